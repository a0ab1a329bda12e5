"""`gpudiv structure FILE|DIR… [--format text|json] [--schemes [--launches N]]`: structured
control flow or not.

Per kernel: structured or not, the unstructured edges with their kind (cut,
forward_copy, backward_copy), line and source pattern; over several files a
Table-1-style summary (Wu et al. 2011). `--schemes` also runs every unstructured kernel
under the reconvergence schemes (`gpudiv.verify.schemes`, Table 3). Exit status: 0 when
every kernel was analysed (structured or not), 2 on bad input with `FILE:LINE:COL:
error:` lines.
"""

from __future__ import annotations

import argparse
import json
import sys

from gpudiv.analyses.structure import (
    PATTERNS,
    FileStructure,
    analyze_file,
    summarize,
)
from gpudiv.cli.common import EXIT_ERROR, EXIT_OK
from gpudiv.lang.load import LoadError, load
from gpudiv.report.corpus import collect_inputs
from gpudiv.verify.schemes import SchemeComparison, compare_schemes, default_launches


def register(sub: argparse._SubParsersAction) -> None:
    """Add `structure` to the `gpudiv` subcommand parser."""
    parser = sub.add_parser("structure",
                            help="find unstructured control flow (Cut, Forward Copy, "
                                 "Backward Copy edges)")
    parser.add_argument("files", nargs="+", metavar="FILE|DIR",
                        help="files and folders (searched recursively)")
    parser.add_argument("--format", choices=("text", "json"), default="text",
                        help="output format")
    parser.add_argument("--schemes", action="store_true",
                        help="run each unstructured kernel under the reconvergence schemes "
                             "(PDOM, earliest, structurized, mimd; Table 3 of Wu et al.)")
    parser.add_argument("--launches", type=int, default=2, metavar="N",
                        help="with --schemes: launches per kernel (default 2)")
    parser.set_defaults(handler=cmd_structure)


def _print_text(result: FileStructure) -> None:
    for k in result.kernels:
        if k.structured:
            print(f"{result.path}: kernel {k.name}: structured "
                  f"({k.branches} branches, {k.loops} loops)")
            continue
        counts = ", ".join(f"{n} {kind}" for kind, n in k.counts().items() if n)
        extra = f"; irreducible loops at {', '.join(k.irreducible_loops)}" \
            if k.irreducible_loops else ""
        print(f"{result.path}: kernel {k.name}: unstructured: {counts}{extra}")
        for e in k.edges:
            print(f"{result.path}:{e.line}: {e.kind} edge {e.source} -> {e.target} "
                  f"({e.pattern or PATTERNS[e.kind]})")


def _schemes(result: FileStructure, launches: int) -> dict[str, SchemeComparison]:
    """Kernel name → the schemes compared, for the unstructured kernels of a file."""
    program = load(result.path)
    language = "ptx" if program.language == "ptx" else "musimd"
    wanted = {k.name for k in result.kernels if not k.structured}
    return {k.name: compare_schemes(k, language, default_launches(language, k), launches)
            for k in program.kernels if k.name in wanted}


def _print_schemes(path: str, name: str, report: SchemeComparison) -> None:
    print(f"{path}: kernel {name}: schemes over {report.launches} launches "
          f"({report.racy_launches} racy left out); Forward Copy upper bound "
          f"{report.upper_bound}, measured expansion {report.measured_expansion}")
    for run in report.runs.values():
        state = "" if run.finished else f"  stopped: {run.message}"
        same = {True: "same memory", False: "OTHER MEMORY", None: "reference"}[
            run.same_memory]
        slots = f", {run.slots} slots" if run.slots is not None else ""
        print(f"  {run.scheme:20} {run.warp_instructions:8} warp instructions, SIMD "
              f"efficiency {run.simd_efficiency:.3f}{slots}, {same}{state}")


def cmd_structure(args: argparse.Namespace) -> int:
    """Analyse the structure of every kernel of the inputs and print it."""
    if args.launches < 1:
        print("gpudiv structure: error: --launches must be at least 1", file=sys.stderr)
        return EXIT_ERROR
    results: list[FileStructure] = []
    schemes: dict[str, dict[str, SchemeComparison]] = {}
    failed = False
    for path in collect_inputs(args.files):
        try:
            results.append(analyze_file(path))
        except LoadError as error:
            print(str(error), file=sys.stderr)
            failed = True
            continue
        if args.schemes:
            schemes[results[-1].path] = _schemes(results[-1], args.launches)
    summary = summarize(results)
    if args.format == "json":
        files = [r.to_json() for r in results]
        for data in files if args.schemes else []:
            for kernel in data["kernels"]:
                found = schemes[data["path"]].get(kernel["name"])
                kernel["schemes"] = found.as_dict() if found else None
        json.dump({"files": files, "summary": summary}, sys.stdout, indent=2)
        print()
    else:
        for result in results:
            _print_text(result)
            for name, report in schemes.get(result.path, {}).items():
                _print_schemes(result.path, name, report)
        if len(results) > 1:
            print(f"summary: {summary['files_unstructured']} of {summary['files']} files and "
                  f"{summary['kernels_unstructured']} of {summary['kernels']} kernels have "
                  f"unstructured control flow ({summary['cut']} cut, "
                  f"{summary['forward_copy']} forward_copy, {summary['backward_copy']} "
                  f"backward_copy edges; {summary['kernels_irreducible']} kernels with "
                  "irreducible loops)")
    return EXIT_ERROR if failed else EXIT_OK
