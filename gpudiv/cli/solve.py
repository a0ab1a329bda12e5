"""`gpudiv solve FILE --rules R.lp`: solve a file's facts with users' rules."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TextIO

from gpudiv import __version__
from gpudiv.analyses import ANALYSIS_NAMES
from gpudiv.cli.common import (
    EXIT_ERROR,
    EXIT_OK,
    add_rule_file_options,
    one_line_errors,
    rule_budget,
)

# ---------------------------------------------------------------------------------------
# gpudiv solve / gpudiv rules
# ---------------------------------------------------------------------------------------

def _columns(name: str, arity: int, named: dict[tuple[str, int], list[str]]) -> list[str]:
    from gpudiv.analyses.schema import documented_relations

    if (name, arity) in named:
        return named[(name, arity)]
    relation = documented_relations().get(name)
    if relation is not None and relation.arity == arity:
        return list(relation.columns)
    return [f"arg{i + 1}" for i in range(arity)]


def _print_solve_table(run, out: TextIO) -> None:
    from gpudiv.report.documents import _table, text_console
    from gpudiv.report.export import plain

    console = text_console(out, True if out.isatty() else None)
    for kernel in run.kernels:
        console.print(f"{run.path}: kernel {kernel.name}", markup=False, highlight=False)
        for (name, arity), symbols in kernel.relations.items():
            if not symbols:
                console.print(f"  {name}/{arity}: (none)", markup=False, highlight=False)
                continue
            rows = [[str(plain(a)) for a in s.arguments] for s in symbols]
            if arity == 0:
                console.print(f"  {name}/0: true", markup=False, highlight=False)
                continue
            _table(console, f"{name}/{arity} ({len(symbols)})",
                   _columns(name, arity, run.columns), rows)
        console.print()


@one_line_errors
def cmd_solve(args: argparse.Namespace) -> int:
    """Solve the facts of a file's kernels with the shipped rules and the user's."""
    from gpudiv.report.experiment import run_rules
    from gpudiv.report.export import plain

    run = run_rules(args.file, args.rules, not args.no_default_rules, args.show,
                    args.analysis, args.kernel, rule_budget(args), not args.no_scripts)
    for d in run.diagnostics:
        print(str(d), file=sys.stderr)
    if args.format == "json":
        document = {"tool": "gpudiv", "version": __version__, "path": run.path,
                    "rules": run.rule_files,
                    "shown": [f"{n}/{a}" for n, a in run.shown],
                    "kernels": [{"name": k.name, "relations": {
                        f"{n}/{a}": [[plain(x) for x in s.arguments] for s in symbols]
                        for (n, a), symbols in k.relations.items()},
                        "timing_ms": {"ground": round(k.ground_ms, 3),
                                      "solve": round(k.solve_ms, 3)}}
                        for k in run.kernels]}
        json.dump(document, sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif args.format == "lp":
        for kernel in run.kernels:
            sys.stdout.write(f"% {run.path}: kernel {kernel.name}\n")
            for symbols in kernel.relations.values():
                sys.stdout.write("".join(f"{s}.\n" for s in symbols))
    else:
        _print_solve_table(run, sys.stdout)
    return EXIT_ERROR if any(d.severity == "error" for d in run.diagnostics) else EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:
    """Add `solve` to the `gpudiv` subcommand parser."""
    solve = sub.add_parser("solve", help="solve a file's facts with your rules")
    solve.add_argument("file", metavar="FILE", help="a .musimd or .ptx file")
    solve.add_argument("--rules", action="append", default=[], metavar="FILE.lp",
                       help="a rule file of yours (repeat for several)")
    solve.add_argument("--no-default-rules", action="store_true",
                       help="leave out the shipped rules of the analysis")
    solve.add_argument("--show", action="extend", nargs="+", metavar="PRED/ARITY",
                       help="relations to print (default: what your files #show, else "
                            "every predicate they define; without --rules, what the "
                            "shipped rules show)")
    solve.add_argument("--format", choices=("table", "json", "lp"), default="table",
                       help="output format")
    solve.add_argument("--kernel", help="only this kernel (default: every kernel)")
    solve.add_argument("--analysis", choices=sorted(ANALYSIS_NAMES),
                       help="default rules: only this analysis' rule files (default: all "
                            "shipped rule files)")
    add_rule_file_options(solve)
    solve.set_defaults(handler=cmd_solve)
