"""Reference SIMD interpreter for kernels in the shared IR (written for μ-SIMD).

One thread block is split into warps; lanes of a warp run in lock-step with partial
execution (Sampaio 2013, Tables 3.3–3.5; notes §1.4–1.6). Warps run one at a time,
round-robin, each until it reaches a `barrier`, finishes, or fails. Two reconvergence
schemes (policies, `gpudiv.interp.simt`) are offered:

- "sync": the seed's explicit synchronisation stack. Every conditional branch pushes (or
  merges into) a node (branch, done, resume, todo); `sync` resumes the deferred lanes
  (rule SS) or pops and reunites (rule SP). Mismatched `sync`s are errors, never hangs.
- "ipdom": GPGPU-Sim's PDOM stack; lanes reconverge at the immediate post-dominator of
  the divergent branch, `sync` is a no-op. Runs unstructured control flow.
- "frontier": earliest reconvergence; one group of lanes per pc, the lowest pc runs.
- "mimd": every thread on its own, round-robin one instruction at a time.

A run whose state repeats stops with `DeadlockError` (SIMT deadlock or infinite loop).

Registers are numpy int64 arrays indexed by thread id, always holding values wrapped to
signed 32 bits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np

from gpudiv import cfg as cfg_module
from gpudiv import ir
from gpudiv.interp.simt import (  # noqa: F401 - re-exported: the μ-SIMD machine's API
    DETECT_AFTER,
    RECONVERGENCE_MODES,
    Counters,
    CycleDetector,
    DeadlockError,
    ExecutionError,
    deadlock_message,
    fingerprint,
    format_lanes,
    never_released,
)

SPECIAL_NAMES = ("tid", "laneid", "warpid", "ntid")

_EMPTY = np.zeros(0, dtype=np.int64)
_EMPTY.flags.writeable = False


def wrap(x):
    """Wrap an integer or an int64 array to signed 32-bit two's complement."""
    return ((x + 2**31) & 0xFFFFFFFF) - 2**31


# ---------------------------------------------------------------------------------------
# Public data types
# ---------------------------------------------------------------------------------------


@dataclass
class LaunchConfig:
    """How to launch a kernel: one block of `threads` threads split into warps."""

    threads: int
    warp_width: int = 32
    params: dict[str, int] = field(default_factory=dict)
    shared: dict[int, int] = field(default_factory=dict)
    reconvergence: str = "auto"
    max_steps: int = 200_000


@dataclass
class TraceStep:
    """One executed warp instruction: where it was and which threads were active."""

    step: int
    warp: int
    line: int
    label: str
    text: str
    active: list[int]


@dataclass
class RunResult:
    """Final memories and registers, counters and (optionally) the execution trace."""

    shared: dict[int, int]
    local: list[dict[int, int]]
    registers: dict[str, list[int]]
    counters: Counters
    trace: list[TraceStep] = field(default_factory=list)


class Observer(Protocol):
    """Hooks called while a kernel runs (the dynamic divergence oracle uses them)."""

    def before(self, warp: int, instruction: int, active: np.ndarray,
               read: Callable[[str], np.ndarray]) -> None:
        """Called before every executed instruction (`instruction` is its `ir.Instruction.id`)."""
        ...

    def branch(self, warp: int, instruction: int, active: np.ndarray,
               jumps: np.ndarray) -> None:
        """Called at bz/bnz: jumps[k] tells whether lane active[k] goes to the target."""
        ...


# ---------------------------------------------------------------------------------------
# Arithmetic (32-bit, C semantics for / and %)
# ---------------------------------------------------------------------------------------


def _as_int(values) -> np.ndarray:
    """Booleans (from comparisons) as 0/1 integers."""
    return np.asarray(values, dtype=np.int64)


def _tdiv(a, b):
    """Division truncating toward zero (C); the caller has excluded b == 0."""
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q)


def _trem(a, b):
    """Remainder whose sign follows the dividend (C)."""
    return a - _tdiv(a, b) * b


def _shl(a, b):
    """Left shift; counts outside 0..31 give 0."""
    ok = (b >= 0) & (b <= 31)
    return np.where(ok, np.left_shift(a, np.where(ok, b, 0)), 0)


def _shr(a, b):
    """Arithmetic right shift; counts outside 0..31 fill with the sign bit."""
    ok = (b >= 0) & (b <= 31)
    return np.right_shift(a, np.where(ok, b, 31))


