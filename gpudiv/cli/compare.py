"""Comparing analysis variants: class counts per kernel and the variables they disagree on.

`gpudiv compare FILE... --analysis simple --analysis affine [--analysis affine2]
[--rules FILE.lp ...] [--block X[xY[xZ]]] [--format text|json]` runs here. Each
`--analysis` is a variant; each `--rules FILE.lp` adds a variant: the affine2 analysis with
the user's rule file loaded too (for instance `affine_off(cmp_difference).` switches off a
completion, see rules/affine.lp). `--block` adds every variant again, named `NAME@XxYxZ`,
analysed for launches with that block shape (`gpudiv.analyses.launch_shape`). For every kernel
and in total it counts the variables of each class (constant, uniform, constaffine,
affine, divergent) and lists the variables whose class differs between variants.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from gpudiv import __version__
from gpudiv.analyses import ANALYSES, get_analysis
from gpudiv.analyses import affine as affine_analysis
from gpudiv.analyses.driver import Analysis
from gpudiv.analyses.launch_shape import BlockShape
from gpudiv.analyses.results import CLASSES, KernelResult
from gpudiv.analyses.rulefile import check_rule_file
from gpudiv.analyses.solve import Budget, RuleError, in_context
from gpudiv.cli.common import (
    EXIT_ERROR,
    EXIT_OK,
    CommandError,
    add_block_option,
    add_rule_file_options,
    block_option,
    one_line_errors,
    rule_budget,
)
from gpudiv.ir import Diagnostic
from gpudiv.lang.load import load
from gpudiv.report.wording import count

DEFAULT_VARIANTS = ("simple", "affine", "affine2")


@dataclass
class KernelComparison:
    """One kernel under every variant."""

    path: str
    kernel: str
    counts: dict[str, dict[str, int]]
    differences: list[dict] = field(default_factory=list)


def _rules_driver(name: str, rules: Path, budget: Budget | None,
                  allow_scripts: bool) -> Analysis:
    try:
        check_rule_file(rules, allow_scripts)
    except RuleError as error:
        raise CommandError(str(error)) from None
    return affine_analysis.analysis(name, 2, extra_rules=(str(rules),), budget=budget)


def variants_of(analyses: list[str] | None, rules: list[str] | None,
                block: BlockShape | None = None, budget: Budget | None = None,
                allow_scripts: bool = True) -> dict[str, Callable]:
    """Variant name → driver (a kernel → its result): the analyses, then
    `affine2+FILE.lp` for each rule file (solved under `budget`; `allow_scripts=False`
    refuses files with `#script`); with a block shape, each again as `NAME@SHAPE`."""
    drivers: dict[str, Analysis] = {name: get_analysis(name)
                                    for name in analyses or DEFAULT_VARIANTS}
    for path in rules or []:
        name = f"affine2+{Path(path).name}"
        name = name if name not in drivers else f"affine2+{path}"
        drivers[name] = _rules_driver(name, Path(path), budget, allow_scripts)
    variants: dict[str, Callable] = dict(drivers)
    if block is not None:
        for name, driver in drivers.items():
            variants[f"{name}@{block}"] = partial(driver, block=block)
    return variants


def compare_kernel(path: str, kernel, variants: dict) -> KernelComparison:
    """Analyse one kernel under every variant and compare the classes."""
    results: dict[str, KernelResult] = {}
    for name, driver in variants.items():
        try:
            results[name] = driver(kernel)
        except RuleError as error:
            raise CommandError(str(in_context(error, path, kernel.loc,
                                              f"kernel {kernel.name}, variant {name}"))
                               ) from None
    counts = {name: {c: sum(1 for v in r.variables if v.klass == c) for c in CLASSES}
              for name, r in results.items()}
    comparison = KernelComparison(path, kernel.name, counts)
    first = results[next(iter(variants))]
    classes = {name: {v.name: v for v in r.variables} for name, r in results.items()}
    for var in first.variables:
        seen = {name: classes[name][var.name].klass for name in variants
                if var.name in classes[name]}
        if len(set(seen.values())) > 1:
            entry = {"name": var.name, "source": var.source, "line": var.line,
                     "classes": seen}
            comparison.differences.append(entry)
    return comparison


def compare_files(paths: list[str], variants: dict
                  ) -> tuple[list[KernelComparison], list[Diagnostic]]:
    """Every kernel of every file under every variant, and the files' diagnostics."""
    out, diagnostics = [], []
    for path in paths:
        program = load(path)
        diagnostics += program.diagnostics
        out += [compare_kernel(path, k, variants) for k in program.kernels]
    return out, diagnostics


