"""Subcommands for reports, fact export and rule experimentation.

`gpudiv analyze` (text, JSON, SARIF, HTML; files and folders, in parallel), `gpudiv cfg`
(DOT/SVG), `gpudiv facts` (Soufflé, CSV, JSON lines, ASP), `gpudiv solve` (users' rules)
and `gpudiv rules` (what the shipped rules derive). `register(sub)` adds them to the
parser of `gpudiv.cli`. Every mistake a user can make ends in one `…: error: …` line on
stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import functools
import io
import json
import os
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from gpudiv import __version__
from gpudiv.analyses import ANALYSIS_NAMES, DEFAULT_ANALYSIS
from gpudiv.wording import count

if TYPE_CHECKING:  # the rest is imported where it is used (start-up time, `gpudiv --help`)
    from gpudiv.corpus import FileOutcome
    from gpudiv.corpus_cache import CorpusCache
    from gpudiv.launch_shape import BlockShape
    from gpudiv.solve import Budget

EXIT_OK, EXIT_ERROR = 0, 2
ANALYZE_FORMATS = ("text", "json", "sarif", "html")


class CommandError(Exception):
    """A command-line mistake, reported as one line."""


class HelpFormatter(argparse.HelpFormatter):
    """Help that shows each option's default (when it has a meaningful one)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (action.option_strings and "%(default)" not in text
                and action.default not in (None, False, [], argparse.SUPPRESS)):
            text += " (default: %(default)s)"
        return text


class OneLineArgumentParser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one `gpudiv …: error: …` line (exit 2), and the
    help shows defaults."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # type: ignore[override]
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def choose_kernel(path: str, names: list[str], wanted: str | None) -> str:
    """The kernel a command works on: `wanted`, or the file's only kernel."""
    if wanted is None:
        if len(names) != 1:
            raise CommandError(f"{path}: error: "
                               + (f"several kernels ({', '.join(names)}); choose one with "
                                  "--kernel" if names else "no kernel could be analysed"))
        return names[0]
    if wanted not in names:
        raise CommandError(f"{path}: error: no kernel '{wanted}' "
                           f"(kernels: {', '.join(names) or 'none'})")
    return wanted


def add_rule_file_options(parser: argparse.ArgumentParser) -> None:
    """`--solve-timeout`, `--solve-memory` and `--no-scripts` for commands that load users'
    rule files."""
    from gpudiv.solve import DEFAULT_SOLVE_MEMORY_MB, DEFAULT_SOLVE_TIMEOUT_S


    parser.add_argument("--solve-timeout", type=float, default=DEFAULT_SOLVE_TIMEOUT_S,
                        metavar="SECONDS", help="give up on a clingo run with your rules "
                        f"after this long (default {DEFAULT_SOLVE_TIMEOUT_S:g}; 0: no limit)")
    parser.add_argument("--solve-memory", type=int, default=DEFAULT_SOLVE_MEMORY_MB,
                        metavar="MIB", help="memory a clingo run with your rules may use "
                        f"(default {DEFAULT_SOLVE_MEMORY_MB}; 0: no limit)")
    parser.add_argument("--no-scripts", action="store_true",
                        help="refuse rule files with #script blocks (they run arbitrary "
                             "code), e.g. for rules you did not write")


def rule_budget(args: argparse.Namespace) -> Budget:
    """The budget the `add_rule_file_options` options ask for."""
    from gpudiv.solve import Budget


    if args.solve_timeout < 0 or args.solve_memory < 0:
        raise CommandError("error: --solve-timeout and --solve-memory must be 0 (no limit) "
                           "or more")
    return Budget(args.solve_timeout, args.solve_memory)


