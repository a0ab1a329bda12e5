"""Scaling of every stage of `gpudiv analyze` on generated kernels (issue 16, item 2).

For each shape of `scaling_inputs.py` (straight-line code, loop nests, many branches,
calls, `-G`-style local memory) and each size N (instructions asked for; the table shows
the IR instructions actually analysed, calls inlined), a fresh process generates the
kernel, warms up on a small one of the same shape (grammar and rule loading are start-up,
not scaling), then times each stage once; the table keeps each stage's median over the
processes of that size:

| stage | what is timed |
|---|---|
| `parse`, `lower` | `parse_ptx_timed`: PTX text to parsed forms, forms to IR |
| `ssa` | CFG, dominators and gated SSA (the analysis driver's `ssa` timing) |
| `facts` | fact building |
| `ground`, `solve` | clingo |
| `other` | the rest of the analysis: clingo reading facts and rules, atoms read back |
| `findings` | findings and their explanation chains (`file_findings`) |
| `report` | the JSON document and its text (`analysis_json`, `dumps_indented`) |

Every stage runs with the garbage collector paused, as `gpudiv analyze` runs them. Times
are processor time by default (`--clock cpu`: the child process makes
`time.perf_counter`, which gpudiv's stage timings read, return its own processor time and
that of its children that have ended, `cpu_seconds`, before it imports gpudiv: a large
kernel is grounded in parts, each in a child process), so that other work on a shared
machine does not bend the fits;
`--clock wall` keeps wall-clock time.

Each size is measured in `--repeat` fresh processes at least, and in more (up to
`--max-repeat`) until their total processor time reaches `--min-ms`, so that a small
kernel's stages of a millisecond or two are medians of many runs; every run starts from a
fresh heap, as `gpudiv analyze` does (repeats in one process would reuse freed memory and
skip the page faults that the single run of a large size pays). `--rounds N` measures
every size N times, in a shuffled order after the first round, and `--statistic min`
keeps each stage's least disturbed round (a round's value is the median of its runs, so
that every size has N values whatever its number of runs): on a shared machine a slow
minute otherwise falls on whichever sizes run then, and with one run per large size that
bends the fits.

After the table, the fitted exponent of each stage per shape: the least-squares slope of
log(time) against log(instructions) over the sizes (1 linear, 2 quadratic). Stages under
`--floor` ms at a size are left out of the fit there (timer noise); `-` when fewer than
two sizes remain. The work done is fitted too: `atoms`, clingo's ground atoms (the size of
the ground program), and with `--counts` the Python function calls (cProfile, one more
run per process) of reading (`parse` + `lower`), the analysis (`ssa`, `facts`, `other`),
the findings and the report. Work exponents of 1.00 with time exponents above it mean the
same operations cost more on a larger kernel (benchmarks/README.md: the working set
outgrows the processor's caches).

    python benchmarks/bench_scaling.py                           # every shape, 1k..200k
    python benchmarks/bench_scaling.py --shapes branches --sizes 1000 10000 --repeat 3
    python benchmarks/bench_scaling.py --json                    # machine-readable rows
    python benchmarks/bench_scaling.py --rounds 3 --statistic min    # a noisy machine
    python benchmarks/bench_scaling.py --counts --sizes 1000 10000   # work done, too
    python benchmarks/bench_scaling.py --samples                 # the CUDA samples instead

`--samples` measures the CUDA sample files instead (`samples/cuda/*.ptx` and the large
program of `samples/cuda_large`, or the PTX files named after it), each file a row whose
stages are summed over its kernels (warm-up: a small sample), and fits the exponents over
the files of each build (`-O3`, `-G`): different programs, so the fit says how the cost
grows with the size of real kernels, not of one shape.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import math
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_vs_ptxas import build_of  # noqa: E402
from scaling_inputs import SHAPES  # noqa: E402

STAGES = ("parse", "lower", "ssa", "facts", "ground", "solve", "other", "findings",
          "report")
DEFAULT_SIZES = (1000, 3000, 10_000, 30_000, 100_000, 200_000)
ROOT = Path(__file__).resolve().parent.parent
WARM_UP_SAMPLE = ROOT / "samples" / "cuda" / "vector_ops.O3.ptx"
# Groups of stages whose Python function calls `--counts` counts (one profiler each).
COUNTED = ("read", "analysis", "findings", "report")


def _once(text: str, analysis: str, counts: bool = False, path: str = "scaling.ptx") -> dict:
    """Every stage's milliseconds on one PTX text, its size and its ground atoms (summed
    over its kernels); with `counts`, instead of times, the Python function calls of each
    group of `COUNTED`."""
    from gpudiv.analyses import get_analysis
    from gpudiv.ir.perf import paused_gc

    get_analysis(analysis)
    profiles = {group: cProfile.Profile() for group in COUNTED}

    def counted(group: str, call):
        """`call()`, under the group's profiler when counting."""
        if not counts:
            return call()
        return profiles[group].runcall(call)

    with paused_gc():  # as `gpudiv analyze` runs, the collector paused throughout
        return _stages(text, analysis, path, counted, profiles if counts else None)


