"""Speed of the PTX front end, and of PTX analysis end to end, on the committed samples and
on generated nvcc-like PTX.

Four tables (progress on stderr):

- samples: every committed PTX file (samples/**/*.ptx): lines parsed per second with the
  fast path and with Lark alone, lowering, lines per second read (parse + lowering);
- analysis: load plus the analysis of every kernel of the samples, in instructions per
  second, with the share of parsing, lowering, CFG+SSA, facts, grounding, solving and the
  rest (building results from the solver's atoms);
- scaling: generated PTX (`gpudiv.lang.ptx.synth`) of growing size, as many kernels and
  as one long kernel: lines/s parsed and read, instructions/s analysed end to end;
- memory: generated files of several megabytes, each read in a fresh process: time and
  peak resident memory (`resource.getrusage`).

    python benchmarks/bench_ptx_frontend.py
    python benchmarks/bench_ptx_frontend.py --sizes 1000 10000 --memory-mb 5 --repeat 5
    python benchmarks/bench_ptx_frontend.py --skip-analysis --memory-mb 5 10 25 50 --json
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from gpudiv.analyses import DEFAULT_ANALYSIS, get_analysis
from gpudiv.analyses.solve import RuleError
from gpudiv.lang.ptx.parse import parse_ptx_timed
from gpudiv.lang.ptx.synth import synthetic_ptx

ROOT = Path(__file__).resolve().parents[1]
STAGES = ("parse", "lower", "ssa", "facts", "ground", "solve", "other")
BYTES_PER_LINE = 26  # of generated PTX, to aim at a file size


def _lines(text: str) -> int:
    """Lines of a text (a last line without a newline counts)."""
    return text.count("\n") + (not text.endswith("\n"))


def _median_run(text: str, path: str, fast: bool, repeat: int) -> dict[str, float]:
    """Median parse and lowering milliseconds over `repeat` reads, and the kernel counts."""
    runs = [parse_ptx_timed(text, path, fast=fast) for _ in range(repeat)]
    program = runs[0][0]
    return {"parse": statistics.median(r[1]["parse"] for r in runs),
            "lower": statistics.median(r[1]["lower"] for r in runs),
            "kernels": len(program.kernels),
            "instrs": sum(k.instruction_count for k in program.kernels),
            "errors": len(program.errors)}


def read_row(name: str, text: str, repeat: int, compare: bool = True) -> dict[str, object]:
    """Reading speed of one text: fast path (and, with `compare`, Lark alone)."""
    fast = _median_run(text, name, True, repeat)
    lines = _lines(text)
    row: dict[str, object] = {"name": name, "lines": lines, "bytes": len(text.encode()), **fast}
    row["parse_lps"] = lines / max(fast["parse"], 1e-9) * 1000
    row["read_lps"] = lines / max(fast["parse"] + fast["lower"], 1e-9) * 1000
    if compare:
        lark = _median_run(text, name, False, repeat)
        row["lark_parse"] = lark["parse"]
        row["speedup"] = lark["parse"] / max(fast["parse"], 1e-9)
    return row


def analyse(text: str, path: str, analysis: str) -> dict[str, float]:
    """One end-to-end run: read the file, analyse every kernel; milliseconds per stage."""
    program, timings = parse_ptx_timed(text, path)
    driver = get_analysis(analysis)
    stages = dict.fromkeys(STAGES, 0.0)
    stages["parse"], stages["lower"] = timings["parse"], timings["lower"]
    start = time.perf_counter()
    results = driver.run(program.kernels)  # as `gpudiv analyze`: kernels share clingo runs
    total = (time.perf_counter() - start) * 1000
    for result in results:
        if isinstance(result, RuleError):
            continue
        for stage in ("ssa", "facts", "ground", "solve"):
            stages[stage] += result.timing_ms.get(stage, 0.0)
    stages["other"] = total - sum(stages[s] for s in ("ssa", "facts", "ground", "solve"))
    stages["total"] = sum(stages[s] for s in STAGES)
    stages["instrs"] = float(sum(k.instruction_count for k in program.kernels))
    stages["kernels"] = float(len(program.kernels))
    return stages


def analysis_row(name: str, texts: list[tuple[str, str]], analysis: str,
                 repeat: int) -> dict[str, object]:
    """End-to-end analysis of a group of files: median stage times over `repeat` runs."""
    runs = []
    for _ in range(repeat):
        totals: dict[str, float] = {}
        for path, text in texts:
            for key, value in analyse(text, path, analysis).items():
                totals[key] = totals.get(key, 0.0) + value
        runs.append(totals)
    row: dict[str, object] = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
    row["name"] = name
    row["lines"] = sum(_lines(text) for _, text in texts)
    row["instr_per_s"] = row["instrs"] / max(row["total"], 1e-9) * 1000
    return row


def peak_rss_mb() -> float:
    """Peak resident memory of this process in MB: VmHWM from /proc where there is one
    (ru_maxrss survives exec on Linux, so a child would report its parent's peak)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def memory_child(megabytes: float, shape: str) -> dict[str, float]:
    """Generate a file of about `megabytes` and read it; run in a fresh process, so that the
    peak resident memory is this file's."""
    rss = peak_rss_mb
    parse_ptx_timed(synthetic_ptx(10))  # build the parser untimed
    start_rss = rss()
    text = synthetic_ptx(int(megabytes * 1e6 / BYTES_PER_LINE), seed=1, kernels=shape)
    text_rss = rss()
    start = time.perf_counter()
    program, timings = parse_ptx_timed(text, "large.ptx")
    seconds = time.perf_counter() - start
    return {"mb": len(text) / 1e6, "lines": _lines(text), "kernels": len(program.kernels),
            "instrs": sum(k.instruction_count for k in program.kernels),
            "parse_s": timings["parse"] / 1000, "lower_s": timings["lower"] / 1000,
            "seconds": seconds, "read_lps": _lines(text) / seconds,
            "rss_start_mb": start_rss, "rss_text_mb": text_rss, "rss_peak_mb": rss()}


def memory_row(megabytes: float, shape: str) -> dict[str, float]:
    """`memory_child` in a fresh interpreter."""
    command = [sys.executable, __file__, "--memory-child", str(megabytes), "--shape", shape]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


# -- tables ---------------------------------------------------------------------------------

def _table(title: str, columns: list[str]):
    """A rich table with right-aligned columns after the first."""
    from rich.table import Table

    table = Table(title=title)
    for n, column in enumerate(columns):
        table.add_column(column, justify="left" if n == 0 else "right")
    return table


def _print(table) -> None:
    """Print a rich table wide enough not to wrap."""
    from rich.console import Console

    Console(width=160).print(table)


def print_samples(rows: list[dict]) -> None:
    """The per-file reading table."""
    table = _table("PTX samples: reading (median ms; fast path vs Lark alone)",
                   ["file", "lines", "kernels", "instrs", "parse", "Lark parse", "speed-up",
                    "lower", "parse lines/s", "read lines/s"])
    for row in rows:
        table.add_row(row["name"], f"{row['lines']}", f"{row['kernels']}", f"{row['instrs']}",
                      f"{row['parse']:.1f}", f"{row['lark_parse']:.1f}",
                      f"{row['speedup']:.1f}×", f"{row['lower']:.1f}",
                      f"{row['parse_lps']:,.0f}", f"{row['read_lps']:,.0f}",
                      end_section=row.get("last", False))
    _print(table)


def _shares(row: dict) -> list[str]:
    """Each stage's share of the total, in percent."""
    return [f"{100 * row[s] / max(row['total'], 1e-9):.0f}%" for s in STAGES]


def print_analysis(rows: list[dict], analysis: str) -> None:
    """The end-to-end table."""
    table = _table(f"PTX analysis end to end ({analysis}; median ms, shares of the total)",
                   ["files", "lines", "kernels", "instrs", "total ms", "instrs/s", *STAGES])
    for row in rows:
        table.add_row(row["name"], f"{row['lines']}", f"{row['kernels']:.0f}",
                      f"{row['instrs']:.0f}", f"{row['total']:.0f}",
                      f"{row['instr_per_s']:,.0f}", *_shares(row))
    _print(table)


def print_scaling(rows: list[dict]) -> None:
    """The scaling table (generated PTX)."""
    table = _table("Generated PTX: scaling (median ms; end to end where analysed)",
                   ["shape", "lines", "MB", "kernels", "instrs", "parse", "parse lines/s",
                    "lower", "read lines/s", "end to end", "instrs/s", "parse+lower",
                    "ground+solve", "other"])
    for row in rows:
        e2e = row.get("analysis")
        extra = ["-"] * 5
        if e2e:
            total = max(e2e["total"], 1e-9)
            extra = [f"{e2e['total']:.0f}", f"{e2e['instr_per_s']:,.0f}",
                     f"{100 * (e2e['parse'] + e2e['lower']) / total:.0f}%",
                     f"{100 * (e2e['ground'] + e2e['solve']) / total:.0f}%",
                     f"{100 * e2e['other'] / total:.0f}%"]
        table.add_row(row["shape"], f"{row['lines']}", f"{row['bytes'] / 1e6:.2f}",
                      f"{row['kernels']}", f"{row['instrs']}", f"{row['parse']:.0f}",
                      f"{row['parse_lps']:,.0f}", f"{row['lower']:.0f}",
                      f"{row['read_lps']:,.0f}", *extra)
    _print(table)


def print_memory(rows: list[dict]) -> None:
    """The large-file table."""
    table = _table("Large generated files, each read in a fresh process",
                   ["MB", "shape", "lines", "kernels", "instrs", "parse s", "lower s",
                    "lines/s", "RSS before MB", "peak RSS MB", "peak / file"])
    for row in rows:
        grown = row["rss_peak_mb"] - row["rss_text_mb"]
        table.add_row(f"{row['mb']:.1f}", row["shape"], f"{row['lines']:,}",
                      f"{row['kernels']}", f"{row['instrs']:,}", f"{row['parse_s']:.1f}",
                      f"{row['lower_s']:.1f}", f"{row['read_lps']:,.0f}",
                      f"{row['rss_text_mb']:.0f}", f"{row['rss_peak_mb']:.0f}",
                      f"{grown / row['mb']:.0f}×")
    _print(table)


# -- the runs -------------------------------------------------------------------------------

def sample_files() -> list[Path]:
    """Every committed PTX sample."""
    return sorted((ROOT / "samples").rglob("*.ptx"))


def _group(path: Path) -> str:
    """-O3, -G or other (legacy dialects, report samples)."""
    return {".O3": "-O3", ".G": "-G"}.get(Path(path.stem).suffix, "other")


def run_samples(repeat: int) -> list[dict]:
    """Per-file rows, then one row per group and one for all files."""
    rows = []
    for path in sample_files():
        name = str(path.relative_to(ROOT / "samples"))
        print(f"samples: {name}", file=sys.stderr)
        row = read_row(name, path.read_text(), repeat)
        row["group"] = _group(path)
        rows.append(row)
    files = list(rows)
    files[-1]["last"] = True  # a rule under the last file
    for group in ("-O3", "-G", "other", None):
        members = [r for r in files if group is None or r["group"] == group]
        total = {key: sum(r[key] for r in members)
                 for key in ("lines", "bytes", "kernels", "instrs", "parse", "lower",
                             "lark_parse")}
        total["name"] = f"all {group} files" if group else "all files"
        total["parse_lps"] = total["lines"] / total["parse"] * 1000
        total["read_lps"] = total["lines"] / (total["parse"] + total["lower"]) * 1000
        total["speedup"] = total["lark_parse"] / total["parse"]
        rows.append(total)
    return rows


def run_analysis(analysis: str, repeat: int) -> list[dict]:
    """End to end on the -O3 samples, the -G samples and all samples."""
    files = [(str(p), p.read_text()) for p in sample_files()]
    rows = []
    for group in ("-O3", "-G", None):
        members = [(p, t) for p, t in files if group is None or _group(Path(p)) == group]
        name = f"{group} samples" if group else "all samples"
        print(f"analysis: {name}", file=sys.stderr)
        rows.append(analysis_row(name, members, analysis, repeat))
    return rows


def run_scaling(sizes: list[int], shapes: list[str], repeat: int, analysis: str | None,
                analyse_max: int) -> list[dict]:
    """Generated PTX of each size and shape: reading speed, and end to end up to a size."""
    rows = []
    for shape in shapes:
        for size in sizes:
            text = synthetic_ptx(size, seed=1, kernels=shape)
            print(f"scaling: {shape} {size} lines", file=sys.stderr)
            row = read_row(f"{shape}-{size}", text, repeat, compare=False)
            row["shape"] = shape
            if analysis and size <= analyse_max:
                row["analysis"] = analysis_row(row["name"], [("gen.ptx", text)], analysis, 1)
            rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="reads per measurement")
    parser.add_argument("--analysis", default=DEFAULT_ANALYSIS)
    parser.add_argument("--analysis-repeat", type=int, default=1)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--shapes", nargs="+", default=["many", "one"])
    parser.add_argument("--analyse-max", type=int, default=100000,
                        help="largest generated size (lines) analysed end to end")
    parser.add_argument("--memory-mb", type=float, nargs="*", default=[5, 10, 25])
    parser.add_argument("--memory-shape", default="many", choices=["many", "one"])
    parser.add_argument("--skip-samples", action="store_true")
    parser.add_argument("--skip-analysis", action="store_true")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--memory-child", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--shape", default="many", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_child is not None:
        print(json.dumps(memory_child(args.memory_child, args.shape)))
        return 0
    parse_ptx_timed(synthetic_ptx(10))  # build the parser (and its regexes) untimed
    repeat = max(args.repeat, 1)
    analysis = None if args.skip_analysis else args.analysis
    report: dict[str, object] = {}
    if not args.skip_samples:
        report["samples"] = run_samples(repeat)
        if analysis:
            report["analysis"] = run_analysis(analysis, max(args.analysis_repeat, 1))
    report["scaling"] = run_scaling(args.sizes, args.shapes, repeat, analysis, args.analyse_max)
    report["memory"] = []
    for megabytes in args.memory_mb:
        print(f"memory: {megabytes} MB", file=sys.stderr)
        row = memory_row(megabytes, args.memory_shape)
        row["shape"] = args.memory_shape
        report["memory"].append(row)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    if "samples" in report:
        print_samples(report["samples"])
    if "analysis" in report:
        print_analysis(report["analysis"], args.analysis)
    print_scaling(report["scaling"])
    if report["memory"]:
        print_memory(report["memory"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
