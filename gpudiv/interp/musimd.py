"""Reference SIMD interpreter for kernels in the shared IR (written for μ-SIMD).

One thread block is split into warps; lanes of a warp run in lock-step with partial
execution (Sampaio 2013, Tables 3.3–3.5; notes §1.4–1.6). Warps run one at a time,
round-robin, each until it reaches a `barrier`, finishes, or fails. This module is the
μ-SIMD semantics of the shared SIMT engine (`gpudiv.interp.engine`: scheduler, step
loop, counters, deadlock detection); the reconvergence policies (`interp.policies`):

- "sync": the seed's explicit synchronisation stack. Every conditional branch pushes (or
  merges into) a node (branch, done, resume, todo); `sync` resumes the deferred lanes
  (rule SS) or pops and reunites (rule SP). Mismatched `sync`s are errors, never hangs.
- "ipdom": GPGPU-Sim's PDOM stack; lanes reconverge at the immediate post-dominator of
  the divergent branch, `sync` is a no-op. Runs unstructured control flow. A kernel
  without `sync` whose branches carry explicit reconvergence points (the IR annotation
  `engine.RECONVERGE_ATTR`) runs under "sync" on the same stack with those points.
- "frontier": earliest reconvergence; one group of lanes per pc, the lowest pc runs.
- "mimd": every thread on its own, round-robin one instruction at a time.
- "aware": AWARE's warp splits in FIFO order, reconverging at immediate post-dominators
  or the marked points, with `LaunchConfig.aware_timeout` (timed-out reconvergence).

A run whose state repeats stops with `DeadlockError` (SIMT deadlock or infinite loop).

Registers are numpy int64 arrays indexed by thread id, always holding values wrapped to
signed 32 bits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from gpudiv import ir
from gpudiv.interp.engine import (  # noqa: F401 - Observer is re-exported
    BARRIER,
    BRANCH,
    EXEC,
    FAIL,
    JUMP,
    STOP,
    SYNC,
    Engine,
    Observer,
    Warp,
    has_marks,
    reconvergence_pcs,
)
from gpudiv.interp.policies import AWARE_TIMEOUT, control_for
from gpudiv.interp.simt import (  # noqa: F401 - re-exported: the μ-SIMD machine's API
    DETECT_AFTER,
    RECONVERGENCE_MODES,
    Counters,
    DeadlockError,
    ExecutionError,
    format_lanes,
    never_released,
)

SPECIAL_NAMES = ("tid", "laneid", "warpid", "ntid")

# Bytes a launch may allocate for registers and thread-private memory, checked up front.
MAX_LAUNCH_BYTES = 2 * 1024**3
_THREAD_OVERHEAD_BYTES = 128  # per thread: its local-memory dict, lane ids, specials
_WARP_OVERHEAD_BYTES = 1024  # per warp: its reconvergence stack
# Backward transfers after which a warp running alone yields (μ-SIMD runs a warp until
# a barrier: the yield only lets the engine look for a repeated state). Counting
# transfers, not steps, keeps the sampled states of a cycle few (at most the transfers
# of one trip round it).
DETECT_QUANTUM = 32


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
    # `aware`: warp steps that lanes wait at a reconvergence point before they go on
    # without the others (AWARE's timed-out reconvergence); None: they wait forever.
    aware_timeout: int | None = AWARE_TIMEOUT


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


# ---------------------------------------------------------------------------------------
# The machine: the μ-SIMD semantics of the shared engine (`gpudiv.interp.engine`)
# ---------------------------------------------------------------------------------------

_CODES = {ir.ASSIGN: EXEC, ir.LOAD: EXEC, ir.STORE: EXEC, ir.ATOMIC: EXEC,
          ir.BRANCH: BRANCH, ir.JUMP: JUMP, ir.SYNC: SYNC, ir.STOP: STOP,
          ir.BARRIER: BARRIER}


@dataclass
class _Op:
    """An instruction prepared for execution: resolved operands, targets and location."""

    instr: ir.Instruction
    index: int
    block: str
    label: str | None
    getters: list[Callable]
    code: int = FAIL
    fn: Callable | None = None
    target: int = -1
    rpc: int = -1
    collective: bool = False
    message: str = ""


class _Machine:
    """Runs one kernel on one block of threads."""

    def __init__(self, kernel: ir.Kernel, config: LaunchConfig,
                 observer: Observer | None, trace: bool) -> None:
        _check_config(config)
        self.kernel = kernel
        names = self._register_names()
        warps = -(-config.threads // config.warp_width)
        need = (config.threads * (8 * (len(names) + len(SPECIAL_NAMES))
                                  + _THREAD_OVERHEAD_BYTES) + warps * _WARP_OVERHEAD_BYTES)
        if need > MAX_LAUNCH_BYTES:
            raise ValueError(f"{config.threads} threads of kernel {kernel.name} need about "
                             f"{need // 2**20} MiB of registers (at most "
                             f"{MAX_LAUNCH_BYTES // 2**20} MiB): use fewer threads")
        self.config = config
        self.trace: list[TraceStep] = []
        self.threads = config.threads
        width = config.warp_width
        self.width = width
        tids = np.arange(self.threads, dtype=np.int64)
        self.specials = {"tid": tids, "laneid": tids % width, "warpid": tids // width,
                         "ntid": np.full(self.threads, self.threads, dtype=np.int64)}
        self.regs = self._registers(names)
        self.shared = {int(k): _wrapped(v) for k, v in config.shared.items()}
        self.local: list[dict[int, int]] = [{} for _ in range(self.threads)]
        self.counters = Counters(warp_width=width)
        self.policy = policy = _machine_policy(kernel, config.reconvergence)
        self.ops = self._prepare()
        self.end = len(self.ops)
        self.warps = [Warp(w, control_for(policy, tids[w * width:(w + 1) * width].copy(),
                                          self.counters, config.aware_timeout))
                      for w in range(warps)]
        # mimd issues one thread's instruction per step: its budget is width times larger
        mimd = policy == "mimd"
        self.engine = Engine(self, kernel.name, self.counters,
                             config.max_steps * (width if mimd else 1),
                             "thread steps (mimd)" if mimd else "warp steps",
                             observer, trace, sticky=True, quantum=DETECT_QUANTUM,
                             per_backward=True)

    def _register_names(self) -> list[str]:
        """Every variable of the kernel, parameters first, each once."""
        names = list(self.kernel.params)
        for instr in self.kernel.instructions():
            names.extend(instr.used_vars)
            if instr.dest is not None:
                names.append(instr.dest)
        return list(dict.fromkeys(names))

    def _registers(self, names: list[str]) -> dict[str, np.ndarray]:
        """One zeroed array per variable of the kernel; parameters preset in every thread."""
        regs = {name: np.zeros(self.threads, dtype=np.int64) for name in names}
        for name in self.kernel.params:
            regs[name][:] = wrap(int(self.config.params.get(name, 0)))
        return regs

    def _getter(self, operand: ir.Operand) -> Callable:
        """A function from a lane selector to the operand's values (arrays are updated in
        place; a constant is one scalar for all lanes)."""
        if isinstance(operand, ir.Const):
            value = np.int64(wrap(operand.value))
            return lambda sel: value
        if isinstance(operand, ir.Special):
            if operand.name not in self.specials:
                raise ValueError(f"unknown special register '{operand.name}'")
            values = self.specials[operand.name]
        else:
            values = self.regs[operand.name]
        return values.__getitem__

    def _prepare(self) -> list[_Op]:
        """Resolve operands, branch targets and reconvergence points; compile each
        instruction to a function of the lanes."""
        start: dict[str, int] = {}
        count = 0
        for block in self.kernel.blocks:
            start[block.label] = count  # an empty block starts where the next one does
            count += len(block.instructions)
        policy = self.policy
        rpcs = reconvergence_pcs(self.kernel, start, count, policy in ("marked", "aware")) \
            if policy in ("ipdom", "marked", "aware") else {}
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
                op.rpc = rpcs.get(block.label, -1)
                self._compile(op)
                ops.append(op)
        return ops

    def _compile(self, op: _Op) -> None:
        """The control code of an instruction and, for EXEC, its function."""
        instr = op.instr
        op.code = _CODES.get(instr.kind, FAIL)
        if op.code == FAIL:
            op.message = f"unsupported instruction kind '{instr.kind}'"
        elif instr.kind == ir.ASSIGN:
            op.fn = self._assign(op)
        elif instr.kind == ir.LOAD:
            op.fn = self._load
        elif instr.kind == ir.STORE:
            op.fn = self._store
        elif instr.kind == ir.ATOMIC:
            op.fn = self._atomic

    # -- errors ---------------------------------------------------------------------------

    def error(self, pc: int, lanes, warp: int, message: str) -> ExecutionError:
        """An ExecutionError located at pc (the last instruction when pc is the end)."""
        if not self.ops:
            return ExecutionError(self.kernel.name, self.kernel.loc.line, None,
                                  [int(t) for t in lanes], message)
        op = self.ops[min(pc, self.end - 1)]
        return ExecutionError(self.kernel.name, op.instr.loc.line, op.label,
                              [int(t) for t in lanes], message)

    def _error(self, pc: int, lanes, message: str) -> ExecutionError:
        return self.error(pc, lanes, 0, message)

    # -- the engine's hooks ---------------------------------------------------------------

    def run(self) -> RunResult:
        """Run all warps round-robin, releasing barriers, until every warp has stopped."""
        self.engine.run_block(self.warps)
        return RunResult(
            shared=dict(self.shared),
            local=self.local,
            registers={name: values.tolist() for name, values in self.regs.items()},
            counters=self.counters,
            trace=self.trace)

    def execute(self, op: _Op, top: list, warp: int) -> None:
        """Run an assignment, load, store or atomic in the lanes of `top`."""
        op.fn(op, top[2], top[1])

    def jumps(self, op: _Op, top: list, warp: int) -> np.ndarray:
        """bz/bnz: which lanes jump."""
        lanes = top[1]
        cond = _per_lane(op.getters[0](top[2]), len(lanes))
        if op.instr.operator == "bz":
            return cond == 0
        if op.instr.operator == "bnz":
            return cond != 0
        raise self._error(op.index, lanes, f"unknown branch '{op.instr.operator}'")

    def barrier_held(self, op: _Op, top: list) -> None:
        """μ-SIMD barriers are never guarded."""
        return None

    def record(self, step: int, op: _Op, warp: int, lanes: np.ndarray) -> None:
        """One row of the trace."""
        self.trace.append(TraceStep(step, warp, op.instr.loc.line, op.block, op.instr.text,
                                    lanes.tolist()))

    def reader(self, lanes: np.ndarray) -> Callable[[str], np.ndarray]:
        """Values of a variable or special register in the lanes."""
        return lambda name: self._read(name, lanes)

    def _read(self, name: str, active: np.ndarray) -> np.ndarray:
        """Values of a variable or special register in the active lanes."""
        if name in self.regs:
            return self.regs[name][active]
        if name in self.specials:
            return self.specials[name][active]
        return np.zeros(len(active), dtype=np.int64)

    def release(self, warps: list[Warp]) -> None:
        """Nothing to compute when a barrier releases."""

    def state(self) -> list[bytes]:
        """Registers and memories as bytes."""
        # Memories in insertion order: cells are never removed, so in a cycle (no new
        # cells) equal states print alike.
        parts = [v.tobytes() for v in self.regs.values()]
        parts.append(repr(self.shared).encode())
        parts.append(repr(self.local).encode())
        return parts

    def deadlock(self, warp: int, line: int, lanes: np.ndarray, message: str) -> DeadlockError:
        """The error for a run that repeats forever."""
        op = next((o for o in self.ops if o.instr.loc.line == line), None)
        return DeadlockError(self.kernel.name, line, op.label if op else None,
                             lanes.tolist(), message)

    def lane_ids(self, lanes: np.ndarray) -> list[int]:
        """μ-SIMD messages name thread ids."""
        return [int(t) for t in lanes]

    # -- instructions ---------------------------------------------------------------------

    def _assign(self, op: _Op) -> Callable:
        """Copy, unary or binary operation in every active lane."""
        instr = op.instr
        table = _BINARY if len(op.getters) == 2 else _UNARY
        entry = table.get(instr.operator or "copy")
        if entry is None:
            message = f"unknown operator '{instr.operator}'"

            def unknown(op, sel, lanes):
                raise self._error(op.index, lanes, message)
            return unknown
        func, wraps = entry
        dest = self.regs[instr.dest]
        if len(op.getters) == 1:
            (g0,) = op.getters
            if wraps:
                def unary(op, sel, lanes):
                    dest[sel] = wrap(func(g0(sel)))
            else:
                def unary(op, sel, lanes):
                    dest[sel] = func(g0(sel))
            return unary
        g0, g1 = op.getters
        if instr.operator in ("/", "%"):
            def divide(op, sel, lanes):
                divisor = g1(sel)
                zero = _per_lane(divisor == 0, len(lanes))
                if zero.any():
                    raise self._error(op.index, lanes[zero], "division by zero")
                dest[sel] = wrap(func(g0(sel), divisor))
            return divide
        if wraps:
            def binary(op, sel, lanes):
                dest[sel] = wrap(func(g0(sel), g1(sel)))
        else:
            def binary(op, sel, lanes):
                dest[sel] = func(g0(sel), g1(sel))
        return binary

    def _addresses(self, op: _Op, sel, lanes: np.ndarray) -> list[int]:
        """The address operand of a memory instruction, one int per active lane."""
        return _per_lane(op.getters[0](sel), len(lanes)).tolist()

    def _memory(self, op: _Op, lanes: np.ndarray, tid: int) -> dict[int, int]:
        """The memory a lane addresses: the block's shared memory or its own local one."""
        space = op.instr.space
        if space == "shared":
            return self.shared
        if space == "local":
            return self.local[tid]
        raise self._error(op.index, lanes, f"unknown memory space '{space}'")

    def _load(self, op: _Op, sel, lanes: np.ndarray) -> None:
        """v = space[a] in every active lane (unwritten cells read 0)."""
        addresses = self._addresses(op, sel, lanes)
        if op.instr.space == "shared":
            get = self.shared.get
            values = [get(a, 0) for a in addresses]
        else:
            values = [self._memory(op, lanes, t).get(a, 0)
                      for t, a in zip(lanes.tolist(), addresses, strict=True)]
        self.regs[op.instr.dest][sel] = values

    def _store(self, op: _Op, sel, lanes: np.ndarray) -> None:
        """space[a] = v, lanes in ascending tid order (so the highest tid wins a race)."""
        addresses = self._addresses(op, sel, lanes)
        values = _per_lane(op.getters[1](sel), len(lanes)).tolist()
        if op.instr.space == "shared":
            self.shared.update(zip(addresses, values, strict=True))
            return
        for t, a, v in zip(lanes.tolist(), addresses, values, strict=True):
            self._memory(op, lanes, t)[a] = v

    def _atomic(self, op: _Op, sel, lanes: np.ndarray) -> None:
        """atominc/atomadd: lanes one at a time in tid order; each gets the new value."""
        instr = op.instr
        if instr.operator == "inc":
            amounts = [1] * len(lanes)
        elif instr.operator == "add":
            amounts = _per_lane(op.getters[1](sel), len(lanes)).tolist()
        else:
            raise self._error(op.index, lanes, f"unknown atomic operation '{instr.operator}'")
        addresses = self._addresses(op, sel, lanes)
        results = []
        for t, a, amount in zip(lanes.tolist(), addresses, amounts, strict=True):
            memory = self._memory(op, lanes, t)
            memory[a] = wrap(memory.get(a, 0) + amount)
            results.append(memory[a])
        self.regs[instr.dest][sel] = results