def _stages(text: str, analysis: str, path: str, counted, profiles: dict | None) -> dict:
    """`_once`'s stages, run by `counted(group, call)`; the calls of `profiles` if given."""
    from gpudiv.analyses.findings import file_findings
    from gpudiv.api import analyze
    from gpudiv.lang.ptx.parse import parse_ptx_timed
    from gpudiv.report.documents import analysis_json
    from gpudiv.report.jsontext import dumps_indented

    program, read = counted("read", lambda: parse_ptx_timed(text, path))
    start = time.perf_counter()
    analysed = counted("analysis", lambda: analyze(program, analysis))
    wall = (time.perf_counter() - start) * 1000
    kernels = analysed.kernels
    row = {"instructions": sum(k.instructions for k in kernels),
           "blocks": sum(k.blocks for k in kernels),
           "atoms": sum(k.stats.get("atoms", 0) for k in kernels), "parse": read["parse"],
           "lower": read["lower"]}
    for stage in ("ssa", "facts", "ground", "solve"):
        row[stage] = sum(k.timing_ms.get(stage, 0.0) for k in kernels)
    row["other"] = max(0.0, wall - sum(row[s] for s in ("ssa", "facts", "ground", "solve")))
    start = time.perf_counter()
    findings = counted("findings", lambda: file_findings(analysed.path, analysed.kernels))
    row["findings"] = (time.perf_counter() - start) * 1000
    analysed.cached_findings = findings
    start = time.perf_counter()
    counted("report", lambda: dumps_indented(analysis_json([analysed])))
    row["report"] = (time.perf_counter() - start) * 1000
    if profiles is not None:
        return {f"calls_{group}": _calls(profile) for group, profile in profiles.items()}
    return row


def _calls(profile: cProfile.Profile) -> int:
    """Function calls (Python and built-in) a profiler recorded."""
    profile.create_stats()
    return sum(calls for _, calls, _, _, _ in profile.stats.values())


def cpu_seconds() -> float:
    """Processor seconds of this process and of its children that have ended (a large
    kernel's parts are grounded in children, `gpudiv.analyses.partition`)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def measure(shape: str, size: int, analysis: str, counts: bool = False) -> dict:
    """Stage times of one generated kernel, run once in this process after a warm-up;
    with `counts`, the Python calls of one more run too."""
    _once(SHAPES[shape](min(size, 200)), analysis)  # warm-up: grammar, rules, imports
    text = SHAPES[shape](size)
    row = {"shape": shape, "size": size, **_once(text, analysis)}
    if counts:
        row.update(_once(text, analysis, counts=True))
    return row


def measure_file(path: str, analysis: str, counts: bool = False) -> dict:
    """Stage times of one PTX file, run once in this process after a warm-up on a small
    sample; its row's group is its build (`samples -O3`, `samples -G`)."""
    _once(WARM_UP_SAMPLE.read_text(), analysis)
    text = Path(path).read_text()
    row = {"shape": Path(path).name.removesuffix(".ptx"),
           "group": f"samples {build_of(Path(path))}", "size": 0,
           **_once(text, analysis, path=path)}
    if counts:
        row.update(_once(text, analysis, counts=True, path=path))
    return row


def median_row(runs: list[dict]) -> dict:
    """One row from the runs of a size: the median of each stage, the total of the
    medians, and the sizes and counts (the same in every run) of the first."""
    row = {k: v for k, v in runs[0].items() if k not in STAGES}
    for stage in STAGES:
        row[stage] = statistics.median(r[stage] for r in runs)
    row["total"] = sum(row[s] for s in STAGES)
    row["runs"] = len(runs)
    return row


def fitted_exponent(points: list[tuple[int, float]], floor: float) -> float | None:
    """Least-squares slope of log(ms) on log(size) over points at or above `floor` ms."""
    kept = [(math.log(n), math.log(t)) for n, t in points if t >= floor and n > 0]
    if len(kept) < 2:
        return None
    mean_x = sum(x for x, _ in kept) / len(kept)
    mean_y = sum(y for _, y in kept) / len(kept)
    spread = sum((x - mean_x) ** 2 for x, _ in kept)
    if spread == 0:
        return None
    return sum((x - mean_x) * (y - mean_y) for x, y in kept) / spread


