"""The SIMT engine both interpreters run on: warps, the scheduler, the step loop,
counters, observers, step budget and SIMT-deadlock detection.

A language (`interp.musimd`, `interp.ptx`) only says what an instruction does to the
lanes: it prepares one `Op` per IR instruction (a control `code`, the branch `target` and
reconvergence pc `rpc` as instruction indices) and implements `Semantics`. How the lanes
of a warp run and meet again is the reconvergence policy, a separate control object per
warp (`interp.policies`, chosen by `control_for`).

Reconvergence points written into the IR: a conditional branch whose
`Instruction.attrs[RECONVERGE_ATTR]` names a block reconverges there under the `sync`
policy (for a kernel without μ-SIMD `sync` instructions), instead of at its immediate
post-dominator; `reconvergence_pcs` resolves them. A transform that moves the point
where a branch's lanes meet (SSDE) writes that attribute; the printers keep it
(docs/execution.md, "Reconvergence points in the IR").

Scheduling: the warps of a block take turns. A warp runs until it waits at a barrier,
finishes, or yields at a backward transfer (then `Warp.loop` says which) once it has run
`quantum` steps (with `per_backward`: at its `quantum`-th backward transfer). With
`sticky` (μ-SIMD: each warp runs until a barrier or its end) the same warp goes on after
a yield; otherwise (PTX) the next warp runs. After a yield of a long run (`DETECT_AFTER`
warp steps) the state of the machine is fingerprinted; a repeat stops the run with a
`DeadlockError` (`simt`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from gpudiv import ir
from gpudiv.interp.policies import PolicyFault
from gpudiv.interp.simt import (
    DETECT_AFTER,
    Counters,
    CycleDetector,
    DeadlockError,
    ExecutionError,
    deadlock_message,
    fingerprint,
)
from gpudiv.ir import cfg as cfg_module

# Control codes of a prepared instruction (CALL and RET: PTX calls run as calls).
EXEC, BRANCH, JUMP, SYNC, STOP, BARRIER, NOP, FAIL, CALL, RET = range(10)

QUANTUM = 1000
# The IR annotation of an explicit reconvergence point (`ir.RECONVERGE`).
RECONVERGE_ATTR = ir.RECONVERGE


class Op(Protocol):
    """What the engine reads of a prepared instruction."""

    code: int
    index: int
    instr: ir.Instruction
    target: int
    rpc: int
    collective: bool
    message: str


class Observer(Protocol):
    """Hooks called while a kernel runs (the dynamic divergence oracle uses them)."""

    def before(self, warp: int, instruction: int, active: np.ndarray,
               read: Callable[[str], np.ndarray]) -> None:
        """Called before every executed instruction (`instruction` is its `ir.Instruction.id`)."""
        ...

    def branch(self, warp: int, instruction: int, active: np.ndarray,
               jumps: np.ndarray) -> None:
        """Called at a conditional branch: jumps[k] tells whether lane active[k] jumps."""
        ...

    # Optional (PTX calls run as calls): `call(warp, instruction, lanes)` after `lanes`
    # entered the callee of the call `instruction`, `ret(warp, instruction, lanes)` after
    # they left it at its `call.return` (`gpudiv.verify.call_runs` follows frames so).


class Semantics(Protocol):
    """What a language tells the engine: its prepared instructions and what they do."""

    ops: list

    def execute(self, op, top: list, warp: int) -> None:
        """Run an EXEC instruction in the lanes of entry `top` ([pc, lanes, sel, ...])."""
        ...

    def jumps(self, op, top: list, warp: int) -> np.ndarray:
        """Which lanes of `top` a conditional branch sends to its target."""
        ...

    def barrier_held(self, op, top: list) -> np.ndarray | None:
        """The guard of a barrier in the lanes of `top` (None: unguarded)."""
        ...

    def record(self, step: int, op, warp: int, lanes: np.ndarray) -> None:
        """Append a trace row."""
        ...

    def reader(self, lanes: np.ndarray) -> Callable[[str], np.ndarray]:
        """A function from a variable name to its values in `lanes` (for observers)."""
        ...

    def error(self, pc: int, lanes, warp: int, message: str) -> ExecutionError:
        """An error located at pc."""
        ...

    def release(self, warps: list[Warp]) -> None:
        """Every warp of the block waits at a barrier; called before they go on."""
        ...

    def state(self) -> list[bytes]:
        """Registers and memories as bytes (for cycle detection)."""
        ...

    def deadlock(self, warp: int, line: int, lanes: np.ndarray, message: str) -> DeadlockError:
        """The error for a run that repeats forever."""
        ...

    def lane_ids(self, lanes: np.ndarray) -> list[int]:
        """Lanes as the messages name them (μ-SIMD thread ids, PTX lane ids)."""
        ...

    def enter(self, op, top: list, warp: int) -> list[tuple]:
        """A CALL: pass the arguments; per callee (a call through a function pointer
        may reach several), (which lanes of `top` call it: None for all, its entry pc,
        the activation the control object keeps until it returns)."""
        ...

    def leave(self, op, top: list, warp: int, activations: tuple) -> None:
        """A RET of the lanes of `top` from the activations `enter` made (the control
        object's `ret` says which): pass the results back."""
        ...


class Warp:
    """A warp: its index in the block, its control object, the pc of the barrier it waits
    at (or None) and (branch pc, target) of its last yield at a backward transfer."""

    __slots__ = ("index", "control", "waiting", "loop")

    def __init__(self, index: int, control) -> None:
        self.index = index
        self.control = control
        self.waiting: int | None = None
        self.loop: tuple[int, int] | None = None


_POINTS: dict[tuple, dict[str, str]] = {}  # immediate post-dominators per control flow
_POINTS_KEPT = 256


def _post_dominators(kernel: ir.Kernel) -> dict[str, str]:
    """`cfg.reconvergence_points` of the kernel, remembered per control-flow shape (the
    blocks with the kinds and targets of their instructions: the oracle runs one kernel
    many times, and building the CFG costs more than a short run)."""
    key = tuple((b.label, tuple((i.kind, i.operator, i.target, i.guard is not None)
                            for i in b.instructions))
                for b in kernel.blocks)
    points = _POINTS.get(key)
    if points is None:
        points = cfg_module.reconvergence_points(cfg_module.build_cfg(kernel))
        if len(_POINTS) >= _POINTS_KEPT:
            _POINTS.pop(next(iter(_POINTS)))
        _POINTS[key] = points
    return points


def reconvergence_pcs(kernel: ir.Kernel, start: dict[str, int], end: int,
                      marked: bool) -> dict[str, int]:
    """Per block label, the first pc of the block where a divergent branch ending it
    reconverges: its immediate post-dominator (`end` for the exit), or with `marked`
    the block its branch's `RECONVERGE_ATTR` names, where it has one."""
    points = _post_dominators(kernel)
    pcs = {label: end if post == cfg_module.EXIT else start[post]
           for label, post in points.items()}
    if marked:
        for block in kernel.blocks:
            term = block.terminator
            label = term.attrs.get(RECONVERGE_ATTR) if term is not None else None
            if label is not None and label in start:
                pcs[block.label] = start[str(label)]
    return pcs


def has_marks(kernel: ir.Kernel) -> bool:
    """Whether a branch of the kernel carries an explicit reconvergence point."""
    return any(RECONVERGE_ATTR in i.attrs for i in kernel.instructions()
               if i.kind == ir.BRANCH)


class Engine:
    """Runs the warps of one block at a time for one language's semantics."""

    def __init__(self, sem: Semantics, kernel: str, counters: Counters, budget: int,
                 budget_unit: str, observer: Observer | None = None, tracing: bool = False,
                 sticky: bool = False, quantum: int = QUANTUM,
                 per_backward: bool = False) -> None:
        self.sem = sem
        self.kernel = kernel
        self.counters = counters
        self.budget = budget
        self.budget_unit = budget_unit
        self.observer = observer
        self.tracing = tracing
        self.sticky = sticky
        self.quantum = quantum
        self.per_backward = per_backward
        self.call_observer = observer if hasattr(observer, "call") else None

    # -- scheduling -------------------------------------------------------------------
    def run_block(self, warps: list[Warp]) -> None:
        """Run the warps round-robin, releasing barriers, until every warp has stopped."""
        cycles = CycleDetector()
        counters = self.counters
        while True:
            for warp in warps:
                control = warp.control
                if self.sticky:
                    while warp.waiting is None and control.alive():
                        self.run_warp(warp)
                        if (warp.waiting is None and control.alive()
                                and counters.warp_instructions > DETECT_AFTER
                                and cycles.seen(self._state(warps, warp))):
                            raise self._deadlock([warp])
                elif warp.waiting is None and control.alive():
                    self.run_warp(warp)
            live = [w for w in warps if w.control.alive()]
            if not live:
                return
            if any(w.waiting is None for w in live):
                if counters.warp_instructions > DETECT_AFTER \
                        and cycles.seen(self._state(warps, None)):
                    raise self._deadlock(live)
                continue
            if len(live) < len(warps):
                first = live[0]
                gone = ", ".join(str(w.index) for w in warps if not w.control.alive())
                raise self.sem.error(first.waiting, first.control.unfinished(), first.index,
                                     f"barrier not reached by all warps (warp(s) {gone} "
                                     f"finished without it)")
            self.sem.release(live)
            for warp in live:
                warp.control.resume(warp.waiting + 1)
                warp.waiting = None

    # -- the step loop ----------------------------------------------------------------
    def run_warp(self, warp: Warp) -> None:
        """Run warp w until it stops, waits at a barrier or yields (see the module)."""
        control = warp.control
        current = control.current
        grouped = control.grouped
        mimd = control.mimd
        sem = self.sem
        ops = sem.ops
        end = len(ops)
        counters = self.counters
        observer = self.observer
        tracing = self.tracing
        budget = self.budget
        index = warp.index
        quantum = self.quantum
        step_cost, backward_cost = (0, 1) if self.per_backward else (1, 0)
        while True:
            top = current()
            if top is None:
                if not grouped:
                    return
                blocked = control.blocked()
                if blocked is None:
                    return
                why, top = blocked
                if why == "barrier":
                    warp.waiting = top[0]
                    return
                if why == "stuck":
                    raise sem.error(top[0], top[1], index,
                                    "barrier in divergent code (lanes wait at it for "
                                    "lanes of the warp that wait to reconverge)")
                self._collective(warp, top)
                continue
            pc = top[0]
            if pc >= end:  # falling off the end acts like a stop
                self._policy(control.stop, top, pc, index)
                continue
            op = ops[pc]
            code = op.code
            lanes = top[1]
            if mimd and op.collective and len(lanes) < len(control.unfinished()):
                control.park(top, "collective")
                continue
            if counters.warp_instructions >= budget:
                raise sem.error(pc, lanes, index,
                                f"did not finish within {budget} {self.budget_unit}")
            counters.warp_instructions += 1
            counters.lane_instructions += len(lanes)
            if tracing:
                sem.record(counters.warp_instructions, op, index, lanes)
            if observer is not None:
                observer.before(index, op.instr.id, lanes, sem.reader(lanes))
            if code == EXEC:
                sem.execute(op, top, index)
                top[0] = pc + 1
            elif code == BRANCH:
                jumps = sem.jumps(op, top, index)
                if observer is not None:
                    observer.branch(index, op.instr.id, lanes, jumps)
                taken = int(np.count_nonzero(jumps))
                if 0 < taken < len(lanes):
                    counters.divergent_branches += 1
                control.branch(top, pc, op.target, jumps, taken, op.rpc)
            elif code == JUMP:
                top[0] = op.target
            elif code == NOP:
                top[0] = pc + 1
            elif code == SYNC:
                self._policy(control.sync, top, pc, index, pc)
            elif code == STOP:
                self._policy(control.stop, top, pc, index)
                continue
            elif code == CALL:
                calls = sem.enter(op, top, index)
                if len(calls) > 1:  # a call through pointers to several functions
                    counters.divergent_branches += 1
                self._policy(control.call, top, pc, index, pc, calls)
                if self.call_observer is not None:
                    for entering, _, _ in calls:
                        self.call_observer.call(index, op.instr.id, lanes if entering is None
                                                else lanes[entering])
            elif code == RET:
                activations = self._policy(control.ret, top, pc, index)
                sem.leave(op, top, index, activations)
                if self.call_observer is not None:
                    self.call_observer.ret(index, op.instr.id, lanes)
            elif code == BARRIER:
                held = sem.barrier_held(op, top)
                if held is not None:
                    if not held.any():
                        top[0] = pc + 1
                        continue
                    if not held.all():
                        raise sem.error(pc, lanes[~held], index,
                                        "barrier skipped by some lanes of the warp")
                if self._policy(control.arrive, top, pc, index, pc):
                    warp.waiting = pc
                    return
                continue
            else:
                raise sem.error(pc, lanes, index, op.message)
            if grouped:
                control.moved()
            quantum -= step_cost
            if code in (JUMP, BRANCH) and op.target <= pc:
                quantum -= backward_cost
                if quantum <= 0:
                    warp.loop = (pc, op.target)
                    return
            if quantum < -self.quantum:  # a long run without a backward transfer
                return

    def _policy(self, action: Callable, top: list, pc: int, warp: int, *args):
        """Run a control action, turning its faults into located errors."""
        try:
            return action(top, *args)
        except PolicyFault as fault:
            raise self.sem.error(pc, fault.lanes, warp, fault.message) from None

    def _collective(self, warp: Warp, top: list) -> None:
        """Mimd: run the warp collective the threads of a warp all reached, with all of
        them, then let them go on alone."""
        pc, lanes = top[0], top[1]
        op = self.sem.ops[pc]
        counters = self.counters
        counters.warp_instructions += 1
        counters.lane_instructions += len(lanes)
        if self.tracing:
            self.sem.record(counters.warp_instructions, op, warp.index, lanes)
        if self.observer is not None:
            self.observer.before(warp.index, op.instr.id, lanes, self.sem.reader(lanes))
        self.sem.execute(op, top, warp.index)
        top[0] = pc + 1
        warp.control.collective_done(pc)

    # -- SIMT deadlocks ---------------------------------------------------------------
    def _state(self, warps: list[Warp], running: Warp | None) -> bytes:
        """A fingerprint of the block at a scheduling point: the running warp, every
        warp's control state, registers and memories."""
        parts = [str(-1 if running is None else running.index).encode()]
        for warp in warps:
            parts.append(str(warp.waiting).encode())
            parts.append(warp.control.state())
        parts += self.sem.state()
        return fingerprint(parts)

    def _line(self, pc: int) -> int:
        """The source line of a pc (the last instruction's for the end)."""
        ops = self.sem.ops
        return ops[min(pc, len(ops) - 1)].instr.loc.line

    def _deadlock(self, candidates: list[Warp]) -> DeadlockError:
        """The error for a block whose state repeats: a SIMT deadlock when lanes of a
        looping warp wait on its control for others, else an infinite loop."""
        looping = [w for w in candidates if w.loop is not None] or candidates
        chosen, waiting = looping[0], []
        for warp in looping:
            found = [(lanes, pc) for lanes, pc in warp.control.waiting() if len(lanes)]
            if found:
                chosen, waiting = warp, found
                break
        top = chosen.control.running()
        branch, target = chosen.loop if chosen.loop is not None else (top[0], top[0])
        line = self._line(branch)
        others = None
        if waiting:
            others = self.sem.lane_ids(np.unique(np.concatenate([lanes for lanes, _ in
                                                                 waiting])))
        message = deadlock_message(self.kernel, line, self.sem.lane_ids(top[1]),
                                   self._line(target), others,
                                   self._line(waiting[0][1]) if waiting else None)
        return self.sem.deadlock(chosen.index, line, top[1], message)
