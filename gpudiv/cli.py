"""Command line of gpudiv: analyze, check, run, explain, compare, cfg, solve, rules, facts,
random, transform, structure, deadlock, fuse, host.

(`analyze`, `cfg`, `facts`, `solve` and `rules` live in `gpudiv.commands`, `explain` in
`gpudiv.explain`, `compare` in `gpudiv.compare`, `random` in `gpudiv.generate`,
`transform` in `gpudiv.transform_cli`, `structure` in `gpudiv.structure_cli`, `deadlock`
in `gpudiv.deadlock_command`, `fuse` and `host` in `gpudiv.fuse_cli`.)

Every failure the user can cause ends in one `FILE:LINE:COL: error: message` line (or a
runtime message naming kernel, line and lanes) and exit status 2; never a traceback.
Exit status 1 means the oracle found a violated claim.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from gpudiv import __version__
from gpudiv.commands import (
    CommandError,
    OneLineArgumentParser,
    add_block_option,
    block_option,
    choose_kernel,
    progress_display,
)

if TYPE_CHECKING:
    from gpudiv import api

# Every subcommand: the module whose `register` adds it (None: this module) and its help
# line. `gpudiv --help` lists them from here and `gpudiv CMD` imports only CMD's module,
# so that start-up does not import the analyses, clingo, numpy and networkx for nothing
# (tests/test_cli.py checks this table against what the modules register).
COMMANDS: dict[str, tuple[str | None, str]] = {
    "analyze": ("gpudiv.commands", "classify variables and branches; reports"),
    "cfg": ("gpudiv.commands", "the CFG of a kernel as DOT or SVG"),
    "facts": ("gpudiv.commands", "export facts for Soufflé, CSV, JSON lines or ASP"),
    "solve": ("gpudiv.commands", "solve a file's facts with your rules"),
    "rules": ("gpudiv.commands", "list the shipped rule files and what they derive"),
    "explain": ("gpudiv.explain", "why a variable is divergent or not constant"),
    "compare": ("gpudiv.compare", "compare analysis variants (class counts)"),
    "random": ("gpudiv.generate", "random terminating programs (property tests)"),
    "transform": ("gpudiv.transform_cli", "rewrite kernels with passes, print and verify"),
    "structure": ("gpudiv.structure_cli",
                  "find unstructured control flow (Cut, Forward Copy, Backward Copy edges)"),
    "deadlock": ("gpudiv.deadlock_command",
                 "loops that may hang under SIMT reconvergence (ElTantawy & Aamodt, MICRO "
                 "2016)"),
    "fuse": ("gpudiv.fuse_cli", "report kernel fusion (KFCM or KF_trad) on a host program"),
    "host": ("gpudiv.fuse_cli", "run a host program on the interpreter"),
    "run": (None, "run a kernel on the reference SIMD interpreter"),
    "check": (None, "check the analysis claims on the interpreter"),
}

EXIT_OK, EXIT_VIOLATION, EXIT_ERROR = 0, 1, 2


def _print_diagnostics(diagnostics) -> bool:
    """Print diagnostics to stderr; True if any is an error."""
    failed = False
    for d in diagnostics:
        print(str(d), file=sys.stderr)
        failed = failed or d.severity == "error"
    return failed


def _analyze_files(paths: list[str], analysis: str, stage=None,
                   block=None) -> tuple[list[api.FileAnalysis], bool]:
    from gpudiv import api
    from gpudiv.load import LoadError

    files, failed = [], False
    for path in paths:
        try:
            result = api.analyze(path, analysis, block,
                                 None if stage is None else functools.partial(stage, path))
        except LoadError as error:
            print(str(error), file=sys.stderr)
            failed = True
            continue
        failed = _print_diagnostics(result.diagnostics) or failed
        files.append(result)
    return files, failed


def cmd_check(args: argparse.Namespace) -> int:
    """Analyse files, run every kernel under several launches and check the claims."""
    from gpudiv import api
    from gpudiv.corpus import collect_inputs
    from gpudiv.report import check_json, render_check

    _check_numbers(args)
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
                                       block_option(args))
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


def _parse_params(items: list[str]) -> dict[str, int]:
    """`--param NAME=VALUE` (VALUE an integer, decimal or 0x…) by name."""
    values = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            if not sep or not name.strip():
                raise ValueError
            values[name.strip()] = int(value, 0)
        except ValueError:
            raise CommandError(f"error: bad --param '{item}' (expected NAME=VALUE with an "
                               "integer VALUE, e.g. c=4)") from None
    return values


def _parse_shared(items: list[str]) -> dict[int, int]:
    """`--shared ADDRESS=VALUE` (two integers) by address."""
    values = {}
    for item in items:
        address, sep, value = item.partition("=")
        try:
            if not sep:
                raise ValueError
            values[int(address, 0)] = int(value, 0)
        except ValueError:
            raise CommandError(f"error: bad --shared '{item}' (expected ADDRESS=VALUE, two "
                               "integers, e.g. 5=7)") from None
    return values


def _check_numbers(args: argparse.Namespace) -> None:
    """Options that must be positive (or not negative), named when they are not."""
    for option, least in (("threads", 1), ("warp", 1), ("max_steps", 1), ("seed", 0),
                          ("dynamic_shared", 0)):
        value = getattr(args, option, None)
        if value is not None and value < least:
            flag = "--" + option.replace("_", "-")
            raise CommandError(f"error: {flag} must be {'at least 1' if least else '0 or more'}"
                               f" (got {value})")


def _musimd_params(path: str, kernel, params: dict[str, int]) -> list[str]:
    """Check `--param` against the kernel's parameters; warnings for values changed."""
    where = f"{kernel.loc.line}:{kernel.loc.column}"
    unknown = sorted(set(params) - set(kernel.params))
    if unknown:
        raise CommandError(f"{path}:{where}: error: kernel {kernel.name} has no parameter "
                           f"'{unknown[0]}' (parameters: {', '.join(kernel.params) or 'none'})")
    missing = [p for p in dict.fromkeys(kernel.params) if p not in params]
    if missing:
        raise CommandError(f"{path}:{where}: error: kernel {kernel.name}: no value for "
                           "parameter"
                           f"{'s' if len(missing) > 1 else ''} {', '.join(missing)} (give "
                           + " ".join(f"--param {p}=VALUE" for p in missing) + ")")
    warnings = []
    for name, value in params.items():
        if not -(1 << 31) <= value < 1 << 32:
            wrapped = (value + (1 << 31)) % (1 << 32) - (1 << 31)
            warnings.append(f"warning: --param {name}={value} does not fit in 32 bits; "
                            f"the kernel gets {wrapped}")
    return warnings


