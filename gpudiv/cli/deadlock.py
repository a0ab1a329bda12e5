"""`gpudiv deadlock FILE|DIR…`: SIMT-induced deadlocks per kernel, as text, JSON or SARIF.

The text report lists, per kernel, every loop with its verdict and, for a loop that may
deadlock, its exit branch, the shared reads its exit depends on, the writes that could
release it and the safe reconvergence point; the findings (`gpudiv-simt-deadlock`,
`gpudiv-divergent-barrier`) come first in the compiler style of `analyze`.
"""

from __future__ import annotations

import argparse
import json
import sys

from gpudiv import api
from gpudiv.analyses.deadlock import KernelDeadlocks, LoopVerdict, Place
from gpudiv.analyses.findings import DEADLOCK_KINDS
from gpudiv.lang.load import LoadError
from gpudiv.report.corpus import collect_inputs

FORMATS = ("text", "json", "sarif")


def _place(place: Place | None) -> str:
    """A place in words: `BLOCK (line N)`."""
    if place is None:
        return "-"
    if place.line is None:
        return place.block
    origin = f", CUDA line {place.origin[1]}" if place.origin else ""
    return f"{place.block} (line {place.line}{origin})"


def _loop_lines(loop: LoopVerdict) -> list[str]:
    """The text lines of one loop."""
    lines = [f"    loop {loop.header} (line {loop.line}): {loop.verdict} ({loop.reason})"]
    if not loop.may_deadlock:
        return lines
    lines.append("      exit branch: " + ", ".join(_place(b) for b in loop.exit_branches))
    for read in loop.shared_reads:
        lines.append(f"      shared read: {read.text}  at {_place(read)}")
    for write in loop.releasing_writes:
        lines.append(f"      releasing write ({write.path}): {write.place.text}  at "
                     f"{_place(write.place)}")
    note = " (conflict resolution unsettled: kernel end)" if loop.unsettled else ""
    lines.append(f"      safe reconvergence point: {_place(loop.safe_reconvergence)}{note}")
    return lines


def kernel_text(path: str, report: KernelDeadlocks) -> list[str]:
    """The text report of one kernel."""
    trusted = " (assumed safe: warp-synchronous)" if report.assumed_safe else ""
    lines = [f"{path}: kernel {report.name}: {len(report.loops)} loops, "
             f"{len(report.detections)} may deadlock{trusted}"]
    for loop in report.loops:
        lines += _loop_lines(loop)
    for barrier in report.barriers:
        lines.append(f"    divergent barrier at {_place(barrier.barrier)}, in the region of "
                     f"the branch at {_place(barrier.branch)}")
    return lines


def render_text(files: list[api.FileDeadlocks]) -> str:
    """Findings first, then the per-kernel report and a summary line."""
    lines = [f.compiler_style() for analysed in files for f in analysed.findings()]
    if lines:
        lines.append("")
    kernels = loops = detections = barriers = 0
    for analysed in files:
        for report in analysed.kernels:
            lines += kernel_text(analysed.path, report)
            kernels += 1
            loops += len(report.loops)
            detections += len(report.detections)
            barriers += 0 if report.assumed_safe else len(report.barriers)
    lines.append(f"summary: {kernels} kernels, {loops} loops, {detections} may deadlock, "
                 f"{barriers} divergent barriers")
    return "\n".join(lines) + "\n"


def cmd_deadlock(args: argparse.Namespace) -> int:
    """Look for SIMT-induced deadlocks; exit status 1 when a loop may deadlock."""
    files, failed = [], False
    for path in collect_inputs(args.files):
        try:
            analysed = api.deadlock(path, tuple(args.assume_safe))
        except LoadError as error:
            print(str(error), file=sys.stderr)
            failed = True
            continue
        for d in analysed.diagnostics:
            print(str(d), file=sys.stderr)
            failed = failed or d.severity == "error"
        files.append(analysed)
    if args.format == "json":
        text = json.dumps({"files": [f.as_dict() for f in files]}, indent=2) + "\n"
    elif args.format == "sarif":
        from gpudiv.report.sarif import sarif_log

        text = json.dumps(sarif_log(files, kinds=DEADLOCK_KINDS), indent=2) + "\n"
    else:
        text = render_text(files)
    sys.stdout.write(text)
    if failed:
        return 2
    return 1 if args.fail_on_detection and any(f.findings() for f in files) else 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add `deadlock` to the `gpudiv` subcommand parser."""
    parser = sub.add_parser("deadlock", help="loops that may hang under SIMT reconvergence "
                            "(ElTantawy & Aamodt, MICRO 2016)")
    parser.add_argument("files", nargs="+", metavar="FILE|DIR",
                        help="files and folders (searched recursively)")
    parser.add_argument("--format", choices=FORMATS, default="text", help="output format")
    parser.add_argument("--assume-safe", action="append", default=[], metavar="KERNEL",
                        help="a warp-synchronous kernel the user vouches for: no findings")
    parser.add_argument("--fail-on-detection", action="store_true",
                        help="exit status 1 when a finding is reported (for CI)")
    parser.set_defaults(handler=cmd_deadlock)
