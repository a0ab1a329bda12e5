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
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from gpudiv import ir
from gpudiv.lang.load import load, parse_text
from gpudiv.lang.printing import print_program
from gpudiv.report.corpus import collect_inputs
from gpudiv.transforms import PassError, Pipeline, get_pass
from gpudiv.transforms.spill_rules import ALLOCATORS
from gpudiv.verify.equivalence import compare_kernels, launches_for
from gpudiv.verify.spill_cost import profile, speedup

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = [ROOT / "samples" / "musimd"]
DEFAULT_PTX = [ROOT / "samples" / "cuda"]
SKIP = ("deadlock", "spin_lock")  # kernels written to hang: every launch runs to its budget
SHARES = ("divergence", "affine")
RULE_KEYS = ("spilled", "spills_local", "spills_constant", "spills_shared", "spills_remat",
             "spills_shared_affine")
NEEDS = re.compile(r"the spill code alone needs (\d+)")
PTXAS = shutil.which("ptxas")


def _allocate(program: ir.Program, name: str, allocator: str,
              budget: int) -> ir.Program | str:
    """The program with one kernel allocated, or the pass's one-line refusal."""
    one = Pipeline([get_pass("regalloc", allocator=allocator, registers=budget)])
    one.kernels = {name}
    try:
        return one.run(program)
    except PassError as error:
        return str(error)


def _all_allocators(program: ir.Program, name: str, budget: int,
                    search: bool) -> tuple[int, dict[str, ir.Program | str]]:
    """Every allocator's result at `budget`; with `search` (PTX `--registers min`), at
    the smallest budget from `budget` on that the spill code of every allocator fits."""
    while True:
        outs = {a: _allocate(program, name, a, budget) for a in ALLOCATORS}
        needs = [int(m.group(1)) for out in outs.values() if isinstance(out, str)
                 for m in [NEEDS.search(out)] if m]
        if not search or not needs or max(needs) <= budget:
            return budget, outs
        budget = max(needs)


def _ptxas(text: str) -> str:
    """`ok`, `error` (ptxas rejects the text) or `-` (no ptxas here)."""
    if PTXAS is None:
        return "-"
    target = re.search(r"^\s*\.target\s+(sm_(\d+))", text, re.M)
    arch = target.group(1) if target and int(target.group(2)) > 80 else "sm_80"
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "out.ptx"
        path.write_text(text)
        done = subprocess.run([PTXAS, f"-arch={arch}", str(path), "-o", "/dev/null"],
                              capture_output=True, text=True, timeout=120, check=False)
    return "ok" if done.returncode == 0 else "error"


def _own_budgets(program: ir.Program, index: int, path: str, tally: Counter) -> None:
    """A kernel that every allocator's budget holds without spilling: each allocator at
    its own smallest budget, verified when it spills there (`own budget verified`)."""
    name = program.kernels[index].name
    for allocator in ALLOCATORS:
        budget = 1
        while True:
            out = _allocate(program, name, allocator, budget)
            found = NEEDS.search(out) if isinstance(out, str) else None
            if found is None or int(found.group(1)) <= budget:
                break
            budget = int(found.group(1))
        if isinstance(out, str):
            tally["own budget refused"] += 1
            continue
        if out.kernels[index].attrs["transform_stats"]["spilled"] == 0:
            tally["own budget no spill"] += 1
            continue
        text = print_program(out)
        printed = parse_text(text, path, "ptx").kernels[index]
        status = compare_kernels(program.kernels[index], printed, "ptx", index).status
        tally[f"own budget {status}"] += 1
        tally[f"own budget ptxas {_ptxas(text)}"] += 1


