"""Lanes that leave the kernel inside a loop (issue 17, item 3).

A lane that traps (the whole launch aborts) or leaves with `exit` never meets its warp
again. gpudiv bounds the region of a branch at `sync_ipdom`, its immediate post-dominator
once the paths that can only end in such an abort are left out (gpudiv.ir.cfg), so a branch
that sends some lanes out of the kernel neither makes later blocks joins nor makes its
loops' exits divergent. A value read in a doomed block (one whose every path aborts) is
still gated by the immediate post-dominator itself: the lanes reading it there may have
left the loop in different iterations.
"""

from pathlib import Path

import pytest

from gpudiv.api import analyze, check
from gpudiv.ir.cfg import EXIT

SAMPLES = Path(__file__).parents[2] / "samples"
ANALYSES = ("simple", "affine", "affine2")
EXITS_CUDA = [SAMPLES / "cuda" / f"exits_in_loops.{build}.ptx" for build in ("O3", "G")]
EXIT_FROM_LOOP = SAMPLES / "ptx" / "exit_from_loop.ptx"


def classes(kernel, source: str) -> dict[str, str]:
    """SSA name -> class of every SSA variable of a PTX register."""
    return {v.name: v.klass for v in kernel.variables if v.source == source}


def test_doomed_blocks_and_their_meeting_points():
    cfg = analyze(EXIT_FROM_LOOP).kernels[0].ssa.cfg
    assert cfg.doomed == {"LEAVE"}
    assert cfg.ipdom["LOOP"] == EXIT
    # Lanes that do not leave meet again where the loop ends normally.
    assert cfg.sync_ipdom["LOOP"] == "bb2"
    assert cfg.sync_ipdom["LEAVE"] == cfg.ipdom["LEAVE"] == EXIT


def test_a_kernel_that_only_returns_has_no_doomed_blocks():
    cfg = analyze(SAMPLES / "cuda" / "vector_ops.O3.ptx").kernels[0].ssa.cfg
    assert cfg.doomed == set()
    assert cfg.sync_ipdom == cfg.ipdom


@pytest.mark.parametrize("analysis", ANALYSES)
def test_counter_after_the_normal_exit_is_uniform_and_the_leaving_one_is_not(analysis):
    kernel = analyze(EXIT_FROM_LOOP, analysis=analysis).kernels[0]
    counter = classes(kernel, "%r4")
    # %r4#4: the η read by the store after the loop (before: divergent by loop_exit).
    assert counter["%r4#4"] == "uniform"
    # %r4#5: the η in LEAVE, read by lanes that left in different iterations.
    assert counter["%r4#5"] == "divergent"
    assert set(classes(kernel, "%r5").values()) == {"divergent"}


@pytest.mark.parametrize("analysis", ANALYSES)
def test_trapping_default_keeps_the_loop_counters_uniform(analysis):
    """interpret: the column loop's test and the row-counter test stay uniform although an
    opcode test in the column loop sends lanes to a trap (before: both divergent)."""
    for path in EXITS_CUDA:
        kernel = analyze(path, analysis=analysis).kernel("interpret")
        by_line = {}
        for branch in kernel.branches:
            if branch.origin is not None:
                by_line.setdefault(branch.origin[1], set()).add(branch.divergent)
        assert by_line[61] == {False}, path.name
        assert by_line[75] == {False}, path.name
        assert True in by_line[69], path.name


# Degree 1 shares affine.lp with affine2: the full suite runs it.
@pytest.mark.parametrize("analysis", ["simple", pytest.param("affine", marks=pytest.mark.slow),
                                      "affine2"])
@pytest.mark.parametrize("path", [EXIT_FROM_LOOP,
                                  *(pytest.param(p, marks=pytest.mark.slow) for p in EXITS_CUDA)],
                         ids=lambda p: p.name)
def test_every_claim_holds_on_the_interpreter(path, analysis):
    for seed in range(2):
        for report in check(analyze(path, analysis=analysis), seed=seed):
            assert report.status == "checked", (report.name, report.reason)
            assert report.violations == [], (report.name, report.violations[:2])