# operator → (function, whether the result can leave the 32-bit range and needs wrapping)
_BINARY: dict[str, tuple[Callable, bool]] = {
    "+": (np.add, True),
    "-": (np.subtract, True),
    "*": (np.multiply, True),
    "/": (_tdiv, True),  # INT_MIN / -1 overflows
    "%": (_trem, True),
    "<": (lambda a, b: _as_int(a < b), False),
    "<=": (lambda a, b: _as_int(a <= b), False),
    ">": (lambda a, b: _as_int(a > b), False),
    ">=": (lambda a, b: _as_int(a >= b), False),
    "==": (lambda a, b: _as_int(a == b), False),
    "!=": (lambda a, b: _as_int(a != b), False),
    "&": (np.bitwise_and, False),
    "|": (np.bitwise_or, False),
    "^": (np.bitwise_xor, False),
    "<<": (_shl, True),
    ">>": (_shr, False),
    "min": (np.minimum, False),
    "max": (np.maximum, False),
}

_UNARY: dict[str, tuple[Callable, bool]] = {
    "copy": (lambda a: a, False),
    "neg": (np.negative, True),  # -INT_MIN overflows
    "-": (np.negative, True),
    "!": (lambda a: _as_int(a == 0), False),
    "~": (np.invert, False),
}


def _frozen(lanes: np.ndarray) -> np.ndarray:
    """Make a lane set read-only: it is shared with observers and kept on stacks."""
    lanes.flags.writeable = False
    return lanes


class _Fault(Exception):
    """Raised by the control stacks; the machine adds kernel, line and label."""

    def __init__(self, message: str, lanes: np.ndarray) -> None:
        super().__init__(message)
        self.message = message
        self.lanes = [int(t) for t in lanes]


# ---------------------------------------------------------------------------------------
# Reconvergence schemes: one control object per warp
# ---------------------------------------------------------------------------------------


class _SyncControl:
    """The seed's sync stack; nodes are [branch pc, done lanes, resume pc, todo lanes]."""

    def __init__(self, lanes: np.ndarray, counters: Counters) -> None:
        self.counters = counters
        self.lanes = lanes
        self.pc = 0
        self.active = lanes
        self.stack: list[list] = []
        self.finished = False

    def current(self) -> tuple[int, np.ndarray] | None:
        """The next pc and active lanes, or None once the warp has stopped."""
        return None if self.finished else (self.pc, self.active)

    def goto(self, pc: int) -> None:
        """Continue at pc with the same lanes."""
        self.pc = pc

    def unfinished(self) -> np.ndarray:
        """Lanes that have not stopped (all of them until the whole warp stops)."""
        return _EMPTY if self.finished else self.lanes

    def _push(self, branch_pc: int, todo: np.ndarray, resume: int) -> None:
        """Table 3.3's push, generalised: merge only into a same-branch node with no done set."""
        if self.stack:
            top = self.stack[-1]
            if top[0] == branch_pc and len(top[1]) == 0:
                if len(todo):
                    top[3] = _frozen(np.union1d(top[3], todo))
                return
        self.stack.append([branch_pc, _EMPTY, resume, todo])
        self.counters.max_stack_depth = max(self.counters.max_stack_depth, len(self.stack) + 1)

    def branch(self, pc: int, target: int, jumps: np.ndarray, rpc: int) -> None:
        """Rules BT, BF, BD: the fall-through group runs first, the jumping one waits."""
        taken = _frozen(self.active[jumps])
        if len(taken) == len(self.active):
            self._push(pc, _EMPTY, target)
            self.pc = target
        elif len(taken) == 0:
            self._push(pc, _EMPTY, target)
            self.pc = pc + 1
        else:
            self._push(pc, taken, target)
            self.active = _frozen(self.active[~jumps])
            self.pc = pc + 1

    def sync(self, pc: int) -> None:
        """Rule SS (run the deferred lanes) or rule SP (pop and reunite)."""
        if not self.stack:
            raise _Fault("sync with nothing to synchronise", self.active)
        top = self.stack[-1]
        if len(top[3]):
            top[1], self.active, top[3] = self.active, top[3], _EMPTY
            self.pc = top[2]
        else:
            self.stack.pop()
            if len(top[1]):
                self.counters.reconvergences += 1
            self.active = _frozen(np.union1d(top[1], self.active))
            self.pc = pc + 1

    def arrive(self, pc: int) -> bool:
        """A barrier: every live lane must be active."""
        if len(self.active) != len(self.unfinished()):
            raise _Fault("barrier in divergent code", self.active)
        return True

    def state(self) -> bytes:
        """The control state as bytes (for cycle detection)."""
        parts = [str((self.pc, self.finished)).encode(), self.active.tobytes()]
        for node in self.stack:
            parts += [str((node[0], node[2])).encode(), node[1].tobytes(), b"|",
                      node[3].tobytes()]
        return b";".join(parts)

    def waiting(self) -> list[tuple[np.ndarray, int]]:
        """Lanes that wait (deferred or done) with the pc where they will go on."""
        return [(np.union1d(n[1], n[3]), n[2]) for n in reversed(self.stack)
                if len(n[1]) or len(n[3])]

    def stop(self) -> None:
        """Rule SF: only legal with an empty stack; the whole warp finishes."""
        if self.stack:
            n = len(self.stack)
            raise _Fault(f"stop reached with {n} pending synchronisation node(s)", self.active)
        self.finished = True
        self.active = _EMPTY


