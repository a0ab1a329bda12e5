"""Liveness and interference of a kernel's registers, solved by rules/liveness.lp and
rules/interference.lp (rules/SCHEMA.md "Register allocation").

Python only writes the facts (instructions, instruction-level control flow, uses and
definitions); the rules decide what is live where and what interferes. Liveness is a
plain least fixpoint, so it reads as three rules and stays checkable beside the other
analyses; the allocator (`linear_scan.py`) turns it into intervals.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpudiv import ir
from gpudiv.analyses.solve import RuleError, shipped_rule, solve
from gpudiv.ir.cfg import EXIT, successor_labels

RULES = ("liveness.lp", "interference.lp")


class LivenessError(Exception):
    """The liveness rules could not be solved."""


@dataclass
class Liveness:
    """Live variables before and after each instruction (by id) and interfering pairs."""

    live_in: dict[int, set[str]] = field(default_factory=dict)
    live_out: dict[int, set[str]] = field(default_factory=dict)
    interfere: set[tuple[str, str]] = field(default_factory=set)

    def live_at_entry(self, kernel: ir.Kernel) -> set[str]:
        """Variables read before any definition on some path from the entry."""
        first = first_instructions(kernel, 0)
        return set().union(*(self.live_in.get(i, set()) for i in first)) if first else set()


def first_instructions(kernel: ir.Kernel, index: int) -> list[int]:
    """Ids of the first instructions reached from the start of block `index` (an empty
    block passes control on to its successors)."""
    found: list[int] = []
    seen: set[int] = set()
    todo = [index]
    labels = {b.label: n for n, b in enumerate(kernel.blocks)}
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        block = kernel.blocks[n]
        if block.instructions:
            found.append(block.instructions[0].id)
            continue
        todo += [labels[s] for s in successor_labels(kernel, n) if s != EXIT]
    return found


def variables(instr: ir.Instruction, params: set[str]) -> tuple[list[str], list[str]]:
    """(registers read, registers written) by an instruction; parameters are not
    registers (they are read from parameter space)."""
    reads = [v for v in dict.fromkeys(instr.used_vars) if v not in params]
    writes = [instr.dest] if instr.dest is not None and instr.dest not in params else []
    return reads, writes


def _quote(name: str) -> str:
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def facts(kernel: ir.Kernel) -> str:
    """The input facts of rules/liveness.lp for one kernel."""
    params = set(kernel.params)
    lines: list[str] = []
    labels = {b.label: n for n, b in enumerate(kernel.blocks)}
    for n, block in enumerate(kernel.blocks):
        for k, instr in enumerate(block.instructions):
            lines.append(f"instr({instr.id}).")
            reads, writes = variables(instr, params)
            lines += [f"use({instr.id},{_quote(v)})." for v in reads]
            lines += [f"def({instr.id},{_quote(v)})." for v in writes]
            if k + 1 < len(block.instructions):
                lines.append(f"next({instr.id},{block.instructions[k + 1].id}).")
                continue
            for succ in successor_labels(kernel, n):
                if succ == EXIT:
                    continue
                for j in first_instructions(kernel, labels[succ]):
                    lines.append(f"next({instr.id},{j}).")
    return "\n".join(lines) + "\n"


def liveness(kernel: ir.Kernel) -> Liveness:
    """Solve liveness and interference for a kernel."""
    try:
        result = solve([shipped_rule(r) for r in RULES], facts(kernel))
    except RuleError as error:
        raise LivenessError(f"kernel {kernel.name}: liveness rules failed: {error}") from error
    live = Liveness()
    for i, v in result.relation("live_in"):
        live.live_in.setdefault(i, set()).add(v)
    for i, v in result.relation("live_out"):
        live.live_out.setdefault(i, set()).add(v)
    live.interfere = {(v, w) for v, w in result.relation("interfere")}
    return live
