"""The soundness oracle: Theorem 1 as a property test, and the oracle's own teeth."""

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpudiv.api import analyze, analyze_text, check
from gpudiv.interp.musimd import LaunchConfig
from gpudiv.ir.record import replace
from gpudiv.verify.oracle import check_kernel, random_launches
from gpudiv.verify.randprog import random_program

SAMPLES = Path(__file__).parents[2] / "samples" / "musimd"
# Fewer launch shapes than `gpudiv check` so that thousands of programs stay affordable;
# they still cover one lane, partial warps, several warps and both warp widths.
SHAPES = ((1, 4), (7, 4), (32, 32), (45, 32))
SCALE = settings.default.max_examples / 100  # 1 under the ci profile (tests/conftest.py)
PROPERTY = settings(max_examples=int(1500 * SCALE), deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


def violations_of(text: str, seed: int) -> list:
    result = analyze_text(text, "random.musimd", "simple")
    assert not result.errors, result.errors
    found = []
    for index, kernel in enumerate(result.kernels):
        launches = random_launches(kernel.ssa.cfg.kernel, seed + index, SHAPES)
        report = check_kernel(kernel, launches)
        assert report.status == "checked", report.reason
        found += report.violations
    return found


@pytest.mark.slow
@PROPERTY
@given(seed=st.integers(0, 2**31 - 1), statements=st.integers(3, 30))
def test_theorem_1_structured_programs(seed, statements):
    """Sampaio 2013 Theorem 1: a variable the analysis calls uniform is uniform."""
    program = random_program(seed, statements, barriers=seed % 3 == 0)
    assert violations_of(program, seed) == [], program


@pytest.mark.slow
@settings(PROPERTY, max_examples=int(600 * SCALE))
@given(seed=st.integers(0, 2**31 - 1), statements=st.integers(3, 30))
def test_theorem_1_unstructured_programs(seed, statements):
    """Unstructured joins, run with reconvergence at immediate post-dominators."""
    program = random_program(seed, statements, unstructured=True)
    assert violations_of(program, seed) == [], program


# The SIMT-deadlock samples spin on memory the random launches fill at random (lock cells
# that are never free, flags that are never set), so most runs exhaust the step budget;
# tests/analyses/test_deadlock.py runs and checks them with chosen memory.
DEADLOCK_SAMPLES = "deadlock_*.musimd"


@pytest.mark.slow
def test_every_sample_checks_without_violation():
    for path in sorted(set(SAMPLES.glob("*.musimd")) - set(SAMPLES.glob(DEADLOCK_SAMPLES))):
        for report in check(analyze(path)):
            assert report.status == "checked", (path, report.reason)
            assert report.violations == [], (path, report.violations)
            assert report.uses_checked > 0
            if report.name == "spin_lock":  # deadlocks whenever two threads share a warp
                assert "SIMT deadlock in kernel spin_lock" in report.reason
            else:  # deadlock detection never fires on kernels that terminate
                assert "SIMT deadlock" not in report.reason, (path, report.reason)
                assert "infinite loop" not in report.reason, (path, report.reason)


def test_oracle_catches_a_wrong_uniform_claim():
    result = analyze(SAMPLES / "sumTriangle.musimd").kernel("sumTriangle")
    lie = replace(result, variables=[replace(v, klass="uniform") for v in result.variables],
                  branches=[replace(b, divergent=False) for b in result.branches])
    launches = [LaunchConfig(4, 4, {"c": 4, "m": 0, "v": 100}, {k: k + 1 for k in range(16)})]
    report = check_kernel(lie, launches)
    claimed = {(v.claim, v.source) for v in report.violations}
    assert ("uniform", "i") in claimed
    assert ("uniform branch", None) in claimed
    (first_i,) = [v for v in report.violations if v.source == "i"][:1]
    assert first_i.lanes == [0, 1, 2, 3] and first_i.values == [0, 1, 2, 3]
    assert "kernel sumTriangle, line" in str(first_i)


def test_oracle_catches_a_wrong_constant():
    result = analyze_text("kernel k()\n x = 7\n shared[0] = x\n stop\n").kernels[0]
    lie = replace(result, variables=[replace(v, value=8) for v in result.variables])
    report = check_kernel(lie, [LaunchConfig(2, 2)])
    assert [v.claim for v in report.violations] == ["constant"]


def test_kernel_that_cannot_run_is_reported_not_hidden():
    result = analyze_text("kernel k(n)\n x = 5 / n\n shared[0] = x\n stop\n")
    (report,) = check(result)
    launches = random_launches(result.kernels[0].ssa.cfg.kernel, 0)
    assert report.runs == sum(1 for config in launches if config.params["n"] != 0)
    if report.runs < len(launches):
        assert "runs stopped" in report.reason and "division by zero" in report.reason
    zero = check_kernel(result.kernels[0], [LaunchConfig(4, 4, {"n": 0})])
    assert zero.status == "not-executed"
    assert "division by zero" in zero.reason