class _PdomControl:
    """GPGPU-Sim's PDOM stack; entries are [next pc, reconvergence pc, lanes]."""

    def __init__(self, lanes: np.ndarray, counters: Counters) -> None:
        self.counters = counters
        self.stack: list[list] = [[0, -1, lanes]]

    def current(self) -> tuple[int, np.ndarray] | None:
        """Pop entries that reached their reconvergence point; None once all lanes stopped."""
        while self.stack:
            pc, rpc, lanes = self.stack[-1]
            if pc != rpc:
                return pc, lanes
            self.stack.pop()
            self.counters.reconvergences += 1
        return None

    def arrive(self, pc: int) -> bool:
        """A barrier: every live lane must be active."""
        active = self.stack[-1][2]
        if len(active) != len(self.unfinished()):
            raise _Fault("barrier in divergent code", active)
        return True

    def state(self) -> bytes:
        """The control state as bytes (for cycle detection)."""
        return b";".join(str((pc, rpc)).encode() + lanes.tobytes()
                         for pc, rpc, lanes in self.stack)

    def waiting(self) -> list[tuple[np.ndarray, int]]:
        """Lanes of lower entries that wait, with the pc where they wait, nearest first."""
        out = []
        above = self.stack[-1][2] if self.stack else _EMPTY
        for pc, _, lanes in reversed(self.stack[:-1]):
            rest = np.setdiff1d(lanes, above, assume_unique=True)
            if len(rest):
                out.append((rest, pc))
            above = np.union1d(above, lanes)
        return out

    def goto(self, pc: int) -> None:
        """Continue at pc with the same lanes."""
        self.stack[-1][0] = pc

    def unfinished(self) -> np.ndarray:
        """Lanes that have not stopped: the bottom entry holds every live lane."""
        return self.stack[0][2] if self.stack else _EMPTY

    def branch(self, pc: int, target: int, jumps: np.ndarray, rpc: int) -> None:
        """On divergence wait at the ipdom and push target side, then fall-through side."""
        top = self.stack[-1]
        lanes = top[2]
        if jumps.all():
            top[0] = target
        elif not jumps.any():
            top[0] = pc + 1
        else:
            top[0] = rpc
            # An entry starting at its reconvergence point has nothing to run: its lanes
            # just wait in the entry below.
            for start, side in ((target, jumps), (pc + 1, ~jumps)):
                if start != rpc:
                    self.stack.append([start, rpc, _frozen(lanes[side])])
            depth = len(self.stack)
            if depth > self.counters.max_stack_depth:
                self.counters.max_stack_depth = depth

    def sync(self, pc: int) -> None:
        """Reconvergence is automatic: `sync` does nothing."""
        self.stack[-1][0] = pc + 1

    def stop(self) -> None:
        """Retire the active lanes from every entry; drop entries left without lanes."""
        gone = self.stack[-1][2]
        for entry in self.stack:
            entry[2] = _frozen(np.setdiff1d(entry[2], gone, assume_unique=True))
        self.stack = [entry for entry in self.stack if len(entry[2])]