def compare(paths: list[str], variants: dict) -> list[KernelComparison]:
    """Every kernel of every file under every variant (diagnostics: `compare_files`)."""
    return compare_files(paths, variants)[0]


def totals(comparisons: list[KernelComparison], variants: list[str]) -> dict[str, dict]:
    """Class counts summed over all kernels, per variant."""
    return {name: {c: sum(k.counts[name][c] for k in comparisons) for c in CLASSES}
            for name in variants}


def render_text(comparisons: list[KernelComparison], variants: list[str]) -> str:
    """A table of counts per kernel and in total, then the differing variables."""
    width = max(len(v) for v in variants)
    header = "  " + "variant".ljust(width) + "".join(f"  {c:>11}" for c in CLASSES)
    lines = []

    def table(counts: dict[str, dict[str, int]]) -> None:
        lines.append(header)
        for name in variants:
            lines.append("  " + name.ljust(width)
                         + "".join(f"  {counts[name][c]:>11}" for c in CLASSES))

    for k in comparisons:
        lines.append(f"{k.path}: kernel {k.kernel}")
        table(k.counts)
        if k.differences:
            lines.append(f"  {count(len(k.differences), 'variable')} "
                         f"{'differs' if len(k.differences) == 1 else 'differ'}:")
            for d in k.differences:
                shown = ", ".join(f"{n}: {c}" for n, c in d["classes"].items())
                lines.append(f"    {d['name']} ({d['source']}, line {d['line']}): {shown}")
        lines.append("")
    lines.append(f"total ({count(len(comparisons), 'kernel')})")
    table(totals(comparisons, variants))
    differing = sum(len(k.differences) for k in comparisons)
    lines.append(f"  {count(differing, 'variable')} "
                 f"{'differs' if differing == 1 else 'differ'} between variants")
    return "\n".join(lines) + "\n"


def calls_json(path: str, projections: list) -> list[dict]:
    """`compare --calls`: per kernel, how call summaries compare with inlining."""
    def difference(d) -> dict:
        return {"variable": d.variable, "source": d.source, "line": d.line,
                "frame": d.frame, "inlined": d.inlined, "summarised": d.summarised,
                "why": d.why}

    return [{"path": path, "name": p.kernel, "variables": len(p.inlined.variables),
             "same": len(p.inlined.variables) - len(p.unmapped) - len(p.losses)
             - len(p.gains), "losses": [difference(d) for d in p.losses],
             "gains": [difference(d) for d in p.gains], "not_variables": p.unmapped,
             "conflicts": p.conflicts, "branches": len(p.inlined.branches),
             "branch_losses": [{"block": b, "line": line} for b, line in p.branch_losses],
             "branch_gains": [{"block": b, "line": line} for b, line in p.branch_gains]}
            for p in projections]


