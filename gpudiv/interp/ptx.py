"""Reference interpreter for PTX kernels: runs the lowered IR on NumPy lanes.

It executes exactly the instructions `gpudiv.frontend.ptx` produced (guards as selects,
split vectors, inlined `.func` calls), so every executed instruction has the index that
SSA, facts and the oracle use, and `gpudiv.oracle.ClaimObserver` works unchanged through
the `Observer` protocol of the μ-SIMD interpreter. What the lowering does not show the
analyses (address displacements, vector elements, register types, symbol layouts, the
operands of `vote`/`activemask`) comes from `Instruction.attrs` and `Kernel.attrs`.

The machine (DESIGN.md, "Semantics choices for PTX"):

- a grid of blocks runs one block after another (x fastest); each block is split into
  warps of 32 threads by linear thread id (x fastest, then y, then z);
- warps of a block run round-robin, each for up to `engine.QUANTUM` steps, until it reaches
  `bar.sync`, finishes or fails; a barrier releases when every warp of the block waits
  at one, and a warp that finished without it is an error;
- lanes of a warp run in lock-step; a divergent branch pushes both sides on a PDOM stack
  and the lanes reconverge at the branch block's immediate post-dominator (GPGPU-Sim);
- registers hold raw bits at their declared width; every instruction reads and writes
  them at its PTX type (integers wrap, f32 in float32, f64 in float64): `ptx_ops`;
- memory is byte-addressed: one global arena (kernel buffers and `.global` variables,
  separated by red zones), per-block `.shared`, per-thread `.local`, `.const` and the
  kernel's `.param` buffer; every access is checked for bounds and natural alignment.
  Generic addresses map to windows: shared at `SHARED_WINDOW`, local at `LOCAL_WINDOW`,
  const at `CONST_WINDOW`, param at `PARAM_WINDOW`, global addresses are themselves;
- a guarded instruction that defines a register is computed speculatively in all active
  lanes (its faults count only in lanes whose guard holds; other faulting lanes get 0),
  because the IR models it as `tmp = op …; d = select(p, tmp, d)`; guarded stores,
  atomics and reductions act only in lanes whose guard holds;
- atomics and reductions apply lane by lane in ascending lane order;
- `shfl` reads 0 from a source lane that is not active.

Integer division by zero does not trap (PTX leaves the result unspecified): the
quotient is all ones and the remainder is the dividend, so a = q·b + r still holds.

Errors (out of bounds, misaligned, a barrier not reached by all warps, an unsupported
instruction, an exhausted step budget) raise
`PtxExecutionError`: one line naming kernel, PTX line, block, warp and lanes.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import ClassVar

import numpy as np

from gpudiv import ir
from gpudiv.frontend.ptx import _float_bits
from gpudiv.frontend.ptx_types import TYPE_NAMES as _TYPE_NAMES
from gpudiv.frontend.ptx_types import guess_type as _guess_type
from gpudiv.interp import ptx_texture
from gpudiv.interp.engine import (
    BARRIER,
    BRANCH,
    EXEC,
    FAIL,
    JUMP,
    NOP,
    STOP,
    Engine,
    Observer,
    Warp,
    has_marks,
    reconvergence_pcs,
)
from gpudiv.interp.policies import control_for
from gpudiv.interp.ptx_ops import (
    OpSpec,
    Unsupported,
    assign_semantics,
    bits,
    canonical,
    constant,
    dtype,
    kind,
    signed,
    unsigned,
)
from gpudiv.interp.simt import (
    RECONVERGENCE_MODES,
    Counters,
    DeadlockError,
    ExecutionError,
    format_lanes,
    never_released,
)

WARP_SIZE = 32
GLOBAL_BASE = 0x1000_0000
SHARED_WINDOW = 0x0100_0000
LOCAL_WINDOW = 0x0200_0000
CONST_WINDOW = 0x0300_0000
PARAM_WINDOW = 0x0400_0000
WINDOW_SIZE = 0x0100_0000
WINDOWS = {"shared": SHARED_WINDOW, "local": LOCAL_WINDOW, "const": CONST_WINDOW,
           "param": PARAM_WINDOW}
RED_ZONE = 256
MAX_THREADS = 1024
# CUDA's limits on launch shapes (grid x, y, z; block x, y, z).
MAX_GRID = (2**31 - 1, 65535, 65535)
MAX_BLOCK = (1024, 1024, 64)
# Bytes a launch may allocate (registers, local, shared and global memory), checked
# before anything is allocated.
MAX_LAUNCH_BYTES = 2 * 1024**3
MAX_SHARED = 228 * 1024
MAX_LOCAL = 512 * 1024

_STORAGE = {1: np.bool_, 8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


# ---------------------------------------------------------------------------------------
# Public data types
# ---------------------------------------------------------------------------------------


class PtxExecutionError(ExecutionError):
    """A runtime error: kernel, PTX line, block, warp and lanes, and what went wrong."""

    def __init__(self, kernel: str, line: int, label: str | None, lanes: list[int],
                 message: str, block: tuple[int, int, int] | None = None,
                 warp: int | None = None) -> None:
        self.block = block
        self.warp = warp
        self.outside = False  # an access outside every buffer (see _Fault)
        super().__init__(kernel, line, label, lanes, message)

    def _render(self) -> str:
        where = f"kernel {self.kernel}, PTX line {self.line}"
        if self.block is not None:
            where += f", block ({self.block[0]}, {self.block[1]}, {self.block[2]})"
        if self.warp is not None:
            where += f", warp {self.warp}"
        if self.lanes:
            lanes = sorted({t % WARP_SIZE for t in self.lanes})
            noun = "lane" if len(lanes) == 1 else "lanes"
            where += f", {noun} {format_lanes(lanes)}"
        return f"{where}: {self.message}"


class PtxDeadlockError(PtxExecutionError, DeadlockError):
    """A launch whose block state repeats (simt.DeadlockError): a SIMT deadlock or an
    infinite loop; the message names kernel, lines, block and warp itself."""

    def _render(self) -> str:
        return self.message


@dataclass
class PtxLaunch:
    """A launch: grid and block shapes, one argument per kernel parameter.

    An argument is a NumPy array (a buffer in global memory; the parameter receives its
    address), a `ptx_texture.Texture` (a texture or surface object: the parameter receives
    its handle), an int or float (a scalar encoded at the parameter's type) or bytes (a
    `.b8` array parameter, e.g. a struct passed by value). `args` maps parameter names
    (or positions) to arguments; missing ones are 0.
    """

    grid: tuple[int, int, int] = (1, 1, 1)
    block: tuple[int, int, int] = (32, 1, 1)
    args: dict[str | int, object] = field(default_factory=dict)
    dynamic_shared: int = 0
    max_steps: int = 1_000_000
    # Arrays bound to texture and surface references by name (`.global .texref t`);
    # texture and surface objects are arguments: `ptx_texture.Texture(array)`.
    textures: dict[str, np.ndarray | ptx_texture.Texture] = field(default_factory=dict)
    # The reconvergence policy (gpudiv.interp.simt): auto (ipdom, and the explicit
    # reconvergence points of marked branches: `machine_policy`), ipdom, sync, frontier
    # or mimd.
    reconvergence: str = "auto"
    # The register that "tid" stands for in affine claims (gpudiv.oracle.ClaimObserver).
    thread_index: ClassVar[str] = "%tid.x"

    @property
    def threads(self) -> int:
        """Threads per block (the oracle reports it)."""
        x, y, z = self.block
        return x * y * z

    @property
    def warp_width(self) -> int:
        """Always 32 for PTX."""
        return WARP_SIZE

    @property
    def params(self) -> dict[str, object]:
        """The arguments as the oracle prints them (buffers as `dtype[size]`)."""
        shown: dict[str, object] = {"grid": "x".join(map(str, self.grid)),
                                    "block": "x".join(map(str, self.block))}
        for name, value in self.args.items():
            if isinstance(value, np.ndarray):
                shown[str(name)] = f"{value.dtype}[{value.size}]"
            elif isinstance(value, ptx_texture.Texture):
                what = "surface" if value.surface else "texture"
                shown[str(name)] = f"{what} {value.array.dtype}{list(value.array.shape)}"
            elif isinstance(value, bytes):
                shown[str(name)] = f"bytes[{len(value)}]"
            else:
                shown[str(name)] = value
        return shown


@dataclass
class PtxRunResult:
    """Final contents of every buffer argument (and surface), counters, the steps taken,
    and the final contents of the kernel's `.global` variables (`__device__` arrays)."""

    buffers: dict[str, np.ndarray]
    counters: Counters
    blocks: int
    steps: int
    variables: dict[str, np.ndarray] = field(default_factory=dict)


def run_ptx_kernel(kernel: ir.Kernel, launch: PtxLaunch, observer: Observer | None = None,
                   trace: list | None = None) -> PtxRunResult:
    """Run a lowered PTX kernel over the whole grid; raise PtxExecutionError on faults.

    `trace`, if a list, receives one (block, warp, PTX line, text, lane ids) tuple per
    executed warp instruction."""
    _check_launch(kernel, launch)
    try:
        machine = _Machine(kernel, launch, observer, trace)
    except Unsupported as error:  # the layout of the kernel's memory
        raise PtxExecutionError(kernel.name, kernel.loc.line, None, [], str(error)) from None
    try:
        with np.errstate(all="ignore"):
            return machine.run()
    except DeadlockError as error:
        if error.message.startswith("SIMT deadlock") and machine.policy != "mimd":
            _confirm_deadlock(kernel, launch, error)
        raise
    except PtxExecutionError:
        raise
    except Exception as error:  # noqa: BLE001 - a bug of the interpreter, as one line
        raise PtxExecutionError(kernel.name, kernel.loc.line, None, [],
                                f"internal error of the PTX interpreter: "
                                f"{type(error).__name__}: {error}") from error


def machine_policy(kernel: ir.Kernel, policy: str) -> str:
    """The control a launch's policy means for a kernel: `auto` and `sync` reconverge at
    the explicit reconvergence points of marked branches ("marked", the PDOM stack with
    those points; `engine.RECONVERGE_ATTR`) and at immediate post-dominators elsewhere;
    `auto` without marks is `ipdom`."""
    if policy in ("auto", "sync"):
        return "marked" if policy == "sync" or has_marks(kernel) else "ipdom"
    return policy


def _confirm_deadlock(kernel: ir.Kernel, launch: PtxLaunch, error: DeadlockError) -> None:
    """A SIMT deadlock is one only if the lanes would finish on their own: when the same
    launch also loops forever under mimd, say so (nothing releases the spinning lanes)."""
    try:
        with np.errstate(all="ignore"):
            _Machine(kernel, replace(launch, reconvergence="mimd"), None, None).run()
    except DeadlockError:
        error.message = never_released(error.message)
    except (ExecutionError, Unsupported):
        pass


