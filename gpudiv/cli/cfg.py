"""`gpudiv cfg FILE`: the CFG of a kernel as DOT or SVG, coloured by the analysis."""

from __future__ import annotations

import argparse
import sys

from gpudiv.analyses import ANALYSIS_NAMES, DEFAULT_ANALYSIS
from gpudiv.cli.common import (
    EXIT_ERROR,
    EXIT_OK,
    _check_output,
    _write_output,
    choose_kernel,
    one_line_errors,
)

# ---------------------------------------------------------------------------------------
# gpudiv cfg
# ---------------------------------------------------------------------------------------

@one_line_errors
def cmd_cfg(args: argparse.Namespace) -> int:
    """Write the CFG of one kernel as DOT or SVG."""
    from gpudiv.api import analyze
    from gpudiv.report.dot import cfg_dot, dot_to_svg

    _check_output(args.output)
    fmt = args.format or ("svg" if (args.output or "").lower().endswith(".svg") else "dot")
    result = analyze(args.file, args.analysis)
    for d in result.diagnostics:
        print(str(d), file=sys.stderr)
    if result.errors and not result.kernels:
        return EXIT_ERROR
    kernel = result.kernel(choose_kernel(args.file, [k.name for k in result.kernels],
                                         args.kernel))
    text = cfg_dot(kernel)
    if fmt == "svg":
        text = dot_to_svg(text)
    _write_output(args.output, text)
    return EXIT_ERROR if result.errors else EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:
    """Add `cfg` to the `gpudiv` subcommand parser."""
    cfg = sub.add_parser("cfg", help="the CFG of a kernel as DOT or SVG")
    cfg.add_argument("file", metavar="FILE", help="a .musimd or .ptx file")
    cfg.add_argument("--kernel", help="the kernel (needed when the file has several)")
    cfg.add_argument("--analysis", choices=sorted(ANALYSIS_NAMES), default=DEFAULT_ANALYSIS,
                     help="the analysis whose classes colour the graph")
    cfg.add_argument("--format", choices=("dot", "svg"),
                     help="default: svg if --output ends in .svg, else dot")
    cfg.add_argument("--output", "-o", help="write to this file")
    cfg.set_defaults(handler=cmd_cfg)