def one_line_errors(handler: Callable[[argparse.Namespace], int]
                    ) -> Callable[[argparse.Namespace], int]:
    """Turn the errors a user can cause into one stderr line and exit status 2."""
    @functools.wraps(handler)
    def wrapped(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except BrokenPipeError:
            # The reader went away (`gpudiv … | head`): stop quietly, like other tools.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            return EXIT_OK
        except Exception as error:
            if not isinstance(error, _user_errors()):
                raise
            print(str(error), file=sys.stderr)
            return EXIT_ERROR
    return wrapped


def _user_errors() -> tuple[type[Exception], ...]:
    """The errors a user can cause (imported when one is raised, not at start-up)."""
    from gpudiv.corpus import CorpusError
    from gpudiv.dot import GraphvizError
    from gpudiv.export import ExportError
    from gpudiv.load import LoadError
    from gpudiv.solve import RuleError

    return CommandError, CorpusError, LoadError, RuleError, ExportError, GraphvizError


def _users(name: str) -> list[str]:
    """The analyses whose drivers solve with the shipped rule file `name`."""
    from gpudiv.export import ExportError, analysis_rule_files

    users = []
    for analysis in sorted(ANALYSIS_NAMES):
        try:
            if name in analysis_rule_files(analysis):
                users.append(analysis)
        except ExportError:
            continue
    return users


def _check_output(path: str | None) -> None:
    """Fail before the work if an output file cannot be created."""
    if path is None or path == "-":
        return
    parent = Path(path).parent
    if not parent.is_dir():
        raise CommandError(f"{path}: error: cannot write: no such directory '{parent}'")
    if Path(path).is_dir():
        raise CommandError(f"{path}: error: cannot write: is a directory")


def _write_output(path: str | None, text: str) -> None:
    """Write to the file, or to stdout when no file (or `-`) is named."""
    if path is None or path == "-":
        sys.stdout.write(text)
        return
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as error:
        raise CommandError(f"{path}: error: cannot write: {error.strerror or error}") from None


# ---------------------------------------------------------------------------------------
# gpudiv analyze
# ---------------------------------------------------------------------------------------

def Console(*args, **kwargs):  # noqa: N802 - stands for rich's class
    """A rich `Console` (rich is imported on first use, not at start-up)."""
    from rich.console import Console as RichConsole

    return RichConsole(*args, **kwargs)


def progress_display(total: int):
    """A rich progress display on stderr when it is a terminal: files done (when there are
    several) and the stage of the file at hand (reading, kernels prepared and solved)."""

    if total < 1 or not (sys.stderr.isatty() or os.environ.get("FORCE_COLOR")
                         or os.environ.get("TTY_COMPATIBLE")):
        return None  # without importing rich (0.04 s) when stderr is not a terminal
    console = Console(stderr=True)
    if not console.is_terminal:
        return None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    return Progress("[progress.description]{task.description}", BarColumn(),
                    MofNCompleteColumn(), TimeElapsedColumn(), console=console,
                    transient=True)


BLOCK_HELP = ("PTX: every launch has blocks of this shape (%%ntid.* are constants; with "
              "X %% 32 == 0, %%tid.y/%%tid.z are warp-uniform); a kernel's .reqntid wins")


def add_block_option(parser: argparse.ArgumentParser) -> None:
    """`--block X[xY[xZ]]` (analyze, check, compare)."""
    parser.add_argument("--block", metavar="X[xY[xZ]]", help=BLOCK_HELP)


def block_option(args: argparse.Namespace) -> BlockShape | None:
    """The `--block` shape, or None; CommandError with a one-line message when bad."""
    from gpudiv.launch_shape import parse_block


    text = getattr(args, "block", None)
    if text is None:
        return None
    try:
        return parse_block(text)
    except ValueError as error:
        raise CommandError(f"error: {error}") from None


def _corpus_cache(folder: str | None) -> CorpusCache | None:
    """The `--cache` folder (created when missing), or None; CommandError when it cannot
    be a folder."""
    if folder is None:
        return None
    if Path(folder).exists() and not Path(folder).is_dir():
        raise CommandError(f"{folder}: error: cannot use as the cache folder: not a folder")
    from gpudiv.corpus_cache import CorpusCache

    try:
        return CorpusCache(folder)
    except OSError as error:
        raise CommandError(f"{folder}: error: cannot use as the cache folder: "
                           f"{error.strerror or error}") from None


@one_line_errors
def cmd_analyze(args: argparse.Namespace) -> int:
    """Analyse files and folders; print or write the report."""
    from gpudiv.corpus import analyze_corpus, collect_inputs, job_count, summarize
    from gpudiv.report import analysis_json, render_analysis, render_findings

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
                             cache=cache, kernel_timeout=args.kernel_timeout)
    finally:
        if progress is not None:
            progress.stop()
    files, failures = run.files, run.failures
    summary = summarize(files, failures, len(paths), run.jobs, run.wall_s, run.cached)
    corpus = len(paths) > 1 or any(Path(p).is_dir() for p in args.files)
    if args.format == "json":
        document = analysis_json(files)
        if corpus:
            document["summary"] = summary.as_dict()
        text = json.dumps(document, indent=2) + "\n"
    elif args.format == "sarif":
        from gpudiv.sarif import sarif_log

        unread = [(o.path, o.failure) for o in run.outcomes
                  if o.analysis is None and o.failure]  # the others carry diagnostics
        text = json.dumps(sarif_log(files, unread), indent=2) + "\n"
    elif args.format == "html":
        from gpudiv.htmlreport import html_report

        text = html_report(files, summary)
    else:
        to_terminal = args.output in (None, "-") and sys.stdout.isatty()
        buffer = io.StringIO()
        if args.brief:
            console = Console(file=buffer, force_terminal=to_terminal or None,
                              width=None if to_terminal else 200, highlight=False)
            for f in files:
                render_findings(console, f.findings())
        else:
            render_analysis(files, buffer, color=True if to_terminal else None)
        if corpus or args.brief:
            buffer.write("\n".join(summary.lines()) + "\n")
        text = buffer.getvalue()
    _write_output(args.output, text)
    return EXIT_ERROR if failures else EXIT_OK