def main(argv: list[str] | None = None) -> int:
    """Allocate every sample kernel with every allocator and print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", help="files or folders (default: the samples)")
    parser.add_argument("--registers", default="3",
                        help="registers (per class on PTX); PTX also `min`: per kernel the "
                             "smallest budget (from 1) every allocator's spill code fits")
    parser.add_argument("--no-base-register", action="store_true",
                        help="μ-SIMD: the sharing allocators get N registers too")
    parser.add_argument("--ptx", action="store_true", help="the CUDA samples' PTX")
    args = parser.parse_args(argv)
    language, suffix = ("ptx", ".ptx") if args.ptx else ("musimd", ".musimd")
    search = args.ptx and args.registers == "min"
    registers = 1 if search else int(args.registers)
    paths = args.paths or [str(p) for p in (DEFAULT_PTX if args.ptx else DEFAULT)]
    rows: list[str] = []
    gains: dict[str, list[float]] = {a: [] for a in ALLOCATORS}
    tally: Counter = Counter()
    totals: dict[str, Counter] = {a: Counter() for a in ALLOCATORS}
    notes: list[str] = []
    for path in collect_inputs(paths):
        if not path.endswith(suffix) or any(s in path for s in SKIP):
            continue
        program = load(path)
        for index, kernel in enumerate(program.kernels):
            where = f"{Path(path).name}:{kernel.name}"
            tally["kernels"] += 1
            if language == "musimd":
                outs = {a: _allocate(program, kernel.name, a, max(registers - 1, 1)
                                     if a in SHARES and not args.no_base_register
                                     else registers) for a in ALLOCATORS}
            else:
                budget, outs = _all_allocators(program, kernel.name, registers, search)
            refused = {a: o for a, o in outs.items() if isinstance(o, str)}
            if refused:
                tally["refused"] += 1
                notes.append(f"- {where}: refused ({next(iter(refused.values()))})")
                continue
            first = outs["linear"].kernels[index]  # type: ignore[union-attr]
            if first.attrs["transform_stats"]["spilled"] == 0:
                tally["no spill"] += 1
                if search:  # each allocator alone at the smallest budget it fits
                    _own_budgets(program, index, path, tally)
                continue
            costs = {}
            for allocator, out in outs.items():
                assert not isinstance(out, str)
                done = out.kernels[index]
                stats = done.attrs["transform_stats"]
                text = print_program(out)
                printed = parse_text(text, path, language).kernels[index]
                status = compare_kernels(kernel, printed, language, index,
                                         scratch=done.attrs.get("scratch")).status
                tally[status] += 1
                accepted = _ptxas(text) if language == "ptx" else "-"
                if language == "ptx":
                    tally[f"ptxas {accepted}"] += 1
                costs[allocator] = profile(printed, launches_for(language, kernel, index),
                                           language)
                gain = speedup(costs["linear"], costs[allocator])
                if costs[allocator].runs:
                    gains[allocator].append(1 + gain)
                for key in RULE_KEYS:
                    totals[allocator][key] += int(stats[key])  # type: ignore[call-overload]
                rows.append(
                    f"| {where} | {allocator} | {stats['register_budget']} | "
                    f"{stats['spilled']} | {stats['spills_local']} | {stats['spills_constant']}"
                    f" | {stats['spills_shared']} | {stats['spills_remat']} | "
                    f"{stats['spills_shared_affine']} | {stats['local_slots_per_thread']} | "
                    f"{stats['shared_slots_per_warp']} | {status} | {accepted} | "
                    f"{costs[allocator].cost} | {100 * gain:+.1f}% |")
    print("| kernel | allocator | registers | spilled | local | (i) | (ii) | (iii) | (iv) | "
          "local slots/thread | shared slots/warp | verify | ptxas | modelled cost | "
          "vs linear |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print()
    print("| allocator | kernels | spilled | local | (i) | (ii) | (iii) | (iv) | "
          "geometric-mean modelled speed-up over linear scan |")
    print("|---|---|---|---|---|---|---|---|---|")
    for allocator, values in gains.items():
        mean = math.exp(sum(map(math.log, values)) / len(values)) - 1 if values else 0.0
        spills = " | ".join(str(totals[allocator][k]) for k in RULE_KEYS)
        print(f"| {allocator} | {len(values)} | {spills} | {100 * mean:+.2f}% |")
    print()
    print(", ".join(f"{k}: {v}" for k, v in sorted(tally.items())))
    print("\n".join(notes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
