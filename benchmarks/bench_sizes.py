"""Scaling of `gpudiv analyze` on the generated shapes of `size_inputs.py` (issue 17, item 8).

For each shape and size, one fresh process writes the input, runs `gpudiv.api.analyze`
(the default analysis, as `gpudiv analyze` does) and reports its stages: `parse`, and
summed over the kernels `ssa` (CFG and SSA), `facts`, `ground` and `solve`; `other` is the
rest of the wall time (reading atoms into results, findings), all with the cyclic garbage
collector paused as `gpudiv analyze` runs; `peak MB` is the process' peak resident
memory. The exponent `k` of a stage between two sizes is
log(t2/t1) / log(s2/s1): 1 is linear, 2 quadratic. A kernel the analysis gives up on
(`gpudiv.api.SizeLimit`) is counted in `gave up`.

    python benchmarks/bench_sizes.py                                  # default sizes
    python benchmarks/bench_sizes.py --shape nested_ifs --sizes 250 500 1000
    python benchmarks/bench_sizes.py --profile nested_ifs 500          # cProfile, top 25
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from size_inputs import SHAPES, SUFFIX  # noqa: E402

DEFAULT_SIZES = {"nested_ifs": (250, 500, 1000, 2000),
                 "straight_line": (25_000, 50_000, 100_000, 200_000),
                 "brx_switch": (500, 1000, 2000, 4000), "big_ptx": (250, 500, 1000, 2000),
                 "endless_loops": (250, 500, 1000), "musimd_kernels": (500, 1000, 2000, 4000),
                 "many_functions": (500, 1000, 2000, 4000),
                 "skipped_loops": (1000, 2000, 4000, 8000),
                 "loop_continues": (1000, 2000, 4000, 8000),
                 "latch_continues": (1000, 2000, 4000, 8000), "loop_nest": (250, 500, 1000, 2000)}
STAGES = ("parse", "ssa", "facts", "ground", "solve", "other", "total")


def measure(shape: str, size: int) -> dict:
    """Generate one input, analyse it, and time the stages (in this process)."""
    from gpudiv.api import analyze
    from gpudiv.ir.perf import paused_gc

    text = SHAPES[shape](size)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"input{SUFFIX[shape]}"
        path.write_text(text)
        start = time.perf_counter()
        with paused_gc():  # as `gpudiv analyze` runs (its collections counted in `other`)
            result = analyze(path)
        total = (time.perf_counter() - start) * 1000
    row = {"shape": shape, "size": size, "bytes": len(text), "kernels": len(result.kernels),
           "instructions": sum(k.instructions for k in result.kernels),
           "parse": sum(result.parse_ms.values()), "total": total,
           "gave_up": sum(1 for d in result.diagnostics if "too large" in d.message)}
    for stage in ("ssa", "facts", "ground", "solve"):
        row[stage] = sum(k.timing_ms.get(stage, 0.0) for k in result.kernels)
    row["other"] = max(0.0, total - sum(row[s] for s in ("parse", "ssa", "facts", "ground",
                                                         "solve")))
    row["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return row


def measure_in_child(shape: str, size: int, timeout: float) -> dict:
    """`measure` in a fresh process, so that the peak memory is this input's own."""
    command = [sys.executable, __file__, "--one", shape, str(size)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                              check=False)
    except subprocess.TimeoutExpired:
        return {"shape": shape, "size": size, "error": f"more than {timeout:g} s"}
    if done.returncode != 0:
        return {"shape": shape, "size": size,
                "error": (done.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(done.stdout)


def exponents(rows: list[dict]) -> list[dict[str, float | None]]:
    """Per row, the scaling exponent of each stage against the previous row."""
    result: list[dict[str, float | None]] = [{}]
    for before, after in zip(rows, rows[1:], strict=False):
        exps: dict[str, float | None] = {}
        for stage in (*STAGES, "peak_mb"):
            t1, t2 = before.get(stage), after.get(stage)
            ratio = after["size"] / before["size"]
            ok = t1 and t2 and t1 > 1 and t2 > 1 and ratio > 1
            exps[stage] = math.log(t2 / t1) / math.log(ratio) if ok else None
        result.append(exps)
    return result


def table(rows: list[dict]) -> str:
    """The rows as a text table: times in ms, exponents in brackets."""
    head = ["shape", "size", "instrs", *STAGES, "peak MB", "gave up"]
    lines = ["  ".join(f"{h:>14}" if i > 1 else f"{h:<13}" for i, h in enumerate(head))]
    for row, exps in zip(rows, exponents(rows), strict=True):
        if "error" in row:
            lines.append(f"{row['shape']:<13}  {row['size']:<13}  {row['error']}")
            continue
        cells = [row["shape"], str(row["size"]), str(row["instructions"])]
        for stage in (*STAGES, "peak_mb"):
            k = exps.get(stage)
            cells.append(f"{row[stage]:.0f}" + (f" [{k:.2f}]" if k is not None else ""))
        cells.append(str(row["gave_up"]))
        lines.append("  ".join(f"{c:>14}" if i > 1 else f"{c:<13}" for i, c in enumerate(cells)))
    return "\n".join(lines)


def profile(shape: str, size: int) -> None:
    """cProfile of one analysis, the 25 functions with the most cumulative time."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.runcall(measure, shape, size)
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)


def main() -> int:
    """Run the benchmark (or one measurement, for `measure_in_child`)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", action="append", choices=sorted(DEFAULT_SIZES))
    parser.add_argument("--sizes", type=int, nargs="+")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per input")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--one", nargs=2, metavar=("SHAPE", "SIZE"), help=argparse.SUPPRESS)
    parser.add_argument("--profile", nargs=2, metavar=("SHAPE", "SIZE"))
    args = parser.parse_args()
    if args.one:
        json.dump(measure(args.one[0], int(args.one[1])), sys.stdout)
        return 0
    if args.profile:
        profile(args.profile[0], int(args.profile[1]))
        return 0
    rows = []
    for shape in args.shape or DEFAULT_SIZES:
        shape_rows = []
        for size in args.sizes or DEFAULT_SIZES[shape]:
            row = measure_in_child(shape, size, args.timeout)
            print(f"{shape} {size}: {row.get('total', row.get('error'))}", file=sys.stderr,
                  flush=True)
            shape_rows.append(row)
            if "error" in row:
                break
        rows += shape_rows
        if not args.json:
            print(table(shape_rows), flush=True)
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
