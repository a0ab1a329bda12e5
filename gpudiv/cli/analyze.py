"""`gpudiv analyze FILE|DIR…`: classify variables and branches; reports as text, JSON, SARIF
or HTML, files and folders in parallel."""

from __future__ import annotations

import argparse
import io
import os
import sys

from gpudiv.analyses import ANALYSIS_NAMES, DEFAULT_ANALYSIS
from gpudiv.cli.common import (
    EXIT_ERROR,
    EXIT_OK,
    CommandError,
    _check_output,
    _write_output,
    add_block_option,
    add_calls_option,
    block_option,
    one_line_errors,
    progress_display,
)
from gpudiv.ir.perf import paused_gc, start_up

TYPE_CHECKING = False  # (typing is not imported: an analysis never needs it)
if TYPE_CHECKING:  # the rest is imported where it is used (start-up time, `gpudiv --help`)
    from gpudiv.report.corpus import FileOutcome
    from gpudiv.report.corpus_cache import CorpusCache


ANALYZE_FORMATS = ("text", "json", "sarif", "html")


def _corpus_cache(folder: str | None) -> CorpusCache | None:
    """The `--cache` folder (created when missing), or None; CommandError when it cannot
    be a folder."""
    if folder is None:
        return None
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise CommandError(f"{folder}: error: cannot use as the cache folder: not a folder")
    from gpudiv.report.corpus_cache import CorpusCache

    try:
        return CorpusCache(folder)
    except OSError as error:
        raise CommandError(f"{folder}: error: cannot use as the cache folder: "
                           f"{error.strerror or error}") from None


@one_line_errors
def cmd_analyze(args: argparse.Namespace) -> int:
    """Analyse files and folders; print or write the report. The cyclic garbage collector
    is paused for the whole command, not only inside each stage: at the end of a stage it
    scanned all the IR, SSA forms and results the stage had made, which were to live on
    (about a tenth of the time of particle_library.G; over all the samples in one
    process, 10% less time for 6% more peak memory, the cyclic garbage of 104 files)."""
    with paused_gc():
        return _analyze(args)


def _analyze(args: argparse.Namespace) -> int:
    """`cmd_analyze` without the collector's pause."""
    with start_up():  # imports make objects that live as long as the process
        from gpudiv.report.corpus import analyze_corpus, collect_inputs, job_count, summarize
        from gpudiv.report.documents import (
            analysis_json,
            render_analysis,
            render_findings,
            text_console,
        )
        from gpudiv.report.jsontext import dumps_indented

    _check_output(args.output)
    block_option(args)
    if args.jobs < 0:
        raise CommandError("error: --jobs must be 0 (one per CPU) or more")
    if args.kernel_timeout is not None and not 0 < args.kernel_timeout < 1e9:
        raise CommandError("error: --kernel-timeout must be a number of seconds above 0")
    cache = _corpus_cache(args.cache)
    paths = collect_inputs(args.files)
    progress = progress_display(len(paths))
    task = None

    stage_task = None

    def started() -> None:
        nonlocal task, stage_task
        if progress is not None:
            progress.start()
            if len(paths) > 1:
                task = progress.add_task("analysing", total=len(paths))
            if job_count(args.jobs) == 1 or len(paths) == 1:
                stage_task = progress.add_task(f"{paths[0]}: analysing" if len(paths) == 1
                                               else "", total=None)

    def stage(path: str, what: str, done: int, total: int) -> None:
        if progress is None or stage_task is None:
            return
        words = (f"{path}: reading" if what == "reading"
                 else f"{path}: {what} kernel {done}/{total}")
        progress.update(stage_task, description=words, completed=done,
                        total=total or None)

    def done(outcome: FileOutcome) -> None:
        console_print = progress.console.print if progress is not None else None
        lines = []
        if outcome.analysis is not None:
            lines = [str(d) for d in outcome.analysis.diagnostics]
        elif outcome.failure:
            lines = [outcome.failure]
        for line in lines:
            if console_print:
                console_print(line, markup=False, highlight=False, soft_wrap=True)
            else:
                print(line, file=sys.stderr)
        if progress is not None and task is not None:
            progress.advance(task)

    try:
        run = analyze_corpus(paths, args.analysis, args.jobs, on_done=done,
                             on_started=started, lean=args.format != "html",
                             block=block_option(args),
                             on_progress=stage if progress is not None else None,
                             cache=cache, kernel_timeout=args.kernel_timeout,
                             calls=args.calls)
    finally:
        if progress is not None:
            progress.stop()
    files, failures = run.files, run.failures
    summary = summarize(files, failures, len(paths), run.jobs, run.wall_s, run.cached)
    corpus = len(paths) > 1 or any(os.path.isdir(p) for p in args.files)
    if args.format == "json":
        document = analysis_json(files)
        if corpus:
            document["summary"] = summary.as_dict()
        text = dumps_indented(document) + "\n"
    elif args.format == "sarif":
        from gpudiv.report.sarif import sarif_log

        unread = [(o.path, o.failure) for o in run.outcomes
                  if o.analysis is None and o.failure]  # the others carry diagnostics
        text = dumps_indented(sarif_log(files, unread)) + "\n"
    elif args.format == "html":
        from gpudiv.report.htmlreport import html_report

        text = html_report(files, summary)
    else:
        to_terminal = args.output in (None, "-") and sys.stdout.isatty()
        buffer = io.StringIO()
        if args.brief:
            console = text_console(buffer, True if to_terminal else None)
            for f in files:
                render_findings(console, f.findings())
        else:
            render_analysis(files, buffer, color=True if to_terminal else None)
        if corpus or args.brief:
            buffer.write("\n".join(summary.lines()) + "\n")
        text = buffer.getvalue()
    _write_output(args.output, text)
    return EXIT_ERROR if failures else EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:
    """Add `analyze` to the `gpudiv` subcommand parser."""
    analyze = sub.add_parser("analyze", help="classify variables and branches; reports")
    analyze.add_argument("files", nargs="+", metavar="FILE|DIR",
                         help="files, and folders searched recursively for .musimd/.ptx")
    analyze.add_argument("--format", choices=ANALYZE_FORMATS, default="text",
                         help="report format")
    analyze.add_argument("--analysis", choices=sorted(ANALYSIS_NAMES), default=DEFAULT_ANALYSIS,
                         help="the divergence analysis")
    analyze.add_argument("--jobs", "-j", type=int, default=1,
                         help="parallel processes (0: one per CPU)")
    analyze.add_argument("--cache", metavar="DIR",
                         help="keep each file's outcome in this folder, keyed by a hash of "
                              "its text, the analysis and the rule files; files unchanged "
                              "since an earlier run are read back, not analysed")
    analyze.add_argument("--kernel-timeout", type=float, metavar="S",
                         help="seconds each kernel's analysis may take; a kernel that takes "
                              "longer is reported as not analysed and the run goes on")
    analyze.add_argument("--output", "-o", help="write the report to this file")
    analyze.add_argument("--brief", action="store_true",
                         help="text: only the findings and the run summary")
    add_calls_option(analyze)
    add_block_option(analyze)
    analyze.set_defaults(handler=cmd_analyze)
