"""`gpudiv analyze` against the assembler on the same PTX files (issue 16, item 5).

For each file (default: the CUDA samples, `samples/cuda/*.ptx` and the large program of
`samples/cuda_large/*.ptx`, `-O3` and `-G` builds) it runs,
`--repeat` times, `ptxas -arch=ARCH FILE -o /dev/null` (ARCH: the file's `.target` when
newer than sm_80, else sm_80) and times `gpudiv analyze --analysis A --format json -o
/dev/null` for each analysis A in two ways (`--mode`):

- `process`: one `gpudiv analyze A FILE` process per file, start-up included, as a user
  runs it on one file; the median processor time (user + system of the child process;
  less sensitive than wall time to other work on the machine), or with `--statistic min`
  the least (on a shared machine, the run least disturbed). The repeats of ptxas and of
  each analysis take turns.
- `corpus`: the whole list in one `gpudiv analyze A FILE…` process, as a user runs it on
  a suite (ptxas takes one file per process, so it is still timed per file). Its processor
  time is the corpus total; the per-file column is what each file adds to such a run: in
  one Python process that has analysed the first file once (untimed: grammar and rule
  loading are start-up), `gpudiv.cli.main.main` on each file, median of `--repeat` calls.

- `daemon`: one `gpudiv analyze A FILE` process per file as in `process`, while a
  `gpudiv daemon` started for the benchmark runs the command: the client's processor time
  plus what the daemon used meanwhile (its own, its living workers' and its reaped
  children's, from /proc/PID/stat, in clock ticks of 10 ms; hence the mean of `--repeat`
  runs, not the median). Linux only.

It prints the ratio gpudiv / ptxas per file, per build (`-O3`, `-G`) and in total. The
ratio, not an absolute time, is the figure to compare between machines.

Before timing, it compiles the bytecode of the `gpudiv` package it times (`compileall`,
as `pip install` does for a regular install): an editable install run with
`PYTHONDONTWRITEBYTECODE` set would otherwise compile every module again in every process
(about 0.04 s each). `--no-compile` leaves the package as it is.

    python benchmarks/bench_vs_ptxas.py                          # every CUDA sample, 3 repeats
    python benchmarks/bench_vs_ptxas.py --analyses simple --repeat 1 samples/cuda/scan.G.ptx
    python benchmarks/bench_vs_ptxas.py --mode corpus --json
    python benchmarks/bench_vs_ptxas.py --analyses simple simple+summary affine2
    python benchmarks/bench_vs_ptxas.py --mode process daemon    # with and without a daemon

An analysis named `A+summary` is analysis A with call summaries (`--calls summary`: each
device function analysed once per calling context instead of inlined at every call).
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ANALYSES = ("simple", "affine2")
MODES = ("process", "corpus", "daemon")
BUILDS = ("-O3", "-G")

# Run in a child interpreter by `warm_seconds`: after one untimed run on the first file,
# the processor seconds of `gpudiv analyze` on each file (median of REPEAT calls), as JSON.
WARM_DRIVER = """
import json, os, resource, statistics, sys, time
from gpudiv.cli.main import main
analysis, repeat, files = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
name, _, calls = analysis.partition("+")
options = ["--analysis", name, "--calls", calls or "inline"]
def cpu():  # this process and its ended children (a large kernel's parts)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime
def once(path):
    start = cpu()
    main(["analyze", *options, path, "--format", "json", "-o", os.devnull])
    return cpu() - start
