"""Cost of the affine analyses (degree 1 and 2) relative to the simple analysis.

For the μ-SIMD samples (all kernels together) and for random structured kernels of N
instructions (`bench_analysis.kernel_of_size`), runs each analysis driver end to end on
the parsed kernel (CFG, SSA, facts, clingo, results) and prints the median time, the
clingo grounding time, the ground atoms, and the ratio to the simple analysis. The thesis
measured 1.39× for its C++ implementation (Sampaio 2013 §5.3).

    python benchmarks/bench_affine.py --sizes 1000 10000 --repeat 3 [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_analysis import kernel_of_size  # noqa: E402

from gpudiv.analyses import ANALYSES  # noqa: E402
from gpudiv.lang.load import load  # noqa: E402
from gpudiv.lang.musimd.parse import parse_musimd  # noqa: E402

VARIANTS = ("simple", "affine", "affine2")
SAMPLES = Path(__file__).parents[1] / "samples" / "musimd"


def run(kernels: list, name: str) -> dict[str, float]:
    """Total ms of the driver over the kernels, and the clingo grounding ms and atoms."""
    driver = ANALYSES[name]
    start = time.perf_counter()
    results = [driver(k) for k in kernels]
    total = (time.perf_counter() - start) * 1000
    return {"total": total, "ground": sum(r.timing_ms["ground"] for r in results),
            "atoms": float(sum(r.stats["atoms"] for r in results))}


def measure(label: str, kernels: list, repeat: int) -> list[dict]:
    rows = []
    for name in VARIANTS:
        runs = [run(kernels, name) for _ in range(repeat)]
        rows.append({"input": label, "analysis": name,
                     **{k: statistics.median(r[k] for r in runs) for k in runs[0]}})
    base = rows[0]["total"]
    for row in rows:
        row["ratio"] = row["total"] / base
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[1000, 10000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    samples = [k for path in sorted(SAMPLES.glob("*.musimd")) for k in load(path).kernels]
    rows = measure(f"samples ({len(samples)} kernels)", samples, args.repeat)
    for size in args.sizes:
        kernel = parse_musimd(kernel_of_size(args.seed, size)).kernels[0]
        rows += measure(f"random {size} instrs", [kernel], args.repeat)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'input':26} {'analysis':9} {'total ms':>9} {'ground ms':>10} {'atoms':>9} "
          f"{'× simple':>9}")
    for row in rows:
        print(f"{row['input']:26} {row['analysis']:9} {row['total']:9.1f} "
              f"{row['ground']:10.1f} {row['atoms']:9.0f} {row['ratio']:9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
