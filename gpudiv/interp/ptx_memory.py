"""The memories of one PTX launch: the global arena with red zones, per-block `.shared`,
per-thread `.local`, `.const` and `.param`, the windows of generic addresses, bounds and
alignment checks (`Fault` per lane), and the layout of the kernel's symbols."""

from __future__ import annotations

import bisect
import struct

import numpy as np

from gpudiv import ir
from gpudiv.interp import ptx_texture
from gpudiv.interp.ptx_launch import PtxLaunch
from gpudiv.interp.ptx_ops import Unsupported, bits, constant, dtype, kind, unsigned
from gpudiv.lang.ptx.parse import _float_bits
from gpudiv.lang.ptx.types import TYPE_NAMES as _TYPE_NAMES

GLOBAL_BASE = 0x1000_0000
SHARED_WINDOW = 0x0100_0000
LOCAL_WINDOW = 0x0200_0000
CONST_WINDOW = 0x0300_0000
PARAM_WINDOW = 0x0400_0000
# Where functions are (addresses a function pointer holds; no memory is there).
CODE_WINDOW = 0x0500_0000
WINDOW_SIZE = 0x0100_0000
WINDOWS = {"shared": SHARED_WINDOW, "local": LOCAL_WINDOW, "const": CONST_WINDOW,
           "param": PARAM_WINDOW}
RED_ZONE = 256
# Bytes a launch may allocate (registers, local, shared and global memory), checked
# before anything is allocated.
MAX_LAUNCH_BYTES = 2 * 1024**3
MAX_SHARED = 228 * 1024
MAX_LOCAL = 512 * 1024


# ---------------------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------------------


def function_addresses(kernel: ir.Kernel) -> dict[str, int]:
    """The address a pointer to each function that a kernel with its calls kept reaches
    (`attrs["functions"]`) holds while the kernel runs."""
    return {function: CODE_WINDOW + 16 * (k + 1)
            for k, function in enumerate(kernel.attrs.get("functions", {}))}


class Fault(Exception):
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



class Memory:
    """All memories of one launch and the layout of the kernel's symbols."""

    def __init__(self, kernel: ir.Kernel, launch: PtxLaunch, threads: int,
                 register_bytes: int = 0, stack: int = 0) -> None:
        """`stack`: bytes per thread after the kernel's `.local` variables for the frames
        of recursive calls (`stack_base` is where they start)."""
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
        for function, address in function_addresses(kernel).items():  # calls as calls
            self.addresses[function] = ("global", address)
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
        self.stack_base = _round_up(local_top, 16)
        if stack:
            local_top = self.stack_base + stack
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
                value = (generic_address(*where) if where else 0) + item[2]
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
                except Fault as fault:  # report the mask over all the lanes
                    full = np.zeros(addr.shape, dtype=bool)
                    full[mask] = fault.mask
                    raise Fault(fault.message, full, fault.lanes, fault.outside) from None
                groups.append((self.region(name), index, mask))
        if not covered.all():
            first = int(addr[~covered][0])
            raise Fault(f"{what} of {size} bytes at generic address {first:#x}, which is "
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
            raise Fault(f"out-of-bounds {space} {what} of {size} bytes at address "
                         f"{first:#x}{limit}", bad, lanes[bad],
                         outside=space == "global" and first >= GLOBAL_BASE)
        if size > 1:
            misaligned = (offsets & (size - 1)) != 0
            if misaligned.any():
                raise Fault(f"misaligned {space} {what} of {size} bytes at address "
                             f"{int(addr[misaligned][0]):#x}", misaligned, lanes[misaligned])
        if space == "local":
            offsets = region.offsets(offsets, lanes)
        return offsets // size


def generic_address(space: str, address: int) -> int:
    """The generic address of a state-space address."""
    return address if space == "global" else WINDOWS[space] + address


# ---------------------------------------------------------------------------------------
# Registers and operands
# ---------------------------------------------------------------------------------------
