"""Divergence analysis with affine constraints, degree 2 (Sampaio 2013 §3.5, Theorem 3).

The rules of `gpudiv.analyses.affine` plus rules/affine2.lp, which sets the degree to 2:
values are a2·tid² + a1·tid + a0, so a product of two affine values keeps its tid² term and
a value with a2 = 0 is an affine function of tid even when a1 is ⊥ (Fig 3.10). The thesis
made this the default of its implementation (§5.3); so does gpudiv.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpudiv import ir
from gpudiv.analyses import affine
from gpudiv.analyses.driver import Analysis
from gpudiv.analyses.results import KernelResult

RULE_FILES = affine.RULE_FILES + affine.DEGREE_RULES[2]


def analysis(name: str = "affine2", options: Mapping[str, bool] | None = None,
             extra_rules: tuple[str, ...] = ()) -> Analysis:
    """The degree-2 affine analysis as a driver (`Analysis.run` for many kernels at once)."""
    return affine.analysis(name, 2, options, extra_rules)


def analyze_kernel(kernel: ir.Kernel, name: str = "affine2",
                   options: Mapping[str, bool] | None = None,
                   extra_rules: tuple[str, ...] = ()) -> KernelResult:
    """Run the degree-2 affine divergence analysis on one kernel."""
    return affine.analyze_kernel(kernel, name, 2, options, extra_rules)