def _per_lane(values, n: int) -> np.ndarray:
    """Values of an operand as one array entry per lane (a constant is one scalar)."""
    if type(values) is np.ndarray:
        return values
    return np.full(n, values)


def _wrapped(value: int) -> int:
    """An integer wrapped to 32 bits (most already are)."""
    value = int(value)
    return value if -2**31 <= value < 2**31 else int(wrap(value))


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
    if config.aware_timeout is not None and config.aware_timeout < 1:
        raise ValueError("aware_timeout must be at least 1 (None: no timeout)")


def reconvergence_for(kernel: ir.Kernel) -> str:
    """The scheme a kernel is written for: "sync" if it has `sync` instructions or
    branches with explicit reconvergence points, else "ipdom".

    A kernel without any `sync` cannot run under the seed's semantics once it branches
    (every branch pushes a node that only `sync` pops), so it is meant for ipdom mode.
    """
    return "sync" if _has_sync(kernel) or has_marks(kernel) else "ipdom"


def _has_sync(kernel: ir.Kernel) -> bool:
    """Whether the kernel has μ-SIMD `sync` instructions."""
    return any(i.kind == ir.SYNC for i in kernel.instructions())


def _machine_policy(kernel: ir.Kernel, policy: str) -> str:
    """The control a policy means for this kernel: "sync" without `sync` instructions
    but with marked branches is the PDOM stack at the marked points ("marked")."""
    if policy == "sync" and not _has_sync(kernel) and has_marks(kernel):
        return "marked"
    return policy