GROW_FACTOR = 8
GROW_RETRIES = 2


def run_ptx_growing(kernel: ir.Kernel, launch: PtxLaunch, observer: Observer | None = None,
                    trace: list | None = None, retries: int = GROW_RETRIES,
                    factor: int = GROW_FACTOR) -> PtxRunResult:
    """`run_ptx_kernel` for synthesised launches: when an access falls outside every
    buffer or surface (a kernel that indexes by blockIdx past the synthesised sizes), run
    again with every buffer and bound array `factor` times larger (its contents repeated),
    at most `retries` times; the last error says how far the buffers grew."""
    scale = 1
    while True:
        try:
            return run_ptx_kernel(kernel, launch, observer, trace)
        except PtxExecutionError as error:
            if not error.outside:
                raise
            if scale >= factor ** retries:
                if scale > 1:
                    error.message += f" (after growing every buffer {scale}×)"
                raise
            scale *= factor
            launch = grown(launch, factor)


def _grow_array(array: np.ndarray, factor: int) -> np.ndarray:
    """`array` with its first axis `factor` times longer, contents repeated."""
    return np.concatenate([array] * factor, axis=0)


def grown(launch: PtxLaunch, factor: int) -> PtxLaunch:
    """The launch with every buffer argument and bound array `factor` times larger."""
    def bigger(value):
        if isinstance(value, np.ndarray):
            return _grow_array(value, factor)
        if isinstance(value, ptx_texture.Texture):
            return ptx_texture.Texture(_grow_array(value.array, factor), value.surface)
        return value
    return PtxLaunch(launch.grid, launch.block, {k: bigger(v) for k, v in launch.args.items()},
                     launch.dynamic_shared, launch.max_steps,
                     {k: bigger(v) for k, v in launch.textures.items()}, launch.reconvergence)


def _check_launch(kernel: ir.Kernel, launch: PtxLaunch) -> None:
    for what, dims in (("grid", launch.grid), ("block", launch.block)):
        if len(dims) != 3 or any(int(d) < 1 for d in dims):
            raise ValueError(f"{what} dimensions must be three positive integers")
    if launch.threads > MAX_THREADS:
        raise ValueError(f"a block has at most {MAX_THREADS} threads (got {launch.threads})")
    for what, dims, limits in (("grid", launch.grid, MAX_GRID),
                               ("block", launch.block, MAX_BLOCK)):
        for axis, d, limit in zip("xyz", dims, limits, strict=True):
            if int(d) > limit:
                raise ValueError(f"{what} {axis} dimension {d} is larger than CUDA's "
                                 f"limit {limit}")
    if launch.max_steps < 0:
        raise ValueError("max_steps must not be negative")
    if launch.dynamic_shared < 0:
        raise ValueError("dynamic_shared must not be negative")
    if launch.reconvergence not in RECONVERGENCE_MODES:
        raise ValueError(f"reconvergence must be one of {', '.join(RECONVERGENCE_MODES)}")
    names = set(kernel.params)
    for key in launch.args:
        if isinstance(key, str) and key not in names:
            raise ValueError(f"kernel {kernel.name} has no parameter '{key}'")
        if isinstance(key, int) and not 0 <= key < len(kernel.params):
            raise ValueError(f"kernel {kernel.name} has no parameter number {key}")


# ---------------------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------------------


