"""`gpudiv fuse HOSTFILE [--pass kfcm|kf-trad] [--format text|json]` (which launches
fuse, where compensation launches go, the predicate values that justify it, which
fusions were refused and why), `gpudiv host HOSTFILE [--input NAME=V]` (run a host
program), and the host-program path of `gpudiv transform HOSTFILE --pass kfcm|kf-trad
[--verify] [-o OUT]`.

Exit status: 0; 1 when `--verify` finds a difference; 2 on a bad host program (one
`FILE:LINE:COL: error:` line).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gpudiv.cli.common import EXIT_DIFFERS, EXIT_ERROR, EXIT_OK
from gpudiv.interp.host import HostRun, HostRunError
from gpudiv.lang.host.parse import HostError
from gpudiv.transforms.base import PassError
from gpudiv.verify.host_check import HostTransform, run_host_file, transform_host

HOST_SUFFIX = ".host"


def register(sub: argparse._SubParsersAction) -> None:
    """Add `fuse` and `host` to the `gpudiv` subcommand parser."""
    fuse = sub.add_parser("fuse", help="report kernel fusion (KFCM or KF_trad) on a host "
                          "program", description="Which launches of a host program fuse, "
                          "where compensation launches go and the BKF/FKF predicate values "
                          "that justify it; refused fusions with their reason.")
    fuse.add_argument("file", metavar="HOSTFILE", help="a .host program")
    fuse.add_argument("--report", action="store_true",
                      help="print the report (the default; kept for symmetry)")
    fuse.add_argument("--pass", dest="pass_name", choices=("kfcm", "kf-trad"),
                      default="kfcm", help="the fusion to report (default kfcm)")
    fuse.add_argument("--verify", action="store_true",
                      help="also run both programs on every input and compare")
    fuse.add_argument("--format", choices=("text", "json"), default="text",
                      help="output format")
    fuse.set_defaults(handler=cmd_fuse)
    host = sub.add_parser("host", help="run a host program on the interpreter",
                          description="Run a host program: its launches run on the SIMD "
                          "interpreters; print final host values, buffers and counters.")
    host.add_argument("file", metavar="HOSTFILE", help="a .host program")
    host.add_argument("--input", action="append", default=[], metavar="NAME=VALUE",
                      help="the value of an input (others take their first value)")
    host.add_argument("--format", choices=("text", "json"), default="text",
                      help="output format")
    host.set_defaults(handler=cmd_host)


def is_host_file(path: str) -> bool:
    """Whether `gpudiv transform` should read the file as a host program."""
    return Path(path).suffix == HOST_SUFFIX


def _inputs(specs: list[str]) -> dict[str, int]:
    """`NAME=VALUE` options as a dict."""
    values: dict[str, int] = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        try:
            values[name] = int(value)
        except ValueError:
            sep = ""
        if not sep or not name:
            raise HostError(f"gpudiv host: error: --input wants NAME=INTEGER, got '{spec}'")
    return values


def _show_run(run: HostRun) -> None:
    c = run.counters
    for name, value in {**run.scalars, **run.arrays, **run.buffers}.items():
        shown = "freed" if value is None else value
        print(f"  {name} = {shown}")
    print(f"  launches: {c.launches} ({', '.join(f'{k} {v}' for k, v in c.per_kernel.items())})")
    print(f"  blocks: {c.blocks}, warp instructions: {c.warp_instructions}, "
          f"memory instructions: {c.memory_instructions}, transactions: {c.transactions}")


def cmd_host(args: argparse.Namespace) -> int:
    """Run a host program and print what it leaves."""
    try:
        run = run_host_file(args.file, _inputs(args.input))
    except (HostError, HostRunError) as error:
        print(str(error), file=sys.stderr)
        return EXIT_ERROR
    if args.format == "json":
        json.dump({"file": args.file, "inputs": run.inputs, "scalars": run.scalars,
                   "arrays": run.arrays, "buffers": run.buffers,
                   "counters": run.counters.as_dict()}, sys.stdout, indent=2)
        print()
        return EXIT_OK
    print(f"{args.file}: inputs {run.inputs}")
    _show_run(run)
    return EXIT_OK


def _runs_text(done: HostTransform) -> list[str]:
    """Per input: equal or not, launches and traffic before → after (Table 5.2 style)."""
    lines = []
    for r in done.runs:
        where = f"{done.path}: inputs {r.inputs}"
        if r.status != "equal":
            lines.append(f"{where}: {r.status}: {r.difference}")
            continue
        b, a = r.before, r.after
        lines.append(f"{where}: verified; launches {b.launches} -> {a.launches}, "
                     f"transactions {b.transactions} -> {a.transactions}, "
                     f"warp instructions {b.warp_instructions} -> {a.warp_instructions}")
    return lines


def report_text(done: HostTransform) -> list[str]:
    """The fusion report in words."""
    lines = [f"{done.path}: {done.pass_name}: {len(done.result.steps)} steps, launch "
             f"statements {done.launches_before} -> {done.launches_after}, fused kernels: "
             f"{', '.join(done.result.fused) or 'none'}"]
    for s in done.result.steps:
        if s.fused_name:
            what = (f"{s.phase}: {s.kernel} (line {s.line}) fused with {s.fused_with} "
                    f"(line {s.fused_line}) as {s.fused_name}")
        else:
            what = f"{s.phase}: {s.kernel} (line {s.line}) sunk, nothing fused"
        if s.forwarded or s.removed:
            what += (f"; {s.forwarded} loads forwarded from a register, {s.removed} "
                     "stores of a dead buffer removed")
        lines.append(f"  {what}")
        for c in s.compensation:
            lines.append(f"    {s.kernel} placed unfused at the {c}")
        for name, nodes in s.predicates.items():
            lines.append(f"    {name}: {' '.join(nodes) or '-'}")
    for kernel, line, reasons in done.result.unfused:
        lines.append(f"  not fused: {kernel} (line {line})")
        lines += [f"    {reason}" for reason in reasons]
    for r in done.result.refusals:
        lines.append(f"  refused: {r.first} (line {r.first_line}) then {r.second} "
                     f"(line {r.second_line}): {r.reason}")
    return lines + _runs_text(done)


def cmd_fuse(args: argparse.Namespace) -> int:
    """Report what a fusion pass does to a host program."""
    try:
        done = transform_host(args.file, args.pass_name, verify=args.verify)
    except (HostError, PassError) as error:
        print(str(error), file=sys.stderr)
        return EXIT_ERROR
    if args.format == "json":
        json.dump(done.to_json(), sys.stdout, indent=2)
        print()
    else:
        print("\n".join(report_text(done)))
    return EXIT_DIFFERS if done.failed else EXIT_OK


def transform_host_files(args: argparse.Namespace) -> int:
    """`gpudiv transform HOSTFILE… --pass kfcm|kf-trad [--verify] [-o OUT]`."""
    passes = [p.strip() for p in args.passes.split(",") if p.strip()]
    if len(passes) != 1:
        print("gpudiv transform: error: a host program takes one pass, kfcm or kf-trad",
              file=sys.stderr)
        return EXIT_ERROR
    status = EXIT_OK
    results = []
    for path in args.files:
        try:
            done = transform_host(path, passes[0], verify=args.verify)
        except (HostError, PassError) as error:
            print(str(error) if str(error).startswith(path) else f"{path}: error: {error}",
                  file=sys.stderr)
            status = EXIT_ERROR
            continue
        results.append(done)
        if args.output:
            target = Path(args.output)
            if target.is_dir():
                target = target / Path(path).name
            target.write_text(done.text(str(target)))
            for language in done.languages():
                Path(done.fused_file(str(target), language)).write_text(
                    done.kernels_text(language))
        elif not args.verify and args.format == "text":
            sys.stdout.write(done.text())
            for language in done.languages():
                sys.stdout.write(f"# fused {language} kernels (-o writes them next to the "
                                 "program):\n")
                sys.stdout.write("".join(f"# {line}\n" for line in
                                         done.kernels_text(language).splitlines()))
        if args.verify and args.format == "text":
            print("\n".join(_runs_text(done)))
        if done.failed:
            status = max(status, EXIT_DIFFERS)
    if args.format == "json":
        json.dump({"pass": passes[0], "files": [d.to_json() for d in results]},
                  sys.stdout, indent=2)
        print()
    return status
