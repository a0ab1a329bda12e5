"""A PTX launch (grid, block, arguments), its result, the errors of a run, CUDA's limits
on launch shapes and the checks a launch must pass before anything runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from gpudiv import ir
from gpudiv.interp import ptx_texture
from gpudiv.interp.engine import has_marks
from gpudiv.interp.policies import AWARE_TIMEOUT
from gpudiv.interp.simt import (
    RECONVERGENCE_MODES,
    Counters,
    DeadlockError,
    ExecutionError,
    format_lanes,
)

WARP_SIZE = 32
MAX_THREADS = 1024
# CUDA's limits on launch shapes (grid x, y, z; block x, y, z).
MAX_GRID = (2**31 - 1, 65535, 65535)
MAX_BLOCK = (1024, 1024, 64)

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
        self.outside = False  # an access outside every buffer (see ptx_memory.Fault)
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
    # reconvergence points of marked branches: `machine_policy`), ipdom, sync, frontier,
    # mimd or aware.
    reconvergence: str = "auto"
    # `aware`: warp steps that lanes wait at a reconvergence point before they go on
    # without the others (AWARE's timed-out reconvergence); None: they wait forever.
    aware_timeout: int | None = AWARE_TIMEOUT
    # Bytes of stack per thread for the frames of recursive calls (CUDA's default
    # `cudaLimitStackSize`); deeper recursion stops the run with a stack overflow.
    stack_size: int = 1024
    # The register that "tid" stands for in affine claims (gpudiv.verify.oracle.ClaimObserver).
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



def machine_policy(kernel: ir.Kernel, policy: str) -> str:
    """The control a launch's policy means for a kernel: `auto` and `sync` reconverge at
    the explicit reconvergence points of marked branches ("marked", the PDOM stack with
    those points; `engine.RECONVERGE_ATTR`) and at immediate post-dominators elsewhere;
    `auto` without marks is `ipdom`."""
    if policy in ("auto", "sync"):
        return "marked" if policy == "sync" or has_marks(kernel) else "ipdom"
    return policy


def check_launch(kernel: ir.Kernel, launch: PtxLaunch) -> None:
    """Raise ValueError when a launch's shape, limits or arguments do not fit the kernel."""
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
    if launch.stack_size < 0:
        raise ValueError("stack_size must not be negative")
    if launch.reconvergence not in RECONVERGENCE_MODES:
        raise ValueError(f"reconvergence must be one of {', '.join(RECONVERGENCE_MODES)}")
    if launch.aware_timeout is not None and launch.aware_timeout < 1:
        raise ValueError("aware_timeout must be at least 1 (None: no timeout)")
    names = set(kernel.params)
    for key in launch.args:
        if isinstance(key, str) and key not in names:
            raise ValueError(f"kernel {kernel.name} has no parameter '{key}'")
        if isinstance(key, int) and not 0 <= key < len(kernel.params):
            raise ValueError(f"kernel {kernel.name} has no parameter number {key}")
