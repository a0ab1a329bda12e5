"""Corpus runs and fact export: `gpudiv analyze DIR --jobs 1` vs `--jobs 2`, export vs analysis.

Times the real command line (a fresh `python -m gpudiv.cli` process per run, start-up
included) on two corpora: the bundled `samples/` folder and a folder of N random μ-SIMD
programs (`gpudiv.verify.randprog.random_program`, seeds 0…N-1, `--statements` statements each).
For each corpus it prints the median wall time of `analyze --format json` with `--jobs 1`
and with `--jobs 2` (and the speed-up), and of `facts --format souffle` (input facts only)
and `facts --derived simple` beside the analysis; then, on a copy of the corpus, the
analysis with `--cache` into an empty folder (cold), again (warm: every file read back),
and after appending a comment to one file (only that file analysed again).

    python benchmarks/bench_corpus.py [--programs 200] [--statements 40] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpudiv.verify.randprog import random_program

ROOT = Path(__file__).resolve().parents[1]


def write_random_corpus(folder: Path, programs: int, statements: int) -> Path:
    """N random kernels, one file each, in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    for seed in range(programs):
        text = random_program(seed, statements, max_depth=3, name=f"rand{seed}")
        (folder / f"rand{seed:04d}.musimd").write_text(text)
    return folder


def timed(args: list[str], repeat: int, cwd: Path) -> float:
    """Median wall seconds of `gpudiv ARGS` in a fresh process (exit status 0 or 2 is fine).

    It runs in `cwd`, a scratch folder: `python -m` puts the working directory first on
    the import path, and from the repository root that would import the source tree
    (without the grammar and rules that an install places inside the package) instead of
    the installed gpudiv."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "gpudiv.cli", *args], cwd=cwd,
                              capture_output=True, check=False)
        times.append(time.perf_counter() - start)
        if done.returncode not in (0, 2):
            raise SystemExit(f"gpudiv {' '.join(args)} failed: {done.stderr.decode()[-500:]}")
    return statistics.median(times)


def measure(name: str, folder: Path, repeat: int, scratch: Path) -> dict:
    """One row: analysis with 1 and 2 jobs, exports."""
    row: dict = {"corpus": name}
    for jobs in (1, 2):
        row[f"analyze_j{jobs}"] = timed(["analyze", str(folder), "--format", "json", "-o",
                                         os.devnull, "--jobs", str(jobs)], repeat, scratch)
    row["speedup"] = row["analyze_j1"] / row["analyze_j2"]
    row["facts"] = timed(["facts", str(folder), "-o", str(scratch / f"{name}-facts")], repeat,
                         scratch)
    row["facts_derived"] = timed(["facts", str(folder), "-o", str(scratch / f"{name}-derived"),
                                  "--derived", "simple"], repeat, scratch)
    row["startup"] = timed(["rules"], repeat, scratch)
    row.update(measure_cache(name, folder, scratch))
    return row


def measure_cache(name: str, folder: Path, scratch: Path) -> dict:
    """`analyze --cache` on a copy of the corpus: cold, warm, and after editing one file
    (one run each: a repeat would find the cache warm)."""
    copy = scratch / f"{name}-copy".replace(" ", "_")
    shutil.copytree(folder, copy)
    cache = scratch / f"{name}-cache".replace(" ", "_")
    args = ["analyze", str(copy), "--format", "json", "-o", os.devnull, "--cache", str(cache)]
    row = {"cache_cold": timed(args, 1, scratch), "cache_warm": timed(args, 1, scratch)}
    edited = sorted(p for p in copy.rglob("*") if p.suffix in (".musimd", ".ptx"))[0]
    comment = "//" if edited.suffix == ".ptx" else "#"
    edited.write_text(edited.read_text() + f"\n{comment} edited\n")
    row["cache_one_edited"] = timed(args, 1, scratch)
    return row


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=200)
    parser.add_argument("--statements", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--skip-samples", action="store_true",
                        help="only the random corpus (a quick run)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        random_folder = write_random_corpus(scratch / "random", args.programs, args.statements)
        corpora = [] if args.skip_samples else [("samples", ROOT / "samples")]
        corpora.append((f"random x{args.programs}", random_folder))
        rows = []
        for name, folder in corpora:
            rows.append(measure(name, folder, args.repeat, scratch))
            rows[-1]["files"] = sum(1 for p in folder.rglob("*")
                                    if p.suffix in (".musimd", ".ptx"))
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"gpudiv corpus runs (median of {args.repeat}, seconds, "
                        f"{os.cpu_count()} CPUs)")
    for column in ("corpus", "files", "analyze -j1", "analyze -j2", "speed-up", "facts",
                   "facts --derived", "start-up", "cache cold", "warm", "one edited"):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(row["corpus"], str(row["files"]), f"{row['analyze_j1']:.2f}",
                      f"{row['analyze_j2']:.2f}", f"{row['speedup']:.2f}x",
                      f"{row['facts']:.2f}", f"{row['facts_derived']:.2f}",
                      f"{row['startup']:.2f}", f"{row['cache_cold']:.2f}",
                      f"{row['cache_warm']:.2f}", f"{row['cache_one_edited']:.2f}")
    Console(width=140).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
