"""`gpudiv analyze` against the assembler on the same PTX files (issue 16, item 5).

For each file (default: the CUDA samples, `samples/cuda/*.O3.ptx` and `*.G.ptx`) it runs,
`--repeat` times, `ptxas -arch=ARCH FILE -o /dev/null` (ARCH: the file's `.target` when
newer than sm_80, else sm_80) and `gpudiv analyze --analysis A FILE --format json -o
/dev/null` for each analysis A, each as its own process (start-up included, as a user
runs them), and prints the median processor time (user + system of the child process;
less sensitive than wall time to other work on the machine) and the ratio gpudiv / ptxas
per file, per build (`-O3`, `-G`) and in total. The ratio, not an absolute time, is the
figure to compare between machines.

With `--in-process` gpudiv is timed inside this process instead: `gpudiv.cli.main.main`
with the same arguments, after one warm-up call per file and analysis (imports, grammar
tables and rule files already loaded), `time.process_time` per call: the steady-state
cost without interpreter start-up (issue 16, item 3).

Before timing, it compiles the bytecode of the `gpudiv` package it times (`compileall`,
as `pip install` does for a regular install): an editable install run with
`PYTHONDONTWRITEBYTECODE` set would otherwise compile every module again in every process
(about 0.04 s each). `--no-compile` leaves the package as it is.

    python benchmarks/bench_vs_ptxas.py                          # every CUDA sample, 3 repeats
    python benchmarks/bench_vs_ptxas.py --analyses simple --repeat 1 samples/cuda/scan.G.ptx
    python benchmarks/bench_vs_ptxas.py --json
    python benchmarks/bench_vs_ptxas.py --in-process --repeat 5
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import importlib.util
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ANALYSES = ("simple", "affine2")


def ptxas_arch(text: str) -> str:
    """The -arch for a PTX text: its .target when newer than sm_80, else sm_80."""
    target = re.search(r"^\s*\.target\s+(sm_(\d+))", text, re.M)
    return target.group(1) if target and int(target.group(2)) > 80 else "sm_80"


def child_seconds(command: list[str], cwd: str) -> float:
    """Processor seconds (user + system) of one child process running `command`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)}: exit {done.returncode}\n{done.stderr[-2000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def gpudiv_command() -> list[str]:
    """The installed `gpudiv` command beside this interpreter, else `python -m gpudiv.cli`."""
    script = Path(sys.executable).with_name("gpudiv")
    return [str(script)] if script.exists() else [sys.executable, "-m", "gpudiv.cli"]


def compile_gpudiv() -> None:
    """Write the bytecode of the `gpudiv` package that `gpudiv_command` runs."""
    spec = importlib.util.find_spec("gpudiv")
    if spec is not None and spec.origin:
        compileall.compile_dir(str(Path(spec.origin).parent), quiet=1)


def in_process_seconds(arguments: list[str], repeat: int) -> float:
    """Median processor seconds of `gpudiv.cli.main.main(arguments)` in this process, after
    one warm-up call (its diagnostics go nowhere)."""
    from gpudiv.cli.main import main as gpudiv_main

    times = []
    with open(os.devnull, "w") as nowhere, contextlib.redirect_stderr(nowhere):
        gpudiv_main(arguments)
        for _ in range(repeat):
            start = time.process_time()
            gpudiv_main(arguments)
            times.append(time.process_time() - start)
    return statistics.median(times)


def measure(path: Path, analyses: list[str], repeat: int, ptxas: str | None,
            scratch: str, in_process: bool = False) -> dict:
    """Median processor seconds of ptxas and of each analysis on one file (`in_process`:
    gpudiv in this process, warm)."""
    absolute = str(path.resolve())
    row: dict = {"file": str(path), "lines": len(path.read_text().splitlines()),
                 "build": "-G" if path.name.endswith(".G.ptx") else
                 "-O3" if path.name.endswith(".O3.ptx") else "other"}
    if ptxas:
        arch = ptxas_arch(path.read_text())
        row["ptxas"] = statistics.median(
            child_seconds([ptxas, f"-arch={arch}", absolute, "-o", os.devnull], scratch)
            for _ in range(repeat))
    for analysis in analyses:
        arguments = ["analyze", "--analysis", analysis, absolute, "--format", "json",
                     "-o", os.devnull]
        if in_process:
            row[analysis] = in_process_seconds(arguments, repeat)
            continue
        row[analysis] = statistics.median(
            child_seconds([*gpudiv_command(), *arguments], scratch) for _ in range(repeat))
    return row


def totals(rows: list[dict], analyses: list[str]) -> list[dict]:
    """Summed seconds per build and over all files (ratios of the sums)."""
    groups = [(build, [r for r in rows if r["build"] == build]) for build in ("-O3", "-G")]
    groups.append(("all", rows))
    out = []
    for name, mine in groups:
        if not mine:
            continue
        total = {"file": f"total {name}", "build": name, "lines": sum(r["lines"] for r in mine)}
        for key in ("ptxas", *analyses):
            if all(key in r for r in mine):
                total[key] = sum(r[key] for r in mine)
        out.append(total)
    return out


def ratios(row: dict, analyses: list[str]) -> dict[str, float | None]:
    """gpudiv / ptxas for each analysis (None without ptxas)."""
    ptxas = row.get("ptxas")
    return {a: (row[a] / ptxas if ptxas else None) for a in analyses}


def print_table(rows: list[dict], summary: list[dict], analyses: list[str]) -> None:
    """One line per file, then the totals and the largest ratio per analysis."""
    heads = ["file", "lines", "ptxas s", *(h for a in analyses for h in (f"{a} s", "ratio"))]
    lines = [heads]
    for row in (*rows, *summary):
        ratio = ratios(row, analyses)
        lines.append([row["file"], str(row["lines"]),
                      f"{row['ptxas']:.3f}" if "ptxas" in row else "-",
                      *(c for a in analyses for c in (
                          f"{row[a]:.3f}", "-" if ratio[a] is None else f"{ratio[a]:.1f}"))])
    widths = [max(len(line[k]) for line in lines) for k in range(len(heads))]
    for line in lines:
        print("  ".join(c.ljust(w) if k == 0 else c.rjust(w)
                        for k, (c, w) in enumerate(zip(line, widths, strict=True))))
    for analysis in analyses:
        per_file = [(ratios(r, analyses)[analysis], r["file"]) for r in rows]
        known = [(x, f) for x, f in per_file if x is not None]
        if known:
            worst, where = max(known)
            print(f"largest {analysis} ratio: {worst:.1f} ({where})")


def main(argv: list[str] | None = None) -> int:
    """Time ptxas and gpudiv on every file and print the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path,
                        help="PTX files (default: samples/cuda/*.O3.ptx and *.G.ptx)")
    parser.add_argument("--analyses", nargs="+", default=list(ANALYSES))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="rows and totals as JSON")
    parser.add_argument("--no-compile", action="store_true",
                        help="do not write the bytecode of the timed gpudiv package first")
    parser.add_argument("--in-process", action="store_true",
                        help="time gpudiv inside this process, warm (no start-up)")
    args = parser.parse_args(argv)
    if not args.no_compile:
        compile_gpudiv()
    files = args.files or sorted((ROOT / "samples" / "cuda").glob("*.ptx"))
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        print("ptxas not found on PATH: gpudiv times only, no ratios", file=sys.stderr)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:  # imports the installed package
        for path in files:
            rows.append(measure(path, args.analyses, args.repeat, ptxas, scratch,
                                args.in_process))
            print(f"{path}: done", file=sys.stderr, flush=True)
    summary = totals(rows, args.analyses)
    if args.json:
        print(json.dumps({"rows": rows, "totals": summary,
                          "ratios": {r["file"]: ratios(r, args.analyses)
                                     for r in (*rows, *summary)}}, indent=1))
    else:
        print_table([{**r, "file": _shown(r["file"])} for r in rows], summary, args.analyses)
    return 0


def _shown(path: str) -> str:
    """A path relative to the repository root when inside it."""
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return path


if __name__ == "__main__":
    sys.exit(main())
