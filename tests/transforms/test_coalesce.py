"""Copy coalescing of code motion's temporaries: merged where they do not interfere,
kept where they do, never a register of the input program renamed."""

from __future__ import annotations

from gpudiv.lang.load import parse_text
from gpudiv.transforms.coalesce import coalesce_copies

FREE = """kernel free(a, b)
      t = a + b
      d = t
      d = d + 1
      o = tid + 64
      shared[o] = d
"""
CLASH = """kernel clash(a, b)
      t = a + b
      d = t
      d = d + 1
      shared[tid] = t
      o = tid + 64
      shared[o] = d
"""
TWO = """kernel two(a, b)
      t = a + b
      d = t
      e = t
      f = d + e
      shared[tid] = f
"""


def texts(source: str, temps: set[str]) -> tuple[int, list[str]]:
    """Copies removed and the instructions after coalescing `temps`."""
    kernel = parse_text(source, "k.musimd").kernels[0]
    removed = coalesce_copies(kernel, temps)
    return removed, [i.text for i in kernel.instructions()]


def test_a_temporary_merges_into_the_register_it_is_copied_to():
    assert texts(FREE, {"t"}) == (1, ["d = a + b", "d = d + 1", "o = tid + 64",
                                      "shared[o] = d"])


def test_interfering_registers_keep_their_copy():
    removed, after = texts(CLASH, {"t"})
    assert removed == 0 and "d = t" in after


def test_only_temporaries_are_renamed():
    assert texts(FREE, set())[0] == 0
    removed, after = texts(TWO, {"t"})
    assert removed == 1 and after[:2] == ["d = a + b", "e = d"]  # d, e stay themselves
