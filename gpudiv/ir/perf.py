"""Process-level tuning and measures: pausing Python's cyclic garbage collector, and the
memory the process uses (`memory_bytes`).

Parsing, CFG and SSA construction allocate millions of small objects that stay alive; each
allocation burst makes the cyclic collector rescan every live object, which turned the
linear stages quadratic on 100,000-instruction kernels (benchmarks/README.md). Reference
counting still frees what dies; the collector runs again when the stage ends.

Start-up is the same on a small scale: importing the modules a command needs makes tens of
thousands of objects (functions, classes, constants) that live as long as the process, and
a third of the collections of a small file's analysis only rescanned them (issue 16).
"""

from __future__ import annotations

import gc
import os


class paused_gc:  # noqa: N801 - used as `with paused_gc():`, like the function it was
    """Disable the cyclic garbage collector inside the block (nesting-safe). A class, not a
    `contextlib.contextmanager`: contextlib and its 18 classes were 0.8 ms of every
    command's start (issue 16)."""

    __slots__ = ("was_enabled",)

    def __enter__(self) -> None:
        self.was_enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc_info: object) -> None:
        if self.was_enabled:
            gc.enable()


_started = False


class start_up(paused_gc):  # noqa: N801 - used as `with start_up():`
    """The collector paused inside the block (a command's imports and argument parsing),
    and, during the process's first command, every object alive at its end moved where
    collections never look (`gc.freeze`; it also spares the collection at exit): what
    start-up makes lives as long as the process."""

    __slots__ = ()

    def __exit__(self, exc_type: object, *exc_info: object) -> None:
        if exc_type is None and not _started:
            gc.freeze()
        super().__exit__(exc_type, *exc_info)


def started() -> None:
    """The process's first command is done: a later one (a test or a program calling
    `gpudiv.cli.main` again) only pauses the collector while it starts."""
    global _started
    _started = True


def memory_bytes(resident: bool = False) -> int:
    """Bytes of address space this process maps now, or with `resident` of memory it has
    resident (/proc/self/statm; 0 where /proc is missing)."""
    try:
        with open("/proc/self/statm") as statm:
            pages = int(statm.read().split()[1 if resident else 0])
    except (OSError, ValueError, IndexError):
        return 0
    return pages * os.sysconf("SC_PAGE_SIZE")