class _GroupControl:
    """Groups of lanes, each at its own pc: entries [pc, lanes, parked at a barrier]. The
    frontier policy runs the group with the lowest pc and merges groups that meet; the
    mimd policy keeps one group per thread and takes them in turn, one instruction each."""

    def __init__(self, lanes: np.ndarray, counters: Counters, mimd: bool) -> None:
        self.counters = counters
        self.mimd = mimd
        if mimd:
            self.groups = [[0, _frozen(lanes[k:k + 1].copy()), False] for k in range(len(lanes))]
        else:
            self.groups = [[0, lanes, False]]
        self.counters.max_stack_depth = max(self.counters.max_stack_depth, len(self.groups))
        self.cursor = 0

    def _pick(self) -> int | None:
        """The group to run next (not parked), or None."""
        runnable = [k for k, g in enumerate(self.groups) if not g[2]]
        if not runnable:
            return None
        if self.mimd:
            after = [k for k in runnable if k >= self.cursor]
            return after[0] if after else runnable[0]
        return min(runnable, key=lambda k: self.groups[k][0])

    def current(self) -> tuple[int, np.ndarray] | None:
        """The pc and lanes of the group that runs next; None when none can run."""
        k = self._pick()
        if k is None:
            return None
        self.cursor = k
        group = self.groups[k]
        return group[0], group[1]

    def _moved(self) -> None:
        """After the current group moved: frontier merges the groups that meet at one pc;
        mimd takes the next thread."""
        if self.mimd:
            group = self.groups[self.cursor]
            if len(group[1]) > 1:  # released from a barrier: the threads go on alone
                lanes = group[1]
                self.groups[self.cursor:self.cursor + 1] = [
                    [group[0], _frozen(lanes[k:k + 1].copy()), False] for k in range(len(lanes))]
            self.cursor += 1
            return
        first: dict[int, list] = {}
        keep = []
        for group in self.groups:
            other = first.get(group[0]) if not group[2] else None
            if other is None:
                if not group[2]:
                    first[group[0]] = group
                keep.append(group)
            else:
                other[1] = _frozen(np.union1d(other[1], group[1]))
                self.counters.reconvergences += 1
        self.groups = keep

    def goto(self, pc: int) -> None:
        """Continue the current group at pc."""
        self.groups[self.cursor][0] = pc
        self._moved()

    def unfinished(self) -> np.ndarray:
        """Every lane that has not stopped."""
        if not self.groups:
            return _EMPTY
        return _frozen(np.sort(np.concatenate([g[1] for g in self.groups])))

    def branch(self, pc: int, target: int, jumps: np.ndarray, rpc: int) -> None:
        """Split the current group into the lanes that jump and those that fall through."""
        group = self.groups[self.cursor]
        if jumps.all() or not jumps.any():
            self.goto(target if jumps.all() else pc + 1)
            return
        lanes = group[1]
        group[0], group[1] = pc + 1, _frozen(lanes[~jumps])
        self.groups.insert(self.cursor + 1, [target, _frozen(lanes[jumps]), False])
        self.counters.max_stack_depth = max(self.counters.max_stack_depth, len(self.groups))
        self._moved()

    def sync(self, pc: int) -> None:
        """Reconvergence is implicit: `sync` does nothing."""
        self.goto(pc + 1)

    def stop(self) -> None:
        """The current group's lanes stop."""
        del self.groups[self.cursor]
        if not self.mimd:
            self.cursor = 0

    def arrive(self, pc: int) -> bool:
        """Park the current group at a barrier; True once every group waits there (then
        they are one group, at pc)."""
        self.groups[self.cursor][2] = True
        if not all(g[2] for g in self.groups):
            if self.mimd:
                self.cursor += 1
            return False
        pcs = {g[0] for g in self.groups}
        if len(pcs) > 1:
            raise _Fault("lanes of the warp wait at different barriers", self.unfinished())
        if len(self.groups) > 1:
            self.counters.reconvergences += 1
        self.groups = [[pc, self.unfinished(), False]]
        self.cursor = 0
        return True

    def parked(self) -> int | None:
        """When every group left waits at a barrier (the others stopped): make them one
        group and return the barrier's pc; else None."""
        if not self.groups or not all(g[2] for g in self.groups):
            return None
        pc = self.groups[0][0]
        self.cursor = 0
        return pc if self.arrive(pc) else None

    def state(self) -> bytes:
        """The control state as bytes (for cycle detection)."""
        return b";".join(str((g[0], g[2])).encode() + g[1].tobytes() for g in self.groups) \
            + str(self.cursor if self.mimd else 0).encode()

    def waiting(self) -> list[tuple[np.ndarray, int]]:
        """Frontier: the groups that do not run, lowest pc first; mimd: none."""
        if self.mimd:
            return []
        others = sorted((g for k, g in enumerate(self.groups) if k != self.cursor),
                        key=lambda g: g[0])
        return [(g[1], g[0]) for g in others]


# ---------------------------------------------------------------------------------------
# The machine
# ---------------------------------------------------------------------------------------


