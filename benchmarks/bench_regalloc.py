"""Register allocation on the μ-SIMD or CUDA samples: per kernel and allocator, spills by
rule of Sampaio 2013 Fig 4.3, whether the result verifies on the interpreter, and the
modelled cost of a run (`gpudiv.verify.spill_cost`: local 33, shared 3, other 1 per warp
instruction) over the launches of `gpudiv check`, with the speed-up over linear scan.

    python benchmarks/bench_regalloc.py [--registers N] [--no-base-register] [PATH ...]
    python benchmarks/bench_regalloc.py --ptx [--registers N] [PATH ...]

μ-SIMD: as in the thesis (§5.3: 9 registers for linear scan and rematerialisation, 8 for
the divergence and affine allocators), the allocators that may use shared memory get one
register fewer (it holds the warp's spill base) unless `--no-base-register`. PTX
(`--ptx`, samples/cuda/*.ptx): every allocator gets N registers per class, the shared
base and the scratch registers counted in them. Only kernels that linear scan spills are
listed; a kernel the PTX allocator refuses is listed with its reason. Prints a Markdown
table per kernel and the geometric mean speed-up per allocator.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from gpudiv.corpus import collect_inputs
from gpudiv.load import load, parse_text
from gpudiv.printers import print_program
from gpudiv.transforms import PassError, Pipeline, get_pass
from gpudiv.transforms.spill_rules import ALLOCATORS
from gpudiv.verify.equivalence import compare_kernels, launches_for
from gpudiv.verify.spill_cost import profile, speedup

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = [ROOT / "samples" / "musimd"]
DEFAULT_PTX = [ROOT / "samples" / "cuda"]
SKIP = ("deadlock", "spin_lock")  # kernels written to hang: every launch runs to its budget
SHARES = ("divergence", "affine")


def main(argv: list[str] | None = None) -> int:
    """Allocate every sample kernel with every allocator and print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", help="files or folders (default: the samples)")
    parser.add_argument("--registers", type=int, default=3, help="registers (per class)")
    parser.add_argument("--no-base-register", action="store_true",
                        help="μ-SIMD: the sharing allocators get N registers too")
    parser.add_argument("--ptx", action="store_true", help="the CUDA samples' PTX")
    args = parser.parse_args(argv)
    language, suffix = ("ptx", ".ptx") if args.ptx else ("musimd", ".musimd")
    paths = args.paths or [str(p) for p in (DEFAULT_PTX if args.ptx else DEFAULT)]
    rows: list[str] = []
    gains: dict[str, list[float]] = {a: [] for a in ALLOCATORS}
    for path in collect_inputs(paths):
        if not path.endswith(suffix) or any(s in path for s in SKIP):
            continue
        program = load(path)
        for index, kernel in enumerate(program.kernels):
            costs = {}
            for allocator in ALLOCATORS:
                budget = args.registers
                if allocator in SHARES and not args.no_base_register and language == "musimd":
                    budget = max(budget - 1, 1)
                one = Pipeline([get_pass("regalloc", allocator=allocator, registers=budget)])
                one.kernels = {kernel.name}
                try:
                    out = one.run(program)
                except PassError as error:
                    rows.append(f"| {Path(path).name}:{kernel.name} | {allocator} | {budget} "
                                f"| refused: {error} |" + " |" * 11)
                    break
                done = out.kernels[index]
                stats = done.attrs["transform_stats"]
                if allocator == "linear" and stats["spilled"] == 0:
                    break
                printed = parse_text(print_program(out), path, language).kernels[index]
                status = compare_kernels(kernel, printed, language, index,
                                         scratch=done.attrs.get("scratch")).status
                costs[allocator] = profile(printed, launches_for(language, kernel, index),
                                           language)
                gain = speedup(costs["linear"], costs[allocator])
                if costs[allocator].runs:
                    gains[allocator].append(1 + gain)
                rows.append(
                    f"| {Path(path).name}:{kernel.name} | {allocator} | {budget} | "
                    f"{stats['spilled']} | {stats['spills_local']} | {stats['spills_constant']}"
                    f" | {stats['spills_shared']} | {stats['spills_remat']} | "
                    f"{stats['spills_shared_affine']} | {stats['local_slots_per_thread']} | "
                    f"{stats['shared_slots_per_warp']} | {status} | {costs[allocator].cost} | "
                    f"{100 * gain:+.1f}% |")
    print("| kernel | allocator | registers | spilled | local | (i) | (ii) | (iii) | (iv) | "
          "local slots/thread | shared slots/warp | verify | modelled cost | vs linear |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print()
    print("| allocator | kernels | geometric-mean modelled speed-up over linear scan |")
    print("|---|---|---|")
    for allocator, values in gains.items():
        mean = math.exp(sum(map(math.log, values)) / len(values)) - 1 if values else 0.0
        print(f"| {allocator} | {len(values)} | {100 * mean:+.2f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
