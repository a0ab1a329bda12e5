"""Process-level tuning for large inputs: pausing Python's cyclic garbage collector.

Parsing, CFG and SSA construction allocate millions of small objects that stay alive; each
allocation burst makes the cyclic collector rescan every live object, which turned the
linear stages quadratic on 100,000-instruction kernels (benchmarks/README.md). Reference
counting still frees what dies; the collector runs again when the stage ends.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """Disable the cyclic garbage collector inside the block (nesting-safe)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
