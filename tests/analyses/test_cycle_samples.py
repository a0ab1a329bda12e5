"""Golden tests of the cycle samples (issue 19): samples/musimd/irreducible_switch.musimd
and two_latch_loop.musimd give what their header comments say, under every analysis."""

from pathlib import Path

import pytest

from gpudiv.api import analyze, check

SAMPLES = Path(__file__).parents[2] / "samples" / "musimd"
ANALYSES = ("simple", "affine", "affine2")


def _analysed(name: str, analysis: str):
    """The only kernel of a sample and its check reports."""
    result = analyze(SAMPLES / name, analysis)
    assert not result.errors, result.errors
    (kernel,) = result.kernels
    return kernel, check(result)


def _not_divergent(kernel) -> dict[str, str]:
    """SSA name → class of every variable that is not divergent."""
    return {v.name: v.klass for v in kernel.variables if v.klass != "divergent"}


def _rejoin_copies(kernel) -> set[tuple[str, str, str]]:
    """(source name, block, class) of every rejoin copy."""
    return {(v.source, kernel.ssa.variables[v.name].block, v.klass)
            for v in kernel.variables if v.kind == "rejoin"}


@pytest.mark.parametrize("analysis", ANALYSES)
def test_irreducible_switch(analysis):
    kernel, reports = _analysed("irreducible_switch.musimd", analysis)
    assert _not_divergent(kernel) == {"sel": "uniform", "k#1": "constant"}
    assert ("r", "C2", "divergent") in _rejoin_copies(kernel)
    assert {b.label: b.divergent for b in kernel.branches} == {
        "bb1": False, "C": True, "C2": True}
    assert [(r.status, r.violations) for r in reports] == [("checked", [])]
    assert reports[0].uses_checked > 0


@pytest.mark.parametrize("analysis", ANALYSES)
def test_two_latch_loop(analysis):
    kernel, reports = _analysed("two_latch_loop.musimd", analysis)
    assert _not_divergent(kernel) == {"n": "uniform", "k#1": "constant"}
    assert {("k", "C2", "divergent"), ("r", "C2", "divergent")} <= _rejoin_copies(kernel)
    assert {b.label: b.divergent for b in kernel.branches} == {"H": True, "C2": True}
    assert [(r.status, r.violations) for r in reports] == [("checked", [])]
    assert reports[0].uses_checked > 0
