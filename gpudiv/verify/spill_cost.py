"""Dynamic spill counts and a latency model (what `gpudiv transform --pass regalloc
--verify` reports, and the regalloc benchmark).

Each executed warp instruction is counted once, by kind: a local load or store, a shared
load or store, or anything else (ALU, control). The model charges a warp instruction
`LATENCY[kind]` cycles, after Sampaio 2013 §4.1: a register/ALU operation 1; shared
memory "less than 3 times slower" than a register, so 3; local memory is cached (a hit
as fast as shared memory, 3) and a miss costs 100 hits (300); we assume 10% misses for
spill traffic, 0.9·3 + 0.1·300 = 32.7, so 33. Counts are of the whole kernel (the
program's own shared-memory accesses included), so the modelled speed-up of an
allocator is the ratio of two whole-run costs.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from gpudiv import ir
from gpudiv.interp.musimd import ExecutionError, run_kernel
from gpudiv.interp.ptx import PtxExecutionError
from gpudiv.verify.call_runs import run_ptx_any

LATENCY = {"local": 33, "shared": 3, "alu": 1}
KINDS = ("local_loads", "local_stores", "shared_loads", "shared_stores", "other")


@dataclass
class Profile:
    """Executed warp instructions by kind over some launches, and their modelled cost."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    runs: int = 0

    @property
    def instructions(self) -> int:
        """All executed warp instructions."""
        return sum(self.counts.values())

    @property
    def cost(self) -> int:
        """The modelled cycles (`LATENCY`)."""
        c = self.counts
        return (LATENCY["local"] * (c["local_loads"] + c["local_stores"])
                + LATENCY["shared"] * (c["shared_loads"] + c["shared_stores"])
                + LATENCY["alu"] * c["other"])

    def to_json(self) -> dict[str, int]:
        """Counts, total and cost as plain JSON."""
        return {**self.counts, "instructions": self.instructions, "cost": self.cost,
                "runs": self.runs}


def kind_of(instr: ir.Instruction) -> str:
    """The profile kind of one instruction."""
    if instr.kind in (ir.LOAD, ir.STORE) and instr.space in ("local", "shared"):
        return f"{instr.space}_{'loads' if instr.kind == ir.LOAD else 'stores'}"
    if instr.kind == ir.ATOMIC:
        return "shared_loads"
    return "other"


class _Counting:
    """An interpreter observer that counts warp instructions by id."""

    def __init__(self) -> None:
        self.by_id: Counter[int] = Counter()

    def before(self, warp: int, instruction: int, active: np.ndarray,
               read: Callable[[str], np.ndarray]) -> None:
        """Count one executed warp instruction."""
        self.by_id[instruction] += 1

    def branch(self, warp: int, instruction: int, active: np.ndarray,
               jumps: np.ndarray) -> None:
        """Branches are counted in `before`."""


def _ptx_kinds(kernel: ir.Kernel) -> dict[int, str]:
    """PTX: the kind of each PTX instruction, on the first IR instruction of its group
    (a vector load, a guarded definition or an inlined call is one warp instruction)."""
    kinds: dict[int, str] = {}
    seen: dict[int, int] = {}
    for instr in kernel.instructions():
        if instr.group is None:
            kinds[instr.id] = kind_of(instr)
            continue
        first = seen.setdefault(instr.group, instr.id)
        kind = kind_of(instr)
        if first == instr.id:
            kinds[first] = kind
        elif kind != "other" and kinds[first] == "other":
            kinds[first] = kind
    return kinds


def profile(kernel: ir.Kernel, launches: list, language: str = "musimd") -> Profile:
    """Run a kernel on the launches and count its warp instructions by kind (a launch
    that stops with an error is left out; PTX: one count per PTX instruction)."""
    result = Profile()
    if language == "ptx":
        kinds = _ptx_kinds(kernel)
    else:
        kinds = {i.id: kind_of(i) for i in kernel.instructions()}
    for launch in launches:
        counter = _Counting()
        try:
            if language == "ptx":
                run_ptx_any(kernel, copy.deepcopy(launch), counter)
            else:
                run_kernel(kernel, copy.deepcopy(launch), counter)
        except (ExecutionError, PtxExecutionError):
            continue
        result.runs += 1
        for instruction, n in counter.by_id.items():
            if instruction in kinds:
                result.counts[kinds[instruction]] += n
    return result


def speedup(baseline: Profile, other: Profile) -> float:
    """How much faster `other` is than `baseline` in the model (0.1 = 10% faster)."""
    return baseline.cost / other.cost - 1.0 if other.cost else 0.0
