"""SIMT-deadlock detection over a corpus, like Tables III/IV of ElTantawy & Aamodt (MICRO
2016): kernels, branches, loops, loops that may deadlock and divergent barriers per group of
files, every detection outside the deadlock samples (to review as possible false
detections), and the time of `gpudiv deadlock` against `gpudiv analyze` on the same files.

    python benchmarks/deadlock_table.py [FOLDER|FILE ...] [--repeat 3] [--json]

Groups: CUDA samples built with -O3 (`*.O3.ptx`), with -G (`*.G.ptx`), other PTX, and
μ-SIMD. Files named `deadlock_*` are the samples written to hang (or to look like they
might); their detections are expected, the others' are false detections unless a kernel
really hangs. Times are the median of `--repeat` runs of the Python API (parse, CFG, SSA,
facts, clingo; CPU time of the process), per file, summed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from gpudiv import api
from gpudiv.corpus import collect_inputs
from gpudiv.load import load

ROOT = Path(__file__).parents[1]
DEFAULT_INPUTS = [ROOT / "samples" / "cuda", ROOT / "samples" / "musimd"]
COLUMNS = ("kernels", "branches", "loops", "detections", "barriers")


def group_of(path: str) -> str:
    """The table row a file belongs to."""
    name = Path(path).name
    if name.endswith(".musimd"):
        return "musimd"
    if name.endswith(".O3.ptx"):
        return "cuda -O3"
    if name.endswith(".G.ptx"):
        return "cuda -G"
    return "ptx"


def timed(function, repeat: int) -> tuple[object, float]:
    """The result of `function()` and its median CPU time in ms over `repeat` runs (CPU
    time of this process, clingo included: steadier than wall time on a shared machine)."""
    times, result = [], None
    for _ in range(repeat):
        start = time.process_time()
        result = function()
        times.append((time.process_time() - start) * 1000)
    return result, statistics.median(times)


def measure(paths: list[str], repeat: int) -> dict:
    """Per-group counts, the detections outside deadlock samples, and the timings."""
    rows: dict[str, dict[str, int]] = {}
    flagged: list[dict] = []
    analyze_ms = deadlock_ms = 0.0
    for path in paths:
        program = load(path)
        report, spent = timed(lambda p=program: api.deadlock(p), repeat)
        _, plain = timed(lambda p=program: api.analyze(p), repeat)
        deadlock_ms += spent
        analyze_ms += plain
        row = rows.setdefault(group_of(path), dict.fromkeys(COLUMNS, 0))
        for kernel in report.kernels:
            row["kernels"] += 1
            row["branches"] += kernel.branches
            row["loops"] += len(kernel.loops)
            row["detections"] += len(kernel.detections)
            row["barriers"] += 0 if kernel.assumed_safe else len(kernel.barriers)
            if Path(path).name.startswith("deadlock_"):
                continue
            for loop in kernel.detections:
                flagged.append({"file": path, "kernel": kernel.name, "loop": loop.header,
                                "line": loop.line,
                                "reads": [r.text for r in loop.shared_reads],
                                "writes": [f"{w.place.text} ({w.path})"
                                           for w in loop.releasing_writes]})
            for barrier in ([] if kernel.assumed_safe else kernel.barriers):
                flagged.append({"file": path, "kernel": kernel.name,
                                "barrier": barrier.barrier.line,
                                "branch": barrier.branch.block})
    return {"rows": rows, "outside_deadlock_samples": flagged,
            "analyze_ms": round(analyze_ms, 1), "deadlock_ms": round(deadlock_ms, 1),
            "ratio": round(deadlock_ms / analyze_ms, 3) if analyze_ms else None}


def render(result: dict) -> str:
    """The table, the list of detections outside the deadlock samples, the timings."""
    lines = [f"{'group':10} " + " ".join(f"{c:>10}" for c in COLUMNS) + f" {'det/loops':>10}"]
    total = dict.fromkeys(COLUMNS, 0)
    for group, row in sorted(result["rows"].items()):
        for c in COLUMNS:
            total[c] += row[c]
        rate = f"{100 * row['detections'] / row['loops']:.1f}%" if row["loops"] else "-"
        lines.append(f"{group:10} " + " ".join(f"{row[c]:>10}" for c in COLUMNS)
                     + f" {rate:>10}")
    rate = f"{100 * total['detections'] / total['loops']:.1f}%" if total["loops"] else "-"
    lines.append(f"{'total':10} " + " ".join(f"{total[c]:>10}" for c in COLUMNS)
                 + f" {rate:>10}")
    lines.append("")
    lines.append("detections outside samples named deadlock_*:")
    for item in result["outside_deadlock_samples"]:
        if "loop" in item:
            lines.append(f"  {item['file']}: {item['kernel']}: loop {item['loop']} "
                         f"(line {item['line']})")
        else:
            lines.append(f"  {item['file']}: {item['kernel']}: divergent barrier "
                         f"(line {item['barrier']})")
    lines.append("")
    lines.append(f"time: analyze {result['analyze_ms']:.0f} ms, deadlock "
                 f"{result['deadlock_ms']:.0f} ms, ratio {result['ratio']}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Print the table (or JSON) for the given files and folders."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("inputs", nargs="*", default=[str(p) for p in DEFAULT_INPUTS])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = measure(collect_inputs(args.inputs), max(1, args.repeat))
    sys.stdout.write(json.dumps(result, indent=2) + "\n" if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
