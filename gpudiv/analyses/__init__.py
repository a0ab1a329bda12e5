"""Registry of analyses: name → driver (`Analysis`: call it on a kernel, or `run` it on
all kernels of a file at once)."""

from __future__ import annotations

from gpudiv.analyses import affine, affine2, simple
from gpudiv.analyses.driver import Analysis

ANALYSES: dict[str, Analysis] = {
    "simple": simple.analysis(),
    "affine": affine.analysis(),
    "affine2": affine2.analysis(),
}

# The most precise analysis is the default (as in the thesis' implementation, §5.3).
DEFAULT_ANALYSIS = "affine2"


def get_analysis(name: str) -> Analysis:
    """The driver of a named analysis; ValueError lists the known names."""
    if name not in ANALYSES:
        raise ValueError(f"unknown analysis '{name}' (known: {', '.join(ANALYSES)})")
    return ANALYSES[name]
