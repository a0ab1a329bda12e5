"""Command line of gpudiv: analyze, check, run, explain, compare, cfg, solve, rules, facts,
random, transform, structure, deadlock, fuse, host, daemon.

Each subcommand has its module `gpudiv.cli.NAME` (`host` is beside `fuse` in
`gpudiv.cli.fuse`); `COMMANDS` names them and `gpudiv CMD` imports only CMD's.

Every failure the user can cause ends in one `FILE:LINE:COL: error: message` line (or a
runtime message naming kernel, line and lanes) and exit status 2; never a traceback.
Exit status 1 means the oracle found a violated claim.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from gpudiv import __version__
from gpudiv.cli.common import EXIT_ERROR, CommandError, OneLineArgumentParser
from gpudiv.ir.perf import start_up, started

# Every subcommand: the module whose `register` adds it and its help line.
# `gpudiv --help` lists them from here and `gpudiv CMD` imports only CMD's module,
# so that start-up does not import the analyses, clingo, numpy and networkx for nothing
# (tests/cli/test_main.py checks this table against what the modules register).
COMMANDS: dict[str, tuple[str, str]] = {
    "analyze": ("gpudiv.cli.analyze", "classify variables and branches; reports"),
    "cfg": ("gpudiv.cli.cfg", "the CFG of a kernel as DOT or SVG"),
    "facts": ("gpudiv.cli.facts", "export facts for Soufflé, CSV, JSON lines or ASP"),
    "solve": ("gpudiv.cli.solve", "solve a file's facts with your rules"),
    "rules": ("gpudiv.cli.rules", "list the shipped rule files and what they derive"),
    "explain": ("gpudiv.cli.explain", "why a variable is divergent or not constant"),
    "compare": ("gpudiv.cli.compare", "compare analysis variants (class counts)"),
    "random": ("gpudiv.cli.random", "random terminating programs (property tests)"),
    "transform": ("gpudiv.cli.transform", "rewrite kernels with passes, print and verify"),
    "structure": ("gpudiv.cli.structure",
                  "find unstructured control flow (Cut, Forward Copy, Backward Copy edges)"),
    "deadlock": ("gpudiv.cli.deadlock",
                 "loops that may hang under SIMT reconvergence (ElTantawy & Aamodt, MICRO "
                 "2016)"),
    "fuse": ("gpudiv.cli.fuse", "report kernel fusion (KFCM or KF_trad) on a host program"),
    "host": ("gpudiv.cli.fuse", "run a host program on the interpreter"),
    "run": ("gpudiv.cli.run", "run a kernel on the reference SIMD interpreter"),
    "check": ("gpudiv.cli.check", "check the analysis claims on the interpreter"),
    "daemon": ("gpudiv.cli.daemon", "keep a warm gpudiv process that runs later commands"),
}

def build_parser(command: str | None = None, alone: bool = False) -> argparse.ArgumentParser:
    """The argument parser with all subcommands; with `command`, only that subcommand's
    module is imported and registered, the others get a bare parser (their help line):
    `""` registers none (`gpudiv --help`). `alone`: the others get none either (when the
    command line starts with `command`, nothing else can be parsed; a bare parser per
    subcommand was 3 ms of every run)."""
    summary = " ".join(__doc__.split("\n\n")[0].split())  # names every subcommand
    parser = OneLineArgumentParser(prog="gpudiv", description=summary)
    parser.add_argument("--version", action="version", version=f"gpudiv {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    modules = {module for module, _ in COMMANDS.values()} if command is None else \
        {COMMANDS[command][0]} if command in COMMANDS else set()
    wanted = {name for name, (module, _) in COMMANDS.items() if module in modules}
    registered: set[str] = set()
    for name, (module, help_line) in COMMANDS.items():
        if name in registered:
            continue
        if name not in wanted:  # only its help line is shown (no `-h` of its own: cheaper)
            if not alone:
                sub.add_parser(name, help=help_line, add_help=False)
            continue
        before = set(sub.choices)
        importlib.import_module(module).register(sub)
        registered |= set(sub.choices) - before
    return parser


_VALUE_OPTIONS = ("--param", "--shared", "--arg", "--seed", "--max-steps", "--threads",
                  "--warp", "--jobs", "-j", "--dynamic-shared", "--aware-timeout")


def _joined_values(argv: list[str]) -> list[str]:
    """`--shared -1=5` as `--shared=-1=5`: argparse would take `-1=5` for an option."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] in _VALUE_OPTIONS and i + 1 < len(argv) and argv[i + 1].startswith("-"):
            out.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
            continue
        out.append(argv[i])
        i += 1
    return out


def _command_of(argv: list[str]) -> str:
    """The subcommand named in `argv` (its first word that is one), `""` if none."""
    return next((word for word in argv if word in COMMANDS), "")


def _user_errors() -> tuple[type[Exception], ...]:
    """The exceptions that end a command with its one-line message and status 2."""
    from gpudiv.lang.load import LoadError
    from gpudiv.report.corpus import CorpusError

    return CommandError, LoadError, CorpusError


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `gpudiv` command."""
    try:
        return _main(argv)
    finally:
        started()  # a later call in this process is not its start-up


def _main(argv: list[str] | None) -> int:
    """`main`: parse the arguments, run the command, turn errors into one line."""
    words = _joined_values(sys.argv[1:] if argv is None else argv)
    command = _command_of(words)
    with start_up():  # imports make objects that live as long as the process
        args = build_parser(command, alone=bool(words) and words[0] == command
                            ).parse_args(words)
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        print("gpudiv: interrupted", file=sys.stderr)
        return 130
    except RecursionError:
        print("gpudiv: error: input nested too deeply", file=sys.stderr)
        return EXIT_ERROR
    except Exception as error:  # noqa: BLE001 - the promise is: never a traceback
        if isinstance(error, _user_errors()):
            print(str(error), file=sys.stderr)
            return EXIT_ERROR
        from gpudiv.lang.load import path_text

        where = path_text(getattr(args, "file", None) or "gpudiv")
        print(f"{where}: internal error: {type(error).__name__}: {error}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