once(files[0])
print(json.dumps({f: statistics.median(once(f) for _ in range(repeat)) for f in files}))
"""


def ptxas_arch(text: str) -> str:
    """The -arch for a PTX text: its .target when newer than sm_80, else sm_80."""
    target = re.search(r"^\s*\.target\s+(sm_(\d+))", text, re.M)
    return target.group(1) if target and int(target.group(2)) > 80 else "sm_80"


def child_seconds(command: list[str], cwd: str) -> float:
    """Processor seconds (user + system) of one child process running `command`."""
    return child_run(command, cwd)[0]


def child_run(command: list[str], cwd: str, env: dict[str, str] | None = None
              ) -> tuple[float, str]:
    """Processor seconds (user + system) of one child process and its standard output
    (`env`: its environment, default: this one without a daemon)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False,
                          env=env or {**os.environ, "GPUDIV_NO_DAEMON": "1"})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)}: exit {done.returncode}\n{done.stderr[-2000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), done.stdout


def gpudiv_command() -> list[str]:
    """The installed `gpudiv` command beside this interpreter, else `python -m gpudiv.cli`."""
    script = Path(sys.executable).with_name("gpudiv")
    return [str(script)] if script.exists() else [sys.executable, "-m", "gpudiv.cli"]


def analyze_command(analysis: str, files: list[str]) -> list[str]:
    """`gpudiv analyze` with one analysis on `files`, the JSON report thrown away
    (`simple+summary`: the simple analysis with call summaries, `--calls summary`)."""
    name, _, calls = analysis.partition("+")
    return [*gpudiv_command(), "analyze", "--analysis", name, "--calls", calls or "inline",
            *files, "--format", "json", "-o", os.devnull]


def compile_gpudiv() -> None:
    """Write the bytecode of the `gpudiv` package that `gpudiv_command` runs."""
    spec = importlib.util.find_spec("gpudiv")
    if spec is not None and spec.origin:
        compileall.compile_dir(str(Path(spec.origin).parent), quiet=1)


def build_of(path: Path) -> str:
    """`-G` or `-O3` by the sample's name (`NAME.G.ptx`, `NAME.O3.ptx`), else `other`."""
    return "-G" if path.name.endswith(".G.ptx") else \
        "-O3" if path.name.endswith(".O3.ptx") else "other"


def measure(path: Path, analyses: list[str], repeat: int, ptxas: str | None,
            scratch: str, per_process: bool = True, daemon: Daemon | None = None,
            statistic: str = "median") -> dict:
    """Processor seconds of ptxas and (`per_process`) of each analysis in its own `gpudiv
    analyze` process on one file, the `statistic` of `repeat` runs; with `daemon`, the
    mean through it as well. The runs take turns (ptxas, each analysis, again), so that a
    slow spell of a shared machine falls on all of them alike."""
    absolute = str(path.resolve())
    text = path.read_text()
    row: dict = {"file": str(path), "lines": len(text.splitlines()), "build": build_of(path)}
    commands: dict[str, list[str]] = {}
    if ptxas:
        commands["ptxas"] = [ptxas, f"-arch={ptxas_arch(text)}", absolute, "-o", os.devnull]
    if per_process:
        commands.update({a: analyze_command(a, [absolute]) for a in analyses})
    times: dict[str, list[float]] = {key: [] for key in commands}
    through: dict[str, list[float]] = {daemon_key(a): [] for a in analyses} if daemon else {}
    for _ in range(repeat):
        for key, command in commands.items():
            times[key].append(child_seconds(command, scratch))
        for analysis in analyses if daemon is not None else ():
            through[daemon_key(analysis)].append(
                daemon.seconds(analyze_command(analysis, [absolute]), scratch))
    aggregate = min if statistic == "min" else statistics.median
    row.update({key: aggregate(values) for key, values in times.items()})
    row.update({key: statistics.mean(values) for key, values in through.items()})
    return row


def process_seconds(pid: int) -> float:
    """Processor seconds of process `pid` and of its children it has reaped."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def tree_seconds(pid: int) -> float:
    """`process_seconds` of process `pid` and of its living children (a daemon's workers
    live across commands: their time is not yet in the daemon's reaped children's); read
    again when the process's own figures changed meanwhile (a child it reaped then would
    be counted twice or not at all)."""
    while True:
        own = process_seconds(pid)
        children = 0.0
        for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                children += process_seconds(int(child))
        if process_seconds(pid) == own:
            return own + children


class Daemon:
    """A `gpudiv daemon` of its own for the benchmark (context manager)."""

    def __enter__(self) -> Daemon:
        self.folder = tempfile.mkdtemp(prefix="gpudiv-bench-", dir="/tmp")
        self.socket = os.path.join(self.folder, "d.sock")
        done = subprocess.run([*gpudiv_command(), "daemon", "start", "--socket", self.socket],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"gpudiv daemon start: {done.stdout}{done.stderr}")
        self.pid = int(done.stdout.split("pid ")[1].split()[0])
        self.env = {k: v for k, v in os.environ.items() if k != "GPUDIV_NO_DAEMON"}
        self.env["GPUDIV_DAEMON_SOCKET"] = self.socket
        return self

    def seconds(self, command: list[str], cwd: str) -> float:
        """Processor seconds of one client process and of the daemon while it ran."""
        before = tree_seconds(self.pid)
        client, _ = child_run(command, cwd, self.env)
        return client + tree_seconds(self.pid) - before

    def __exit__(self, *_exc) -> None:
        subprocess.run([*gpudiv_command(), "daemon", "stop", "--socket", self.socket],
                       capture_output=True, check=False)
        shutil.rmtree(self.folder, ignore_errors=True)


def daemon_key(analysis: str) -> str:
    """The row key of an analysis's daemon column."""
    return f"{analysis} daemon"


