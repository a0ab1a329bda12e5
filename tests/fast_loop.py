"""Which cases of a test repeated over every sample the fast loop runs.

`pytest -m "not slow"` is the local loop (under a minute); CI runs everything. A check
repeated on every CUDA sample runs on the `-O3` builds and the hand-written files in the
fast loop, and on the `-G` builds (larger twins of the same sources) in the full suite only.
Besides, a case that takes 0.6 s or more of the fast loop on the 2-core machine (a sweep
over every sample, opcode form or many random programs) is marked slow where it is
defined, and a cheaper case of the same check stays where there is one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest


def debug_builds_slow(paths: list[Path],
                      also_slow: Callable[[Path], bool] = lambda _path: False) -> list:
    """The paths, with the `-G` builds (and those `also_slow` names) marked slow."""
    return [pytest.param(p, marks=pytest.mark.slow)
            if p.name.endswith(".G.ptx") or also_slow(p) else p
            for p in paths]