def run_kernel(kernel: ir.Kernel, config: LaunchConfig, observer: Observer | None = None,
               trace: bool = False) -> RunResult:
    """Run one block of `config.threads` threads of a kernel; raise ExecutionError on faults."""
    if config.reconvergence == "auto":
        config = replace(config, reconvergence=reconvergence_for(kernel))
    machine = _Machine(kernel, config, observer, trace)
    try:
        return machine.run()
    except DeadlockError as error:
        error.trace = machine.trace  # so that a trace can be shown up to the stop
        if not error.message.startswith("SIMT deadlock"):
            raise
        try:  # would the waiting lanes release the spinning ones if they could run?
            _Machine(kernel, replace(config, reconvergence="mimd"), None, False).run()
        except DeadlockError:
            error.message = never_released(error.message)
        except ExecutionError:
            pass
        raise
    except ExecutionError as error:
        error.trace = machine.trace  # so that a trace can be shown up to the fault
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
    return format_steps(result.trace, threads)


def format_steps(steps: list[TraceStep], threads: int) -> str:
    """The trace table of `format_trace` for a list of steps (e.g. up to a fault)."""
    width = max(len(f"t{threads - 1}"), 1)
    rows = [(str(s.step), str(s.warp), str(s.line), s.label, s.text, set(s.active))
            for s in steps]
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
