"""English for counts in messages: `count(1, "kernel")` is "1 kernel", not "1 kernels"."""

from __future__ import annotations

_IRREGULAR = {"analysis": "analyses"}


def plural(number: int, noun: str) -> str:
    """The noun as it goes with the number."""
    if number == 1:
        return noun
    if noun in _IRREGULAR:
        return _IRREGULAR[noun]
    return noun + ("es" if noun.endswith(("s", "x", "ch", "sh")) else "s")


def count(number: int, noun: str) -> str:
    """`3 kernels`, `1 kernel`, `0 kernels`."""
    return f"{number} {plural(number, noun)}"