class _Fault(Exception):
    """A per-lane fault; the machine adds kernel, line, block and warp. `mask` marks the
    faulting lanes among those of the instruction, `lanes` (if known) names them;
    `outside` says an access fell outside every global buffer or surface (larger ones
    might let the kernel run: `run_ptx_growing`)."""

    def __init__(self, message: str, mask=None, lanes=None, outside: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.mask = mask
        self.lanes = lanes
        self.outside = outside


def _round_up(value: int, align: int) -> int:
    return (value + align - 1) // align * align


class _Region:
    """One byte-addressed memory: a uint8 buffer with typed views."""

    def __init__(self, name: str, size: int) -> None:
        self.name = name
        self.size = size
        self.buf = np.zeros(_round_up(max(size, 8), 8), dtype=np.uint8)
        self._views: dict = {}

    def view(self, dt):
        """The buffer seen as an array of `dt` (aligned accesses index it by addr // size)."""
        view = self._views.get(dt)
        if view is None:
            view = self._views[dt] = self.buf.view(dt)
        return view

    def check(self, addr, size: int):
        """Byte offsets of the accesses; a mask of faulting lanes or None."""
        bad = (addr < 0) | (addr + size > self.size)
        return addr, bad


class _Local(_Region):
    """Thread-private memory: `stride` bytes per thread of the block."""

    def __init__(self, size: int, threads: int) -> None:
        self.local_size = size
        self.stride = _round_up(size, 16)
        super().__init__("local", self.stride * threads)
        self.size = size  # per thread

    def offsets(self, addr, lanes):
        return lanes * self.stride + addr


class _Global(_Region):
    """The global arena: allocations at GLOBAL_BASE + offset, separated by red zones."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.names: list[str] = []
        self.top = RED_ZONE
        super().__init__("global", 0)

    def reserve(self, size: int, name: str, align: int = 256) -> int:
        """Reserve an allocation; returns its global address."""
        start = _round_up(self.top, max(align, 256))
        self.starts.append(start)
        self.ends.append(start + size)
        self.names.append(name)
        self.top = start + max(size, 1) + RED_ZONE
        return GLOBAL_BASE + start

    def materialise(self) -> None:
        self.size = self.top
        self.buf = np.zeros(_round_up(self.top, 8), dtype=np.uint8)
        self._views = {}

    def check(self, addr, size: int):
        offsets = addr - GLOBAL_BASE
        lo = int(offsets.min())
        hi = int(offsets.max())
        k = bisect.bisect_right(self.starts, lo) - 1
        if k >= 0 and hi + size <= self.ends[k] and lo >= self.starts[k]:
            return offsets, None
        if not self.starts:  # no allocation at all (e.g. a number given for a pointer)
            return offsets, np.ones(offsets.shape, dtype=bool)
        starts = np.asarray(self.starts, dtype=np.int64)
        ends = np.asarray(self.ends, dtype=np.int64)
        index = np.searchsorted(starts, offsets, side="right") - 1
        inside = (index >= 0) & (offsets + size <= ends[np.maximum(index, 0)])
        return offsets, ~inside


_ACCESS = {"ld": "load", "st": "store", "atom": "atomic", "red": "reduction"}


class _Memory:
    """All memories of one launch and the layout of the kernel's symbols."""

    def __init__(self, kernel: ir.Kernel, launch: PtxLaunch, threads: int,
                 register_bytes: int = 0) -> None:
        self.kernel = kernel
        symbols: dict[str, tuple] = dict(kernel.attrs.get("symbols", {}))
        self.addresses: dict[str, tuple[str, int]] = {}  # symbol → (space, address)
        self.glob = _Global()
        self.buffers: list[tuple[str, int, np.ndarray]] = []
        # Arrays bound to texture/surface objects (index = handle) and references (name);
        # each a private contiguous copy, surfaces returned as buffers.
        self.bound: list[np.ndarray] = []
        self.surfaces: list[tuple[str, np.ndarray]] = []
        self.named: dict[str, np.ndarray] = {}
        for name, value in launch.textures.items():
            self.named[name] = self._bind(name, value)
        self.inits: list[tuple[str, int, str, tuple]] = []
        shared_top = local_top = const_top = 0
        dynamic: list[str] = []
        for name, (space, type_, align, size, init) in symbols.items():
            align = max(int(align), 1)
            if space == "shared":
                if size == 0:
                    dynamic.append(name)
                    continue
                shared_top = _round_up(shared_top, align)
                self.addresses[name] = ("shared", shared_top)
                shared_top += size
            elif space == "local":
                local_top = _round_up(local_top, align)
                self.addresses[name] = ("local", local_top)
                local_top += size
            elif space == "const":
                const_top = _round_up(const_top, align)
                self.addresses[name] = ("const", const_top)
                self.inits.append(("const", const_top, type_, init))
                const_top += size
            elif space == "global":
                address = self.glob.reserve(size, name, align)
                self.addresses[name] = ("global", address)
                self.inits.append(("global", address, type_, init))
        shared_top = _round_up(shared_top, 16)
        for name in dynamic:
            self.addresses[name] = ("shared", shared_top)
        self.shared_size = shared_top + launch.dynamic_shared
        if self.shared_size > MAX_SHARED:
            raise Unsupported(f"the kernel needs {self.shared_size} bytes of shared memory "
                              f"(at most {MAX_SHARED})")
        if local_top > MAX_LOCAL:
            raise Unsupported(f"the kernel needs {local_top} bytes of local memory per "
                              f"thread (at most {MAX_LOCAL})")
        self.shared = _Region("shared", self.shared_size)
        self.local = _Local(local_top, threads)
        self.const = _Region("const", const_top)
        self.param, self.param_values = self._params(launch)
        total = (register_bytes + self.glob.top + self.shared.buf.nbytes
                 + self.local.buf.nbytes + self.const.buf.nbytes)
        if total > MAX_LAUNCH_BYTES:
            raise Unsupported(f"the launch needs {total // 2**20} MiB of registers and "
                              f"memory (at most {MAX_LAUNCH_BYTES // 2**20} MiB)")
        self.glob.materialise()
        self.regions: dict[str, _Region] = {"global": self.glob, "shared": self.shared,
                                            "local": self.local, "const": self.const,
                                            "param": self.param}
        for _, address, array in self.buffers:
            start = address - GLOBAL_BASE
            raw = np.ascontiguousarray(array).view(np.uint8).reshape(-1)
            self.glob.buf[start:start + raw.size] = raw
        for space, address, type_, init in self.inits:
            self._initialise(space, address, type_, init)

    # -- parameters --------------------------------------------------------------------
    def _params(self, launch: PtxLaunch) -> tuple[_Region, dict[str, int]]:
        params = self.kernel.attrs.get("params", ())
        layout = []
        top = 0
        for name, type_, size, align in params:
            top = _round_up(top, max(int(align), 1))
            layout.append((name, type_ or "b64", top, size or 8))
            self.addresses[name] = ("param", top)
            top += size or 8
        args = {}
        for key, value in launch.args.items():
            args[self.kernel.params[key] if isinstance(key, int) else key] = value
        region = _Region("param", top)
        values: dict[str, int] = {}
        for name, type_, offset, size in layout:
            value = args.get(name, 0)
            raw = self._encode_param(name, type_, size, value)
            region.buf[offset:offset + len(raw)] = np.frombuffer(raw, dtype=np.uint8)
            values[name] = int.from_bytes(raw[:8].ljust(8, b"\0"), "little")
        return region, values

    def _bind(self, name: str, value) -> np.ndarray:
        """A private copy of an array bound to a texture or surface."""
        texture = value if isinstance(value, ptx_texture.Texture) else ptx_texture.Texture(
            np.asarray(value))
        array = np.array(texture.array, order="C", copy=True)
        if array.size == 0:
            raise ValueError(f"the array bound to {name} is empty")
        if texture.surface:
            self.surfaces.append((name, array))
        return array

    def _encode_param(self, name: str, type_: str, size: int, value) -> bytes:
        if isinstance(value, ptx_texture.Texture):
            self.bound.append(self._bind(name, value))
            value = ptx_texture.handle(len(self.bound) - 1)
        if isinstance(value, np.ndarray):
            address = self.glob.reserve(value.nbytes, name)
            self.buffers.append((name, address, value))
            value = address
        if isinstance(value, bytes | bytearray):
            if len(value) > size:
                raise ValueError(f"argument for {name} has {len(value)} bytes; the "
                                 f"parameter has {size}")
            return bytes(value).ljust(size, b"\0")
        if type_ in ("f32", "f64", "f16"):
            fmt = {"f32": "<f", "f64": "<d", "f16": "<e"}[type_]
            return struct.pack(fmt, float(value)).ljust(size, b"\0")
        if isinstance(value, float | np.floating):
            if size == 4:
                return struct.pack("<f", float(value))
            if size == 8:
                return struct.pack("<d", float(value))
            value = int(value)
        value = int(value)
        return (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little")

    def _initialise(self, space: str, address: int, type_: str, init: tuple) -> None:
        if not init:
            return
        region = self.glob if space == "global" else self.const
        start = address - GLOBAL_BASE if space == "global" else address
        type_ = type_ if type_ in ("f16", "f32", "f64") else unsigned(type_ or "b8")
        width = bits(type_) // 8
        for k, item in enumerate(init):
            if item[0] == "sym":
                where = self.addresses.get(item[1])
                value = (_generic(*where) if where else 0) + item[2]
                raw = (value & ((1 << (8 * width)) - 1)).to_bytes(width, "little")
            elif item[0] == "f":
                raw = np.asarray(constant(_float_bits(item[1]), type_)).tobytes()
            elif kind(type_) == "f":
                raw = np.asarray(dtype(type_)(item[1])).tobytes()
            else:
                raw = (item[1] & ((1 << (8 * width)) - 1)).to_bytes(width, "little")
            at = start + k * width
            if at + width <= region.buf.size:
                region.buf[at:at + width] = np.frombuffer(raw[:width], dtype=np.uint8)

    def global_variables(self) -> dict[str, np.ndarray]:
        """The current contents of every typed `.global` variable, as arrays of its type."""
        variables = {}
        for name, (space, type_, _, size, _) in self.kernel.attrs.get("symbols", {}).items():
            if space != "global" or type_ not in _TYPE_NAMES or type_ == "pred" or not size:
                continue
            dt = np.dtype(dtype(type_ if kind(type_) == "f" else unsigned(type_)))
            start = self.addresses[name][1] - GLOBAL_BASE
            count = size // dt.itemsize
            raw = self.glob.buf[start:start + count * dt.itemsize].copy()
            variables[name] = raw.view(dt)
        return variables

    # -- addresses ---------------------------------------------------------------------
    def symbol(self, name: str) -> tuple[str, int]:
        """(space, state-space address) of a symbol."""
        where = self.addresses.get(name)
        if where is None:
            raise Unsupported(f"unknown symbol '{name}'")
        return where

    def reset_block(self) -> None:
        self.shared.buf[:] = 0
        self.local.buf[:] = 0

    def region(self, space: str) -> _Region:
        return self.regions[space]

    def resolve(self, space: str, addr: np.ndarray, size: int, lanes: np.ndarray,
                what: str) -> list[tuple[_Region, np.ndarray, np.ndarray | None]]:
        """Check an access of `size` bytes per lane; [(region, element index, lanes mask)]
        (one group unless generic addresses point into several windows)."""
        if space != "generic":
            return [(self.region(space), self._index(space, addr, size, lanes, what), None)]
        lo = int(addr.min())
        hi = int(addr.max())
        if lo >= GLOBAL_BASE:
            return [(self.glob, self._index("global", addr, size, lanes, what), None)]
        for name, base in WINDOWS.items():
            if base <= lo and hi < base + WINDOW_SIZE:
                return [(self.region(name),
                         self._index(name, addr - base, size, lanes, what), None)]
        groups = []
        covered = np.zeros(addr.shape, dtype=bool)
        for name, base in (("global", 0), *WINDOWS.items()):
            if name == "global":
                mask = addr >= GLOBAL_BASE
            else:
                mask = (addr >= base) & (addr < base + WINDOW_SIZE)
            covered |= mask
            if mask.any():
                try:
                    index = self._index(name, addr[mask] - base, size, lanes[mask], what)
                except _Fault as fault:  # report the mask over all the lanes
                    full = np.zeros(addr.shape, dtype=bool)
                    full[mask] = fault.mask
                    raise _Fault(fault.message, full, fault.lanes, fault.outside) from None
                groups.append((self.region(name), index, mask))
        if not covered.all():
            first = int(addr[~covered][0])
            raise _Fault(f"{what} of {size} bytes at generic address {first:#x}, which is "
                         f"in no memory window", ~covered, lanes[~covered])
        return groups

    def _index(self, space: str, addr: np.ndarray, size: int, lanes: np.ndarray,
               what: str) -> np.ndarray:
        region = self.region(space)
        offsets, bad = region.check(addr, size)
        if bad is not None and bad.any():
            first = int(addr[bad][0])
            limit = (f" (thread-private memory has {region.size} bytes)" if space == "local"
                     else "" if space == "global" else f" ({space} memory has "
                     f"{region.size} bytes)")
            raise _Fault(f"out-of-bounds {space} {what} of {size} bytes at address "
                         f"{first:#x}{limit}", bad, lanes[bad],
                         outside=space == "global" and first >= GLOBAL_BASE)
        if size > 1:
            misaligned = (offsets & (size - 1)) != 0
            if misaligned.any():
                raise _Fault(f"misaligned {space} {what} of {size} bytes at address "
                             f"{int(addr[misaligned][0]):#x}", misaligned, lanes[misaligned])
        if space == "local":
            offsets = region.offsets(offsets, lanes)
        return offsets // size


def _generic(space: str, address: int) -> int:
    """The generic address of a state-space address."""
    return address if space == "global" else WINDOWS[space] + address


# ---------------------------------------------------------------------------------------
# Registers and operands
# ---------------------------------------------------------------------------------------


def register_types(kernel: ir.Kernel) -> dict[str, str]:
    """The PTX type of every register the kernel reads or writes."""
    types = dict(kernel.registers)
    for name in kernel.params:
        types[name] = "b64"
    instructions = kernel.instructions()
    for _ in range(3):
        changed = False
        for instr in instructions:
            if instr.dest is not None and instr.dest not in types:
                guess = _guess_type(instr, types)
                if guess is not None:
                    types[instr.dest] = guess
                    changed = True
        if not changed:
            break
    for instr in instructions:
        for name in (*instr.used_vars, *([instr.dest] if instr.dest else [])):
            types.setdefault(name, "b64")
    return types


def _storage_bits(type_: str) -> int:
    return 1 if type_ == "pred" else bits(type_) if type_ in _TYPE_NAMES else 64


def _reader(store: np.ndarray, want: str) -> Callable:
    """A function from lanes to the values of a register read as PTX type `want`."""
    want = canonical(want)
    if want == "pred":
        if store.dtype == np.bool_:
            return store.__getitem__
        return lambda sel: store[sel] != 0
    dt = dtype(want)
    if store.dtype == np.bool_:
        return lambda sel: store[sel].astype(dt)
    width = store.dtype.itemsize * 8
    want_bits = bits(want)
    if width == want_bits:
        return store.view(dt).__getitem__
    if width > want_bits:
        udt = dtype(unsigned(want))
        return lambda sel: store[sel].astype(udt).view(dt)
    if kind(want) == "s":
        narrow = store.view(dtype(f"s{width}"))
        return lambda sel: narrow[sel].astype(dt)
    return lambda sel: store[sel].astype(dtype(unsigned(want))).view(dt)


def _writer(store: np.ndarray, result: str, sign_extend: bool | None = None) -> Callable:
    """A function (lanes, values) writing a result of PTX type `result` into a register."""
    result = canonical(result)
    if store.dtype == np.bool_:
        if result == "pred":
            return store.__setitem__
        return lambda sel, v: store.__setitem__(sel, np.asarray(v) != 0)
    if result == "pred":
        return lambda sel, v: store.__setitem__(sel, np.asarray(v).astype(store.dtype))
    width = store.dtype.itemsize * 8
    result_bits = bits(result)
    if width == result_bits:
        view = store.view(dtype(result))
        return view.__setitem__
    if width > result_bits:
        extend_signed = kind(result) == "s" if sign_extend is None else sign_extend
        if kind(result) == "f":
            udt = dtype(unsigned(result))
            return lambda sel, v: store.__setitem__(sel, np.asarray(v).view(udt).astype(
                store.dtype))
        if extend_signed:
            sdt = dtype(f"s{width}")
            source = dtype(signed(result))
            return lambda sel, v: store.__setitem__(
                sel, np.asarray(v).view(source).astype(sdt).view(store.dtype))
        return lambda sel, v: store.__setitem__(sel, np.asarray(v).astype(
            dtype(unsigned(result))).astype(store.dtype))
    udt = dtype(unsigned(result))
    return lambda sel, v: store.__setitem__(sel, np.asarray(v).view(udt).astype(store.dtype))


# ---------------------------------------------------------------------------------------
# Prepared instructions
# ---------------------------------------------------------------------------------------



@dataclass
class _Op:
    """An instruction ready to run: a code, its function or control data, its location."""

    code: int
    index: int
    instr: ir.Instruction
    label: str | None
    fn: Callable | None = None
    target: int = -1
    rpc: int = -1
    cond: Callable | None = None
    taken_when: int = 1  # bnz: 1, bz: 0, brx.idx: the case index (see `case`)
    case: int | None = None
    message: str = ""
    # bar.red: the reduction ("popc", "and" or "or") and each lane's vote (see `_release`)
    reduction: tuple[str, Callable] | None = None
    # a warp collective (shfl, vote, activemask, redux): under mimd the warp's lanes meet
    collective: bool = False


class _Machine:
    """Runs one launch of one kernel."""

    def __init__(self, kernel: ir.Kernel, launch: PtxLaunch, observer: Observer | None,
                 trace: list | None) -> None:
        self.kernel = kernel
        self.launch = launch
        self.observer = observer
        self.trace = trace
        self.threads = launch.threads
        self.types = register_types(kernel)
        register_bytes = self.threads * sum(max(_storage_bits(t) // 8, 1)
                                            for t in self.types.values())
        self.memory = _Memory(kernel, launch, self.threads, register_bytes)
        self.counters = Counters(warp_width=WARP_SIZE)
        self.policy = machine_policy(kernel, launch.reconvergence)
        self.block_reduction: np.generic | None = None  # the value of the last bar.red
        self.block_index = (0, 0, 0)
        self.regs: dict[str, np.ndarray] = {}
        for name, type_ in self.types.items():
            self.regs[name] = np.zeros(self.threads, dtype=_STORAGE[_storage_bits(type_)])
        for name in kernel.params:
            self.regs[name][:] = np.uint64(self.memory.param_values.get(name, 0))
        self.specials = self._specials()
        self._renames: dict[str, str] = {}
        self.ops = self._prepare()
        self.end = len(self.ops)
        mimd = self.policy == "mimd"
        self.engine = Engine(self, kernel.name, self.counters,
                             launch.max_steps * (WARP_SIZE if mimd else 1),
                             "thread steps (mimd)" if mimd else "warp steps",
                             observer, trace is not None)

    # -- special registers -------------------------------------------------------------
    def _specials(self) -> dict[str, np.ndarray]:
        bx, by, bz = self.launch.block
        gx, gy, gz = self.launch.grid
        tid = np.arange(self.threads, dtype=np.int64)
        lane = tid % WARP_SIZE
        u32 = np.uint32

        def full(value) -> np.ndarray:
            return np.full(self.threads, value, dtype=u32)

        ones = np.uint64(1)
        lane64 = lane.astype(np.uint64)
        specials = {
            "%tid.x": (tid % bx).astype(u32), "%tid.y": (tid // bx % by).astype(u32),
            "%tid.z": (tid // (bx * by)).astype(u32),
            "%ntid.x": full(bx), "%ntid.y": full(by), "%ntid.z": full(bz),
            "%nctaid.x": full(gx), "%nctaid.y": full(gy), "%nctaid.z": full(gz),
            "%ctaid.x": full(0), "%ctaid.y": full(0), "%ctaid.z": full(0),
            "%laneid": lane.astype(u32), "%warpid": (tid // WARP_SIZE).astype(u32),
            "%nwarpid": full((self.threads + WARP_SIZE - 1) // WARP_SIZE),
            "%smid": full(0), "%nsmid": full(1), "%gridid": np.zeros(self.threads, np.uint64),
            "%lanemask_eq": (ones << lane64).astype(u32),
            "%lanemask_lt": ((ones << lane64) - ones).astype(u32),
            "%lanemask_le": ((ones << (lane64 + ones)) - ones).astype(u32),
            "%lanemask_gt": (~((ones << (lane64 + ones)) - ones)).astype(u32),
            "%lanemask_ge": (~((ones << lane64) - ones)).astype(u32),
            "%clock": full(0), "%clock_hi": full(0),
            "%clock64": np.zeros(self.threads, np.uint64),
            "%globaltimer": np.zeros(self.threads, np.uint64),
            "%globaltimer_lo": full(0), "%globaltimer_hi": full(0),
            "%total_smem_size": full(self.memory.shared_size),
            "%dynamic_smem_size": full(self.launch.dynamic_shared),
            "%aggr_smem_size": full(self.memory.shared_size),
        }
        for k in range(32):
            specials[f"%envreg{k}"] = full(0)
        for name in self.kernel.specials:  # symbols used as values: their addresses
            if name in self.memory.addresses:
                specials[name] = np.full(self.threads, self.memory.addresses[name][1],
                                         dtype=np.uint64)
        return specials

    def _set_block(self, index: tuple[int, int, int]) -> None:
        self.block_index = index
        for axis, value in zip("xyz", index, strict=True):
            self.specials[f"%ctaid.{axis}"].fill(value)
        for name, store in self.regs.items():
            if name not in self.memory.param_values:
                store.fill(0)
        self.memory.reset_block()

    def _tick(self) -> None:
        """Clock registers follow the step count."""
        steps = self.steps
        self.specials["%clock"].fill(steps & 0xFFFFFFFF)
        self.specials["%clock64"].fill(steps)
        self.specials["%globaltimer"].fill(steps)
        self.specials["%globaltimer_lo"].fill(steps & 0xFFFFFFFF)

    # -- operands ----------------------------------------------------------------------
    def _store_of(self, operand: ir.Operand) -> np.ndarray:
        if isinstance(operand, ir.Special):
            store = self.specials.get(operand.name)
            if store is None:
                raise Unsupported(f"unsupported special register '{operand.name}'")
            return store
        return self.regs[self._renames.get(operand.name, operand.name)]

    def _get(self, operand: ir.Operand, type_: str, symbol: tuple | None = None) -> Callable:
        """A function from lanes to the operand's values at PTX type `type_`."""
        if symbol is not None:
            space, address = self.memory.symbol(symbol[0])
            value = constant(address + symbol[1], type_)
            return lambda sel: value
        if isinstance(operand, ir.Const):
            value = constant(operand.value, type_)
            return lambda sel: value
        if isinstance(operand, ir.Special) and operand.name in ("%clock", "%clock64",
                                                                "%globaltimer",
                                                                "%globaltimer_lo"):
            read = _reader(self._store_of(operand), type_)

            def clock(sel):
                self._tick()
                return read(sel)
            return clock
        return _reader(self._store_of(operand), type_)

    # -- preparation ---------------------------------------------------------------------
    def _prepare(self) -> list[_Op]:
        start: dict[str, int] = {}
        count = 0
        for block in self.kernel.blocks:
            start[block.label] = count
            count += len(block.instructions)
        ipdom = reconvergence_pcs(self.kernel, start, count, self.policy == "marked")
        renames, copies = self._hazards(self.kernel.instructions())
        ops: list[_Op] = []
        label: str | None = None
        for block in self.kernel.blocks:
            if block.user_label:
                label = block.label
            for instr in block.instructions:
                op = _Op(EXEC, len(ops), instr, label)
                self._renames = renames.get(op.index, {})
                try:
                    self._compile(op, instr)
                except Unsupported as error:
                    op.code, op.message = FAIL, str(error)
                except (KeyError, IndexError, TypeError, ValueError, AttributeError) as error:
                    op.code = FAIL
                    op.message = (f"cannot execute '{instr.text}' (internal error of the PTX "
                                  f"interpreter: {type(error).__name__}: {error})")
                if op.index in copies and op.code == EXEC:
                    op.fn = _with_copies(op.fn, [(self.regs[a], self.regs[b])
                                                 for a, b in copies[op.index]])
                if instr.target is not None:
                    op.target = start[instr.target]
                op.rpc = ipdom.get(block.label, count)
                root = str(instr.attrs.get("opcode", "")).split(".", 1)[0]
                op.collective = root in ("shfl", "vote", "activemask", "redux")
                ops.append(op)
        self._renames = {}
        return ops

    def _hazards(self, instructions: list[ir.Instruction]):
        """The IR instructions lowered from one PTX instruction read their sources before
        any of them writes (`ld.v2 {%rd1, %rd2}, [%rd1]`): a later one that reads a
        register an earlier one wrote reads a shadow copied when the first one runs.
        Returns renames per instruction and copies per first instruction."""
        renames: dict[int, dict[str, str]] = {}
        copies: dict[int, list[tuple[str, str]]] = {}
        first = 0
        written: set[str] = set()
        for index, instr in enumerate(instructions):
            previous = instructions[index - 1] if index else None
            if previous is None or instr.group is None or instr.group != previous.group:
                first, written = index, set()
            reads = set(instr.used_vars)
            if instr.operator in ("select", "select.not") and len(instr.args) > 1:
                reads.discard(instr.args[1].name if isinstance(instr.args[1], ir.Var) else "")
            for name in sorted(reads & written):
                shadow = f"{name}@shadow"
                if shadow not in self.regs:
                    self.regs[shadow] = np.zeros_like(self.regs[name])
                renames.setdefault(index, {})[name] = shadow
                if (name, shadow) not in copies.get(first, []):
                    copies.setdefault(first, []).append((name, shadow))
            if instr.dest:
                written.add(instr.dest)
        return renames, copies

    def _compile(self, op: _Op, instr: ir.Instruction) -> None:
        kind_ = instr.kind
        opcode = str(instr.attrs.get("opcode", instr.operator or ""))
        if kind_ == ir.BRANCH:
            op.code = BRANCH
            if instr.operator == "brx.idx":
                op.cond = self._get(instr.args[0], "u32")
                op.case = int(instr.attrs.get("case", 0))
            else:
                op.cond = self._get(instr.args[0], "pred")
                op.taken_when = 1 if instr.operator == "bnz" else 0
        elif kind_ == ir.JUMP:
            op.code = JUMP
        elif kind_ == ir.STOP:
            op.code = STOP
            if opcode.startswith("trap"):
                op.code, op.message = FAIL, "trap: the kernel aborted"
        elif kind_ == ir.BARRIER:
            op.code = NOP if opcode.startswith("bar.arrive") or ".arrive" in opcode else BARRIER
            guard = instr.guard
            if guard:
                op.cond = self._guard(guard)
        elif kind_ in (ir.SYNC, ir.FENCE):
            op.code = NOP
        elif kind_ == ir.ASSIGN and opcode.split(".")[0] in ("bar", "barrier") \
                and "red" in opcode.split("."):
            op.fn, op.reduction = self._barrier_reduction(instr, opcode)
        elif kind_ == ir.ASSIGN:
            op.fn = self._assign(instr, opcode)
        elif kind_ == ir.LOAD:
            op.fn = self._load(instr, opcode)
        elif kind_ == ir.STORE:
            op.fn = self._store(instr, opcode)
        elif kind_ == ir.ATOMIC:
            op.fn = self._atomic(instr, opcode)
        elif kind_ == ir.OPAQUE:
            op.fn = self._opaque(instr, opcode)
        else:
            raise Unsupported(f"unsupported instruction kind '{kind_}'")

    def _guard(self, guard: ir.Guard) -> Callable:
        """The lanes mask of an instruction's guard (`@%p` / `@!%p`)."""
        read = self._get(guard.operand, "pred")
        if guard.negated:
            return lambda sel: ~np.asarray(read(sel))
        return read

    # -- assignments -------------------------------------------------------------------
    def _assign(self, instr: ir.Instruction, opcode: str) -> Callable:
        operator = instr.operator or ""
        dest = instr.dest
        if dest is None:
            raise Unsupported(f"'{opcode}' without a destination")
        if operator in ("select", "select.not"):
            return self._select(instr)
        root = opcode.split(".", 1)[0]
        if operator == "copy" or "slot_read" in instr.attrs or root in ("ld", "st", "call"):
            return self._copy(instr, opcode)
        if root in ("vote", "activemask", "redux"):
            return self._collective(instr, opcode, root)
        if root in ("cvta", "isspacep"):
            return self._address_op(instr, opcode, root)
        if root in ("txq", "suq"):
            return self._query(instr, opcode)
        if root == "bar":
            raise Unsupported(f"unsupported instruction '{opcode}'")
        store = self.regs[dest]
        spec = OpSpec(opcode, len(instr.args), instr.attrs.get("element"),
                      bool(instr.attrs.get("carry")), _storage_bits(self.types[dest]),
                      tuple(instr.attrs.get("negated", ())),
                      [a.value if isinstance(a, ir.Const) else None for a in instr.args])
        semantics = assign_semantics(spec)
        if len(semantics.arg_types) != len(instr.args):
            raise Unsupported(f"'{opcode}' with {len(instr.args)} operands")
        symbols = instr.attrs.get("arg_symbols") or (None,) * len(instr.args)
        getters = [self._get(a, t, s) for a, t, s in
                   zip(instr.args, semantics.arg_types, symbols, strict=True)]
        write = _writer(store, semantics.result_type)
        fn = semantics.fn
        if len(getters) == 1:
            g0 = getters[0]
            return lambda sel, lanes, warp: write(sel, fn(g0(sel)))
        if len(getters) == 2:
            g0, g1 = getters
            return lambda sel, lanes, warp: write(sel, fn(g0(sel), g1(sel)))
        if len(getters) == 3:
            g0, g1, g2 = getters
            return lambda sel, lanes, warp: write(sel, fn(g0(sel), g1(sel), g2(sel)))
        return lambda sel, lanes, warp: write(sel, fn(*[g(sel) for g in getters]))

    def _select(self, instr: ir.Instruction) -> Callable:
        dest = instr.dest
        store = self.regs[dest]
        type_ = self._raw_type(dest)
        cond = self._get(instr.args[0], "pred")
        value = self._get(instr.args[1], type_)
        current = _reader(store, type_)
        write = _writer(store, type_)
        negated = instr.operator == "select.not"

        def select(sel, lanes, warp):
            c = np.asarray(cond(sel))
            if negated:
                c = ~c
            if c.all():
                write(sel, value(sel))
            elif c.any():
                write(sel, np.where(c, value(sel), current(sel)))
        return select

    def _raw_type(self, name: str) -> str:
        type_ = self.types.get(name, "b64")
        if type_ == "pred":
            return "pred"
        return f"u{_storage_bits(type_)}"

    def _copy(self, instr: ir.Instruction, opcode: str) -> Callable:
        dest = instr.dest
        store = self.regs[dest]
        parts = opcode.split(".")
        types = [p for p in parts[1:] if p in _TYPE_NAMES]
        is_signed = bool(types) and kind(types[-1]) == "s"
        if "slot_read" in instr.attrs:
            return self._slot_read(instr, store, is_signed)
        source = instr.args[0]
        if isinstance(source, ir.Const):
            type_ = types[-1] if types else self._raw_type(dest)
            if type_ == "pred" or self._raw_type(dest) == "pred":
                type_ = "pred"
        else:
            type_ = self._raw_type(source.name) if isinstance(source, ir.Var) else "u32"
        symbols = instr.attrs.get("arg_symbols") or (None,)
        get = self._get(source, type_, symbols[0])
        write = _writer(store, type_, sign_extend=is_signed)
        return lambda sel, lanes, warp: write(sel, get(sel))

    def _slot_read(self, instr: ir.Instruction, store: np.ndarray, is_signed: bool):
        where, size, offsets = instr.attrs["slot_read"]
        getters = []
        for arg, offset in zip(instr.args, offsets, strict=True):
            type_ = self._raw_type(arg.name) if isinstance(arg, ir.Var) else "u64"
            getters.append((_reader(self._store_of(arg), type_), offset, bits(type_)))
        width = 8 * size
        write = _writer(store, f"u{width}" if width in (8, 16, 32, 64) else "u64",
                        sign_extend=is_signed)

        def join(sel, lanes, warp):
            total = np.zeros(len(lanes), dtype=np.uint64)
            for get, offset, nbits in getters:
                shift = 8 * (offset - where)
                value = np.asarray(get(sel)).astype(np.uint64)
                if -nbits < shift < 64:
                    total |= (value << np.uint64(shift)) if shift >= 0 else (
                        value >> np.uint64(-shift))
            if width < 64:
                total &= np.uint64((1 << width) - 1)
            write(sel, total.astype(dtype(f"u{width}")) if width in (8, 16, 32) else total)
        return join

    def _address_op(self, instr: ir.Instruction, opcode: str, root: str) -> Callable:
        """cvta (state space ↔ generic) and isspacep."""
        parts = opcode.split(".")
        types = [p for p in parts[1:] if p in _TYPE_NAMES]
        type_ = canonical(types[-1]) if types else "u64"
        space = next((p for p in parts[1:] if p in ("global", "shared", "local", "const",
                                                     "param")), None)
        if space is None:
            raise Unsupported(f"unsupported instruction '{opcode}'")
        symbols = instr.attrs.get("arg_symbols") or (None,)
        get = self._get(instr.args[0], type_, symbols[0])
        store = self.regs[instr.dest]
        dt = dtype(type_)
        if root == "isspacep":
            write = _writer(store, "pred")
            get = self._get(instr.args[0], "u64", symbols[0])

            def isspacep(sel, lanes, warp):
                a = np.asarray(get(sel)).astype(np.int64)
                if space == "global":
                    write(sel, a >= GLOBAL_BASE)
                else:
                    base = WINDOWS[space]
                    write(sel, (a >= base) & (a < base + WINDOW_SIZE))
            return isspacep
        write = _writer(store, type_)
        if space == "global":
            return lambda sel, lanes, warp: write(sel, get(sel))
        window = dt(WINDOWS[space])
        if "to" in parts:
            return lambda sel, lanes, warp: write(sel, np.asarray(get(sel) - window, dt))
        return lambda sel, lanes, warp: write(sel, np.asarray(get(sel) + window, dt))

    def _collective(self, instr: ir.Instruction, opcode: str, root: str) -> Callable:
        """vote, activemask, redux: one value for all participating lanes."""
        parts = opcode.split(".")
        hidden = tuple(instr.implicit)
        negated = set(instr.attrs.get("negated", ()))
        store = self.regs[instr.dest]
        guard = instr.guard
        held = self._guard(guard) if guard else None

        def participants(sel, lanes):
            if held is None:
                return np.ones(len(lanes), dtype=bool)
            return np.broadcast_to(held(sel), lanes.shape)

        if root == "activemask":
            write = _writer(store, "u32")

            def activemask(sel, lanes, warp):
                mask = participants(sel, lanes)
                write(sel, _ballot(lanes[mask]))
            return activemask
        if root == "vote":
            if not hidden:
                raise Unsupported(f"'{opcode}' without operands")
            pred = self._get(hidden[0], "pred")
            flip = 0 in negated
            mode = next((p for p in parts[1:] if p in ("all", "any", "uni", "ballot")), None)
            if mode is None:
                raise Unsupported(f"unsupported instruction '{opcode}'")
            write = _writer(store, "u32" if mode == "ballot" else "pred")

            def vote(sel, lanes, warp):
                mask = participants(sel, lanes)
                p = np.broadcast_to(np.asarray(pred(sel)), lanes.shape)
                p = ~p if flip else p
                p = p[mask]
                if mode == "ballot":
                    write(sel, _ballot(lanes[mask][p]))
                elif mode == "all":
                    write(sel, np.bool_(p.all()))
                elif mode == "any":
                    write(sel, np.bool_(p.any()))
                else:
                    write(sel, np.bool_(p.all() or not p.any()))
            return vote
        # redux.sync.op.type d, a, membermask
        types = [p for p in parts[1:] if p in _TYPE_NAMES]
        op_name = next((p for p in parts[1:] if p in ("add", "min", "max", "and", "or",
                                                       "xor")), None)
        if not hidden or op_name is None or not types:
            raise Unsupported(f"unsupported instruction '{opcode}'")
        type_ = canonical(types[-1])
        get = self._get(hidden[0], type_)
        write = _writer(store, type_)
        reduce = {"add": np.add, "min": np.minimum, "max": np.maximum,
                  "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op_name]

        def redux(sel, lanes, warp):
            mask = participants(sel, lanes)
            values = np.broadcast_to(np.asarray(get(sel)), lanes.shape)[mask]
            write(sel, reduce.reduce(values) if len(values) else dtype(type_)(0))
        return redux

    def _barrier_reduction(self, instr: ir.Instruction,
                           opcode: str) -> tuple[Callable, tuple[str, Callable]]:
        """bar.red.popc.u32 / bar.red.and.pred / bar.red.or.pred d, a{, b}, {!}c: the
        lowering puts the barrier just before this; when it releases, `_release` reduces
        the votes of every thread of the block and this writes the result to all lanes."""
        parts = opcode.split(".")
        mode = next((p for p in parts[1:] if p in ("popc", "and", "or")), None)
        hidden = tuple(instr.implicit)
        if mode is None or len(hidden) < 2 or instr.dest is None:
            raise Unsupported(f"unsupported instruction '{opcode}'")
        pred = self._get(hidden[-1], "pred")
        flip = len(hidden) - 1 in set(instr.attrs.get("negated", ()))
        write = _writer(self.regs[instr.dest], "u32" if mode == "popc" else "pred")

        def votes(sel, lanes) -> np.ndarray:
            vote = np.broadcast_to(np.asarray(pred(sel), dtype=bool), lanes.shape)
            return ~vote if flip else vote

        def result(sel, lanes, warp):
            write(sel, self.block_reduction)
        return result, (mode, votes)

    # -- memory --------------------------------------------------------------------------
    def _address(self, instr: ir.Instruction, base: ir.Operand) -> tuple[str, Callable]:
        """(space, function from lanes to int64 addresses) of a memory access."""
        attrs = instr.attrs
        disp = int(attrs.get("disp", 0))
        space = instr.space or "generic"
        if attrs.get("generic"):
            space = "generic"
        symbol = attrs.get("symbol")
        if symbol is not None:
            sym_space, address = self.memory.symbol(str(symbol))
            if space == "generic":
                address = _generic(sym_space, address)
            value = np.int64(address + disp)
            return space, lambda sel: value
        if space in ("texture", "surface"):
            raise Unsupported(f"unsupported instruction '{attrs.get('opcode')}' "
                              f"(texture and surface memory)")
        if isinstance(base, ir.Const):
            value = np.int64(base.value + disp)
            return space, lambda sel: value
        width = _storage_bits(self._type_of_operand(base))
        read = _reader(self._store_of(base), f"u{width}")
        offset = np.int64(disp)
        if disp == 0:
            return space, lambda sel: read(sel).astype(np.int64)
        if width <= 32:  # a 32-bit address: register + displacement wraps at 32 bits
            return space, lambda sel: (read(sel).astype(np.int64) + offset) & 0xFFFFFFFF
        return space, lambda sel: read(sel).astype(np.int64) + offset

    def _type_of_operand(self, operand: ir.Operand) -> str:
        if isinstance(operand, ir.Special):
            store = self.specials.get(operand.name)
            return "u64" if store is not None and store.dtype == np.uint64 else "u32"
        type_ = self.types.get(operand.name, "b64")
        return "u64" if type_ == "pred" else type_

    # -- textures and surfaces (semantics in ptx_texture) --------------------------------
    def _texture_operands(self, instr: ir.Instruction) -> tuple[np.ndarray | None,
                                                                Callable | None, list]:
        """(array bound to a named texture/surface reference, or None; for an object the
        reader of its handle register; the operands after the handle)."""
        attrs = instr.attrs
        name = attrs.get("texture") or (attrs.get("symbol") if instr.kind == ir.STORE
                                        else None)
        if name is None:
            return None, self._get(instr.args[0], "u64"), list(instr.args[1:])
        array = self.memory.named.get(str(name))
        if array is None:
            raise Unsupported(f"no array bound to texture or surface '{name}'")
        operands = list(attrs.get("coords") or instr.args)
        if instr.kind == ir.STORE:
            operands = list(instr.args)
        return array, None, operands

    def _bound(self, named: np.ndarray | None, handles: Callable | None, sel,
               count: int) -> list[tuple[np.ndarray, np.ndarray | None]]:
        """[(array, lanes mask or None for all)] of the handles the `count` lanes hold."""
        if named is not None:
            return [(named, None)]
        values = np.broadcast_to(np.asarray(handles(sel)), (count,))
        groups = []
        for value in np.unique(values).tolist():
            mask = values == value
            index = ptx_texture.handle_index(int(value), len(self.memory.bound))
            if index is None:
                raise _Fault(f"handle {int(value):#x} names no bound texture or surface",
                             mask)
            groups.append((self.memory.bound[index], None if mask.all() else mask))
        return groups

    def _query(self, instr: ir.Instruction, opcode: str) -> Callable:
        """txq/suq: a property of the bound array (`ptx_texture.query`)."""
        parts = opcode.split(".")
        what = parts[1] if len(parts) > 1 else ""
        handle = instr.args[0] if instr.args else None
        if isinstance(handle, ir.Special):  # a named reference
            array = self.memory.named.get(handle.name)
            if array is None:
                raise Unsupported(f"no array bound to texture or surface '{handle.name}'")
            named, handles = array, None
        elif handle is not None:
            named, handles = None, self._get(handle, "u64")
        else:
            raise Unsupported(f"'{opcode}' without a texture")
        write = _writer(self.regs[instr.dest], "u32")

        def query(sel, lanes, warp):
            out = np.zeros(len(lanes), dtype=np.uint32)
            for array, mask in self._bound(named, handles, sel, len(lanes)):
                try:
                    value = ptx_texture.query(array, what)
                except ptx_texture.TextureUnsupported as error:
                    raise Unsupported(f"{error} ({opcode})") from None
                if mask is None:
                    out[:] = value
                else:
                    out[mask] = value
            write(sel, out)
        return query

    def _texture(self, instr: ir.Instruction, opcode: str) -> Callable:
        """tex, tld4 and suld: element `element` of a fetch, per bound array."""
        try:
            form = ptx_texture.parse_form(opcode, _TYPE_NAMES)
        except ptx_texture.TextureUnsupported as error:
            raise Unsupported(str(error)) from None
        if form.root == "sust" or instr.dest is None:
            raise Unsupported(f"unsupported instruction '{opcode}'")
        named, handles, operands = self._texture_operands(instr)
        if len(operands) < form.dims or (form.root == "tld4" and form.dims != 2):
            raise Unsupported(f"'{opcode}' with {len(operands)} coordinates")
        element = int(instr.attrs.get("element") or 0)
        if form.root == "suld":
            size = bits(form.types[0]) // 8
            result = f"u{8 * size}"
            getters = [self._get(c, "s32") for c in operands[:form.dims]]

            def compute(array, coords):
                return ptx_texture.surface_load(array, form, coords, element, size)
        else:
            if len(form.types) != 2:
                raise Unsupported(f"unsupported instruction '{opcode}'")
            result = canonical(form.types[0])
            getters = [self._get(c, canonical(form.types[1])) for c in operands[:form.dims]]
            out_dtype = dtype(result)
            fn = ptx_texture.gather if form.root == "tld4" else ptx_texture.fetch

            def compute(array, coords):
                return fn(array, form, coords, element, out_dtype)
        write = _writer(self.regs[instr.dest], result)
        guard = instr.attrs.get("guard")
        held = self._guard(str(guard)) if guard else None

        def texture(sel, lanes, warp):
            coords = [np.broadcast_to(np.asarray(g(sel)), lanes.shape) for g in getters]
            if held is not None:  # lanes whose guard fails read texel 0 (never fault)
                skip = ~np.broadcast_to(held(sel), lanes.shape)
                coords = [np.where(skip, np.zeros_like(c), c) for c in coords]
            write(sel, self._per_texture(named, handles, sel, lanes, coords, compute))
        return texture

    def _per_texture(self, named, handles, sel, lanes: np.ndarray, coords: list,
                     compute: Callable) -> np.ndarray:
        """`compute(array, coords)` for each group of lanes holding the same handle."""
        out = None
        for array, mask in self._bound(named, handles, sel, len(lanes)):
            try:
                if mask is None:
                    return compute(array, coords)
                values = compute(array, [c[mask] for c in coords])
            except ptx_texture.TextureFault as fault:
                raise _Fault(fault.message, _widen(fault.mask, mask),
                             outside=fault.outside) from None
            if out is None:
                out = np.zeros(len(lanes), dtype=values.dtype)
            out[mask] = values
        return out

    def _surface_store(self, instr: ir.Instruction, opcode: str) -> Callable:
        """sust.b: the values' raw bits at byte x (and y, z) of the bound surface."""
        try:
            form = ptx_texture.parse_form(opcode, _TYPE_NAMES)
        except ptx_texture.TextureUnsupported as error:
            raise Unsupported(str(error)) from None
        if form.root != "sust":
            raise Unsupported(f"unsupported instruction '{opcode}'")
        named, handles, operands = self._texture_operands(instr)
        size = bits(form.types[0]) // 8
        if len(operands) < form.vector + form.dims:
            raise Unsupported(f"'{opcode}' with {len(operands)} operands")
        split = len(operands) - form.vector
        getters = [self._get(c, "s32") for c in operands[:split][:form.dims]]
        values = [self._get(v, f"u{8 * size}") for v in operands[split:]]
        guard = instr.attrs.get("guard")
        held = self._guard(str(guard)) if guard else None

        def store(sel, lanes, warp):
            keep = None
            if held is not None:
                keep = np.broadcast_to(held(sel), lanes.shape)
                if not keep.any():
                    return
            for array, mask in self._bound(named, handles, sel, len(lanes)):
                if keep is not None:
                    mask = keep if mask is None else mask & keep
                pick = (lambda a: a) if mask is None else (lambda a, m=mask: a[m])
                coords = [pick(np.broadcast_to(np.asarray(g(sel)), lanes.shape))
                          for g in getters]
                data = [pick(np.broadcast_to(np.asarray(v(sel)), lanes.shape))
                        for v in values]
                if not len(coords[0]):
                    continue
                try:
                    ptx_texture.surface_store(array, form, coords, data, size)
                except ptx_texture.TextureFault as fault:
                    raise _Fault(fault.message, _widen(fault.mask, mask),
                             outside=fault.outside) from None
        return store

    def _load(self, instr: ir.Instruction, opcode: str) -> Callable:
        parts = opcode.split(".")
        if instr.space == "texture":
            return self._texture(instr, opcode)
        types = [p for p in parts[1:] if p in _TYPE_NAMES]
        if not types or instr.dest is None:
            raise Unsupported(f"unsupported instruction '{opcode}'")
        type_ = canonical(types[-1])
        if type_ == "pred" or bits(type_) > 64:
            raise Unsupported(f"unsupported instruction '{opcode}'")
        space, address = self._address(instr, instr.args[0])
        size = bits(type_) // 8
        dt = dtype(type_)
        write = _writer(self.regs[instr.dest], type_)
        memory = self.memory
        guard = instr.guard
        held = self._guard(guard) if guard else None

        def gather(addr, lanes):
            groups = memory.resolve(space, addr, size, lanes, "load")
            if len(groups) == 1:
                region, index, _ = groups[0]
                return region.view(dt)[index]
            out = np.zeros(len(addr), dtype=dt)
            for region, index, mask in groups:
                out[mask] = region.view(dt)[index]
            return out

        def load(sel, lanes, warp):
            addr = address(sel)
            if addr.ndim == 0 or len(addr) != len(lanes):
                addr = np.broadcast_to(addr, lanes.shape)
            if held is None:
                write(sel, gather(addr, lanes))
                return
            try:
                write(sel, gather(addr, lanes))
            except _Fault as fault:
                mask = np.broadcast_to(fault.mask, lanes.shape)
                active = np.broadcast_to(held(sel), lanes.shape)
                if (mask & active).any():
                    raise _Fault(fault.message, mask & active) from None
                ok = ~mask
                out = np.zeros(len(lanes), dtype=dt)
                if ok.any():
                    out[ok] = gather(addr[ok], lanes[ok])
                write(sel, out)
        return load

    def _store(self, instr: ir.Instruction, opcode: str) -> Callable:
        if instr.space == "surface":
            return self._surface_store(instr, opcode)
        parts = opcode.split(".")
        types = [p for p in parts[1:] if p in _TYPE_NAMES]
        if parts[0] != "st" or not types or len(instr.args) != 2:
            raise Unsupported(f"unsupported instruction '{opcode}'")
        type_ = canonical(types[-1])
        if type_ == "pred":
            raise Unsupported(f"unsupported instruction '{opcode}'")
        space, address = self._address(instr, instr.args[0])
        size = bits(type_) // 8
        dt = dtype(type_)
        symbols = instr.attrs.get("arg_symbols") or (None, None)
        value = self._get(instr.args[1], type_, symbols[1])
        memory = self.memory
        guard = instr.guard
        held = self._guard(guard) if guard else None

        def store(sel, lanes, warp):
            addr = np.broadcast_to(address(sel), lanes.shape)
            values = np.broadcast_to(np.asarray(value(sel), dtype=dt), lanes.shape)
            if held is not None:
                mask = np.broadcast_to(held(sel), lanes.shape)
                if not mask.all():
                    addr, values, lanes = addr[mask], values[mask], lanes[mask]
                    if not len(lanes):
                        return
            for region, index, group in memory.resolve(space, addr, size, lanes, "store"):
                region.view(dt)[index] = values if group is None else values[group]
        return store

    def _atomic(self, instr: ir.Instruction, opcode: str) -> Callable:
        parts = opcode.split(".")
        types = [p for p in parts[1:] if p in _TYPE_NAMES]
        op_name = next((p for p in parts[1:] if p in _ATOMIC_OPS), None)
        if parts[0] not in ("atom", "red") or not types or op_name is None:
            raise Unsupported(f"unsupported instruction '{opcode}'")
        type_ = canonical(types[-1])
        if "v2" in parts or "v4" in parts or "v8" in parts or bits(type_) < 16:
            raise Unsupported(f"unsupported instruction '{opcode}'")
        if op_name == "add" and kind(type_) == "f" and type_ not in ("f32", "f64"):
            raise Unsupported(f"unsupported instruction '{opcode}'")
        space, address = self._address(instr, instr.args[0])
        size = bits(type_) // 8
        dt = dtype(type_)
        operands = [self._get(a, type_) for a in instr.args[1:]]
        need = 2 if op_name == "cas" else 1
        if len(operands) != need:
            raise Unsupported(f"'{opcode}' with {len(operands)} operands")
        update = _ATOMIC_OPS[op_name]
        write = _writer(self.regs[instr.dest], type_) if instr.dest else None
        memory = self.memory
        guard = instr.guard
        held = self._guard(guard) if guard else None
        what = "atomic" if parts[0] == "atom" else "reduction"

        def atomic(sel, lanes, warp):
            addr = np.broadcast_to(address(sel), lanes.shape)
            values = [np.broadcast_to(np.asarray(g(sel), dtype=dt), lanes.shape)
                      for g in operands]
            target = sel
            if held is not None:
                mask = np.broadcast_to(held(sel), lanes.shape)
                if not mask.all():
                    addr, lanes = addr[mask], lanes[mask]
                    values = [v[mask] for v in values]
                    target = lanes
                    if not len(lanes):
                        return
            olds = np.zeros(len(lanes), dtype=dt)
            position = np.arange(len(lanes))
            for region, index, group in memory.resolve(space, addr, size, lanes, what):
                view = region.view(dt)
                where = position if group is None else position[group]
                for k, cell in zip(where.tolist(), index.tolist(), strict=True):
                    old = view[cell]
                    olds[k] = old
                    view[cell] = update(old, *(v[k] for v in values))
            if write is not None:
                write(target, olds)
        return atomic

    # -- opaque: shfl ------------------------------------------------------------------
    def _opaque(self, instr: ir.Instruction, opcode: str) -> Callable:
        parts = opcode.split(".")
        root = parts[0]
        if instr.operator == "call" or root == "call":
            raise Unsupported(f"cannot execute '{opcode}': the callee is not inlined (no "
                              f"body in this file, indirect or recursive call)")
        if root != "shfl" or instr.dest is None:
            raise Unsupported(f"unsupported instruction '{opcode}'")
        mode = next((p for p in parts[1:] if p in ("up", "down", "bfly", "idx")), None)
        if mode is None or len(instr.args) < 3:
            raise Unsupported(f"unsupported instruction '{opcode}'")
        a = self._get(instr.args[0], "u32")
        b = self._get(instr.args[1], "u32")
        c = self._get(instr.args[2], "u32")
        predicate = instr.attrs.get("element") == 1
        write = _writer(self.regs[instr.dest], "pred" if predicate else "u32")

        def shfl(sel, lanes, warp):
            n = lanes.shape
            lane = (lanes % WARP_SIZE).astype(np.int64)
            source = np.zeros(WARP_SIZE, dtype=np.uint32)
            valid = np.zeros(WARP_SIZE, dtype=bool)
            source[lane] = np.broadcast_to(a(sel), n)
            valid[lane] = True
            bval = np.broadcast_to(b(sel), n).astype(np.int64) & 31
            cval = np.broadcast_to(c(sel), n).astype(np.int64)
            segmask = (cval >> 8) & 31
            clamp = cval & 31
            max_lane = (lane & segmask) | (clamp & ~segmask)
            min_lane = lane & segmask
            if mode == "up":
                j = lane - bval
                ok = j >= max_lane
            elif mode == "down":
                j = lane + bval
                ok = j <= max_lane
            elif mode == "bfly":
                j = lane ^ bval
                ok = j <= max_lane
            else:
                j = min_lane | (bval & ~segmask)
                ok = j <= max_lane
            j = np.where(ok, j, lane) & 31
            if predicate:
                write(sel, ok)
            else:
                write(sel, np.where(valid[j], source[j], np.uint32(0)))
        return shfl

    # -- running (the PTX semantics of the shared engine, `gpudiv.interp.engine`) ------
    def run(self) -> PtxRunResult:
        gx, gy, gz = self.launch.grid
        for z in range(gz):
            for y in range(gy):
                for x in range(gx):
                    self._run_block((x, y, z))
        buffers = {}
        for name, address, array in self.memory.buffers:
            start = address - GLOBAL_BASE
            raw = self.memory.glob.buf[start:start + array.nbytes].copy()
            buffers[name] = raw.view(array.dtype).reshape(array.shape)
        for name, array in self.memory.surfaces:
            buffers[name] = array.copy()
        return PtxRunResult(buffers, self.counters, gx * gy * gz, self.steps,
                            self.memory.global_variables())

    @property
    def steps(self) -> int:
        """Warp steps so far (over all blocks)."""
        return self.counters.warp_instructions

    def _run_block(self, index: tuple[int, int, int]) -> None:
        """Run one block: its warps on the engine under the launch's policy."""
        self._set_block(index)
        tids = np.arange(self.threads, dtype=np.int64)
        warps = [Warp(w // WARP_SIZE, control_for(self.policy, tids[w:w + WARP_SIZE].copy(),
                                                  self.counters))
                 for w in range(0, self.threads, WARP_SIZE)]
        self.engine.run_block(warps)

    def execute(self, op: _Op, top: list, warp: int) -> None:
        """Run an EXEC instruction in the lanes of `top`."""
        try:
            op.fn(top[2], top[1], warp)
        except _Fault as fault:
            raise self._fault(op.index, top[1], warp, fault) from None
        except Unsupported as error:
            raise self._error(op.index, top[1], warp, str(error)) from None

    def jumps(self, op: _Op, top: list, warp: int) -> np.ndarray:
        """Which lanes of `top` a branch sends to its target."""
        value = np.broadcast_to(op.cond(top[2]), top[1].shape)
        if op.case is not None:
            return value == op.case
        return value if op.taken_when else ~value

    def barrier_held(self, op: _Op, top: list) -> np.ndarray | None:
        """The guard of a barrier in the lanes of `top` (None: unguarded)."""
        if op.cond is None:
            return None
        return np.broadcast_to(op.cond(top[2]), top[1].shape)

    def record(self, step: int, op: _Op, warp: int, lanes: np.ndarray) -> None:
        """One trace row: (block, warp, PTX line, text, lane ids)."""
        if self.trace is not None:
            self.trace.append((self.block_index, warp, op.instr.loc.line, op.instr.text,
                               lanes.tolist()))

    def reader(self, lanes: np.ndarray) -> Callable[[str], np.ndarray]:
        """Register values in the lanes (for observers)."""
        return self._reading(lanes)

    def error(self, pc: int, lanes, warp: int, message: str) -> PtxExecutionError:
        """An error located at pc."""
        return self._error(pc, lanes, warp, message)

    def state(self) -> list[bytes]:
        """Registers and memories as bytes (for cycle detection)."""
        parts = [store.tobytes() for store in self.regs.values()]
        memory = self.memory
        parts += [memory.shared.buf.tobytes(), memory.local.buf.tobytes(),
                  memory.glob.buf.tobytes(), str(self.block_reduction).encode()]
        parts += [array.tobytes() for _, array in memory.surfaces]
        return parts

    def deadlock(self, warp: int, line: int, lanes: np.ndarray,
                 message: str) -> PtxDeadlockError:
        """The error for a block whose state repeats, naming block and warp."""
        block = ", ".join(map(str, self.block_index))
        message += f" (block ({block}), warp {warp})"
        return PtxDeadlockError(self.kernel.name, line, None, [int(t) for t in lanes],
                                message, self.block_index, warp)

    @staticmethod
    def lane_ids(lanes: np.ndarray) -> list[int]:
        """PTX messages name lanes of the warp."""
        return [int(t) % WARP_SIZE for t in lanes]

    def release(self, warps: list[Warp]) -> None:
        """Every warp of the block waits at a barrier: compute a bar.red's value from the
        votes of all threads (each warp's lanes at the barrier)."""
        after = {w.waiting + 1 for w in warps}
        reductions = {self.ops[pc].reduction for pc in after if pc < self.end} - {None}
        if not reductions:
            return
        first = warps[0]
        if len(after) > 1:
            raise self._error(first.waiting, first.control.running()[1], first.index,
                              "warps of the block wait at different barriers, one of "
                              "them a bar.red")
        ((mode, votes),) = reductions
        lane_votes = [votes(top[2], top[1]) for top in (w.control.running() for w in warps)]
        if mode == "popc":
            self.block_reduction = np.uint32(sum(int(v.sum()) for v in lane_votes))
        elif mode == "and":
            self.block_reduction = np.bool_(all(v.all() for v in lane_votes))
        else:
            self.block_reduction = np.bool_(any(v.any() for v in lane_votes))

    def _reading(self, lanes: np.ndarray) -> Callable[[str], np.ndarray]:
        """Values of a register or special register in the lanes, signed at its width
        (dtype bool, int8, int16, int32 or int64: the oracle compares modulo the width)."""
        def read(name: str) -> np.ndarray:
            store = self.regs.get(name)
            if store is None:
                store = self.specials.get(name)
            if store is None:
                return np.zeros(len(lanes), dtype=np.int64)
            if store.dtype == np.bool_:
                return store[lanes]
            return store.view(dtype(f"s{store.dtype.itemsize * 8}"))[lanes]
        return read

    # -- errors --------------------------------------------------------------------------
    def _error(self, pc: int, lanes, warp: int, message: str) -> PtxExecutionError:
        op = self.ops[min(pc, self.end - 1)] if self.ops else None
        line = op.instr.loc.line if op else self.kernel.loc.line
        label = op.label if op else None
        return PtxExecutionError(self.kernel.name, line, label, [int(t) for t in lanes],
                                 message, self.block_index, warp)

    def _fault(self, pc: int, lanes: np.ndarray, warp: int, fault) -> PtxExecutionError:
        mask = fault.mask
        if getattr(fault, "lanes", None) is not None:
            lanes = fault.lanes
        elif mask is not None and np.ndim(mask) and len(mask) == len(lanes):
            lanes = lanes[np.asarray(mask, dtype=bool)]
        opcode = self.ops[pc].instr.attrs.get("opcode", "")
        error = self._error(pc, lanes, warp, f"{fault.message} ({opcode})")
        error.outside = fault.outside
        return error


def _widen(inner: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """A lanes mask over a group (`mask` of all lanes, None: all) as a mask of all lanes."""
    if mask is None:
        return inner
    full = np.zeros(len(mask), dtype=bool)
    full[mask] = inner
    return full


def _with_copies(fn: Callable, copies: list[tuple[np.ndarray, np.ndarray]]) -> Callable:
    """`fn` after copying registers to their shadows in the active lanes."""
    def run(sel, lanes, warp):
        for source, shadow in copies:
            shadow[sel] = source[sel]
        fn(sel, lanes, warp)
    return run


def _ballot(lanes: np.ndarray) -> np.uint32:
    mask = 0
    for lane in (lanes % WARP_SIZE).tolist():
        mask |= 1 << lane
    return np.uint32(mask)


def _atomic_inc(old, b):
    return type(old)(0) if old >= b else old + type(old)(1)


def _atomic_dec(old, b):
    return b if (old == 0 or old > b) else old - type(old)(1)


_ATOMIC_OPS: dict[str, Callable] = {
    "add": lambda old, b: old + b,
    "exch": lambda old, b: b,
    "cas": lambda old, compare, new: new if old == compare else old,
    "min": lambda old, b: b if b < old else old,
    "max": lambda old, b: b if b > old else old,
    "inc": _atomic_inc,
    "dec": _atomic_dec,
    "and": lambda old, b: old & b,
    "or": lambda old, b: old | b,
    "xor": lambda old, b: old ^ b,
}


# ---------------------------------------------------------------------------------------
# Inputs for `gpudiv check`: launch shapes and synthesised arguments
# ---------------------------------------------------------------------------------------

# (grid, block, buffer fill): one block of one warp, a partial last warp over two blocks,
# 2-D blocks on a 2-D grid, three full-warp blocks, a 3-D block with a partial warp.
CHECK_SHAPES: tuple[tuple[tuple[int, int, int], tuple[int, int, int], str], ...] = (
    ((1, 1, 1), (32, 1, 1), "zeros"),
    ((2, 1, 1), (48, 1, 1), "ints"),
    ((2, 2, 1), (8, 4, 1), "ints"),
    ((3, 1, 1), (64, 1, 1), "floats"),
    ((1, 1, 1), (4, 3, 2), "zeros"),
)
CHECK_BUFFER_BYTES = 128 * 1024
CHECK_DYNAMIC_SHARED = 4096
CHECK_MAX_STEPS = 50_000
_SMALL_SCALARS = (0, 1, 2, 3, 5, 7, 16, 33, 40)


_POINTER_ROOTS = frozenset({"mov", "cvta", "add", "sub", "ld", "st", "call"})


def _param_sources(kernel: ir.Kernel) -> dict[str, set[str]]:
    """The parameters each register's value may come from (through any chain of moves,
    adds, selects and `.param` copies, flow-insensitively)."""
    derived: dict[str, set[str]] = {}
    instructions = kernel.instructions()
    for instr in instructions:
        if (instr.kind == ir.LOAD and instr.space == "param" and instr.dest
                and instr.attrs.get("symbol") in kernel.params):
            derived.setdefault(instr.dest, set()).add(str(instr.attrs["symbol"]))
    changed = True
    while changed:
        changed = False
        for instr in instructions:
            if instr.kind != ir.ASSIGN or not instr.dest:
                continue
            root = str(instr.attrs.get("opcode", "")).split(".", 1)[0]
            if root not in _POINTER_ROOTS and instr.operator not in (
                    "copy", "select", "select.not"):
                continue  # indices (scaled by mul/shl/cvt) are not pointers
            sources = set().union(*(derived.get(v, set()) for v in instr.used_vars))
            if sources - derived.get(instr.dest, set()):
                derived.setdefault(instr.dest, set()).update(sources)
                changed = True
    return derived


def _texture_handle(instr: ir.Instruction) -> ir.Operand | None:
    """The handle operand of a texture/surface instruction on an object (not a named
    reference), else None."""
    if instr.space not in ("texture", "surface") or not instr.args:
        return None
    if instr.attrs.get("texture") or instr.attrs.get("symbol"):
        return None
    return instr.args[0]


def pointer_params(kernel: ir.Kernel) -> list[str]:
    """Parameters whose value reaches a memory address: they get buffers; the others get
    scalars (or, for texture handles, textures: `texture_params`)."""
    derived = _param_sources(kernel)
    pointers: set[str] = set()
    for instr in kernel.instructions():
        address = instr.args[0] if instr.args else None
        if (instr.kind in (ir.LOAD, ir.STORE, ir.ATOMIC)
                and instr.space not in ("param", "texture", "surface")
                and isinstance(address, ir.Var)):
            pointers |= derived.get(address.name, set())
        opcode = str(instr.attrs.get("opcode", ""))
        if opcode.startswith("cvta") and instr.used_vars:
            pointers |= derived.get(instr.used_vars[0], set())
    return [p for p in kernel.params if p in pointers - set(texture_params(kernel))]


def texture_params(kernel: ir.Kernel) -> dict[str, ptx_texture.Form]:
    """Parameters that are texture or surface objects, with the first instruction form
    that uses each (it says the geometry, element type and whether it is a surface)."""
    derived = _param_sources(kernel)
    found: dict[str, ptx_texture.Form] = {}
    for name, form in _texture_uses(kernel):
        for param in sorted(derived.get(name, set())):
            found.setdefault(param, form)
    return {p: found[p] for p in kernel.params if p in found}


def texture_refs(kernel: ir.Kernel) -> dict[str, ptx_texture.Form]:
    """Texture and surface references (`.global .texref t`) the kernel fetches from."""
    found: dict[str, ptx_texture.Form] = {}
    for instr in kernel.instructions():
        if instr.space not in ("texture", "surface"):
            continue
        name = instr.attrs.get("texture") or instr.attrs.get("symbol")
        form = _form_of(instr)
        if name and form is not None:
            found.setdefault(str(name), form)
    return found


def _form_of(instr: ir.Instruction) -> ptx_texture.Form | None:
    try:
        return ptx_texture.parse_form(str(instr.attrs.get("opcode", "")), _TYPE_NAMES)
    except ptx_texture.TextureUnsupported:
        return None


def _texture_uses(kernel: ir.Kernel) -> list[tuple[str, ptx_texture.Form]]:
    """(handle register, form) of every texture/surface instruction on an object."""
    uses = []
    for instr in kernel.instructions():
        handle = _texture_handle(instr)
        form = _form_of(instr) if handle is not None else None
        if isinstance(handle, ir.Var) and form is not None:
            uses.append((handle.name, form))
    return uses


def synthesized_texture(rng: np.random.Generator, form: ptx_texture.Form, fill: str,
                        scale: int = 1) -> ptx_texture.Texture:
    """An array for a texture or surface the kernel uses as `form` says: 8192·scale texels
    (1-D), 128×128·scale (2-D) or 32×32×32·scale (3-D); one channel of the fetched type
    for textures, `vector` channels of the accessed width for surfaces."""
    shape = {1: (8192 * scale,), 2: (128 * scale, 128), 3: (32 * scale, 32, 32)}[form.dims]
    surface = form.root in ("suld", "sust")
    if surface:
        type_ = f"u{bits(form.types[0])}"
        if form.vector > 1:
            shape = (*shape, form.vector)
    else:
        type_ = canonical(form.types[0])
    dt = dtype(type_)
    if fill == "zeros":
        array = np.zeros(shape, dtype=dt)
    elif kind(type_) == "f":
        array = rng.uniform(-2.0, 2.0, size=shape).astype(dt)
    else:
        array = rng.integers(0, 16, size=shape).astype(dt)
    return ptx_texture.Texture(array, surface=surface)


def synthesize_launches(kernel: ir.Kernel, seed: int = 0,
                        shapes=CHECK_SHAPES, max_steps: int = CHECK_MAX_STEPS,
                        buffer_bytes: int = CHECK_BUFFER_BYTES) -> list[PtxLaunch]:
    """Launches with generous buffers for pointer parameters (zeros, small integers or
    small floats) and small random scalars for the others."""
    rng = np.random.default_rng(seed)
    pointers = set(pointer_params(kernel))
    textures = texture_params(kernel)
    references = texture_refs(kernel)
    types = {name: type_ for name, type_, _, _ in kernel.attrs.get("params", ())}
    sizes = {name: size for name, _, size, _ in kernel.attrs.get("params", ())}
    launches = []
    for grid, block, fill in shapes:
        args: dict[str | int, object] = {}
        for name in kernel.params:
            type_ = types.get(name, "")
            if name in textures:
                args[name] = synthesized_texture(rng, textures[name], fill)
            elif name in pointers:
                args[name] = _fill(rng, fill, buffer_bytes)
            elif type_ in ("f32", "f64", "f16"):
                args[name] = float(rng.choice([0.5, 1.0, 1.5, 2.0, -1.0, 3.0]))
            elif type_ in _TYPE_NAMES and type_ != "pred":
                args[name] = int(rng.choice(_SMALL_SCALARS))
            else:  # an array parameter (a struct by value): small random bytes
                args[name] = bytes(rng.integers(0, 8, size=sizes.get(name, 8),
                                                dtype=np.uint8))
        bound = {name: synthesized_texture(rng, form, fill) for name, form in references.items()}
        launches.append(PtxLaunch(grid=grid, block=block, args=args, textures=bound,
                                  dynamic_shared=CHECK_DYNAMIC_SHARED, max_steps=max_steps))
    return launches


def _fill(rng: np.random.Generator, fill: str, size: int) -> np.ndarray:
    if fill == "zeros":
        return np.zeros(size // 4, dtype=np.int32)
    if fill == "ints":
        return rng.integers(0, 16, size=size // 4, dtype=np.int32)
    return rng.uniform(-2.0, 2.0, size=size // 4).astype(np.float32)
