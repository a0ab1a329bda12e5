"""Which kernels `gpudiv check` executes: per file and kernel, the check status, the runs
that finished out of those tried, and the reason a kernel (or some of its runs) stopped.

    python benchmarks/execution_table.py                      # every file under samples/
    python benchmarks/execution_table.py samples/cuda --json  # machine-readable rows
    python benchmarks/execution_table.py --markdown > table.md

A kernel counts as executed when at least one of its launches ran to the end (the oracle
then checked its claims on that run). The summary groups kernels by build: CUDA `-O3`
(`*.O3.ptx`), CUDA `-G` (`*.G.ptx`), other PTX and μ-SIMD. docs/execution.md holds the
table for this repository's samples.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from gpudiv import api
from gpudiv.interp.ptx_synthesis import CHECK_SHAPES
from gpudiv.report.corpus import collect_inputs
from gpudiv.verify.oracle import DEFAULT_SHAPES

ROOT = Path(__file__).resolve().parents[1]


def build_of(path: str) -> str:
    """The group a file's kernels are counted in."""
    if path.endswith(".O3.ptx"):
        return "CUDA -O3"
    if path.endswith(".G.ptx"):
        return "CUDA -G"
    return "PTX" if path.endswith(".ptx") else "μ-SIMD"


def rows(paths: list[str], analysis: str) -> list[dict]:
    """One row per kernel: file, build, kernel, status, runs, tried, reason."""
    table = []
    for path in collect_inputs(paths):
        analysed = api.analyze(path, analysis)
        launches = len(CHECK_SHAPES if analysed.language == "ptx" else DEFAULT_SHAPES)
        for report in api.check(analysed):
            tried = report.runs + _stopped(report.reason, report.runs, launches)
            table.append({"file": str(path), "build": build_of(str(path)),
                          "kernel": report.name,
                          "executed": report.status != "not-executed",
                          "runs": report.runs, "tried": tried, "reason": report.reason,
                          "violations": len(report.violations)})
    return table


def _stopped(reason: str, runs: int, launches: int) -> int:
    """Runs that stopped, from the report's reason (`N of M runs stopped: …`; all of the
    `launches` when none finished)."""
    if runs == 0:
        return launches
    head = reason.split(" runs stopped", 1)[0].split(" of ")
    return int(head[0]) if len(head) == 2 and head[0].isdigit() else 0


def summary(table: list[dict]) -> list[tuple[str, int, int, int, int]]:
    """(build, kernels executed, kernels, runs finished, runs tried) per build and in all."""
    counts: dict[str, Counter[str]] = {}
    for row in table:
        for key in (row["build"], "all"):
            c = counts.setdefault(key, Counter())
            c["kernels"] += 1
            c["executed"] += row["executed"]
            c["runs"] += row["runs"]
            c["tried"] += max(row["tried"], row["runs"])
    order = sorted(k for k in counts if k != "all") + ["all"]
    return [(k, counts[k]["executed"], counts[k]["kernels"], counts[k]["runs"],
             counts[k]["tried"]) for k in order if k in counts]


def markdown(table: list[dict]) -> str:
    """The summary and the per-kernel table in Markdown."""
    lines = ["| build | kernels executed | kernels | share | runs finished | runs |",
             "|---|---:|---:|---:|---:|---:|"]
    for build, done, total, runs, tried in summary(table):
        lines.append(f"| {build} | {done} | {total} | {100 * done / max(total, 1):.1f}% | "
                     f"{runs} | {tried} |")
    lines += ["", "| file | kernel | executed | runs finished | reason a run stopped |",
              "|---|---|---|---:|---|"]
    for row in table:
        reason = row["reason"].replace("|", "\\|")
        lines.append(f"| {Path(row['file']).name} | {row['kernel']} | "
                     f"{'yes' if row['executed'] else '**no**'} | "
                     f"{row['runs']}/{max(row['tried'], row['runs'])} | {reason} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", default=[str(ROOT / "samples")])
    parser.add_argument("--analysis", default="affine2")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    table = rows(args.paths, args.analysis)
    if args.json:
        json.dump(table, sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif args.markdown:
        sys.stdout.write(markdown(table))
    else:
        for build, done, total, runs, tried in summary(table):
            print(f"{build:10} {done:4} / {total:4} kernels executed "
                  f"({100 * done / max(total, 1):.1f}%), {runs} / {tried} runs finished")
        for row in table:
            if not row["executed"] or row["reason"]:
                state = "executed" if row["executed"] else "NOT executed"
                print(f"  {Path(row['file']).name}: {row['kernel']}: {state}: {row['reason']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
