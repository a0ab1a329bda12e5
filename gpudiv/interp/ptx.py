"""Reference interpreter for PTX kernels: runs the lowered IR on NumPy lanes.

It executes exactly the instructions `gpudiv.lang.ptx.parse` produced (guards as selects,
split vectors, inlined `.func` calls), so every executed instruction has the index that
SSA, facts and the oracle use, and `gpudiv.verify.oracle.ClaimObserver` works unchanged through
the `Observer` protocol of the μ-SIMD interpreter. What the lowering does not show the
analyses (address displacements, vector elements, register types, symbol layouts, the
operands of `vote`/`activemask`) comes from `Instruction.attrs` and `Kernel.attrs`.

The machine (docs/design.md, "Semantics choices for PTX"):

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

This module runs launches (`run_ptx_kernel`, `run_ptx_growing`) and re-exports the launch
types; the interpreter's parts live beside it: `ptx_launch` (launches, results, errors,
limits), `ptx_memory` (memories and addresses), `ptx_registers` (typed register access),
`ptx_machine` (instruction preparation and the machine on the engine), `ptx_ops`
(instruction semantics), `ptx_texture` (textures and surfaces) and `ptx_synthesis`
(launches synthesised for `gpudiv check`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from gpudiv import ir
from gpudiv.interp import ptx_texture
from gpudiv.interp.engine import Observer
from gpudiv.interp.ptx_launch import (
    PtxDeadlockError,
    PtxExecutionError,
    PtxLaunch,
    PtxRunResult,
    check_launch,
)
from gpudiv.interp.ptx_machine import Machine
from gpudiv.interp.ptx_ops import Unsupported
from gpudiv.interp.simt import DeadlockError, ExecutionError, never_released

__all__ = ["GROW_FACTOR", "GROW_RETRIES", "PtxDeadlockError", "PtxExecutionError", "PtxLaunch",
           "PtxRunResult", "grown", "run_ptx_growing", "run_ptx_kernel"]


def run_ptx_kernel(kernel: ir.Kernel, launch: PtxLaunch, observer: Observer | None = None,
                   trace: list | None = None) -> PtxRunResult:
    """Run a lowered PTX kernel over the whole grid; raise PtxExecutionError on faults.

    `trace`, if a list, receives one (block, warp, PTX line, text, lane ids) tuple per
    executed warp instruction."""
    check_launch(kernel, launch)
    try:
        machine = Machine(kernel, launch, observer, trace)
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



def _confirm_deadlock(kernel: ir.Kernel, launch: PtxLaunch, error: DeadlockError) -> None:
    """A SIMT deadlock is one only if the lanes would finish on their own: when the same
    launch also loops forever under mimd, say so (nothing releases the spinning lanes)."""
    try:
        with np.errstate(all="ignore"):
            Machine(kernel, replace(launch, reconvergence="mimd"), None, None).run()
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

