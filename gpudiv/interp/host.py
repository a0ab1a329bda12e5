"""The host-program interpreter: runs a `gpudiv.ir.host.HostProgram` statement by
statement and each launch on the SIMD interpreters (README "Host programs and kernel
fusion").

Host scalars are 32-bit integers (C semantics for `/` and `%`; `&&`, `||`, comparisons
give 0 or 1); host arrays and device buffers hold 32-bit words. A μ-SIMD kernel sees
device memory as its `shared` memory: buffer number i (in `malloc` order, from 1) starts
at address i·2^20; a launch of `grid` blocks runs the blocks one after the other, each
with its `ctaid` (and `nctaid`) parameter set, under `ipdom` reconvergence. A PTX kernel
gets its buffers as int32 arrays (one block shape per launch, the grid in x).

Counted per run: launches, blocks, warp and lane instructions, and global-memory traffic
of μ-SIMD kernels: memory warp instructions, lane accesses and transactions (the distinct
aligned 32-word segments one warp instruction touches).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gpudiv import ir
from gpudiv.interp.musimd import ExecutionError, LaunchConfig, run_kernel, wrap
from gpudiv.interp.ptx import PtxLaunch, run_ptx_kernel
from gpudiv.interp.ptx_calls import executable_form
from gpudiv.ir import host as h
from gpudiv.lang.host.parse import IMPLICIT_PARAMS, explicit_params

BUFFER_STRIDE = 1 << 20
MAX_BUFFER_WORDS = BUFFER_STRIDE
SEGMENT_WORDS = 32
MAX_HOST_STEPS = 1_000_000


class HostRunError(Exception):
    """A host program that fails while running: one `FILE:LINE:COL: error:` line."""


@dataclass
class HostCounters:
    """What a run of a host program did."""

    launches: int = 0
    blocks: int = 0
    warp_instructions: int = 0
    lane_instructions: int = 0
    memory_instructions: int = 0
    memory_accesses: int = 0
    transactions: int = 0
    host_steps: int = 0
    per_kernel: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict:
        """The counters as plain data."""
        return dict(self.__dict__)


@dataclass
class HostRun:
    """Final host values and device buffers of a run, and its counters."""

    inputs: dict[str, int]
    scalars: dict[str, int]
    arrays: dict[str, list[int]]
    buffers: dict[str, list[int] | None]  # None: freed
    counters: HostCounters

    def values(self) -> dict[str, object]:
        """Every final value by variable name (what `--verify` compares)."""
        return {**self.scalars, **self.arrays, **self.buffers}


class _Traffic:
    """A μ-SIMD observer counting global-memory instructions, accesses, transactions."""

    def __init__(self, kernel: ir.Kernel, counters: HostCounters) -> None:
        self.memory = {i.id: i.args[0] for i in kernel.instructions()
                       if i.kind in (ir.LOAD, ir.STORE, ir.ATOMIC) and i.space == "shared"}
        self.counters = counters

    def before(self, warp, instruction, active, read) -> None:
        """Count one warp instruction if it touches memory."""
        address = self.memory.get(instruction)
        if address is None:
            return
        if isinstance(address, ir.Const):
            values = np.full(len(active), address.value)
        else:
            values = read(address.name)
        self.counters.memory_instructions += 1
        self.counters.memory_accesses += len(active)
        self.counters.transactions += len(set((values // SEGMENT_WORDS).tolist()))

    def branch(self, warp, instruction, active, jumps) -> None:
        """Branches are not counted here."""


class _Host:
    """The state of one run."""

    def __init__(self, prog: h.HostProgram, inputs: dict[str, int]) -> None:
        self.prog = prog
        self.scalars: dict[str, int] = dict(inputs)
        self.arrays: dict[str, np.ndarray] = {}
        self.buffer_of: dict[str, int] = {}
        self.allocations: list[np.ndarray | None] = [None]  # number 0 is never used
        self.counters = HostCounters()

    def error(self, loc: ir.Loc, message: str) -> HostRunError:
        """A run-time error at a place of the host file."""
        return HostRunError(f"{self.prog.path}:{loc.line}:{loc.column}: error: {message}")

    # -- values -------------------------------------------------------------------------

    def eval(self, e: h.Expr, loc: ir.Loc) -> int:
        """The value of a scalar expression."""
        if isinstance(e, h.Num):
            return int(wrap(e.value))
        if isinstance(e, h.Name):
            if e.name not in self.scalars:
                raise self.error(e.loc or loc, f"'{e.name}' is read before it is assigned")
            return self.scalars[e.name]
        if isinstance(e, h.Index):
            array = self.array(e.array, e.loc)
            i = self.eval(e.index, loc)
            if not 0 <= i < len(array):
                raise self.error(e.loc, f"index {i} outside '{e.array}' ({len(array)} elements)")
            return int(array[i])
        if isinstance(e, h.Unary):
            v = self.eval(e.operand, loc)
            return int(wrap(-v)) if e.op == "-" else int(v == 0)
        if isinstance(e, h.Binary):
            return self.binary(e, loc)
        raise self.error(loc, f"'{e}' is not a number")

    def binary(self, e: h.Binary, loc: ir.Loc) -> int:
        """`a OP b` on 32-bit integers."""
        a = self.eval(e.left, loc)
        if e.op == "&&":
            return int(a != 0 and self.eval(e.right, loc) != 0)
        if e.op == "||":
            return int(a != 0 or self.eval(e.right, loc) != 0)
        b = self.eval(e.right, loc)
        if e.op in ("/", "%") and b == 0:
            raise self.error(e.loc, "division by zero")
        ops = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
               "/": lambda: abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1),
               "%": lambda: a - b * (abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)),
               "<": lambda: a < b, "<=": lambda: a <= b, ">": lambda: a > b,
               ">=": lambda: a >= b, "==": lambda: a == b, "!=": lambda: a != b}
        return int(wrap(int(ops[e.op]())))

    def array(self, name: str, loc: ir.Loc) -> np.ndarray:
        """A host array that exists."""
        if name not in self.arrays:
            raise self.error(loc, f"host array '{name}' is used before it is created")
        return self.arrays[name]

    def buffer(self, e: h.Expr, loc: ir.Loc) -> tuple[int, np.ndarray]:
        """The allocation a buffer variable names (not freed)."""
        name = str(e)
        if name not in self.buffer_of:
            raise self.error(getattr(e, "loc", loc), f"buffer '{name}' is used before malloc")
        number = self.buffer_of[name]
        data = self.allocations[number]
        if data is None:
            raise self.error(getattr(e, "loc", loc), f"use of freed buffer '{name}'")
        return number, data

    # -- statements ---------------------------------------------------------------------

    def assign(self, stmt: h.Assign, loc: ir.Loc) -> None:
        """`v = e`, `v = malloc(n)`, `v = array(n)`, `b1 = b2`."""
        value, kind = stmt.value, self.prog.types[stmt.target]
        if isinstance(value, h.Func):
            size = self.eval(value.args[0], loc)
            if not 0 <= size <= MAX_BUFFER_WORDS:
                raise self.error(loc, f"{value.name}({size}): size outside 0..{MAX_BUFFER_WORDS}")
            if value.name == "malloc":
                self.allocations.append(np.zeros(size, dtype=np.int64))
                self.buffer_of[stmt.target] = len(self.allocations) - 1
            else:
                self.arrays[stmt.target] = np.zeros(size, dtype=np.int64)
        elif kind == h.BUFFER:
            self.buffer_of[stmt.target] = self.buffer(value, loc)[0]
        elif kind == h.ARRAY:
            self.arrays[stmt.target] = self.array(str(value), loc).copy()
        else:
            self.scalars[stmt.target] = self.eval(value, loc)

    def call(self, stmt: h.Call, loc: ir.Loc) -> None:
        """memcpy, memset, free, sync."""
        if stmt.name == "memcpy":
            dst, src = stmt.args
            target = self.storage(dst, loc)
            source = self.storage(src, loc)
            if len(target) != len(source):
                raise self.error(loc, f"memcpy between {len(target)} and {len(source)} elements")
            target[:] = source
        elif stmt.name == "memset":
            _, data = self.buffer(stmt.args[0], loc)
            data[:] = self.eval(stmt.args[1], loc)
        elif stmt.name == "free":
            number, _ = self.buffer(stmt.args[0], loc)
            self.allocations[number] = None

    def storage(self, e: h.Expr, loc: ir.Loc) -> np.ndarray:
        """The words of a buffer or host array argument."""
        if self.prog.types.get(str(e)) == h.BUFFER:
            return self.buffer(e, loc)[1]
        return self.array(str(e), loc)

    def launch(self, stmt: h.Launch, loc: ir.Loc) -> None:
        """Run every block of a launch on the interpreter."""
        ref = self.prog.kernels[stmt.kernel]
        grid, block = self.eval(stmt.grid, loc), self.eval(stmt.block, loc)
        if grid < 1 or block < 1:
            raise self.error(loc, f"launch shape <<<{grid}, {block}>>>: both must be positive")
        args: dict[str, object] = {}
        buffers: dict[str, int] = {}
        for param, arg in zip(explicit_params(ref), stmt.args, strict=True):
            if param in ref.pointer_params:
                buffers[param] = self.buffer(arg, loc)[0]
            else:
                args[param] = self.eval(arg, loc)
        c = self.counters
        c.launches += 1
        c.blocks += grid
        c.per_kernel[stmt.kernel] = c.per_kernel.get(stmt.kernel, 0) + 1
        try:
            if ref.language == "musimd":
                self.launch_musimd(ref, stmt, grid, block, args, buffers)
            else:
                self.launch_ptx(ref, grid, block, args, buffers)
        except (ExecutionError, HostRunError) as error:
            message = str(error).split(" error: ", 1)[-1]
            raise self.error(loc, f"launch of {stmt.kernel} failed: {message}") from None

    def launch_musimd(self, ref: h.KernelRef, stmt: h.Launch, grid: int, block: int,
                      args: dict[str, object], buffers: dict[str, int]) -> None:
        """Blocks one after the other, device memory as the kernel's shared memory."""
        memory: dict[int, int] = {}
        for number in set(buffers.values()):
            base = number * BUFFER_STRIDE
            memory.update({base + i: int(v) for i, v in enumerate(self.allocations[number])})
        params = {**args, **{p: n * BUFFER_STRIDE for p, n in buffers.items()}}
        observer = _Traffic(ref.kernel, self.counters)
        for b in range(grid):
            implicit = {"ctaid": b, "nctaid": grid}
            config = LaunchConfig(block, 32, {**params, **{p: implicit[p] for p in
                                                          IMPLICIT_PARAMS
                                                          if p in ref.kernel.params}},
                                  memory, reconvergence="ipdom")
            result = run_kernel(ref.kernel, config, observer)
            memory = result.shared
            self.counters.warp_instructions += result.counters.warp_instructions
            self.counters.lane_instructions += result.counters.lane_instructions
        owned = set(buffers.values())
        for address, value in memory.items():
            number, offset = divmod(address, BUFFER_STRIDE)
            data = self.allocations[number] if number in owned else None
            if data is None or offset >= len(data):  # reads never add cells: a write
                raise HostRunError(f"{self.prog.path}: error: kernel {stmt.kernel} wrote "
                                   f"address {address}, outside the buffers it was given")
            data[offset] = value

    def launch_ptx(self, ref: h.KernelRef, grid: int, block: int, args: dict[str, object],
                   buffers: dict[str, int]) -> None:
        """The PTX interpreter over the grid; buffers as int32 arrays."""
        if len(set(buffers.values())) != len(buffers):
            raise HostRunError(f"{self.prog.path}: error: a PTX launch given one buffer for "
                               "two parameters (the PTX interpreter gives each its own "
                               "memory)")
        arrays = {p: self.allocations[n].astype(np.int32) for p, n in buffers.items()}
        launch = PtxLaunch((grid, 1, 1), (block, 1, 1), {**args, **arrays})
        kernel = ref.kernel
        if kernel.attrs.get("calls_not_inlined"):  # recursion, function pointers
            try:
                kernel = executable_form(kernel, self.prog.path)
            except ValueError as error:
                raise HostRunError(f"{self.prog.path}: error: {error}") from None
        result = run_ptx_kernel(kernel, launch)
        for p, n in buffers.items():
            self.allocations[n][:] = result.buffers[p].astype(np.int64)
        self.counters.warp_instructions += result.counters.warp_instructions
        self.counters.lane_instructions += result.counters.lane_instructions

    def run(self) -> HostRun:
        """Run from the start node to the end node."""
        prog, n = self.prog, self.prog.start
        while n != prog.end:
            self.counters.host_steps += 1
            node = prog.nodes[n]
            if self.counters.host_steps > MAX_HOST_STEPS:
                raise self.error(node.loc, f"host program did not finish within "
                                 f"{MAX_HOST_STEPS} statements")
            stmt, following = node.stmt, 0
            if isinstance(stmt, h.Assign):
                self.assign(stmt, node.loc)
            elif isinstance(stmt, h.Store):
                array = self.array(stmt.array, node.loc)
                i = self.eval(stmt.index, node.loc)
                if not 0 <= i < len(array):
                    raise self.error(node.loc, f"index {i} outside '{stmt.array}'")
                array[i] = self.eval(stmt.value, node.loc)
            elif isinstance(stmt, h.Call):
                self.call(stmt, node.loc)
            elif isinstance(stmt, h.Launch):
                self.launch(stmt, node.loc)
            elif isinstance(stmt, h.Branch):
                following = 0 if self.eval(stmt.cond, node.loc) else 1
            n = prog.succ[n][following]
        return self.result()

    def result(self) -> HostRun:
        """The final values."""
        buffers: dict[str, list[int] | None] = {}
        for name, number in sorted(self.buffer_of.items()):
            data = self.allocations[number]
            buffers[name] = None if data is None else [int(x) for x in wrap(data)]
        arrays = {k: [int(x) for x in wrap(v)] for k, v in sorted(self.arrays.items())}
        inputs = {k: self.scalars[k] for k in self.prog.inputs if k in self.scalars}
        return HostRun(inputs, dict(sorted(self.scalars.items())), arrays, buffers,
                       self.counters)


def default_inputs(prog: h.HostProgram) -> dict[str, int]:
    """Each input at its first value."""
    return {k: v[0] for k, v in prog.inputs.items()}


def input_sets(prog: h.HostProgram) -> list[dict[str, int]]:
    """Every combination of the values the inputs list."""
    sets: list[dict[str, int]] = [{}]
    for name, values in prog.inputs.items():
        sets = [{**s, name: v} for s in sets for v in values]
    return sets


def run_host(prog: h.HostProgram, inputs: dict[str, int] | None = None) -> HostRun:
    """Run a host program with the given inputs (the rest at their first value)."""
    values = default_inputs(prog)
    for name, value in (inputs or {}).items():
        if name not in prog.inputs:
            raise HostRunError(f"{prog.path}:1:1: error: unknown input '{name}' "
                               f"(inputs: {', '.join(prog.inputs) or 'none'})")
        values[name] = int(wrap(value))
    return _Host(prog, values).run()
