"""The oracle on kernels that recurse: they run with their calls run as calls, and the
claims on their inlined form are checked on that run (`gpudiv.verify.call_runs`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpudiv import api
from gpudiv.analyses.stack_slots import original
from gpudiv.interp.ptx_calls import executable_form
from gpudiv.ir.record import replace
from gpudiv.lang.load import load
from gpudiv.verify import call_runs
from gpudiv.verify.call_runs import _twins, run_ptx_any
from gpudiv.verify.oracle import check_kernel, ptx_launches

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
RECURSION = [SAMPLES / "cuda" / f"recursion.{build}.ptx" for build in ("O3", "G")]


@pytest.mark.parametrize("path", [RECURSION[0], pytest.param(RECURSION[1], marks=pytest.mark.slow)],
                         ids=lambda p: p.name)
@pytest.mark.parametrize("analysis", [pytest.param("simple", marks=pytest.mark.slow),
                                      "affine2"])
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
    report = check_kernel(careless, ptx_launches(inlined, 0, result.block), run=run_ptx_any)
    assert any(v.source == wrong.source for v in report.violations)


def test_activations_deeper_than_inlining_are_checked_against_the_function_alone(
        monkeypatch):
    """fib's recursive activations have no inlined copy: they are checked against fib
    analysed on its own for any caller. A divergent register of that analysis claimed
    uniform is caught there, and only there: the inlined copies are not touched."""
    path = RECURSION[0]
    result = api.analyze(path, "simple").kernel("fib_per_thread")
    inlined = original(result.ssa.cfg.kernel)
    launches = ptx_launches(inlined, 0, result.block)
    honest = check_kernel(result, launches, run=run_ptx_any)
    assert honest.violations == []
    alone = call_runs.any_caller_results

    def careless(reader, analysis, functions):
        found = alone(reader, analysis, functions)
        for function, claims in found.items():
            wrong = next(v for v in claims.variables
                         if v.klass == "divergent" and v.source.startswith("%r"))
            found[function] = replace(claims, variables=[
                replace(v, klass="uniform") if v is wrong else v for v in claims.variables])
        return found

    monkeypatch.setattr(call_runs, "any_caller_results", careless)
    call_runs._RUNNERS.clear()
    call_runs._ALONE.clear()
    report = check_kernel(result, launches, run=run_ptx_any)
    assert report.violations and {v.kernel for v in report.violations} == \
        {"_Z3fibi(any caller)"}
    call_runs._RUNNERS.clear()
    call_runs._ALONE.clear()


def test_every_kernel_of_a_file_finds_its_functions_analysed_alone():
    """The functions analysed alone are computed once per file and shared by its kernels:
    each kernel, in turn, finds every function it reaches."""
    call_runs._ALONE.clear()
    program = load(RECURSION[1])
    for name in ("fib_per_thread", "frames_uniform", "gcd_table"):
        kernel = program.kernel(name)
        executable = executable_form(kernel, str(RECURSION[1]))
        deep = call_runs.DeepClaims(executable, kernel)
        for function in executable.attrs["functions"]:
            assert deep.of(function, "simple") is not None, (name, function)


def test_a_kernel_read_from_text_is_checked_too():
    """The inlined kernel keeps the text it was read from: no file is read again."""
    text = RECURSION[0].read_text()
    reports = api.check(api.analyze_text(text, "<string>", "simple", language="ptx"))
    assert [r.status for r in reports] == ["checked"] * 3
    assert all(r.uses_checked > 0 for r in reports)


def inlined_and_as_calls(path: Path, analysis: str = "affine2") -> list[tuple]:
    """Per kernel with calls of a sample: the oracle's report on the inlined kernel run
    inlined, and on the same claims with the kernel run with its calls as calls."""
    from gpudiv.interp.ptx import run_ptx_growing
    from gpudiv.verify.call_runs import calls_runner

    pairs = []
    for index, result in enumerate(api.analyze(path, analysis).kernels):
        inlined = original(result.ssa.cfg.kernel)
        if not inlined.attrs.get("call_instances") or inlined.attrs.get("calls_not_inlined"):
            continue  # no calls, or recursion (inlined, it cannot run)
        launches = ptx_launches(inlined, index, result.block)
        as_calls = calls_runner(api.kernel_to_run(path, inlined, "call"), inlined,
                                run_ptx_growing)
        pairs.append((check_kernel(result, launches, run=run_ptx_growing),
                      check_kernel(result, launches, run=as_calls)))
    return pairs


def assert_checked_as_calls(path: Path) -> None:
    for inline, as_calls in inlined_and_as_calls(path):
        assert as_calls.runs == inline.runs and not as_calls.violations
        # every use but the argument and result copies of calls
        assert as_calls.uses_checked >= inline.uses_checked // 2 > 0 or inline.runs == 0


@pytest.mark.slow
def test_claims_are_checked_on_a_run_with_calls_as_calls():
    assert_checked_as_calls(SAMPLES / "cuda" / "many_calls.O3.ptx")


@pytest.mark.slow
@pytest.mark.parametrize("path", sorted((SAMPLES / "cuda").glob("*.ptx")),
                         ids=lambda p: p.name)
def test_every_sample_is_checked_with_calls_as_calls(path):
    assert_checked_as_calls(path)


@pytest.mark.parametrize("build", ["O3", "G"])
def test_kernels_that_call_through_pointers_are_checked(build):
    path = SAMPLES / "cuda" / f"function_pointers.{build}.ptx"
    reports = api.check(api.analyze(path, "affine2"))
    assert [r.status for r in reports] == ["checked"] * 3
    assert all(r.runs == 5 and r.uses_checked > 0 and not r.violations for r in reports)


@pytest.mark.parametrize("name", [pytest.param("recursion.O3.ptx", marks=pytest.mark.slow),
                                  "function_pointers.G.ptx"])
def test_rewrites_of_kernels_whose_calls_run_as_calls_are_verified(name):
    """`transform --verify` runs the original and the printed result with their calls
    as calls (each re-read from its own text) and the oracle on the result."""
    from gpudiv.verify.transform_check import transform

    result = transform(SAMPLES / "cuda" / name, "lcm", verify=True)
    assert [k.status for k in result.kernels] == ["verified"] * 3
    assert all(k.oracle_violations == [] for k in result.kernels)


@pytest.mark.slow
def test_reports_say_when_calls_ran_as_calls(capsys):
    from gpudiv.cli import main

    assert main(["check", str(RECURSION[0])]) == 0
    out = capsys.readouterr().out
    assert out.count("  ipdom, calls run as calls: ") == 2  # gcd_table: -O3 made it a loop
    reports = api.check(api.analyze(RECURSION[0], "affine2"))
    assert [r.calls for r in reports] == ["call", "call", "inline"]
