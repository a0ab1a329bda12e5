"""`gpudiv run FILE`: run a kernel on the reference SIMD interpreter (μ-SIMD here, PTX
arguments and outputs in `gpudiv.cli.run_ptx`)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from gpudiv.cli.common import (
    EXIT_ERROR,
    EXIT_OK,
    CommandError,
    check_numbers,
    choose_kernel,
    print_diagnostics,
)
from gpudiv.cli.main import COMMANDS

if TYPE_CHECKING:
    from gpudiv import api


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
    from gpudiv import api
    from gpudiv.cli import run_ptx as ptxrun
    from gpudiv.interp.musimd import (
        ExecutionError,
        LaunchConfig,
        format_steps,
        format_trace,
        run_kernel,
    )
    from gpudiv.lang.load import load

    check_numbers(args)
    program = load(args.file)
    failed = print_diagnostics(program.diagnostics)  # errors in the file: exit status 2
    if failed and not program.kernels:
        return EXIT_ERROR
    kernel = program.kernel(choose_kernel(args.file, [k.name for k in program.kernels],
                                          args.kernel))
    if args.max_steps < 0:
        raise CommandError("error: --max-steps must be 0 or more")
    if args.stack_size < 0:
        raise CommandError(f"{args.file}: error: --stack-size must be 0 or more")
    if args.aware_timeout < 0:
        raise CommandError(f"{args.file}: error: --aware-timeout must not be negative")
    if program.language == "ptx":  # grids of blocks, typed arguments: gpudiv.cli.run_ptx
        try:
            kernel = api.kernel_to_run(args.file, kernel, args.calls)
        except ValueError as error:
            raise CommandError(f"{args.file}: error: {error}") from None
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


def register(sub: argparse._SubParsersAction) -> None:
    """Add `run` to the `gpudiv` subcommand parser."""
    from gpudiv.interp.policies import AWARE_TIMEOUT
    from gpudiv.interp.simt import RECONVERGENCE_MODES
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
    ptx.add_argument("--calls", choices=("auto", "inline", "call"), default="auto",
                     help="calls to functions of the file: inlined, or run as calls (each "
                          "function once, a frame per call); auto: inlined unless inlining "
                          "leaves one opaque (recursion, function pointers) (default: auto)")
    ptx.add_argument("--stack-size", type=int, default=1024, metavar="BYTES",
                     help="stack per thread for the frames of recursive calls (CUDA's "
                          "default limit; default: 1024)")
    run.set_defaults(handler=cmd_run)
