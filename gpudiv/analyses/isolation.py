"""Per-kernel time limits: analyse kernels one by one in a forked child, each under a deadline.

`gpudiv analyze --kernel-timeout S` runs here. A child process (`os.fork`) analyses the
kernels in order and sends each result back as soon as it has it; the parent gives every
kernel `S` seconds from the moment the previous one arrived. When a kernel overruns, the
child is killed, the kernel becomes a `KernelTimeout` (a kernel not analysed, with the
reason) and a fresh child goes on with the next kernel. Every stage of a kernel's analysis
(CFG, SSA, facts, grounding, solving, results) counts; reading the file does not. Where
processes cannot fork the kernels are analysed in this process without a limit.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import struct
import time
from collections.abc import Callable
from typing import TypeVar

from gpudiv.solve import RuleError

T = TypeVar("T")

# How the reason of every kernel this module gives up on begins.
NOT_ANALYSED = "not analysed: "

_HEADER = struct.Struct("!IQ")  # kernel index, length of the pickled outcome


class KernelTimeout(RuleError):
    """A kernel whose analysis did not finish within the per-kernel time limit."""


class KernelCrash(RuleError):
    """A kernel whose analysis ended the process analysing it (e.g. out of memory)."""


def timeout_error(seconds: float) -> KernelTimeout:
    """The reason given for a kernel that overran `seconds`."""
    return KernelTimeout(f"{NOT_ANALYSED}its analysis took more than {seconds:g} s (the "
                         "limit of --kernel-timeout); the kernel is skipped")


def each_in_child(count: int, work: Callable[[int], T], seconds: float,
                  on_item: Callable[[int], None] | None = None) -> list[T | RuleError]:
    """`[work(i) for i in range(count)]`, computed in forked children with `seconds` per
    item; an item that overruns is a `KernelTimeout`, one that kills its child a
    `KernelCrash`. `work` returns picklable data (a RuleError counts as data).
    `on_item(done)` hears how many items have an outcome, after each one."""
    if not hasattr(os, "fork"):
        return [work(i) for i in range(count)]
    results: dict[int, T | RuleError] = {}
    start = 0
    while start < count:
        got, status = _one_child(start, count, work, seconds, results, on_item)
        start = got
        if start < count:
            results[start] = (timeout_error(seconds) if status is None else
                              KernelCrash(f"{NOT_ANALYSED}the process analysing it stopped "
                                          f"(status {status}); the kernel is skipped"))
            start += 1
            if on_item is not None:
                on_item(len(results))
    return [results[i] for i in range(count)]


def _one_child(start: int, count: int, work: Callable[[int], T], seconds: float,
               results: dict[int, T | RuleError],
               on_item: Callable[[int], None] | None) -> tuple[int, int | None]:
    """Run a child over items `start…`; store what arrives. Returns the first item without
    a result and the child's exit status (None when it was killed for overrunning)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: one framed pickle per item, then leave without cleanup
        code = 0
        try:
            os.close(read_fd)
            with os.fdopen(write_fd, "wb", buffering=0) as out:
                for i in range(start, count):
                    data = pickle.dumps(work(i), protocol=pickle.HIGHEST_PROTOCOL)
                    out.write(_HEADER.pack(i, len(data)) + data)
        except BaseException:  # noqa: BLE001 - the parent sees the missing result
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    reader = _FrameReader(read_fd)
    next_item, killed = start, False
    try:
        while next_item < count:
            frame = reader.frame(time.monotonic() + seconds)
            if frame is None:
                killed = reader.timed_out
                break
            index, data = frame
            results[index] = pickle.loads(data)
            next_item = index + 1
            if on_item is not None:
                on_item(len(results))
    finally:
        os.close(read_fd)
        if killed or next_item < count:
            _kill(pid)
        status = _reap(pid)
    return next_item, None if killed else status


def _kill(pid: int) -> None:
    """Kill a child that may already have ended."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _reap(pid: int) -> int:
    """Wait for a child; its exit status."""
    try:
        return os.waitpid(pid, 0)[1]
    except ChildProcessError:
        return 0


class _FrameReader:
    """Reads `_HEADER`-framed records from a pipe, each before a deadline."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = bytearray()
        self.timed_out = False

    def frame(self, deadline: float) -> tuple[int, bytes] | None:
        """The next record, or None at the end of the pipe or when the deadline passes
        (then `timed_out`)."""
        if not self._fill(_HEADER.size, deadline):
            return None
        index, length = _HEADER.unpack_from(self.buffer)
        if not self._fill(_HEADER.size + length, deadline):
            return None
        data = bytes(self.buffer[_HEADER.size:_HEADER.size + length])
        del self.buffer[:_HEADER.size + length]
        return index, data

    def _fill(self, size: int, deadline: float) -> bool:
        """Read until the buffer holds `size` bytes; False at the end or the deadline."""
        while len(self.buffer) < size:
            ready, _, _ = select.select([self.fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                self.timed_out = True
                return False
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                return False
            self.buffer += chunk
        return True