@dataclass
class _Op:
    """An instruction prepared for execution: resolved operands, targets and location."""

    instr: ir.Instruction
    index: int
    block: str
    label: str | None
    getters: list[Callable[[np.ndarray], np.ndarray]]
    target: int = -1
    rpc: int = -1


class _Machine:
    """Runs one kernel on one block of threads."""

    def __init__(self, kernel: ir.Kernel, config: LaunchConfig,
                 observer: Observer | None, trace: bool) -> None:
        _check_config(config)
        self.kernel = kernel
        self.config = config
        self.observer = observer
        self.tracing = trace
        self.trace: list[TraceStep] = []
        self.threads = config.threads
        width = config.warp_width
        self.width = width
        tids = np.arange(self.threads, dtype=np.int64)
        self.specials = {"tid": tids, "laneid": tids % width, "warpid": tids // width,
                         "ntid": np.full(self.threads, self.threads, dtype=np.int64)}
        self.regs = self._registers()
        self.shared = {int(k): int(wrap(v)) for k, v in config.shared.items()}
        self.local: list[dict[int, int]] = [{} for _ in range(self.threads)]
        self.counters = Counters(warp_width=width)
        self.ops = self._prepare()
        self.end = len(self.ops)
        warps = (self.threads + width - 1) // width
        self.controls = [self._control_for(_frozen(tids[w * width:(w + 1) * width].copy()))
                         for w in range(warps)]
        self.cycles = CycleDetector()
        # mimd issues one thread's instruction per step: its budget is width times larger
        self.budget = config.max_steps * (width if config.reconvergence == "mimd" else 1)
        self.backward = 0  # backward transfers since DETECT_AFTER steps
        self.waiting: list[int | None] = [None] * warps  # pc of the barrier a warp waits at

    def _control_for(self, lanes: np.ndarray):
        """The control object of one warp under the configured policy."""
        policy = self.config.reconvergence
        if policy == "sync":
            return _SyncControl(lanes, self.counters)
        if policy in ("frontier", "mimd"):
            return _GroupControl(lanes, self.counters, mimd=policy == "mimd")
        return _PdomControl(lanes, self.counters)

    def _registers(self) -> dict[str, np.ndarray]:
        """One zeroed array per variable of the kernel; parameters preset in every thread."""
        names = list(self.kernel.params)
        for instr in self.kernel.instructions():
            names.extend(instr.used_vars)
            if instr.dest is not None:
                names.append(instr.dest)
        regs = {name: np.zeros(self.threads, dtype=np.int64) for name in dict.fromkeys(names)}
        for name in self.kernel.params:
            regs[name][:] = wrap(int(self.config.params.get(name, 0)))
        return regs

    def _getter(self, operand: ir.Operand) -> Callable[[np.ndarray], np.ndarray]:
        """A function from active lanes to the operand's values (arrays are updated in place)."""
        if isinstance(operand, ir.Const):
            value = np.int64(wrap(operand.value))
            return lambda lanes: value
        if isinstance(operand, ir.Special):
            if operand.name not in self.specials:
                raise ValueError(f"unknown special register '{operand.name}'")
            values = self.specials[operand.name]
        else:
            values = self.regs[operand.name]
        return lambda lanes: values[lanes]

    def _prepare(self) -> list[_Op]:
        """Resolve operands, branch targets and (ipdom mode) reconvergence points."""
        start: dict[str, int] = {}
        count = 0
        for block in self.kernel.blocks:
            start[block.label] = count  # an empty block starts where the next one does
            count += len(block.instructions)
        ipdom = self._ipdom_pcs(start, count) if self.config.reconvergence == "ipdom" else {}
        ops: list[_Op] = []
        user_label: str | None = None
        for block in self.kernel.blocks:
            if block.user_label:
                user_label = block.label
            for instr in block.instructions:
                op = _Op(instr, len(ops), block.label, user_label,
                         [self._getter(a) for a in instr.args])
                if instr.target is not None:
                    op.target = start[instr.target]
                op.rpc = ipdom.get(block.label, -1)
                ops.append(op)
        return ops

    def _ipdom_pcs(self, start: dict[str, int], end: int) -> dict[str, int]:
        """First pc of each block's immediate post-dominator (the end pc for the exit)."""
        points = cfg_module.reconvergence_points(cfg_module.build_cfg(self.kernel))
        return {label: end if post == cfg_module.EXIT else start[post]
                for label, post in points.items()}

    # -- errors ---------------------------------------------------------------------------

    def _error(self, pc: int, lanes, message: str) -> ExecutionError:
        """An ExecutionError located at pc (the last instruction when pc is the end)."""
        if not self.ops:
            return ExecutionError(self.kernel.name, self.kernel.loc.line, None,
                                  [int(t) for t in lanes], message)
        op = self.ops[min(pc, self.end - 1)]
        return ExecutionError(self.kernel.name, op.instr.loc.line, op.label,
                              [int(t) for t in lanes], message)

    # -- scheduling -----------------------------------------------------------------------

    def run(self) -> RunResult:
        """Run all warps round-robin, releasing barriers, until every warp has stopped."""
        while True:
            for w in range(len(self.controls)):
                if self.waiting[w] is None and self.controls[w].current() is not None:
                    self._run_warp(w)
            live = [w for w in range(len(self.controls)) if self.controls[w].current()]
            if not live:
                break
            # Every live warp now waits at a barrier.
            if len(live) < len(self.controls):
                w = live[0]
                gone = [v for v in range(len(self.controls)) if v not in live]
                raise self._error(self.waiting[w], self.controls[w].unfinished(),
                                  f"barrier not reached by all warps (warp(s) "
                                  f"{', '.join(map(str, gone))} finished without it)")
            for w in live:
                self.controls[w].goto(self.waiting[w] + 1)
                self.waiting[w] = None
        return RunResult(
            shared=dict(self.shared),
            local=self.local,
            registers={name: values.tolist() for name, values in self.regs.items()},
            counters=self.counters,
            trace=self.trace)

    def _run_warp(self, w: int) -> None:
        """Run warp w until it stops or waits at a barrier."""
        control = self.controls[w]
        ops = self.ops
        self._run_lanes(w, control, ops)
        parked = getattr(control, "parked", None)
        if parked is not None:  # frontier/mimd: the groups left all wait at a barrier
            pc = None

            def gather():
                nonlocal pc
                pc = parked()
            self._control(self.end, gather)
            if pc is not None:
                self.waiting[w] = pc

    def _run_lanes(self, w: int, control, ops: list[_Op]) -> None:
        """Run the lanes of warp w until none can go on."""
        while (state := control.current()) is not None:
            pc, active = state
            if pc >= self.end:  # falling off the end acts like `stop`
                self._control(pc, control.stop)
                continue
            op = ops[pc]
            self._account(w, op, active)
            kind = op.instr.kind
            if kind == ir.BARRIER:
                arrived = False

                def arrive(pc=pc):
                    nonlocal arrived
                    arrived = control.arrive(pc)
                self._control(pc, arrive)
                if arrived:
                    self.waiting[w] = pc
                    return
                continue
            handler = self._handlers.get(kind)
            if handler is None:
                raise self._error(pc, active, f"unsupported instruction kind '{kind}'")
            handler(self, op, control, active)
            if (kind in (ir.BRANCH, ir.JUMP) and op.target <= pc
                    and self.counters.warp_instructions > DETECT_AFTER):
                self._detect(w, op, active)

    def _detect(self, w: int, op: _Op, active: np.ndarray) -> None:
        """At a backward transfer of a long run: stop if the machine's state repeats
        (sampled every 8th time; a warp runs alone until a barrier or its end)."""
        self.backward += 1
        if self.backward % 8:
            return
        parts = [str(w).encode(), str(self.waiting).encode()]
        parts += [c.state() for c in self.controls]
        parts += [v.tobytes() for v in self.regs.values()]
        parts.append(str(sorted(self.shared.items())).encode())
        parts.append(str([sorted(m.items()) for m in self.local]).encode())
        if not self.cycles.seen(fingerprint(parts)):
            return
        control = self.controls[w]
        waiting = [(lanes, pc) for lanes, pc in control.waiting() if len(lanes)]
        lines = [self.ops[min(pc, self.end - 1)].instr.loc.line for _, pc in waiting]
        others = np.unique(np.concatenate([lanes for lanes, _ in waiting])) if waiting \
            else _EMPTY
        target = self.ops[op.target].instr.loc.line
        message = deadlock_message(self.kernel.name, op.instr.loc.line, active.tolist(),
                                   target, others.tolist() or None, lines[0] if lines else None)
        raise DeadlockError(self.kernel.name, op.instr.loc.line, op.label,
                            active.tolist(), message)

    def _account(self, w: int, op: _Op, active: np.ndarray) -> None:
        """Enforce the step budget, count, trace and notify the observer."""
        counters = self.counters
        if counters.warp_instructions >= self.budget:
            what = "thread steps (mimd)" if self.config.reconvergence == "mimd" else "warp steps"
            raise self._error(op.index, active, f"did not finish within {self.budget} {what}")
        counters.warp_instructions += 1
        counters.lane_instructions += len(active)
        if self.tracing:
            self.trace.append(TraceStep(counters.warp_instructions, w, op.instr.loc.line,
                                        op.block, op.instr.text, active.tolist()))
        if self.observer is not None:
            self.observer.before(w, op.instr.id, active, lambda name: self._read(name, active))

    def _read(self, name: str, active: np.ndarray) -> np.ndarray:
        """Values of a variable or special register in the active lanes."""
        if name in self.regs:
            return self.regs[name][active]
        if name in self.specials:
            return self.specials[name][active]
        return np.zeros(len(active), dtype=np.int64)

    def _control(self, pc: int, action: Callable[[], None]) -> None:
        """Run a control-stack action, turning its faults into located errors."""
        try:
            action()
        except _Fault as fault:
            raise self._error(pc, fault.lanes, fault.message) from None

    # -- instructions ---------------------------------------------------------------------

    def _assign(self, op: _Op, control, active: np.ndarray) -> None:
        """Copy, unary or binary operation in every active lane."""
        instr = op.instr
        values = [get(active) for get in op.getters]
        table = _BINARY if len(values) == 2 else _UNARY
        entry = table.get(instr.operator or "copy")
        if entry is None:
            raise self._error(op.index, active, f"unknown operator '{instr.operator}'")
        func, wraps = entry
        if instr.operator in ("/", "%"):
            zero = np.broadcast_to(values[1] == 0, active.shape)
            if zero.any():
                raise self._error(op.index, active[zero], "division by zero")
        result = func(*values)
        self.regs[instr.dest][active] = wrap(result) if wraps else result
        control.goto(op.index + 1)

    def _addresses(self, op: _Op, active: np.ndarray) -> list[int]:
        """The address operand of a memory instruction, one int per active lane."""
        return np.broadcast_to(op.getters[0](active), active.shape).tolist()

    def _memory(self, op: _Op, active: np.ndarray, tid: int) -> dict[int, int]:
        """The memory a lane addresses: the block's shared memory or its own local one."""
        space = op.instr.space
        if space == "shared":
            return self.shared
        if space == "local":
            return self.local[tid]
        raise self._error(op.index, active, f"unknown memory space '{space}'")

    def _load(self, op: _Op, control, active: np.ndarray) -> None:
        """v = space[a] in every active lane (unwritten cells read 0)."""
        addresses = self._addresses(op, active)
        values = [self._memory(op, active, t).get(a, 0)
                  for t, a in zip(active.tolist(), addresses, strict=True)]
        self.regs[op.instr.dest][active] = values
        control.goto(op.index + 1)

    def _store(self, op: _Op, control, active: np.ndarray) -> None:
        """space[a] = v, lanes in ascending tid order (so the highest tid wins a race)."""
        addresses = self._addresses(op, active)
        values = np.broadcast_to(op.getters[1](active), active.shape).tolist()
        for t, a, v in zip(active.tolist(), addresses, values, strict=True):
            self._memory(op, active, t)[a] = v
        control.goto(op.index + 1)

    def _atomic(self, op: _Op, control, active: np.ndarray) -> None:
        """atominc/atomadd: lanes one at a time in tid order; each gets the new value."""
        instr = op.instr
        if instr.operator == "inc":
            amounts = [1] * len(active)
        elif instr.operator == "add":
            amounts = np.broadcast_to(op.getters[1](active), active.shape).tolist()
        else:
            raise self._error(op.index, active, f"unknown atomic operation '{instr.operator}'")
        addresses = self._addresses(op, active)
        results = []
        for t, a, amount in zip(active.tolist(), addresses, amounts, strict=True):
            memory = self._memory(op, active, t)
            memory[a] = wrap(memory.get(a, 0) + amount)
            results.append(memory[a])
        self.regs[instr.dest][active] = results
        control.goto(op.index + 1)

    def _branch(self, op: _Op, control, active: np.ndarray) -> None:
        """bz/bnz: split the active lanes into jumping and falling-through groups."""
        cond = np.broadcast_to(op.getters[0](active), active.shape)
        if op.instr.operator == "bz":
            jumps = cond == 0
        elif op.instr.operator == "bnz":
            jumps = cond != 0
        else:
            raise self._error(op.index, active, f"unknown branch '{op.instr.operator}'")
        if self.observer is not None:
            self.observer.branch(self._warp_of(active), op.instr.id, active, jumps)
        if 0 < int(jumps.sum()) < len(active):
            self.counters.divergent_branches += 1
        control.branch(op.index, op.target, jumps, op.rpc)

    def _warp_of(self, active: np.ndarray) -> int:
        """The warp that owns these (non-empty) lanes."""
        return int(active[0]) // self.width

    def _jump(self, op: _Op, control, active: np.ndarray) -> None:
        """Unconditional jump."""
        control.goto(op.target)

    def _sync(self, op: _Op, control, active: np.ndarray) -> None:
        """Reconvergence point (a no-op in ipdom mode)."""
        self._control(op.index, lambda: control.sync(op.index))

    def _stop(self, op: _Op, control, active: np.ndarray) -> None:
        """Halt the active lanes."""
        self._control(op.index, control.stop)

    _handlers = {
        ir.ASSIGN: _assign,
        ir.LOAD: _load,
        ir.STORE: _store,
        ir.ATOMIC: _atomic,
        ir.BRANCH: _branch,
        ir.JUMP: _jump,
        ir.SYNC: _sync,
        ir.STOP: _stop,
    }