def warm_seconds(files: list[Path], analysis: str, repeat: int, scratch: str) -> dict[str, float]:
    """Processor seconds each file adds to a corpus run (`WARM_DRIVER`), by path."""
    absolute = [str(f.resolve()) for f in files]
    _, out = child_run([sys.executable, "-c", WARM_DRIVER, analysis, str(repeat), *absolute],
                       scratch)
    seconds = json.loads(out.strip().splitlines()[-1])
    return {str(f): seconds[a] for f, a in zip(files, absolute, strict=True)}


def corpus_seconds(files: list[Path], analysis: str, repeat: int, scratch: str) -> float:
    """Median processor seconds of one `gpudiv analyze` process on all of `files`."""
    absolute = [str(f.resolve()) for f in files]
    return statistics.median(child_seconds(analyze_command(analysis, absolute), scratch)
                             for _ in range(repeat))


def groups(rows: list[dict]) -> list[tuple[str, list[dict]]]:
    """The rows of each build that has any, then all rows."""
    out = [(build, [r for r in rows if r["build"] == build]) for build in BUILDS]
    return [(name, mine) for name, mine in out if mine] + [("all", rows)]


def totals(rows: list[dict], keys: list[str],
           corpus: dict[tuple[str, str], float] | None = None) -> list[dict]:
    """Summed seconds per build and over all files (ratios of the sums); `corpus`: the
    one-process time of each (group, analysis) for the warm columns."""
    out = []
    for name, mine in groups(rows):
        total = {"file": f"total {name}", "build": name, "lines": sum(r["lines"] for r in mine)}
        for key in ("ptxas", *keys):
            if all(key in r for r in mine):
                total[key] = sum(r[key] for r in mine)
        for (group, analysis), seconds in (corpus or {}).items():
            if group == name:
                total[warm_key(analysis)] = seconds
        out.append(total)
    return out


def warm_key(analysis: str) -> str:
    """The row key of an analysis's corpus-run column."""
    return f"{analysis} corpus"


def ratios(row: dict, keys: list[str]) -> dict[str, float | None]:
    """gpudiv / ptxas for each timed column (None without ptxas or without the column)."""
    ptxas = row.get("ptxas")
    return {k: (row[k] / ptxas if ptxas and k in row else None) for k in keys}


