"""`gpudiv random`: write the random programs of the property tests, to check them by hand.

`gpudiv random [--seed N] [--count C] [--statements S] [--cycles | --unstructured]
[--ptx [--calls [--recursive]]] [-o DIR]` prints the μ-SIMD (or, with `--ptx`, PTX) text of the
program of seed N (`gpudiv.verify.randprog.random_program`,
`gpudiv.verify.randptx.random_ptx`; `--calls`: some operations through device functions,
called as nvcc's -G builds call them; `--recursive`: `*` by a recursive one); with `-o
DIR` it writes programs N … N+C-1 to `DIR/rand_SEED.musimd` (`.ptx`), ready for `gpudiv
check DIR`. The property tests in
tests/verify/test_oracle_cycles.py draw the same programs (seed, statements), so a
failing example can be written out and inspected.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpudiv.cli.common import EXIT_OK, CommandError
from gpudiv.verify.randprog import random_program
from gpudiv.verify.randptx import random_ptx


def kernel_name(seed: int) -> str:
    """`rand_SEED` (`rand_mSEED` for a negative seed)."""
    return f"rand_{seed}" if seed >= 0 else f"rand_m{-seed}"


def program_text(seed: int, statements: int, mode: str, ptx: bool,
                 calls: bool | str = False) -> str:
    """The text of one random kernel `rand_SEED(n, k)` in the chosen mode and language
    (`calls`: PTX with device functions; `"recursive"`: one of them recursive)."""
    name = kernel_name(seed)
    cycles, unstructured = mode == "cycles", mode == "unstructured"
    if ptx:
        return random_ptx(seed, statements, cycles=cycles, unstructured=unstructured,
                          name=name, calls=calls)
    return random_program(seed, statements, cycles=cycles, unstructured=unstructured,
                          name=name)


def write_programs(folder: Path, seeds: range, statements: int, mode: str,
                   ptx: bool, calls: bool | str = False) -> list[Path]:
    """Write one file per seed into `folder` (created if needed); returns the paths."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise CommandError(f"{folder}: error: cannot create folder: {error.strerror}") from None
    paths = []
    for seed in seeds:
        path = folder / (kernel_name(seed) + (".ptx" if ptx else ".musimd"))
        try:
            path.write_text(program_text(seed, statements, mode, ptx, calls))
        except OSError as error:
            raise CommandError(f"{path}: error: cannot write: {error.strerror}") from None
        paths.append(path)
    return paths


def cmd_random(args: argparse.Namespace) -> int:
    """Print one random program, or write several into a folder."""
    if args.count < 1:
        raise CommandError("gpudiv random: error: --count must be at least 1")
    if args.statements < 1:
        raise CommandError("gpudiv random: error: --statements must be at least 1")
    if args.calls and not args.ptx:
        raise CommandError("gpudiv random: error: --calls needs --ptx (μ-SIMD has no calls)")
    if args.recursive and not args.calls:
        raise CommandError("gpudiv random: error: --recursive needs --calls")
    calls = "recursive" if args.recursive else args.calls
    mode = "cycles" if args.cycles else "unstructured" if args.unstructured else "structured"
    if args.output is None:
        if args.count != 1:
            raise CommandError("gpudiv random: error: --count needs -o DIR")
        sys.stdout.write(program_text(args.seed, args.statements, mode, args.ptx, calls))
        return EXIT_OK
    seeds = range(args.seed, args.seed + args.count)
    paths = write_programs(Path(args.output), seeds, args.statements, mode, args.ptx, calls)
    print(f"{len(paths)} programs written to {args.output}")
    return EXIT_OK


def register(sub: argparse._SubParsersAction) -> None:
    """Add `random` to the `gpudiv` subcommand parser."""
    parser = sub.add_parser("random", help="random terminating programs (property tests)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the first program (the next ones count up)")
    parser.add_argument("--count", type=int, default=1, help="with -o: programs to write")
    parser.add_argument("--statements", type=int, default=20,
                        help="statements per program")
    shape = parser.add_mutually_exclusive_group()
    shape.add_argument("--cycles", action="store_true",
                       help="irreducible cycles, switch chains, multi-way exits (ipdom)")
    shape.add_argument("--unstructured", action="store_true",
                       help="joins that are not post-dominators, early exits (ipdom)")
    parser.add_argument("--ptx", action="store_true", help="PTX for sm_80 instead of μ-SIMD")
    parser.add_argument("--calls", action="store_true",
                        help="PTX: min, max, *, < and tid through device functions, called "
                             "as nvcc -G calls them (the front end inlines them)")
    parser.add_argument("--recursive", action="store_true",
                        help="with --calls: * through a recursive device function, whose "
                             "activations go deeper than inlining (run as calls)")
    parser.add_argument("-o", "--output", metavar="DIR", help="write files rand_SEED.* here")
    parser.set_defaults(handler=cmd_random)
