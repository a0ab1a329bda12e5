"""`gpudiv check FILE|DIR…`: check the analysis claims on the interpreter."""

from __future__ import annotations

import argparse
import functools
import json
import sys
from typing import TYPE_CHECKING

from gpudiv.cli.common import (
    EXIT_ERROR,
    EXIT_OK,
    EXIT_VIOLATION,
    add_block_option,
    add_calls_option,
    block_option,
    check_numbers,
    print_diagnostics,
    progress_display,
)
from gpudiv.cli.main import COMMANDS

if TYPE_CHECKING:
    from gpudiv import api


def _analyze_files(paths: list[str], analysis: str, stage=None, block=None,
                   calls: str = "inline") -> tuple[list[api.FileAnalysis], bool]:
    from gpudiv import api
    from gpudiv.lang.load import LoadError

    files, failed = [], False
    for path in paths:
        try:
            result = api.analyze(path, analysis, block,
                                 None if stage is None else functools.partial(stage, path),
                                 calls=calls)
        except LoadError as error:
            print(str(error), file=sys.stderr)
            failed = True
            continue
        failed = print_diagnostics(result.diagnostics) or failed
        files.append(result)
    return files, failed


def cmd_check(args: argparse.Namespace) -> int:
    """Analyse files, run every kernel under several launches and check the claims."""
    from gpudiv import api
    from gpudiv.report.corpus import collect_inputs
    from gpudiv.report.documents import check_json, render_check

    check_numbers(args)
    calls = args.calls
    paths = collect_inputs(args.files)
    progress = progress_display(len(paths))
    task = progress.add_task("", total=None) if progress is not None else None

    def stage(path: str, what: str, done: int, total: int) -> None:
        if progress is not None:
            words = f"{path}: reading" if what == "reading" else f"{path}: {what} kernel " \
                f"{min(done + (what == 'checking'), total)}/{total}"
            progress.update(task, description=words, completed=done, total=total or None)

    if progress is not None:
        progress.start()
    try:
        files, failed = _analyze_files(paths, args.analysis,
                                       stage if progress is not None else None,
                                       block_option(args), calls)
        checked = [(f.path, api.check(f, seed=args.seed, reconvergence=args.reconvergence,
                                      max_steps=args.max_steps,
                                      on_progress=None if progress is None
                                      else functools.partial(stage, f.path)))
                   for f in files]
    finally:
        if progress is not None:
            progress.stop()
    if args.format == "json":
        json.dump(check_json(checked), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        render_check(checked, sys.stdout)
    reports = [r for _, file_reports in checked for r in file_reports]
    if any(r.violations for r in reports):
        return EXIT_VIOLATION
    if failed:
        return EXIT_ERROR
    if args.require_all and any(r.status == "not-executed" for r in reports):
        return EXIT_VIOLATION
    return EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:
    """Add `check` to the `gpudiv` subcommand parser."""
    from gpudiv.analyses import ANALYSIS_NAMES, DEFAULT_ANALYSIS
    from gpudiv.interp.ptx_synthesis import CHECK_MAX_STEPS as PTX_CHECK_MAX_STEPS
    from gpudiv.interp.simt import RECONVERGENCE_MODES
    from gpudiv.verify.oracle import CHECK_MAX_STEPS
    check = sub.add_parser("check", help=COMMANDS["check"][1])
    check.add_argument("files", nargs="+", metavar="FILE|DIR",
                       help="files, or folders searched for .musimd/.ptx files")
    check.add_argument("--format", choices=("text", "json"), default="text",
                       help="output format")
    check.add_argument("--analysis", choices=sorted(ANALYSIS_NAMES),
                       default=DEFAULT_ANALYSIS, help="the analysis whose claims are checked")
    check.add_argument("--seed", type=int, default=0,
                       help="random seed of the launches' inputs")
    check.add_argument("--max-steps", type=int, metavar="N",
                       help="warp steps a launch may take before it is given up (default: "
                            f"{CHECK_MAX_STEPS} for μ-SIMD, {PTX_CHECK_MAX_STEPS} for PTX)")
    check.add_argument("--require-all", action="store_true",
                       help="exit status 1 when a kernel could not be executed (as for a "
                            "violated claim): nothing goes unchecked in CI")
    check.add_argument("--reconvergence", choices=RECONVERGENCE_MODES, default="auto",
                       help="as for run (PTX: sync and auto mean ipdom)")
    add_calls_option(check)
    add_block_option(check)
    check.set_defaults(handler=cmd_check)
