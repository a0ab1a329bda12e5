"""What the subcommands share: one-line errors (`CommandError`, `one_line_errors`) and the
argument parser that writes them, choosing a kernel, output files, the progress display,
the `--block` and rule-file options. Every mistake a user can make ends in one
`…: error: …` line on stderr and exit status 2, never a traceback."""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable

from gpudiv.analyses import ANALYSIS_NAMES

TYPE_CHECKING = False  # (typing is not imported: an analysis never needs it)
if TYPE_CHECKING:  # the rest is imported where it is used (start-up time, `gpudiv --help`)
    from gpudiv.analyses.launch_shape import BlockShape
    from gpudiv.analyses.solve import Budget


# Exit statuses of every command: 1 when a check finds a violation or a rewrite differs,
# 2 on bad input.
EXIT_OK, EXIT_VIOLATION, EXIT_ERROR = 0, 1, 2
EXIT_DIFFERS = EXIT_VIOLATION


class CommandError(Exception):
    """A command-line mistake, reported as one line."""


def terminal_columns() -> int:
    """The width `shutil.get_terminal_size` gives (`$COLUMNS`, else the terminal's, else
    80) without importing shutil and the compression modules it loads (argparse makes a
    help formatter for every option it adds: 2 ms of every start-up, issue 16)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns > 0:
        return columns
    try:
        columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
    except (AttributeError, ValueError, OSError):
        columns = 0
    return columns or 80


class HelpFormatter(argparse.HelpFormatter):
    """Help that shows each option's default (when it has a meaningful one)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position,
                         terminal_columns() - 2 if width is None else width)

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
    from gpudiv.analyses.solve import DEFAULT_SOLVE_MEMORY_MB, DEFAULT_SOLVE_TIMEOUT_S


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
    from gpudiv.analyses.solve import Budget


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
    from gpudiv.analyses.solve import RuleError
    from gpudiv.lang.load import LoadError
    from gpudiv.report.corpus import CorpusError
    from gpudiv.report.dot import GraphvizError
    from gpudiv.report.export import ExportError

    return CommandError, CorpusError, LoadError, RuleError, ExportError, GraphvizError


def _users(name: str) -> list[str]:
    """The analyses whose drivers solve with the shipped rule file `name`."""
    from gpudiv.report.export import ExportError, analysis_rule_files

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
    from gpudiv.lang.load import path_text

    parent = os.path.dirname(path_text(path)) or "."  # `Path(path).parent`
    if not os.path.isdir(parent):
        raise CommandError(f"{path}: error: cannot write: no such directory '{parent}'")
    if os.path.isdir(path):
        raise CommandError(f"{path}: error: cannot write: is a directory")


def _write_output(path: str | None, text: str) -> None:
    """Write to the file, or to stdout when no file (or `-`) is named."""
    if path is None or path == "-":
        sys.stdout.write(text)
        return
    try:
        with open(path, "w", encoding="utf-8") as file:
            file.write(text)
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


def add_calls_option(parser: argparse.ArgumentParser) -> None:
    """`--calls inline|summary` (analyze, check)."""
    parser.add_argument("--calls", choices=("inline", "summary"), default="inline",
                        help="calls to device functions of a PTX file: inlined at every "
                             "call site (default), or each function analysed once per "
                             "calling context (faster on code with many calls; `compare "
                             "--calls` lists what it loses)")


def add_block_option(parser: argparse.ArgumentParser) -> None:
    """`--block X[xY[xZ]]` (analyze, check, compare)."""
    parser.add_argument("--block", metavar="X[xY[xZ]]", help=BLOCK_HELP)


def block_option(args: argparse.Namespace) -> BlockShape | None:
    """The `--block` shape, or None; CommandError with a one-line message when bad."""
    from gpudiv.analyses.launch_shape import parse_block


    text = getattr(args, "block", None)
    if text is None:
        return None
    try:
        return parse_block(text)
    except ValueError as error:
        raise CommandError(f"error: {error}") from None


def print_diagnostics(diagnostics) -> bool:
    """Print diagnostics to stderr; True if any is an error."""
    failed = False
    for d in diagnostics:
        print(str(d), file=sys.stderr)
        failed = failed or d.severity == "error"
    return failed


def check_numbers(args: argparse.Namespace) -> None:
    """Options that must be positive (or not negative), named when they are not."""
    for option, least in (("threads", 1), ("warp", 1), ("max_steps", 1), ("seed", 0),
                          ("dynamic_shared", 0)):
        value = getattr(args, option, None)
        if value is not None and value < least:
            flag = "--" + option.replace("_", "-")
            raise CommandError(f"error: {flag} must be {'at least 1' if least else '0 or more'}"
                               f" (got {value})")
