"""Linear-scan register allocation (Poletto & Sarkar 1999; Sampaio 2013 §4.1).

Blocks are laid out in kernel order. Instruction k has two points: 2k (its reads, where
what is live before it lives) and 2k+1 (its write, where what is live after it lives).
A variable's interval is the hull of the points where it is live or written, so two
variables whose intervals are disjoint are never live together and may share a
register. Intervals are visited by start; when all `registers` are busy, the interval
that ends last is spilled (on a tie the one that starts first, then by name): the same
assignment and spill choice for every allocator, which only decide where a spilled
value goes (`spill_rules.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpudiv import ir
from gpudiv.transforms.liveness import Liveness, variables


@dataclass(frozen=True)
class Interval:
    """The points [start, end] of one variable."""

    name: str
    start: int
    end: int


@dataclass
class Assignment:
    """Registers of the variables kept in registers, and the spilled variables (in the
    order the scan spilled them)."""

    registers: dict[str, int] = field(default_factory=dict)
    spilled: list[str] = field(default_factory=list)
    intervals: dict[str, Interval] = field(default_factory=dict)

    @property
    def used(self) -> int:
        """How many distinct registers hold variables."""
        return len(set(self.registers.values()))


def intervals(kernel: ir.Kernel, live: Liveness) -> dict[str, Interval]:
    """The live interval of every register the kernel reads or writes."""
    points: dict[str, list[int]] = {}
    params = set(kernel.params)
    for k, instr in enumerate(kernel.instructions()):
        _, writes = variables(instr, params)
        for name in live.live_in.get(instr.id, ()):
            points.setdefault(name, []).append(2 * k)
        for name in (*live.live_out.get(instr.id, ()), *writes):
            points.setdefault(name, []).append(2 * k + 1)
    return {name: Interval(name, min(p), max(p)) for name, p in points.items()}


def linear_scan(kernel: ir.Kernel, live: Liveness, registers: int) -> Assignment:
    """Assign at most `registers` registers; spill what does not fit."""
    if registers < 1:
        raise ValueError("the register budget must be at least 1")
    return scan(intervals(kernel, live), registers)


def scan(spans: dict[str, Interval], registers: int) -> Assignment:
    """Linear scan over given intervals with `registers` registers (0: spill them all)."""
    result = Assignment(intervals=spans)
    active: list[Interval] = []
    free = list(range(registers))
    for current in sorted(spans.values(), key=lambda s: (s.start, s.end, s.name)):
        for old in [a for a in active if a.end < current.start]:
            active.remove(old)
            free.append(result.registers[old.name])
        if free:
            free.sort()
            result.registers[current.name] = free.pop(0)
            active.append(current)
            continue
        victim = max([*active, current], key=lambda s: (s.end, -s.start, s.name))
        if victim is current:
            result.spilled.append(current.name)
            continue
        active.remove(victim)
        result.registers[current.name] = result.registers.pop(victim.name)
        result.spilled.append(victim.name)
        active.append(current)
    return result


def conflicts(assignment: Assignment, live: Liveness) -> list[tuple[str, str]]:
    """Interfering pairs that got the same register (empty for a correct assignment)."""
    regs = assignment.registers
    return sorted((v, w) for v, w in live.interfere
                  if v < w and v in regs and w in regs and regs[v] == regs[w])