# ---------------------------------------------------------------------------------------
# gpudiv cfg
# ---------------------------------------------------------------------------------------

@one_line_errors
def cmd_cfg(args: argparse.Namespace) -> int:
    """Write the CFG of one kernel as DOT or SVG."""
    from gpudiv.api import analyze
    from gpudiv.dot import cfg_dot, dot_to_svg

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


# ---------------------------------------------------------------------------------------
# gpudiv facts
# ---------------------------------------------------------------------------------------

@one_line_errors
def cmd_facts(args: argparse.Namespace) -> int:
    """Export the facts (and derived relations) of every kernel of the files."""
    from gpudiv.export import export


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


# ---------------------------------------------------------------------------------------
# gpudiv solve / gpudiv rules
# ---------------------------------------------------------------------------------------

def _columns(name: str, arity: int, named: dict[tuple[str, int], list[str]]) -> list[str]:
    from gpudiv.schema import documented_relations

    if (name, arity) in named:
        return named[(name, arity)]
    relation = documented_relations().get(name)
    if relation is not None and relation.arity == arity:
        return list(relation.columns)
    return [f"arg{i + 1}" for i in range(arity)]


def _print_solve_table(run, out: TextIO) -> None:
    from gpudiv.export import plain
    from gpudiv.report import _table

    console = Console(file=out, force_terminal=True if out.isatty() else None,
                      width=None if out.isatty() else 200, highlight=False)
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
    from gpudiv.experiment import run_rules
    from gpudiv.export import plain

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


@one_line_errors
def cmd_rules(args: argparse.Namespace) -> int:
    """List the shipped rule files and the relations each derives."""
    from gpudiv.schema import shipped_rule_files


    files = shipped_rule_files()
    if args.format == "json":
        json.dump([{"file": f.name, "summary": f.summary, "analyses": _users(f.name),
                    "derives": [{"relation": f"{n}/{a}", "meaning": m} for n, a, m in f.shows]}
                   for f in files], sys.stdout, indent=2)
        sys.stdout.write("\n")
        return EXIT_OK
    columns = 100
    for f in files:
        users = _users(f.name)
        print(f"{f.name}: {f.summary}"
              + (f" (used by: {', '.join(users)})" if users else ""))
        width = max((len(f"{n}/{a}") for n, a, _ in f.shows), default=0)
        for name, arity, meaning in f.shows:
            head = f"  {f'{name}/{arity}'.ljust(width)}  "
            print(textwrap.fill(meaning, columns, initial_indent=head,
                                subsequent_indent=" " * len(head)))
        print()
    print(f"(relations and facts are documented in {Path('rules') / 'SCHEMA.md'}; "
          f"the shipped files are in {files[0].path.parent if files else 'rules/'})")
    return EXIT_OK


# ---------------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------------

def register(sub: argparse._SubParsersAction) -> None:
    """Add analyze, cfg, facts, solve and rules to the `gpudiv` subcommand parser."""
    from gpudiv.export import FORMATS as EXPORT_FORMATS
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
    add_block_option(analyze)
    analyze.set_defaults(handler=cmd_analyze)

    cfg = sub.add_parser("cfg", help="the CFG of a kernel as DOT or SVG")
    cfg.add_argument("file", metavar="FILE", help="a .musimd or .ptx file")
    cfg.add_argument("--kernel", help="the kernel (needed when the file has several)")
    cfg.add_argument("--analysis", choices=sorted(ANALYSIS_NAMES), default=DEFAULT_ANALYSIS,
                     help="the analysis whose classes colour the graph")
    cfg.add_argument("--format", choices=("dot", "svg"),
                     help="default: svg if --output ends in .svg, else dot")
    cfg.add_argument("--output", "-o", help="write to this file")
    cfg.set_defaults(handler=cmd_cfg)

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

    rules = sub.add_parser("rules", help="list the shipped rule files and what they derive")
    rules.add_argument("--format", choices=("text", "json"), default="text",
                       help="output format")
    rules.set_defaults(handler=cmd_rules)
