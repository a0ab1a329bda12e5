"""Registry of analyses: name → driver `analyze_kernel(kernel) -> KernelResult`."""

from __future__ import annotations

from collections.abc import Callable

from gpudiv import ir
from gpudiv.analyses import affine, affine2, simple
from gpudiv.analyses.results import KernelResult

ANALYSES: dict[str, Callable[[ir.Kernel], KernelResult]] = {
    "simple": simple.analyze_kernel,
    "affine": affine.analyze_kernel,
    "affine2": affine2.analyze_kernel,
}

# The most precise analysis is the default (as in the thesis' implementation, §5.3).
DEFAULT_ANALYSIS = "affine2"


def get_analysis(name: str) -> Callable[[ir.Kernel], KernelResult]:
    """The driver of a named analysis; ValueError lists the known names."""
    if name not in ANALYSES:
        raise ValueError(f"unknown analysis '{name}' (known: {', '.join(ANALYSES)})")
    return ANALYSES[name]
