"""Work in a forked child process under a deadline, its results streamed back through a pipe.

The one place where gpudiv forks: `gpudiv.analyses.solve` grounds and solves a user's rules in a
child with a time and memory budget, and `gpudiv.analyses.isolation` analyses kernels one
by one under `--kernel-timeout`. The child (`os.fork`, so it shares the parent's loaded
rules and IR) computes items `start, start + 1, …` in order and writes each outcome as
one framed pickle; the parent reads each frame before its deadline and kills the child
when one overruns. The child leaves with `os._exit` (no cleanup handlers of the parent run
twice). Callers check `can_fork()` first: where processes cannot fork, nothing is limited.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass

_HEADER = struct.Struct("!IQ")  # item index, length of the pickled outcome


def can_fork() -> bool:
    """Whether this platform can fork (not Windows)."""
    return hasattr(os, "fork")


@dataclass(frozen=True)
class ChildEnd:
    """How a child ended: the first item without an outcome, whether the parent killed
    it for overrunning, and its exit status (0 when killed)."""

    next_item: int
    timed_out: bool
    status: int


def run_in_child(start: int, count: int, work: Callable[[int], object],
                 seconds: float | None, on_result: Callable[[int, object], None]
                 ) -> ChildEnd:
    """Compute `work(i)` for `i` in `start…count-1` in one forked child; `on_result(i,
    outcome)` hears of each outcome as it arrives. Each item gets `seconds` (None: no
    limit) from the arrival of the previous one; an exception in the child ends it with
    status 1. `work` returns picklable data."""
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
        except BaseException:  # noqa: BLE001 - the parent sees the missing outcome
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    reader = _FrameReader(read_fd)
    next_item = start
    try:
        while next_item < count:
            deadline = None if seconds is None else time.monotonic() + seconds
            frame = reader.frame(deadline)
            if frame is None:
                break
            index, data = frame
            on_result(index, pickle.loads(data))
            next_item = index + 1
    finally:
        os.close(read_fd)
        if reader.timed_out or next_item < count:
            _kill(pid)
        status = _reap(pid)
    return ChildEnd(next_item, reader.timed_out, 0 if reader.timed_out else status)


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

    def frame(self, deadline: float | None) -> tuple[int, bytes] | None:
        """The next record, or None at the end of the pipe or when the deadline (None:
        none) passes (then `timed_out`)."""
        if not self._fill(_HEADER.size, deadline):
            return None
        index, length = _HEADER.unpack_from(self.buffer)
        if not self._fill(_HEADER.size + length, deadline):
            return None
        data = bytes(self.buffer[_HEADER.size:_HEADER.size + length])
        del self.buffer[:_HEADER.size + length]
        return index, data

    def _fill(self, size: int, deadline: float | None) -> bool:
        """Read until the buffer holds `size` bytes; False at the end or the deadline."""
        while len(self.buffer) < size:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.fd], [], [], wait)
            if not ready:
                self.timed_out = True
                return False
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                return False
            self.buffer += chunk
        return True