def render_calls_text(kernels: list[dict]) -> str:
    """`compare --calls` as text: counts per kernel, then the differences grouped by why."""
    lines = []
    total = {"variables": 0, "same": 0, "losses": 0, "gains": 0, "not_variables": 0,
             "branches": 0, "branch_losses": 0, "branch_gains": 0}
    for k in kernels:
        lines.append(f"{k['path']}: kernel {k['name']}: {count(k['variables'], 'variable')} "
                     f"inlined: {k['same']} same class with call summaries, "
                     f"{len(k['losses'])} less precise, {len(k['gains'])} more precise, "
                     f"{len(k['not_variables'])} not variables with summaries; "
                     f"{count(k['branches'], 'branch')}: {len(k['branch_losses'])} divergent "
                     f"only with summaries, {len(k['branch_gains'])} only when inlined")
        for key in total:
            total[key] += k[key] if isinstance(k[key], int) else len(k[key])
        groups: dict[str, list[dict]] = {}
        for d in k["losses"] + k["gains"]:
            groups.setdefault(d["why"], []).append(d)
        for why, found in groups.items():
            shown = ", ".join(f"{d['variable']} ({d['inlined']} → {d['summarised']})"
                              for d in found[:6])
            more = f", … {len(found) - 6} more" if len(found) > 6 else ""
            lines.append(f"  {len(found)}: {why}: {shown}{more}")
    lines.append(f"total: {count(total['variables'], 'variable')}: {total['same']} same, "
                 f"{total['losses']} less precise, {total['gains']} more precise, "
                 f"{total['not_variables']} not variables with summaries; "
                 f"{count(total['branches'], 'branch')}: {total['branch_losses']} divergent only "
                 f"with summaries, {total['branch_gains']} only when inlined")
    return "\n".join(lines) + "\n"


def cmd_compare_calls(args: argparse.Namespace) -> int:
    """`compare --calls`: call summaries against inlining, for one analysis."""
    from gpudiv import api
    from gpudiv.analyses import DEFAULT_ANALYSIS

    analysis = args.analysis[0] if args.analysis else DEFAULT_ANALYSIS
    kernels: list[dict] = []
    failed = False
    for path in args.files:
        analysed, projections = api.compare_calls(path, analysis)
        for diagnostic in analysed.diagnostics:
            print(str(diagnostic), file=sys.stderr)
        failed = failed or bool(analysed.errors)
        kernels += calls_json(path, projections)
    if args.format == "json":
        json.dump({"tool": "gpudiv", "version": __version__, "kernels": kernels},
                  sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_calls_text(kernels))
    return EXIT_OK if kernels and not failed else EXIT_ERROR


@one_line_errors
def cmd_compare(args: argparse.Namespace) -> int:
    """Compare analysis variants on files."""
    if args.calls:
        if len(args.analysis or ()) > 1 or args.rules or args.block:
            raise CommandError("error: --calls compares call summaries with inlining for "
                               "one analysis: at most one --analysis, no --rules or --block")
        return cmd_compare_calls(args)
    drivers = variants_of(args.analysis, args.rules, block_option(args), rule_budget(args),
                          not args.no_scripts)
    comparisons, diagnostics = compare_files(args.files, drivers)
    for diagnostic in diagnostics:
        print(str(diagnostic), file=sys.stderr)
    failed = any(d.severity == "error" for d in diagnostics)
    variants = list(drivers)
    if args.format == "json":
        json.dump({"tool": "gpudiv", "version": __version__, "variants": variants,
                   "kernels": [{"path": k.path, "name": k.kernel, "counts": k.counts,
                                "differences": k.differences} for k in comparisons],
                   "total": totals(comparisons, variants)}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_text(comparisons, variants))
    return EXIT_OK if comparisons and not failed else EXIT_ERROR


def register(sub: argparse._SubParsersAction) -> None:
    """Add `compare` to the `gpudiv` subcommand parser."""
    parser = sub.add_parser("compare", help="compare analysis variants (class counts)")
    parser.add_argument("files", nargs="+", metavar="FILE", help=".musimd or .ptx files")
    parser.add_argument("--analysis", action="append", choices=sorted(ANALYSES),
                        help="a variant (repeat; default: simple, affine, affine2)")
    parser.add_argument("--rules", action="append", metavar="FILE.lp",
                        help="a variant: affine2 with this rule file added (repeat)")
    parser.add_argument("--format", choices=("text", "json"), default="text",
                        help="output format")
    parser.add_argument("--calls", action="store_true",
                        help="compare call summaries (analyze --calls summary) with "
                             "inlining: the variables of each inlined kernel whose class "
                             "differs, and why (one --analysis, default affine2; PTX)")
    add_block_option(parser)
    add_rule_file_options(parser)
    parser.set_defaults(handler=cmd_compare)
