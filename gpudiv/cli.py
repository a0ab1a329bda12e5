"""Command line: `gpudiv analyze`, `run`, `check`, `cfg`, `facts`, `solve`, `rules`, `random`,
`deadlock`.

(`analyze`, `cfg`, `facts`, `solve` and `rules` live in `gpudiv.commands`.)

Every failure the user can cause ends in one `FILE:LINE:COL: error: message` line (or a
runtime message naming kernel, line and lanes) and exit status 2; never a traceback.
Exit status 1 means the oracle found a violated claim.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gpudiv import __version__, api, ptxrun
from gpudiv.analyses import ANALYSES, DEFAULT_ANALYSIS
from gpudiv.commands import CommandError, OneLineArgumentParser, choose_kernel
from gpudiv.commands import register as register_report_commands
from gpudiv.compare import register as register_compare
from gpudiv.corpus import CorpusError, collect_inputs
from gpudiv.deadlock_command import register as register_deadlock
from gpudiv.explain import register as register_explain
from gpudiv.generate import register as register_random
from gpudiv.interp.musimd import ExecutionError, LaunchConfig, format_trace, run_kernel
from gpudiv.interp.simt import RECONVERGENCE_MODES
from gpudiv.load import LoadError, load
from gpudiv.report import check_json, render_check
from gpudiv.transform_cli import register as register_transform

EXIT_OK, EXIT_VIOLATION, EXIT_ERROR = 0, 1, 2


def _print_diagnostics(diagnostics) -> bool:
    """Print diagnostics to stderr; True if any is an error."""
    failed = False
    for d in diagnostics:
        print(str(d), file=sys.stderr)
        failed = failed or d.severity == "error"
    return failed


def _analyze_files(paths: list[str], analysis: str) -> tuple[list[api.FileAnalysis], bool]:
    files, failed = [], False
    for path in paths:
        try:
            result = api.analyze(path, analysis)
        except LoadError as error:
            print(str(error), file=sys.stderr)
            failed = True
            continue
        failed = _print_diagnostics(result.diagnostics) or failed
        files.append(result)
    return files, failed


def cmd_check(args: argparse.Namespace) -> int:
    """Analyse files, run every kernel under several launches and check the claims."""
    files, failed = _analyze_files(collect_inputs(args.files), args.analysis)
    checked = [(f.path, api.check(f, seed=args.seed, reconvergence=args.reconvergence))
               for f in files]
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


def _parse_assignments(items: list[str], what: str, key_type=str) -> dict:
    values = {}
    for item in items:
        key, sep, value = item.partition("=")
        try:
            if not sep:
                raise ValueError
            values[key_type(key.strip())] = int(value, 0)
        except ValueError:
            raise CommandError(f"error: bad {what} '{item}' (expected NAME=INTEGER)") from None
    return values


def cmd_run(args: argparse.Namespace) -> int:
    """Run one kernel on the reference interpreter."""
    program = load(args.file)
    if _print_diagnostics(program.diagnostics) and not program.kernels:
        return EXIT_ERROR
    kernel = program.kernel(choose_kernel(args.file, [k.name for k in program.kernels],
                                          args.kernel))
    if program.language == "ptx":  # grids of blocks, typed arguments: gpudiv.ptxrun
        return ptxrun.run_command(args, args.file, kernel)
    params = _parse_assignments(args.param, "parameter")
    unknown = sorted(set(params) - set(kernel.params))
    if unknown:
        raise CommandError(f"{args.file}: error: kernel {kernel.name} has no parameter "
                         f"'{unknown[0]}' (parameters: {', '.join(kernel.params) or 'none'})")
    if args.threads < 1 or args.warp < 1:
        raise CommandError("error: --threads and --warp must be at least 1")
    config = LaunchConfig(threads=args.threads, warp_width=args.warp, params=params,
                          shared=_parse_assignments(args.shared, "shared cell", int),
                          reconvergence=args.reconvergence, max_steps=args.max_steps)
    if args.compare_reconvergence:
        return print_comparison(kernel.name, api.compare_reconvergence(kernel, config),
                                args.format)
    try:
        result = run_kernel(kernel, config, trace=args.trace)
    except ExecutionError as error:
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
        return EXIT_OK
    if args.trace:
        print(format_trace(result, args.threads))
    print(f"kernel {kernel.name}: {args.threads} threads, warp width {args.warp}")
    for line in ptxrun.counter_lines(counters):
        print(line)
    cells = ", ".join(f"[{k}]={v}" for k, v in sorted(result.shared.items()))
    print(f"  shared memory: {cells or '(untouched)'}")
    return EXIT_OK


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


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with all subcommands."""
    parser = OneLineArgumentParser(prog="gpudiv", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"gpudiv {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    register_report_commands(sub)
    register_explain(sub)
    register_compare(sub)
    register_random(sub)
    register_transform(sub)
    register_deadlock(sub)

    run = sub.add_parser("run", help="run a kernel on the reference SIMD interpreter")
    run.add_argument("file")
    run.add_argument("--kernel")
    run.add_argument("--threads", type=int, default=32)
    run.add_argument("--warp", type=int, default=32)
    run.add_argument("--param", action="append", default=[], metavar="NAME=VALUE")
    run.add_argument("--shared", action="append", default=[], metavar="ADDRESS=VALUE")
    run.add_argument("--reconvergence", choices=RECONVERGENCE_MODES, default="auto",
                     help="ipdom (stack, immediate post-dominators), sync (μ-SIMD sync), "
                          "frontier (earliest reconvergence), mimd (independent threads); "
                          "auto: sync if the kernel has sync instructions, else ipdom")
    run.add_argument("--compare-reconvergence", action="store_true",
                     help="run the same launch under every policy and print a table")
    run.add_argument("--max-steps", type=int, default=1_000_000)
    run.add_argument("--trace", action="store_true")
    run.add_argument("--format", choices=("text", "json"), default="text")
    ptx = run.add_argument_group("PTX kernels (see gpudiv.ptxrun)")
    ptx.add_argument("--grid", default="1", metavar="X[xY[xZ]]")
    ptx.add_argument("--block", default="32", metavar="X[xY[xZ]]")
    ptx.add_argument("--arg", action="append", default=[], metavar="[NAME=]SPEC",
                     help="one per parameter, in order: TYPE:VALUE (u32:512), a number, "
                          "TYPE[N]:INIT (f32[1024]:random; zeros, ones, range, a number) "
                          "or @FILE.npy")
    ptx.add_argument("-o", "--output", metavar="DIR", help="write every buffer to DIR")
    ptx.add_argument("--output-format", choices=("npy", "json"), default="npy")
    ptx.add_argument("--dynamic-shared", type=int, default=0, metavar="BYTES")
    ptx.add_argument("--seed", type=int, default=0, help="for random buffers")
    run.set_defaults(handler=cmd_run)

    check = sub.add_parser("check", help="check the analysis claims on the interpreter")
    check.add_argument("files", nargs="+", metavar="FILE|DIR",
                       help="files, or folders searched for .musimd/.ptx files")
    check.add_argument("--format", choices=("text", "json"), default="text")
    check.add_argument("--analysis", choices=sorted(ANALYSES), default=DEFAULT_ANALYSIS)
    check.add_argument("--seed", type=int, default=0)
    check.add_argument("--require-all", action="store_true",
                       help="exit status 1 when a kernel could not be executed (as for a "
                            "violated claim): nothing goes unchecked in CI")
    check.add_argument("--reconvergence", choices=RECONVERGENCE_MODES, default="auto",
                       help="as for run (PTX: sync and auto mean ipdom)")
    check.set_defaults(handler=cmd_check)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `gpudiv` command."""
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except (CommandError, LoadError, CorpusError) as error:
        print(str(error), file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("gpudiv: interrupted", file=sys.stderr)
        return 130
    except RecursionError:
        print("gpudiv: error: input nested too deeply", file=sys.stderr)
        return EXIT_ERROR
    except Exception as error:  # noqa: BLE001 - the promise is: never a traceback
        where = Path(getattr(args, "file", None) or "gpudiv")
        print(f"{where}: internal error: {type(error).__name__}: {error}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
