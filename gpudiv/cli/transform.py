"""`gpudiv transform FILE|DIR… --pass P[,P…] [--kernel K] [-o OUT] [--verify]
[--divergence simple|affine|affine2] [--allocator A --registers N] [--explain] [--no-coalesce]
[--assume-safe K] [--format text|json]` and `gpudiv transform --list`.

Without `-o` and `--verify` the transformed program is written to standard output;
with `-o` it goes to OUT (a file for one input file, a folder mirroring the inputs for a
folder). `--verify` reports per kernel `verified`, `differs` (with the first difference)
or `not-executed`. `--explain` (one code-motion pass) prints, instead of the program, per
kernel and expression the insertion and replacement points and the predicate values
that justify them (`gpudiv.explain_motion`). Exit status: 0, 1 when a kernel differs or
violates a claim, 2 on bad input (unknown pass, unreadable file) with `FILE:LINE:COL: error:` lines.

Host programs (`.host` files) take `--pass kfcm` or `--pass kf-trad` (`gpudiv.cli.fuse`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gpudiv.cli.common import EXIT_DIFFERS, EXIT_ERROR, EXIT_OK, CommandError
from gpudiv.cli.fuse import is_host_file, transform_host_files
from gpudiv.interp.simt import RECONVERGENCE_MODES
from gpudiv.lang.load import LoadError
from gpudiv.report.corpus import collect_inputs
from gpudiv.transforms import available
from gpudiv.transforms.motion_explain import MotionExplanation, Point
from gpudiv.transforms.spill_rules import ALLOCATORS
from gpudiv.verify.transform_check import FileTransform, TransformError, transform

ALLOCATOR_NAMES = tuple(ALLOCATORS)
DIVERGENCE_ANALYSES = ("simple", "affine", "affine2")


def register(sub: argparse._SubParsersAction) -> None:
    """Add `transform` to the `gpudiv` subcommand parser."""
    parser = sub.add_parser("transform", help="rewrite kernels with passes, print and verify")
    parser.add_argument("files", nargs="*", metavar="FILE|DIR",
                        help="files, and folders searched for .musimd/.ptx files")
    parser.add_argument("--pass", dest="passes", metavar="P[,P…]",
                        help="passes to run in order (see --list); a .host program takes "
                             "kfcm or kf-trad")
    parser.add_argument("--list", action="store_true", help="list the passes and exit")
    parser.add_argument("--kernel", help="transform only this kernel")
    parser.add_argument("-o", "--output", metavar="OUT",
                        help="write the result (a folder when the input is a folder)")
    parser.add_argument("--verify", action="store_true",
                        help="run original and result on the interpreter and compare memory")
    parser.add_argument("--format", choices=("text", "json"), default="text",
                        help="output format")
    parser.add_argument("--json", dest="format", action="store_const", const="json",
                        help="same as --format json")
    parser.add_argument("--raw", action="store_true",
                        help="read PTX as written: calls kept as calls, guarded definitions "
                             "guarded (`--pass inline,guard-to-select` makes it canonical)")
    parser.add_argument("--seed", type=int, default=0, help="for the synthesized launches")
    parser.add_argument("--allocator", choices=ALLOCATOR_NAMES, default="linear",
                        help="regalloc: where spilled values go (linear: local memory; "
                             "divergence, remat, affine: Sampaio 2013 Fig 4.3)")
    parser.add_argument("--registers", type=int, default=8, metavar="N",
                        help="regalloc: registers per thread for the kernel's values (PTX: per "
                             "register class, scratch and shared base included)")
    parser.add_argument("--divergence", choices=DIVERGENCE_ANALYSES, default=None,
                        help="divergence analysis whose divergent branches the code-motion "
                             "passes (sscm, esrqp, ssrqp, ssrqp-s) use (default affine2)")
    parser.add_argument("--no-coalesce", dest="coalesce", action="store_false",
                        help="code-motion passes: keep the copies of their temporaries "
                             "(no copy coalescing after the motion)")
    parser.add_argument("--explain", action="store_true",
                        help="code-motion passes: print per expression the insertion and "
                             "replacement points and the predicate values behind them "
                             "instead of the program")
    parser.add_argument("--reconvergence", choices=RECONVERGENCE_MODES, default="auto",
                        help="reconvergence policy of the --verify runs: auto (default), "
                             "ipdom, sync (μ-SIMD `sync` and the reconvergence points "
                             "written on branches), frontier, mimd, aware")
    parser.add_argument("--assume-safe", action="append", default=[], metavar="KERNEL",
                        help="ssde: leave this kernel as it is (warp-synchronous code the "
                             "user vouches for, like `gpudiv deadlock --assume-safe`); "
                             "repeatable")
    parser.set_defaults(handler=cmd_transform)


def _list(fmt: str) -> int:
    passes = available()
    if fmt == "json":
        json.dump([{"name": n, "description": d} for n, d in passes], sys.stdout, indent=2)
        print()
        return EXIT_OK
    width = max(len(n) for n, _ in passes)
    for name, description in passes:
        print(f"{name:<{width}}  {description}")
    return EXIT_OK


def _destination(output: str, path: str, inputs: list[str]) -> Path:
    """Where the result of `path` goes: OUT itself for one file given as a file, else
    OUT/<path relative to the folder given>."""
    out = Path(output)
    if len(inputs) == 1 and Path(inputs[0]).is_file():
        return out / Path(path).name if out.is_dir() else out
    for given in inputs:
        root = Path(given)
        if root.is_dir() and Path(path).is_relative_to(root):
            return out / Path(path).relative_to(root)
    return out / Path(path).name


def _regalloc_line(s: dict, dynamic: dict) -> str:
    """One line of register-allocation results: spills by rule, slots, counts."""
    line = (f"{s['allocator']}, {s['register_budget']} registers: {s['spilled']} spilled "
            f"(local {s['spills_local']}, (i) constant {s['spills_constant']}, "
            f"(ii) shared {s['spills_shared']}, (iii) remat {s['spills_remat']}, "
            f"(iv) shared+mad {s['spills_shared_affine']}); "
            f"{s['local_slots_per_thread']} local slots per thread, "
            f"{s['shared_slots_per_warp']} shared slots per warp")
    spills = dynamic.get("spills")
    if spills:
        before, after = spills["before"], spills["after"]
        line += (f"; run: local {after['local_loads']} loads {after['local_stores']} "
                 f"stores, shared {after['shared_loads']} loads {after['shared_stores']} "
                 f"stores, {before['instructions']} -> {after['instructions']} warp "
                 f"instructions, modelled cost {before['cost']} -> {after['cost']}")
    return line


def _report_text(result: FileTransform) -> None:
    for k in result.kernels:
        s = k.static
        shape = (f"{s['instructions_before']} -> {s['instructions_after']} instructions, "
                 f"{s['blocks_before']} -> {s['blocks_after']} blocks")
        if k.status == "differs":
            line = f"differs: {k.difference}"
        elif k.status == "verified":
            line = f"verified ({k.runs} runs; {shape})"
        elif k.status == "not-executed":
            line = f"not-executed: {k.reason}"
        else:
            line = f"unverified ({shape})"
        print(f"{result.path}: kernel {k.name}: {line}")
        if "allocator" in s:
            print(f"{result.path}: kernel {k.name}: {_regalloc_line(s, k.dynamic)}")
        if k.ssde_summary:
            print(f"{result.path}: kernel {k.name}: ssde: {k.ssde_summary}")
        for problem in k.problems:
            print(f"{result.path}: kernel {k.name}: {problem}")
        for violation in k.oracle_violations[:5]:
            print(f"{result.path}: kernel {k.name}: claim violated on the result: {violation}")


def pass_options(args: argparse.Namespace) -> dict[str, dict[str, object]]:
    """Options per pass name: the allocator's, ssde's kernels assumed safe, and
    --divergence and --no-coalesce for every pass named."""
    options: dict[str, dict[str, object]] = {
        "regalloc": {"allocator": args.allocator, "registers": args.registers},
        "ssde": {"assume_safe": tuple(args.assume_safe)}}
    for name in (n.strip() for n in (args.passes or "").split(",") if n.strip()):
        if args.divergence:
            options.setdefault(name, {})["divergence"] = args.divergence
        if not args.coalesce:
            options.setdefault(name, {})["coalesce"] = False
    return options


def _point_text(point: Point) -> str:
    """`block place [statement] {predicates}` of one explained point."""
    values = " ".join(f"{k}={'T' if v else 'F'}" for k, v in point.predicates.items())
    statement = f" `{point.statement}`" if point.statement else ""
    return f"{point.block} ({point.place}){statement}: {values}"


def _explain_text(path: str, explanation: MotionExplanation) -> None:
    """Print one kernel's explanation."""
    head = f"{path}: kernel {explanation.kernel}: {explanation.pass_name}"
    if explanation.divergence:
        spec = ", ".join(explanation.speculate) or "none"
        head += f" (divergence {explanation.divergence}; speculates at {spec})"
    print(head + ("" if explanation.expressions else ": nothing moves"))
    for record in explanation.expressions:
        print(f"  [{record.step}] {record.expression}")
        for point in record.insertions:
            print(f"    insert  {_point_text(point)}")
        for point in record.replacements:
            print(f"    replace {_point_text(point)}")


