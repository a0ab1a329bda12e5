"""SIMT-deadlock detection over a corpus, like Tables III/IV of ElTantawy & Aamodt (MICRO
2016): kernels, branches, loops, loops that may deadlock and divergent barriers per group of
files, every detection outside the deadlock samples (to review as possible false
detections), and the time of `gpudiv deadlock` against `gpudiv analyze` on the same files.

    python benchmarks/deadlock_table.py [FOLDER|FILE ...] [--repeat 3] [--json]
    python benchmarks/deadlock_table.py --ssde [FOLDER|FILE ...] [--json]
    python benchmarks/deadlock_table.py --hangs [FOLDER|FILE ...] [--json]

`--ssde` prints instead the overheads of the SSDE rewrite (`gpudiv transform --pass ssde`)
like Table III: per rewritten kernel the loops transformed, static instructions and
registers added, and on the interpreter the warp instructions (issues), lane
instructions (the threads' work) and SIMD efficiency of the original under `mimd` (the
reference: under `ipdom` it hangs; every thread runs on its own there, so its warp and
lane counts are equal) against the result under `ipdom`, on one launch (μ-SIMD: the
golden launch of tests/analyses/test_deadlock.py, one warp of 4 lanes; PTX: the first
launch `gpudiv check` synthesizes); whether the original hangs there under `ipdom`,
whether the memories are equal, what `gpudiv deadlock` finds in the result, and per
PTX file whether `ptxas -arch=sm_80` accepts the printed result (when ptxas is
installed).

`--hangs` checks for missed detections: every kernel is run under `ipdom` on the
launches of `gpudiv transform --pass ssde --verify` (those of `gpudiv check`; μ-SIMD with
zeroed shared memory, plus the golden launch for the `deadlock_*` samples); a kernel
*hangs* when some launch does not finish under `ipdom` but does under `mimd`. It lists
every such kernel with whether `gpudiv deadlock` flags it.

Groups: CUDA samples built with -O3 (`*.O3.ptx`), with -G (`*.G.ptx`), other PTX, and
μ-SIMD. Files named `deadlock_*` are the samples written to hang (or to look like they
might); their detections are expected, the others' are false detections unless a kernel
really hangs. Times are the median of `--repeat` runs of the Python API (parse, CFG, SSA,
facts, clingo; CPU time of the process), per file, summed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpudiv import api
from gpudiv.interp.musimd import ExecutionError, LaunchConfig
from gpudiv.lang.load import load, parse_text
from gpudiv.lang.printing import print_program
from gpudiv.report.corpus import collect_inputs
from gpudiv.transforms import Pipeline
from gpudiv.verify.equivalence import _first_difference, _memories, _run
from gpudiv.verify.oracle import ptx_launches
from gpudiv.verify.ssde_check import detections, hangs, ssde_launches

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


def _golden_launch(kernel) -> LaunchConfig:
    """One warp of 4 lanes, parameter i = 16·i, memory zero but cells 1-3 = -1."""
    params = {p: 16 * i for i, p in enumerate(kernel.params)}
    shared = dict.fromkeys(range(128), 0) | {1: -1, 2: -1, 3: -1}
    return LaunchConfig(threads=4, warp_width=4, params=params, shared=shared,
                        max_steps=20_000)


def _outcome(language: str, kernel, launch, policy: str):
    """A run's result, or its error message."""
    try:
        return _run(language, kernel, launch, policy)
    except ExecutionError as error:
        return str(error)


def ssde_rows(paths: list[str]) -> list[dict]:
    """Table III-style rows: one per kernel the ssde pass rewrites."""
    rows = []
    for path in paths:
        program = load(path)
        result = Pipeline.parse("ssde").run(program)
        text = print_program(result)
        printed = parse_text(text, path, program.language)
        accepted = None
        if program.language == "ptx" and any(
                k.attrs.get("transform_stats", {}).get("flagged_loops")
                for k in result.kernels):
            accepted = ptxas_accepts(text)
        for old, new, reread in zip(program.kernels, result.kernels, printed.kernels,
                                    strict=True):
            stats = new.attrs.get("transform_stats", {})
            if not stats.get("flagged_loops"):
                continue
            launch = (ptx_launches(old, 0)[0] if program.language == "ptx"
                      else _golden_launch(old))
            stuck = _outcome(program.language, old, launch, "ipdom")
            before = _outcome(program.language, old, launch, "mimd")
            after = _outcome(program.language, reread, launch, "ipdom")
            row = {"file": Path(path).name, "kernel": old.name,
                   "loops": stats["flagged_loops"], "switch_blocks": stats["switch_blocks"],
                   "instructions_before": stats["instructions_before"],
                   "instructions_added": stats["instructions_added"],
                   "registers_added": stats["registers_added"],
                   "original_hangs": isinstance(stuck, str) and hangs(stuck),
                   "detections_after": detections(reread), "ptxas": accepted}
            if isinstance(before, str) or isinstance(after, str):
                row["error"] = before if isinstance(before, str) else after
            else:
                row |= {"warp_mimd": before.counters.warp_instructions,
                        "warp_ssde": after.counters.warp_instructions,
                        "lane_mimd": before.counters.lane_instructions,
                        "lane_ssde": after.counters.lane_instructions,
                        "simd_eff_ssde": round(after.counters.simd_efficiency, 3),
                        "memory_equal": _first_difference(
                            _memories(program.language, before),
                            _memories(program.language, after), "") is None}
            rows.append(row)
    return rows