def cmd_run(args: argparse.Namespace) -> int:
    """Run one kernel on the reference interpreter."""
    from gpudiv import api, ptxrun
    from gpudiv.interp.musimd import (
        ExecutionError,
        LaunchConfig,
        format_steps,
        format_trace,
        run_kernel,
    )
    from gpudiv.load import load

    _check_numbers(args)
    program = load(args.file)
    failed = _print_diagnostics(program.diagnostics)  # errors in the file: exit status 2
    if failed and not program.kernels:
        return EXIT_ERROR
    kernel = program.kernel(choose_kernel(args.file, [k.name for k in program.kernels],
                                          args.kernel))
    if args.max_steps < 0:
        raise CommandError("error: --max-steps must be 0 or more")
    if args.aware_timeout < 0:
        raise CommandError(f"{args.file}: error: --aware-timeout must not be negative")
    if program.language == "ptx":  # grids of blocks, typed arguments: gpudiv.ptxrun
        status = ptxrun.run_command(args, args.file, kernel)
        return EXIT_ERROR if failed else status
    if args.arg or args.grid != "1" or args.block != "32":
        raise CommandError(f"{args.file}: error: --arg, --grid and --block are for PTX "
                           "kernels; a μ-SIMD kernel takes --param NAME=VALUE, --threads "
                           "and --warp")
    params, shared = _parse_params(args.param), _parse_shared(args.shared)
    for warning in _musimd_params(args.file, kernel, params):
        print(f"{args.file}: {warning}", file=sys.stderr)
    config = LaunchConfig(threads=args.threads, warp_width=args.warp, params=params,
                          shared=shared,
                          reconvergence=args.reconvergence, max_steps=args.max_steps,
                          aware_timeout=args.aware_timeout or None)
    if args.compare_reconvergence:
        return print_comparison(kernel.name, api.compare_reconvergence(kernel, config),
                                args.format)
    try:
        result = run_kernel(kernel, config, trace=args.trace)
    except (ExecutionError, ValueError) as error:  # ValueError: a launch that cannot run
        if (args.trace and isinstance(error, ExecutionError) and error.trace
                and args.format == "text"):
            print(format_steps(error.trace, args.threads))  # the steps up to the fault
        print(f"{args.file}: error: {error}", file=sys.stderr)
        return EXIT_ERROR
    counters = result.counters
    if args.format == "json":
        json.dump({"kernel": kernel.name, "threads": args.threads, "warp_width": args.warp,
                   "shared": {str(k): v for k, v in sorted(result.shared.items())},
                   "registers": result.registers,
                   "reconvergence": args.reconvergence,
                   "counters": counters.as_dict()},
                  sys.stdout, indent=2)
        sys.stdout.write("\n")
        return EXIT_ERROR if failed else EXIT_OK
    if args.trace:
        print(format_trace(result, args.threads))
    print(f"kernel {kernel.name}: {args.threads} threads, warp width {args.warp}")
    for line in ptxrun.counter_lines(counters):
        print(line)
    cells = ", ".join(f"[{k}]={v}" for k, v in sorted(result.shared.items()))
    print(f"  shared memory: {cells or '(untouched)'}")
    return EXIT_ERROR if failed else EXIT_OK