def print_table(rows: list[dict], summary: list[dict], keys: list[str]) -> None:
    """One line per file, then the totals and the largest ratio per column."""
    heads = ["file", "lines", "ptxas s", *(h for k in keys for h in (f"{k} s", "ratio"))]
    lines = [heads]
    for row in (*rows, *summary):
        ratio = ratios(row, keys)
        lines.append([row["file"], str(row["lines"]),
                      f"{row['ptxas']:.3f}" if "ptxas" in row else "-",
                      *(c for k in keys for c in (
                          f"{row[k]:.3f}" if k in row else "-",
                          "-" if ratio[k] is None else f"{ratio[k]:.1f}"))])
    widths = [max(len(line[k]) for line in lines) for k in range(len(heads))]
    for line in lines:
        print("  ".join(c.ljust(w) if k == 0 else c.rjust(w)
                        for k, (c, w) in enumerate(zip(line, widths, strict=True))))
    for key in keys:
        known = [(x, r["file"]) for r in rows if (x := ratios(r, keys)[key]) is not None]
        if known:
            worst, where = max(known)
            print(f"largest {key} ratio: {worst:.1f} ({where})")


def main(argv: list[str] | None = None) -> int:
    """Time ptxas and gpudiv on every file and print the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path,
                        help="PTX files (default: samples/cuda/*.ptx, samples/cuda_large/*.ptx)")
    parser.add_argument("--analyses", nargs="+", default=list(ANALYSES))
    parser.add_argument("--mode", nargs="+", choices=[*MODES, "both"], default=["both"],
                        help="one gpudiv process per file, one for the whole list, one "
                             "process per file through a daemon; both: process and corpus")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--statistic", choices=["median", "min"], default="median",
                        help="of the repeats of ptxas and of each process per file: min is "
                             "the run least disturbed by other work on a shared machine")
    parser.add_argument("--json", action="store_true", help="rows and totals as JSON")
    parser.add_argument("--no-compile", action="store_true",
                        help="do not write the bytecode of the timed gpudiv package first")
    args = parser.parse_args(argv)
    if not args.no_compile:
        compile_gpudiv()
    files = args.files or [*sorted((ROOT / "samples" / "cuda").glob("*.ptx")),
                            *sorted((ROOT / "samples" / "cuda_large").glob("*.ptx"))]
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        print("ptxas not found on PATH: gpudiv times only, no ratios", file=sys.stderr)
    per_process = bool({"process", "both"} & set(args.mode))
    in_corpus = bool({"corpus", "both"} & set(args.mode))
    through_daemon = "daemon" in args.mode
    keys = [*(args.analyses if per_process else []),
            *(daemon_key(a) for a in (args.analyses if through_daemon else [])),
            *(warm_key(a) for a in (args.analyses if in_corpus else []))]
    rows = []
    corpus: dict[tuple[str, str], float] = {}
    with tempfile.TemporaryDirectory() as scratch, \
            (Daemon() if through_daemon else contextlib.nullcontext()) as daemon:
        for path in files:
            rows.append(measure(path, args.analyses, args.repeat, ptxas, scratch, per_process,
                                daemon, args.statistic))
            print(f"{path}: done", file=sys.stderr, flush=True)
        if in_corpus:
            for analysis in args.analyses:
                warm = warm_seconds(files, analysis, args.repeat, scratch)
                for row in rows:
                    row[warm_key(analysis)] = warm[row["file"]]
                for name, mine in groups(rows):
                    corpus[name, analysis] = corpus_seconds(
                        [Path(r["file"]) for r in mine], analysis, args.repeat, scratch)
                print(f"corpus {analysis}: done", file=sys.stderr, flush=True)
    summary = totals(rows, [k for k in keys if not k.endswith(" corpus")], corpus)
    if args.json:
        print(json.dumps({"rows": rows, "totals": summary,
                          "ratios": {r["file"]: ratios(r, keys)
                                     for r in (*rows, *summary)}}, indent=1))
    else:
        print_table([{**r, "file": _shown(r["file"])} for r in rows], summary, keys)
        if in_corpus:
            print("corpus columns: per file, what the file adds to a one-process run; "
                  "totals, one `gpudiv analyze` process over the group's files")
    return 0


def _shown(path: str) -> str:
    """A path relative to the repository root when inside it."""
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return path


if __name__ == "__main__":
    sys.exit(main())
