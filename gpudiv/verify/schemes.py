"""SIMD reconvergence schemes compared on one kernel (Wu et al. 2011, B.6 and Table 3).

Each scheme runs the same launches on the reference interpreter and is counted in warp
instructions (one per instruction a warp issues), lane instructions, SIMD efficiency and,
for μ-SIMD, time slots (Fig 3):

- `pdom`: the original kernel, reconverging at immediate post-dominators (policy ipdom);
- `earliest`: the original kernel, earliest reconvergence (thread frontiers, policy
  frontier; Fig 3(d));
- `sync`: the original μ-SIMD kernel at its `sync` instructions, when it has them;
- `structured`: the structurized kernel (`structurize`: Cut, Backward Copy, Forward Copy)
  under a structured predicate stack. On structured control flow a predicate stack
  (IF/ELSE/ENDIF, LOOP/BREAK/ENDLOOP) reconverges at the end of each region, which is the
  immediate post-dominator of its branch, so it is run as ipdom on the structurized code;
- `structured_earliest`: the structurized kernel under earliest reconvergence (copies of
  a block are different code, so they no longer meet);
- `mimd`: every thread on its own (the reference for memory; its lane instructions are
  the useful work of the other schemes).

The Table-3-style upper limit of dynamic code expansion counts, in the PDOM run, the
instructions of the blocks Forward Copy duplicates executed while their warp was divergent
(fewer lanes active than the warp started with), first executions included; the measured
expansion is what PDOM issues beyond earliest reconvergence.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace

import numpy as np

from gpudiv import ir
from gpudiv.interp.musimd import (
    ExecutionError,
    reconvergence_for,
    run_kernel,
    time_slots,
)
from gpudiv.interp.ptx import run_ptx_kernel
from gpudiv.transforms import PassError, get_pass
from gpudiv.transforms.structurize import STATS
from gpudiv.verify.equivalence import launches_for

SCHEMES = ("pdom", "earliest", "sync", "structured", "structured_earliest", "mimd")
_PLAN = {"pdom": ("original", "ipdom"), "earliest": ("original", "frontier"),
         "sync": ("original", "sync"), "structured": ("structurized", "ipdom"),
         "structured_earliest": ("structurized", "frontier"), "mimd": ("original", "mimd")}


@dataclass
class SchemeRun:
    """One scheme summed over the launches: counts, whether every launch finished, and
    whether every launch left the memory the mimd run of the original left (None for
    mimd itself) and the memory the PDOM run left (None for PDOM itself; a racy launch
    may differ from mimd under every SIMT scheme alike)."""

    scheme: str
    warp_instructions: int = 0
    lane_instructions: int = 0
    lane_slots: int = 0
    slots: int | None = None
    finished: bool = True
    same_memory: bool | None = None
    same_as_pdom: bool | None = None
    message: str = ""

    @property
    def simd_efficiency(self) -> float:
        """Lane instructions per issued lane slot."""
        return self.lane_instructions / self.lane_slots if self.lane_slots else 0.0

    def as_dict(self) -> dict[str, object]:
        """JSON form."""
        return {"scheme": self.scheme, "warp_instructions": self.warp_instructions,
                "lane_instructions": self.lane_instructions,
                "simd_efficiency": round(self.simd_efficiency, 4), "time_slots": self.slots,
                "finished": self.finished, "same_memory": self.same_memory,
                "same_as_pdom": self.same_as_pdom, "message": self.message}


@dataclass
class SchemeComparison:
    """Every scheme on one kernel, with the structurize statistics, the blocks Forward
    Copy duplicated and how many copies it made of them, and the upper limit of the
    dynamic code expansion (Table 3)."""

    kernel: str
    launches: int
    runs: dict[str, SchemeRun] = field(default_factory=dict)
    transform: dict[str, object] = field(default_factory=dict)
    duplicated_blocks: tuple[str, ...] = ()
    duplicates: int = 0
    upper_bound: int = 0
    racy_launches: int = 0
    error: str = ""

    @property
    def measured_expansion(self) -> int | None:
        """Warp instructions PDOM issues beyond earliest reconvergence (None when either
        did not finish)."""
        pdom, earliest = self.runs.get("pdom"), self.runs.get("earliest")
        if not (pdom and earliest and pdom.finished and earliest.finished):
            return None
        return pdom.warp_instructions - earliest.warp_instructions

    def as_dict(self) -> dict[str, object]:
        """JSON form."""
        return {"kernel": self.kernel, "launches": self.launches,
                "transform": self.transform, "duplicated_blocks": list(self.duplicated_blocks),
                "duplicates": self.duplicates,
                "upper_bound": self.upper_bound, "racy_launches": self.racy_launches,
                "measured_expansion": self.measured_expansion, "error": self.error,
                "runs": [r.as_dict() for r in self.runs.values()]}


class _DivergentBlockCounter:
    """Observer: instructions of the chosen blocks a warp runs with fewer lanes than it
    started with."""

    def __init__(self, kernel: ir.Kernel, blocks: set[str]):
        self.counted = {i.id for b in kernel.blocks if b.label in blocks
                        for i in b.instructions}
        self.width: dict[int, int] = {}
        self.total = 0

    def before(self, warp: int, instruction: int, active: np.ndarray, read) -> None:
        """Count one instruction when its block is chosen and the warp is divergent."""
        lanes = len(active)
        widest = self.width.setdefault(warp, lanes)
        self.width[warp] = max(widest, lanes)
        if instruction in self.counted and lanes < self.width[warp]:
            self.total += 1

    def branch(self, warp: int, instruction: int, active: np.ndarray,
               jumps: np.ndarray) -> None:
        """Branches need nothing more."""


def _memory(language: str, result) -> object:
    """What a run leaves in memory, comparable with ==."""
    if language == "ptx":
        return sorted((name, np.asarray(a).tobytes()) for name, a in result.buffers.items())
    return (sorted((k, v) for k, v in result.shared.items() if v != 0),
            [sorted((k, v) for k, v in local.items() if v != 0) for local in result.local])


def _run(language: str, kernel: ir.Kernel, launch: object, policy: str, observer=None):
    """One run under `policy`; the result and its time slots (μ-SIMD)."""
    launch = replace(copy.deepcopy(launch), reconvergence=policy)
    if language == "ptx":
        return run_ptx_kernel(kernel, launch, observer), None
    result = run_kernel(kernel, launch, observer, trace=True)
    return result, time_slots(result.trace)


def structurized(kernel: ir.Kernel) -> ir.Kernel:
    """A structurized copy of the kernel (PassError when the pass refuses it)."""
    return get_pass("structurize").run(copy.deepcopy(kernel))


def compare_schemes(kernel: ir.Kernel, language: str, launches: list,
                    count: int | None = None) -> SchemeComparison:
    """Run the kernel's launches under every scheme that applies and count them: the
    first `count` launches (all by default) that the original finishes under mimd and
    that are not racy (the original leaves other memory under PDOM than under mimd:
    counted in `racy_launches`)."""
    report = SchemeComparison(kernel.name, 0)
    kernels = {"original": kernel}
    try:
        kernels["structurized"] = structurized(kernel)
        stats = dict(kernels["structurized"].attrs.get(STATS, {}))
        copies = stats.pop("copies", {})
        report.transform = stats
        labels = {b.label for b in kernel.blocks}
        report.duplicated_blocks = tuple(sorted(b for b in copies if b in labels))
        report.duplicates = sum(n for b, n in copies.items() if b in labels)
    except PassError as error:
        report.error = str(error)
    schemes = [s for s in SCHEMES if s != "mimd" and _PLAN[s][0] in kernels
               and (s != "sync" or (language == "musimd" and reconvergence_for(kernel) == "sync"))]
    report.runs = {s: SchemeRun(s) for s in ("mimd", *schemes)}
    for launch in launches:
        if count is not None and report.launches >= count:
            break
        outcome = _reference(language, kernel, launch, report.duplicated_blocks)
        if outcome is None:
            continue  # the launch itself fails: not a comparison of schemes
        if isinstance(outcome, str):
            report.racy_launches += 1
            continue
        reference, pdom, slots, upper = outcome
        report.launches += 1
        report.upper_bound += upper
        _add(report.runs["mimd"], reference, None)
        expected = _memory(language, reference)
        for scheme in schemes:
            run = report.runs[scheme]
            if scheme == "pdom":
                result = pdom
            else:
                which, policy = _PLAN[scheme]
                try:
                    result, slots = _run(language, kernels[which], launch, policy)
                except ExecutionError as error:
                    run.finished, run.message = False, str(error).splitlines()[0][:120]
                    continue
            if isinstance(result, ExecutionError):
                run.finished, run.message = False, str(result).splitlines()[0][:120]
                continue
            _add(run, result, slots)
            memory = _memory(language, result)
            run.same_memory = _and(run.same_memory, memory == expected)
            if scheme != "pdom" and not isinstance(pdom, ExecutionError):
                run.same_as_pdom = _and(run.same_as_pdom, memory == _memory(language, pdom))
    report.runs = {s: report.runs[s] for s in SCHEMES if s in report.runs}
    return report


def _reference(language: str, kernel: ir.Kernel, launch: object,
               duplicated: tuple[str, ...]):
    """The original's mimd run, its PDOM run (or the error that stopped it), PDOM's time
    slots and its count of divergently executed duplicated instructions; None when the
    mimd run fails, "racy" when both finish with different memory (the outcome depends on
    the schedule: threads race)."""
    try:
        reference, _ = _run(language, kernel, launch, "mimd")
    except ExecutionError:
        return None
    counter = _DivergentBlockCounter(kernel, set(duplicated))
    try:
        pdom, slots = _run(language, kernel, launch, "ipdom", counter)
    except ExecutionError as error:
        return reference, error, None, 0
    if _memory(language, pdom) != _memory(language, reference):
        return "racy"
    return reference, pdom, slots, counter.total


def _and(sofar: bool | None, now: bool) -> bool:
    """Equal on every launch so far and on this one."""
    return now if sofar is None else sofar and now


def _add(run: SchemeRun, result, slots: int | None) -> None:
    """Add one finished run's counters to the scheme's sums."""
    counters = result.counters
    run.warp_instructions += counters.warp_instructions
    run.lane_instructions += counters.lane_instructions
    run.lane_slots += counters.warp_instructions * counters.warp_width
    if slots is not None:
        run.slots = (run.slots or 0) + slots


def default_launches(language: str, kernel: ir.Kernel, seed: int = 0) -> list:
    """The launches `gpudiv check` would use for the kernel."""
    return launches_for(language, kernel, seed)


__all__ = ["SCHEMES", "SchemeComparison", "SchemeRun", "compare_schemes",
           "default_launches", "structurized"]