def fitted_columns(rows: list[dict]) -> tuple[str, ...]:
    """The columns fitted: the stages, the total, and the work counts the rows have."""
    work = ("atoms", *(f"calls_{g}" for g in COUNTED))
    return (*STAGES, "total", *(c for c in work if all(c in r for r in rows)))


def exponents(rows: list[dict], floor: float) -> dict[str, dict[str, float | None]]:
    """Per shape, the fitted exponent of each stage, of the total and of the work counts
    (the floor applies to times only)."""
    result = {}
    for group in dict.fromkeys(r.get("group", r["shape"]) for r in rows):
        mine = [r for r in rows if r.get("group", r["shape"]) == group]
        result[group] = {column: fitted_exponent([(r["instructions"], r[column]) for r in mine],
                                                 floor if column in (*STAGES, "total") else 0)
                         for column in fitted_columns(rows)}
    return result


def _run_child(what: list[str], analysis: str, clock: str, counts: bool) -> dict:
    """`measure` (`what`: `--child SHAPE SIZE`) or `measure_file` (`--child-file PATH`)
    in a fresh interpreter (no memory or caches carried between runs)."""
    done = subprocess.run([sys.executable, __file__, *what,
                           "--analysis", analysis, "--clock", clock,
                           *(["--counts"] if counts else [])],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(what[1:])}: failed\n{done.stderr[-2000:]}")
    return json.loads(done.stdout)


def measure_size(what: list[str], args: argparse.Namespace) -> list[dict]:
    """The runs of at least `--repeat` fresh processes, more (up to `--max-repeat`) until
    their processor time adds up to `--min-ms`."""
    runs = [_run_child(what, args.analysis, args.clock, args.counts)]
    while len(runs) < args.max_repeat and (
            len(runs) < args.repeat
            or sum(sum(r[s] for s in STAGES) for r in runs) < args.min_ms):
        runs.append(_run_child(what, args.analysis, args.clock, args.counts))
    return runs


def measure_rounds(jobs: list[list[str]], args: argparse.Namespace) -> list[list[dict]]:
    """Per job, its row of each round: `measure_size` in each of `--rounds` rounds, the
    first in the jobs' order and each later one in a shuffled order (a slow spell of a
    shared machine then falls on different sizes in each round). A job's row of a round
    is the median of its runs; `combined_rounds` makes one row of a job's rounds."""
    rounds: list[list[dict]] = [[] for _ in jobs]
    order = list(range(len(jobs)))
    shuffler = random.Random(16)
    for round_number in range(args.rounds):
        if round_number:
            shuffler.shuffle(order)
        for index in order:
            rounds[index].append(median_row(measure_size(jobs[index], args)))
            row = rounds[index][-1]
            print(f"{' '.join(jobs[index][1:])}: {row['total']:.0f} ms ({row['runs']} runs)",
                  file=sys.stderr, flush=True)
    return rounds


def combined_rounds(rows: list[dict], statistic: str) -> dict:
    """The rows of one job's rounds as one: each stage's median (or least, `--statistic
    min`) over the rounds, and the runs of all rounds. Each size has one row per round,
    whatever its number of runs: the least of 40 small runs would be lower than the least
    of 3 large ones by chance alone."""
    combine = min if statistic == "min" else statistics.median
    row = dict(rows[0])
    for stage in STAGES:
        row[stage] = combine(r[stage] for r in rows)
    row["total"] = sum(row[s] for s in STAGES)
    row["runs"] = sum(r["runs"] for r in rows)
    return row


def sample_files(named: list[str]) -> list[str]:
    """The PTX files `--samples` measures: those named, else every CUDA sample build."""
    if named:
        return named
    return [str(p) for folder in ("cuda", "cuda_large")
            for p in sorted((ROOT / "samples" / folder).glob("*.ptx"))]


def round_exponents(rounds: list[list[dict]], floor: float) -> list[dict]:
    """`exponents` of each round on its own (`rounds`: per job, its row of each round)."""
    return [exponents([job[k] for job in rounds], floor) for k in range(len(rounds[0]))]


def exponent_ranges(by_round: list[dict]) -> dict[str, dict[str, tuple[float, float] | None]]:
    """Per group and column, the least and the greatest exponent of the rounds' fits."""
    ranges: dict[str, dict[str, tuple[float, float] | None]] = {}
    for group, columns in by_round[0].items():
        ranges[group] = {}
        for column in columns:
            values = [fits[group][column] for fits in by_round
                      if fits[group][column] is not None]
            ranges[group][column] = (min(values), max(values)) if values else None
    return ranges