def _check_config(config: LaunchConfig) -> None:
    """Reject launch configurations that cannot run."""
    if config.threads < 1:
        raise ValueError("threads must be at least 1")
    if config.warp_width < 1:
        raise ValueError("warp_width must be at least 1")
    if config.reconvergence not in RECONVERGENCE_MODES:
        raise ValueError(f"reconvergence must be one of {', '.join(RECONVERGENCE_MODES)}")
    if config.max_steps < 0:
        raise ValueError("max_steps must not be negative")


def reconvergence_for(kernel: ir.Kernel) -> str:
    """The scheme a kernel is written for: "sync" if it has `sync` instructions, else "ipdom".

    A kernel without any `sync` cannot run under the seed's semantics once it branches
    (every branch pushes a node that only `sync` pops), so it is meant for ipdom mode.
    """
    return "sync" if any(i.kind == ir.SYNC for i in kernel.instructions()) else "ipdom"


def run_kernel(kernel: ir.Kernel, config: LaunchConfig, observer: Observer | None = None,
               trace: bool = False) -> RunResult:
    """Run one block of `config.threads` threads of a kernel; raise ExecutionError on faults."""
    if config.reconvergence == "auto":
        config = replace(config, reconvergence=reconvergence_for(kernel))
    try:
        return _Machine(kernel, config, observer, trace).run()
    except DeadlockError as error:
        if not error.message.startswith("SIMT deadlock"):
            raise
        try:  # would the waiting lanes release the spinning ones if they could run?
            _Machine(kernel, replace(config, reconvergence="mimd"), None, False).run()
        except DeadlockError:
            error.message = never_released(error.message)
        except ExecutionError:
            pass
        raise


