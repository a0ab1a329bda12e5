"""Calls run as calls: the per-thread bookkeeping of the functions a kernel calls
(issue 16, item 1; docs/execution.md, "Calls").

A kernel lowered for execution with its calls kept (`FunctionReader.executable`) carries
its functions, each lowered once with its registers renamed `NAME@@FUNCTION`. The PTX
machine lays them out after the kernel; a `call` passes the arguments through one
register per input slot of the callee and the PDOM stack runs the callee in an entry of
its own (`policies.IpdomStack.call`); the callee's `call.return` copies its outputs to one
register per output slot, which the result instructions after the call read.

A function's registers and `.local` variables live in one place per thread, as when
calls are inlined, until a thread calls a function it is already in (recursion): then
its registers are saved for the calling lanes and restored when the call returns, and
its `.local` variables move to a fresh frame on the thread's stack (`PtxLaunch.
stack_size` bytes after the kernel's own `.local` memory), so that a pointer into the
caller's frame still points there.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from gpudiv import ir
from gpudiv.lang.ptx.functions import FunctionReader


def executable_form(kernel: ir.Kernel, path: str, text: str | None = None) -> ir.Kernel:
    """A kernel read with its calls inlined, lowered again from `text` (default: the text
    a kernel whose calls inlining left opaque keeps, `attrs["ptx_text"]`) with its calls
    kept (`FunctionReader.executable`). ValueError when that cannot be done."""
    text = text if text is not None else kernel.attrs.get("ptx_text")
    if text is None:
        raise ValueError(f"kernel {kernel.name}: no PTX text to lower its calls as calls")
    reader = FunctionReader(str(text), path)
    kept = reader.executable(kernel.name) if kernel.name in reader.entries else None
    if kept is None:
        errors = [str(d) for d in reader.diagnostics if d.severity == "error"]
        raise ValueError(f"kernel {kernel.name}: cannot keep its calls as calls"
                         + (f" ({errors[0]})" if errors else ""))
    return kept


# The operators of the instructions that pass values into and out of a call (a call and
# its results, a callee's parameters and its return).
CALL_OPERATORS = frozenset({"call", "call.input", "call.return"})


class StackOverflow(Exception):
    """A recursive call needs more stack than the launch gives a thread."""


@dataclass(eq=False)
class Activation:
    """One call of `callee` by `lanes`; what a recursive call saved (the callee's
    registers and `.local` addresses, every thread's: restored in the lanes that return,
    which may return at different times under `mimd`) and the stack bytes its frame
    took."""

    callee: str
    lanes: np.ndarray
    saved: dict[str, np.ndarray] | None = None
    frame: int = 0
    digest: str = ""

    def __repr__(self) -> str:  # part of the control state the deadlock detector hashes
        return f"call {self.callee} {self.digest}"


def frame_layouts(functions: dict[str, ir.Kernel], recursive: frozenset[str],
                  addresses: dict[str, tuple[str, int]], symbols: dict[str, tuple]
                  ) -> dict[str, tuple[dict[str, int], int]]:
    """Per recursive function with `.local` variables: each variable's offset in its
    frame and the frame's size (16-byte aligned)."""
    layouts = {}
    for name in sorted(recursive):
        kernel = functions.get(name)
        owned = [s for s in (kernel.attrs.get("frame_symbols", ()) if kernel else ())
                 if s in addresses and addresses[s][0] == "local"]
        if not owned:
            continue
        low = min(addresses[s][1] for s in owned)
        high = max(addresses[s][1] + int(symbols[s][3]) for s in owned)
        layouts[name] = ({s: addresses[s][1] - low for s in owned}, -(-(high - low) // 16) * 16)
    return layouts


class CallFrames:
    """How deep each thread is in each function, its stack pointer, and what recursive
    activations save and restore."""

    def __init__(self, functions: dict[str, ir.Kernel], recursive: frozenset[str],
                 regs: dict[str, np.ndarray], specials: dict[str, np.ndarray],
                 layouts: dict[str, tuple[dict[str, int], int]], threads: int,
                 stack_base: int, stack_size: int) -> None:
        self.registers = {f: [n for n in regs if n.endswith(f"@@{f}")] for f in functions}
        self.regs = regs
        self.specials = specials
        self.layouts = layouts
        self.depth = {f: np.zeros(threads, dtype=np.int32) for f in recursive}
        self.stack_base = stack_base
        self.stack_end = stack_base + stack_size
        self.sp = np.full(threads, stack_base, dtype=np.int64)
        self.static = {s: specials[s].copy() for layout, _ in layouts.values() for s in layout}

    @property
    def relocatable(self) -> set[str]:
        """`.local` variables whose address depends on the activation."""
        return set(self.static)

    def reset(self) -> None:
        """A new block: no thread is in any function."""
        for depth in self.depth.values():
            depth.fill(0)
        self.sp.fill(self.stack_base)
        for name, addresses in self.static.items():
            self.specials[name][:] = addresses

    def enter(self, callee: str, lanes: np.ndarray, sel) -> Activation:
        """`lanes` call `callee` (after their arguments were passed)."""
        activation = Activation(callee, lanes)
        depth = self.depth.get(callee)
        if depth is None:  # not recursive: nothing to save
            return activation
        if depth[sel].any():
            activation.saved = {n: self.regs[n].copy() for n in self.registers[callee]}
            layout = self.layouts.get(callee)
            if layout is not None:
                offsets, size = layout
                base = self.sp[sel]
                if int(base.max()) + size > self.stack_end:
                    raise StackOverflow(
                        f"stack overflow: a recursive call of {callee} needs a frame of "
                        f"{size} bytes beyond the {self.stack_end - self.stack_base} "
                        f"bytes of stack a thread has (--stack-size)")
                for symbol, offset in offsets.items():
                    activation.saved[symbol] = self.specials[symbol].copy()
                    self.specials[symbol][sel] = (base + offset).astype(np.uint64)
                self.sp[sel] = base + size
                activation.frame = size
            digest = hashlib.blake2b(digest_size=8)
            for values in activation.saved.values():
                digest.update(values[sel].tobytes())
            activation.digest = digest.hexdigest()
        depth[sel] += 1
        return activation

    def leave(self, activation: Activation, lanes: np.ndarray) -> None:
        """`lanes` return from the call `activation` stands for (after their outputs were
        passed)."""
        depth = self.depth.get(activation.callee)
        if depth is None:
            return
        if len(lanes) != len(activation.lanes):
            lanes = np.intersect1d(lanes, activation.lanes, assume_unique=True)
        depth[lanes] -= 1
        if activation.saved is None:
            return
        for name, values in activation.saved.items():
            store = self.regs.get(name)
            (self.specials[name] if store is None else store)[lanes] = values[lanes]
        if activation.frame:
            self.sp[lanes] -= activation.frame

    def state(self) -> list[bytes]:
        """The bookkeeping as bytes (for cycle detection)."""
        return [self.sp.tobytes(), *(d.tobytes() for d in self.depth.values())]