def print_table(rows: list[dict], fits: dict, floor: float,
                ranges: dict | None = None) -> None:
    """The stage table and the exponents, aligned; with `ranges`, the least and greatest
    exponent of the rounds fitted one by one."""
    heads = ("shape", "instrs", "blocks", *STAGES, "total", "µs/instr", "atoms", "runs")
    table = [[r["shape"], str(r["instructions"]), str(r["blocks"]),
              *(f"{r[s]:.1f}" for s in (*STAGES, "total")),
              f"{1000 * r['total'] / max(1, r['instructions']):.1f}", str(r["atoms"]),
              str(r["runs"])] for r in rows]
    _aligned([heads, *table])
    print(f"\nfitted exponents (log-log least squares; stages under {floor} ms left out; "
          "atoms, calls_*: work done)")
    fit_rows = [[group, *("-" if e is None else f"{e:.2f}" for e in per.values())]
                for group, per in fits.items()]
    _aligned([("shape", *fitted_columns(rows)), *fit_rows])
    if ranges:
        print("\neach round fitted on its own: least and greatest exponent over the rounds")
        _aligned([("shape", *fitted_columns(rows)),
                  *([group, *("-" if r is None else f"{r[0]:.2f}-{r[1]:.2f}"
                              for r in per.values())] for group, per in ranges.items())])


def _aligned(rows: list) -> None:
    widths = [max(len(str(row[k])) for row in rows) for k in range(len(rows[0]))]
    for row in rows:
        print("  ".join(str(c).ljust(w) if k == 0 else str(c).rjust(w)
                        for k, (c, w) in enumerate(zip(row, widths, strict=True))))


def main(argv: list[str] | None = None) -> int:
    """Measure every shape at every size and print the stage table and exponents."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", nargs="+", choices=sorted(SHAPES), default=list(SHAPES))
    parser.add_argument("--sizes", nargs="+", type=int, default=list(DEFAULT_SIZES))
    parser.add_argument("--analysis", default="affine2")
    parser.add_argument("--repeat", type=int, default=1,
                        help="fresh processes per size at least (default 1)")
    parser.add_argument("--min-ms", type=float, default=1500.0,
                        help="more processes per size until their stage times add up to "
                             "this many ms (default 1500)")
    parser.add_argument("--max-repeat", type=int, default=15,
                        help="processes per size at most (default 15)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="measure every size this many times, in a shuffled order "
                             "after the first round (default 1)")
    parser.add_argument("--statistic", choices=("median", "min"), default="median",
                        help="each stage's value over the rounds, each round's value the "
                             "median of its runs (default median; min: the least "
                             "disturbed round)")
    parser.add_argument("--floor", type=float, default=1.0,
                        help="stages under this many ms at a size are left out of the fit")
    parser.add_argument("--counts", action="store_true",
                        help="also count Python function calls per group of stages")
    parser.add_argument("--json", action="store_true", help="rows and exponents as JSON")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                        help="time stages in processor time (default) or wall-clock time")
    parser.add_argument("--samples", nargs="*", metavar="PTX",
                        help="measure these PTX files (default: every CUDA sample build) "
                             "instead of generated kernels; fits per build")
    parser.add_argument("--child", nargs=2, metavar=("SHAPE", "SIZE"), help=argparse.SUPPRESS)
    parser.add_argument("--child-file", metavar="PTX", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child or args.child_file:
        if args.clock == "cpu":  # before gpudiv is imported: its stage timings read it
            time.perf_counter = cpu_seconds
        row = (measure_file(args.child_file, args.analysis, args.counts) if args.child_file
               else measure(args.child[0], int(args.child[1]), args.analysis, args.counts))
        print(json.dumps(row))
        return 0
    jobs = ([["--child-file", path] for path in sample_files(args.samples)]
            if args.samples is not None else
            [["--child", shape, str(size)] for shape in args.shapes for size in args.sizes])
    rounds = measure_rounds(jobs, args)
    rows = [combined_rounds(job, args.statistic) for job in rounds]
    if args.samples is not None:
        rows.sort(key=lambda r: (r["group"], r["instructions"]))
    fits = exponents(rows, args.floor)
    ranges = exponent_ranges(round_exponents(rounds, args.floor)) if args.rounds > 1 else None
    if args.json:
        print(json.dumps({"rows": rows, "exponents": fits, "exponent_ranges": ranges},
                         indent=1))
    else:
        print_table(rows, fits, args.floor, ranges)
    return 0


if __name__ == "__main__":
    sys.exit(main())
