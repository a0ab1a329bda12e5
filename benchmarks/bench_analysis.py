"""Scaling of the analysis pipeline on random μ-SIMD kernels of N instructions.

For each size, generates one structured random kernel (loops and branches included) of
about N instructions with `gpudiv.verify.randprog`, then times each stage: parse, CFG, SSA, facts,
clingo grounding and solving (cfg.lp + divergence.lp). Prints the median over repeats.

    python benchmarks/bench_analysis.py --sizes 100 1000 10000 --repeat 3 [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable

from gpudiv.analyses.facts import facts_text
from gpudiv.analyses.solve import shipped_rule, solve
from gpudiv.ir.cfg import build_cfg
from gpudiv.ir.perf import paused_gc
from gpudiv.ir.ssa import build_ssa
from gpudiv.lang.musimd.parse import parse_musimd
from gpudiv.verify.randprog import random_program

STAGES = ("parse", "cfg", "ssa", "facts", "ground", "solve")
PADDING = ("v0 = v0 + 1", "v1 = v1 ^ tid", "v2 = v2 min n", "v3 = v3 * 3")


def instruction_count(text: str) -> int:
    """Instructions in a one-kernel text: lines that are not the header, blank or labels."""
    count = 0
    for line in text.splitlines()[1:]:
        body = line.split("#", 1)[0].strip()
        if ":" in body:
            body = body.split(":", 1)[1].strip()
        count += bool(body)
    return count


def _generate(seed: int, statements: int) -> str:
    """A structured random kernel with `statements` statements."""
    return random_program(seed, statements, max_depth=3, name="bench")


def kernel_of_size(seed: int, size: int) -> str:
    """A random kernel of exactly `size` instructions: generate slightly fewer, then pad."""
    statements = max(1, int(size / 2.3))
    text = _generate(seed, statements)
    while statements > 1 and instruction_count(text) > size:
        shrunk = int(statements * size / instruction_count(text) * 0.98)
        statements = max(1, min(shrunk, statements - 1))
        text = _generate(seed, statements)
    missing = size - instruction_count(text)
    head, stop = text.rstrip("\n").rsplit("\n", 1)
    pad = [f"      {PADDING[i % len(PADDING)]}" for i in range(max(missing, 0))]
    return "\n".join([head, *pad, stop]) + "\n"


def _timed(fn: Callable, *args) -> tuple[object, float]:
    """Result of fn(*args) and the milliseconds it took, the cyclic GC paused as
    `gpudiv.lang.load` and the analysis drivers pause it (gpudiv.ir.perf)."""
    start = time.perf_counter()
    with paused_gc():
        value = fn(*args)
    return value, (time.perf_counter() - start) * 1000


def run_once(text: str) -> dict[str, float]:
    """Timings (ms) of every stage on one kernel text, plus the clingo atom count."""
    program, t_parse = _timed(parse_musimd, text)
    if program.errors:
        raise SystemExit(f"generated kernel does not parse: {program.errors[0]}")
    kernel = program.kernels[0]
    cfg, t_cfg = _timed(build_cfg, kernel)
    ssa, t_ssa = _timed(build_ssa, cfg)
    facts, t_facts = _timed(facts_text, ssa)
    rules = [shipped_rule("cfg.lp"), shipped_rule("divergence.lp")]
    result = solve(rules, facts)
    return {"parse": t_parse, "cfg": t_cfg, "ssa": t_ssa, "facts": t_facts,
            "ground": result.ground_ms, "solve": result.solve_ms,
            "atoms": float(result.atom_count), "instructions": float(len(kernel.instructions())),
            "blocks": float(len(kernel.blocks))}


def measure(size: int, seed: int, repeat: int) -> dict[str, float]:
    """Median timings over `repeat` runs for one size."""
    text = kernel_of_size(seed, size)
    runs = [run_once(text) for _ in range(repeat)]
    row = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    row["total"] = sum(row[stage] for stage in STAGES)
    row["us_per_instr"] = row["total"] * 1000 / row["instructions"]
    row["size"] = float(size)
    return row


def print_table(rows: list[dict[str, float]]) -> None:
    """The rows as a rich table (milliseconds, medians)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="gpudiv analysis pipeline (median ms)")
    for column in ("instrs", "blocks", *STAGES, "total", "µs/instr", "atoms"):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(f"{row['instructions']:.0f}", f"{row['blocks']:.0f}",
                      *(f"{row[stage]:.1f}" for stage in STAGES), f"{row['total']:.1f}",
                      f"{row['us_per_instr']:.1f}", f"{row['atoms']:.0f}")
    Console(width=140).print(table)


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000, 100000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    parse_musimd("kernel warmup()\n  stop\n")  # build the cached Lark parser untimed
    rows = []
    for size in args.sizes:
        rows.append(measure(size, args.seed, max(args.repeat, 1)))
        if not args.json:
            print(f"size {size}: {rows[-1]['total']:.0f} ms", file=sys.stderr)
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
