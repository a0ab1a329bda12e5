"""`gpudiv facts FILE|DIR… -o DIR`: export facts for Soufflé, CSV, JSON lines or ASP."""

from __future__ import annotations

import argparse
import sys

from gpudiv.analyses import ANALYSIS_NAMES
from gpudiv.cli.common import EXIT_ERROR, EXIT_OK, one_line_errors
from gpudiv.report.wording import count

# ---------------------------------------------------------------------------------------
# gpudiv facts
# ---------------------------------------------------------------------------------------

@one_line_errors
def cmd_facts(args: argparse.Namespace) -> int:
    """Export the facts (and derived relations) of every kernel of the files."""
    from gpudiv.report.export import export


    result = export(args.files, args.output, args.format, args.derived,
                    True if args.keyed else None)
    for d in result.diagnostics:
        print(str(d), file=sys.stderr)
    total = sum(result.rows.values())
    print(f"{result.directory}: {count(len(result.written), 'file')}, "
          f"{count(len(result.rows), 'relation')}, {count(total, 'fact')} of "
          f"{count(len(result.kernels), 'kernel')}"
          + (" (with file and kernel columns)" if result.keyed else ""))
    return EXIT_ERROR if any(d.severity == "error" for d in result.diagnostics) else EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:
    """Add `facts` to the `gpudiv` subcommand parser."""
    from gpudiv.report.export import FORMATS as EXPORT_FORMATS
    facts = sub.add_parser("facts", help="export facts for Soufflé, CSV, JSON lines or ASP")
    facts.add_argument("files", nargs="+", metavar="FILE|DIR",
                       help="files, and folders searched recursively for .musimd/.ptx")
    facts.add_argument("--output", "-o", required=True, help="output directory")
    facts.add_argument("--format", choices=EXPORT_FORMATS, default="souffle",
                       help="fact format")
    facts.add_argument("--derived", choices=sorted(ANALYSIS_NAMES), metavar="ANALYSIS",
                       help="also export what this analysis' rules derive")
    facts.add_argument("--keyed", action="store_true",
                       help="add the file and kernel columns even for a single kernel")
    facts.set_defaults(handler=cmd_facts)