def time_slots(trace: list[TraceStep]) -> int:
    """Time slots of a traced run as Wu et al. (2011, Fig 3) count them: maximal runs of
    consecutive steps in which one warp executes one basic block with one set of lanes
    (a block that jumps back to itself starts a new slot)."""
    slots = 0
    previous = None
    line = 0
    for step in trace:
        key = (step.warp, step.label, tuple(step.active))
        if key != previous or step.line <= line:
            slots += 1
            previous = key
        line = step.line
    return slots


def format_trace(result: RunResult, threads: int) -> str:
    """A table like the thesis' Fig 3.4: one row per step, ✓ active / • inactive per thread."""
    width = max(len(f"t{threads - 1}"), 1)
    rows = [(str(s.step), str(s.warp), str(s.line), s.label, s.text, set(s.active))
            for s in result.trace]
    heads = ("step", "warp", "line", "label", "instruction")
    widths = [max([len(h)] + [len(r[k]) for r in rows]) for k, h in enumerate(heads)]

    def line(fields: tuple[str, ...], cells: list[str]) -> str:
        """One aligned row: numbers right-aligned, text left-aligned, then the cells."""
        left = [f.rjust(w) if k < 3 else f.ljust(w)
                for k, (f, w) in enumerate(zip(fields, widths, strict=True))]
        return "  ".join(left + [" ".join(c.center(width) for c in cells)]).rstrip()

    out = [line(heads, [f"t{t}" for t in range(threads)])]
    for *fields, active in rows:
        out.append(line(tuple(fields), ["✓" if t in active else "•" for t in range(threads)]))
    return "\n".join(out)