def ptxas_accepts(text: str) -> bool | None:
    """Whether `ptxas -arch=sm_80` accepts a PTX text (None: no ptxas here)."""
    if shutil.which("ptxas") is None:
        return None
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "ssde.ptx"
        source.write_text(text)
        done = subprocess.run(["ptxas", "-arch=sm_80", str(source), "-o",
                               str(Path(folder) / "ssde.cubin")], capture_output=True)
    return done.returncode == 0


def _hang_launches(path: str, language: str, kernel, limit: int | None) -> list:
    """The launches `--hangs` tries for a kernel (at most `limit`, the golden one first)."""
    launches = ssde_launches(kernel, language, 0)
    if Path(path).name.startswith("deadlock_") and language != "ptx":
        launches.insert(0, _golden_launch(kernel))
    return launches[:limit]


def hang_census(paths: list[str], limit: int | None = None) -> list[dict]:
    """Kernels that hang under `ipdom` on some launch but finish under `mimd` on it, and
    whether `gpudiv deadlock` flags each."""
    found = []
    for path in paths:
        program = load(path)
        report = api.deadlock(program)
        flagged = {k.name for k in report.kernels if k.detections}
        for kernel in program.kernels:
            hung = 0
            launches = _hang_launches(path, program.language, kernel, limit)
            for launch in launches:
                stuck = _outcome(program.language, kernel, launch, "ipdom")
                if isinstance(stuck, str) and hangs(stuck) and not isinstance(
                        _outcome(program.language, kernel, launch, "mimd"), str):
                    hung += 1
            if hung:
                found.append({"file": Path(path).name, "kernel": kernel.name,
                              "launches": len(launches), "hang": hung,
                              "detected": kernel.name in flagged})
    return found


def render_hangs(rows: list[dict]) -> str:
    """The kernels that hang, and the missed ones."""
    lines = [f"{r['file']}  {r['kernel']}: hangs in {r['hang']} of {r['launches']} "
             f"launches, {'detected' if r['detected'] else 'NOT DETECTED'}" for r in rows]
    missed = [r for r in rows if not r["detected"]]
    lines.append(f"{len(rows)} kernels hang under ipdom, {len(rows) - len(missed)} "
                 f"detected, {len(missed)} missed")
    return "\n".join(lines) + "\n"


def render_ssde(rows: list[dict]) -> str:
    """The overhead table."""
    head = ("file", "kernel", "loops", "instr", "+instr", "+regs", "hangs", "warp mimd",
            "warp ssde", "lane mimd", "lane ssde", "eff ssde", "mem =", "det after",
            "ptxas")
    lines = ["  ".join(head)]
    for r in rows:
        dyn = (f"{r['warp_mimd']}  {r['warp_ssde']}  {r['lane_mimd']}  {r['lane_ssde']}  "
               f"{r['simd_eff_ssde']}  "
               f"{'yes' if r['memory_equal'] else 'NO'}" if "error" not in r
               else f"error: {r['error'][:60]}")
        pct = 100 * r["instructions_added"] / r["instructions_before"]
        lines.append(f"{r['file']}  {r['kernel']}  {r['loops']}  {r['instructions_before']}  "
                     f"+{r['instructions_added']} ({pct:.1f}%)  +{r['registers_added']}  "
                     f"{'yes' if r['original_hangs'] else 'no'}  {dyn}  "
                     f"{r['detections_after']}  "
                     f"{ {True: 'accepts', False: 'REJECTS', None: '-'}[r['ptxas']] }")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Print the table (or JSON) for the given files and folders."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("inputs", nargs="*", default=[str(p) for p in DEFAULT_INPUTS])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--ssde", action="store_true",
                        help="the overheads of the SSDE rewrite instead (Table III)")
    parser.add_argument("--hangs", action="store_true",
                        help="the kernels that hang under ipdom and whether each is "
                             "detected instead")
    parser.add_argument("--launches", type=int, metavar="N",
                        help="--hangs: at most N launches per kernel (default: all)")
    args = parser.parse_args(argv)
    if args.hangs:
        found = hang_census(collect_inputs(args.inputs), args.launches)
        sys.stdout.write(json.dumps(found, indent=2) + "\n" if args.json
                         else render_hangs(found))
        return 0
    if args.ssde:
        rows = ssde_rows(collect_inputs(args.inputs))
        sys.stdout.write(json.dumps(rows, indent=2) + "\n" if args.json
                         else render_ssde(rows))
        return 0
    result = measure(collect_inputs(args.inputs), max(1, args.repeat))
    sys.stdout.write(json.dumps(result, indent=2) + "\n" if args.json else render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
