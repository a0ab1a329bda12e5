"""The oracle on kernels that recurse: they run with their calls run as calls, and the
claims on their inlined form are checked on that run (`gpudiv.verify.call_runs`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gpudiv import api
from gpudiv.analyses.stack_slots import original
from gpudiv.verify.call_runs import _twins
from gpudiv.verify.oracle import check_kernel, ptx_launches

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
RECURSION = [SAMPLES / "cuda" / f"recursion.{build}.ptx" for build in ("O3", "G")]


@pytest.mark.parametrize("path", RECURSION, ids=lambda p: p.name)
@pytest.mark.parametrize("analysis", ["simple", "affine2"])
def test_recursive_kernels_are_checked(path, analysis):
    reports = api.check(api.analyze(path, analysis))
    assert [r.status for r in reports] == ["checked"] * 3
    assert all(r.uses_checked > 0 and not r.violations for r in reports)


@pytest.mark.parametrize("path", RECURSION, ids=lambda p: p.name)
def test_every_inlined_copy_of_a_recursive_function_is_matched(path):
    result = api.analyze(path, "simple").kernel("fib_per_thread")
    inlined = original(result.ssa.cfg.kernel)
    frames = {suffix for suffix, _ in _twins(api.kernel_to_run(path, inlined, "call"),
                                             inlined)}
    assert frames == {"", *inlined.attrs["call_instances"]}


def test_a_wrong_claim_inside_an_inlined_recursive_call_is_caught():
    """A divergent register of fib's first inlined activation claimed uniform: the run
    with calls as calls shows it to the oracle as the inlined kernel's register."""
    path = RECURSION[0]
    result = api.analyze(path, "simple").kernel("fib_per_thread")
    wrong = next(v for v in result.variables
                 if v.source.endswith("@1") and v.klass == "divergent" and v.source
                 .startswith("%r"))
    careless = replace(result, variables=[replace(v, klass="uniform") if v is wrong else v
                                          for v in result.variables])
    inlined = original(result.ssa.cfg.kernel)
    report = check_kernel(careless, ptx_launches(inlined, 0, result.block),
                          run=api._ptx_runner(str(path), inlined))
    assert any(v.source == wrong.source for v in report.violations)
