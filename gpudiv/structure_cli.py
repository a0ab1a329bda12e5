"""`gpudiv structure FILE|DIR… [--format text|json]`: structured control flow or not.

Per kernel: structured or not, the unstructured edges with their kind (cut,
forward_copy, backward_copy), line and source pattern; over several files a
Table-1-style summary (Wu et al. 2011). Exit status: 0 when every kernel was analysed
(structured or not), 2 on bad input with `FILE:LINE:COL: error:` lines.
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
from gpudiv.corpus import collect_inputs
from gpudiv.load import LoadError

EXIT_OK, EXIT_ERROR = 0, 2


def register(sub: argparse._SubParsersAction) -> None:
    """Add `structure` to the `gpudiv` subcommand parser."""
    parser = sub.add_parser("structure",
                            help="find unstructured control flow (Cut, Forward Copy, "
                                 "Backward Copy edges)")
    parser.add_argument("files", nargs="+", metavar="FILE|DIR",
                        help="files and folders (searched recursively)")
    parser.add_argument("--format", choices=("text", "json"), default="text",
                        help="output format")
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
                  f"({PATTERNS[e.kind]})")


def cmd_structure(args: argparse.Namespace) -> int:
    """Analyse the structure of every kernel of the inputs and print it."""
    results: list[FileStructure] = []
    failed = False
    for path in collect_inputs(args.files):
        try:
            results.append(analyze_file(path))
        except LoadError as error:
            print(str(error), file=sys.stderr)
            failed = True
    summary = summarize(results)
    if args.format == "json":
        json.dump({"files": [r.to_json() for r in results], "summary": summary},
                  sys.stdout, indent=2)
        print()
    else:
        for result in results:
            _print_text(result)
        if len(results) > 1:
            print(f"summary: {summary['files_unstructured']} of {summary['files']} files and "
                  f"{summary['kernels_unstructured']} of {summary['kernels']} kernels have "
                  f"unstructured control flow ({summary['cut']} cut, "
                  f"{summary['forward_copy']} forward_copy, {summary['backward_copy']} "
                  f"backward_copy edges; {summary['kernels_irreducible']} kernels with "
                  "irreducible loops)")
    return EXIT_ERROR if failed else EXIT_OK