def _explain(args: argparse.Namespace, inputs: list[str]) -> int:
    """`--explain`: what one code-motion pass moves in each kernel, and why."""
    from gpudiv.api import explain_motion
    from gpudiv.transforms import PassError

    names = [n.strip() for n in args.passes.split(",") if n.strip()]
    if len(names) != 1:
        raise CommandError("gpudiv transform: error: --explain takes one pass")
    files, failed = [], False
    for path in inputs:
        try:
            explained = explain_motion(path, names[0], args.kernel, args.divergence)
        except LoadError as error:
            print(str(error), file=sys.stderr)
            failed = True
            continue
        except PassError as error:
            raise CommandError(f"gpudiv transform: error: {error}") from error
        files.append({"file": path, "kernels": [e.to_json() for e in explained]})
        if args.format == "text":
            for explanation in explained:
                _explain_text(path, explanation)
    if args.format == "json":
        json.dump({"pass": names[0], "files": files}, sys.stdout, indent=2)
        print()
    return EXIT_ERROR if failed else EXIT_OK


def cmd_transform(args: argparse.Namespace) -> int:
    """Transform files with a pass pipeline; print, write and verify the results."""
    if args.list:
        return _list(args.format)
    if not args.passes:
        raise CommandError("gpudiv transform: error: --pass is required (see --list)")
    if not args.files:
        raise CommandError("gpudiv transform: error: no input file")
    if all(is_host_file(f) for f in args.files):
        return transform_host_files(args)
    inputs = collect_inputs(args.files)
    if args.explain:
        return _explain(args, inputs)
    results: list[FileTransform] = []
    failed = False
    for path in inputs:
        try:
            options = pass_options(args)
            result = transform(path, args.passes, kernel=args.kernel, verify=args.verify,
                               reconvergence=args.reconvergence,
                               seed=args.seed, options=options, canonical=not args.raw)
        except (TransformError, LoadError) as error:
            print(str(error), file=sys.stderr)
            failed = True
            continue
        for d in result.diagnostics:
            print(str(d), file=sys.stderr)
        results.append(result)
        if args.output:
            target = _destination(args.output, path, args.files)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(result.text)
        elif not args.verify and args.format == "text":
            sys.stdout.write(result.text)
    if args.format == "json":
        json.dump({"passes": [p.strip() for p in args.passes.split(",") if p.strip()],
                   "files": [r.to_json() for r in results]}, sys.stdout, indent=2)
        print()
    elif args.verify or args.output:
        for result in results:
            _report_text(result)
    if failed:
        return EXIT_ERROR
    return EXIT_DIFFERS if any(r.failed for r in results) else EXIT_OK