def print_comparison(kernel: str, runs: list[api.PolicyRun], fmt: str) -> int:
    """Print `run --compare-reconvergence`: one row per policy; exit 0."""
    if fmt == "json":
        json.dump({"kernel": kernel, "policies": [
            {"policy": r.policy, "status": r.status, "message": r.message,
             "counters": r.counters.as_dict() if r.counters else None, "time_slots": r.slots,
             "same_memory_as_mimd": r.same_as_mimd} for r in runs]}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return EXIT_OK
    heads = ("policy", "result", "warp instr", "lane instr", "SIMD eff", "divergent",
             "reconv", "max depth", "slots", "memory = mimd")
    rows = []
    for r in runs:
        c = r.counters
        cells = ([str(c.warp_instructions), str(c.lane_instructions),
                  f"{c.simd_efficiency:.3f}", str(c.divergent_branches),
                  str(c.reconvergences), str(c.max_stack_depth)] if c else ["-"] * 6)
        same = "-" if r.same_as_mimd is None else ("yes" if r.same_as_mimd else "no")
        rows.append((r.policy, r.status, *cells, "-" if r.slots is None else str(r.slots),
                     same))
    widths = [max(len(h), *(len(row[k]) for row in rows)) for k, h in enumerate(heads)]
    print(f"kernel {kernel}: the same launch under every reconvergence policy")
    for row in (heads, *rows):
        print("  " + "  ".join(cell.ljust(w) if k < 2 else cell.rjust(w)
                               for k, (cell, w) in enumerate(zip(row, widths, strict=True))))
    for r in runs:
        if r.message:
            print(f"  {r.policy}: {r.message}")
    return EXIT_OK


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser with all subcommands; with `command`, only that subcommand's
    module is imported and registered, the others get a bare parser (their help line):
    `""` registers none (`gpudiv --help`)."""
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
        if name not in wanted:
            sub.add_parser(name, help=help_line)
            continue
        before = set(sub.choices)
        if module is None:
            _register_run_and_check(sub)
        else:
            importlib.import_module(module).register(sub)
        registered |= set(sub.choices) - before
    return parser


def _register_run_and_check(sub: argparse._SubParsersAction) -> None:
    """Add `run` and `check` to the `gpudiv` subcommand parser."""
    from gpudiv.analyses import ANALYSIS_NAMES, DEFAULT_ANALYSIS
    from gpudiv.interp.policies import AWARE_TIMEOUT
    from gpudiv.interp.ptx_synthesis import CHECK_MAX_STEPS as PTX_CHECK_MAX_STEPS
    from gpudiv.interp.simt import RECONVERGENCE_MODES
    from gpudiv.oracle import CHECK_MAX_STEPS

    run = sub.add_parser("run", help=COMMANDS["run"][1],
                         description="Run one μ-SIMD or PTX kernel on the reference "
                         "interpreter and print its counters (and buffers). μ-SIMD: one "
                         "block of --threads threads; PTX: a grid of blocks with one --arg "
                         "per kernel parameter.")
    run.add_argument("file", metavar="FILE", help="a .musimd or .ptx file")
    run.add_argument("--kernel", help="the kernel (needed when the file has several)")
    run.add_argument("--max-steps", type=int, default=1_000_000, metavar="N",
                     help="stop with an error after N warp instructions")
    run.add_argument("--trace", action="store_true",
                     help="print every warp step (up to the fault, if the run faults)")
    run.add_argument("--format", choices=("text", "json"), default="text",
                     help="output format")
    musimd = run.add_argument_group("μ-SIMD kernels")
    musimd.add_argument("--threads", type=int, default=32, metavar="N",
                        help="threads in the block")
    musimd.add_argument("--warp", type=int, default=32, metavar="N", help="warp width")
    musimd.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                        help="the value of a kernel parameter (one for each parameter)")
    musimd.add_argument("--shared", action="append", default=[], metavar="ADDRESS=VALUE",
                        help="initial value of a shared-memory cell (repeat; others are 0)")
    run.add_argument("--reconvergence", choices=RECONVERGENCE_MODES, default="auto",
                     help="ipdom (stack, immediate post-dominators), sync (μ-SIMD sync), "
                          "frontier (earliest reconvergence), mimd (independent threads), "
                          "aware (AWARE's FIFO warp splits with timed-out reconvergence); "
                          "auto: sync if the kernel has sync instructions, else ipdom "
                          "(PTX: sync and auto mean ipdom)")
    run.add_argument("--aware-timeout", type=int, default=AWARE_TIMEOUT, metavar="N",
                     help="aware: warp steps lanes wait at a reconvergence point before "
                          "they go on without the others; 0: they wait forever "
                          f"(default: {AWARE_TIMEOUT})")
    run.add_argument("--compare-reconvergence", action="store_true",
                     help="run the same launch under every policy and print a table")
    ptx = run.add_argument_group("PTX kernels")
    ptx.add_argument("--grid", default="1", metavar="X[xY[xZ]]", help="blocks in the grid")
    ptx.add_argument("--block", default="32", metavar="X[xY[xZ]]",
                     help="threads per block")
    ptx.add_argument("--arg", action="append", default=[], metavar="[NAME=]SPEC",
                     help="one per parameter, in order: TYPE:VALUE (u32:512), a number, "
                          "TYPE[N]:INIT (f32[1024]:random; zeros, ones, range, a number) "
                          "or @FILE.npy; NAME= labels a buffer in the output")
    ptx.add_argument("-o", "--output", metavar="DIR", help="write every buffer to DIR")
    ptx.add_argument("--output-format", choices=("npy", "json"), default="npy",
                     help="format of the buffers written with -o")
    ptx.add_argument("--dynamic-shared", type=int, default=0, metavar="BYTES",
                     help="dynamic shared memory per block")
    ptx.add_argument("--seed", type=int, default=0,
                     help="random seed of `random` buffers")
    run.set_defaults(handler=cmd_run)

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
    add_block_option(check)
    check.set_defaults(handler=cmd_check)


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
    from gpudiv.corpus import CorpusError
    from gpudiv.load import LoadError

    return CommandError, LoadError, CorpusError


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `gpudiv` command."""
    words = _joined_values(sys.argv[1:] if argv is None else argv)
    args = build_parser(_command_of(words)).parse_args(words)
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
        where = Path(getattr(args, "file", None) or "gpudiv")
        print(f"{where}: internal error: {type(error).__name__}: {error}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
