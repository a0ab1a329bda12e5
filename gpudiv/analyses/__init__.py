"""Registry of analyses: name → driver (`Analysis`: call it on a kernel, or `run` it on
all kernels of a file at once).

The drivers (and clingo, networkx behind them) are imported on first use of `ANALYSES` or
`get_analysis`; `ANALYSIS_NAMES` and `DEFAULT_ANALYSIS` cost nothing (command-line
start-up)."""

from __future__ import annotations

from importlib import import_module

TYPE_CHECKING = False  # (typing is not imported: an analysis never needs it)
if TYPE_CHECKING:
    from gpudiv.analyses.driver import Analysis

ANALYSIS_NAMES = ("simple", "affine", "affine2")

# The most precise analysis is the default (as in the thesis' implementation, §5.3).
DEFAULT_ANALYSIS = "affine2"

_registry: dict[str, Analysis] = {}


def _driver(name: str) -> Analysis:
    """The driver of a known analysis, its module imported on first use (only the one
    a command runs)."""
    if name not in _registry:
        _registry[name] = import_module(f"gpudiv.analyses.{name}").analysis()
    return _registry[name]


def _analyses() -> dict[str, Analysis]:
    """The registry: every analysis, in `ANALYSIS_NAMES` order."""
    return {name: _driver(name) for name in ANALYSIS_NAMES}


def __getattr__(name: str) -> dict[str, Analysis]:
    """`ANALYSES`: name → driver, built on first access."""
    if name == "ANALYSES":
        return _analyses()
    raise AttributeError(f"module 'gpudiv.analyses' has no attribute {name!r}")


def get_analysis(name: str) -> Analysis:
    """The driver of a named analysis; ValueError lists the known names."""
    if name not in ANALYSIS_NAMES:
        raise ValueError(f"unknown analysis '{name}' (known: {', '.join(ANALYSIS_NAMES)})")
    return _driver(name)
