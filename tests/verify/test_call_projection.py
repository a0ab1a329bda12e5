"""Call summaries carried onto the inlined kernels (gpudiv/verify/call_projection.py):
the oracle checks them on the interpreter, and `compare --calls` measures them against
inlining (issue 16, item 1)."""

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpudiv.analyses import call_summaries
from gpudiv.analyses.call_summaries import analyze_calls
from gpudiv.analyses.stack_slots import original
from gpudiv.interp.ptx import run_ptx_growing
from gpudiv.ir.record import replace
from gpudiv.lang.ptx.functions import FunctionReader
from gpudiv.verify.call_projection import project
from gpudiv.verify.oracle import check_kernel, ptx_launches
from gpudiv.verify.randptx import random_ptx

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
# The samples that call device functions, under each analysis, in the full suite (the
# fast loop checks summaries on the interpreter through `gpudiv check --calls summary`
# in tests/cli/test_calls.py and the random programs below; the thread-private pointers
# of half_precision.G in tests/analyses/test_call_summaries.py).
FAST_SAMPLES: set[tuple[str, str]] = set()
# Samples where summaries say exactly what inlining says, variable by variable.
LOSSLESS = {"many_calls.G.ptx", "many_calls.O3.ptx", "device_functions.G.ptx",
            "device_functions.O3.ptx"}
ANALYSES = ("simple", "affine2")
CALL_SAMPLES = [pytest.param(SAMPLES / "cuda" / f"{name}.{build}.ptx", analysis,
                             marks=[] if (f"{name}.{build}", analysis) in FAST_SAMPLES
                             else [pytest.mark.slow], id=f"{name}.{build}-{analysis}")
                for name in ("many_calls", "device_functions", "half_precision",
                             "texture_objects") for build in ("G", "O3")
                for analysis in ANALYSES]
SCALE = settings.default.max_examples / 100  # 1 under the ci profile (tests/conftest.py)
KNOWN_CAUSES = ("a constant that comes from a call's literal arguments",
                "the stack frame of", "a divergent argument: the stack frame of",
                "a call's result: the stack frame of", "an irreducible cycle",
                "an affine value that crosses a call")


def projections(ptx: str, analysis: str = "simple", path: str = "f.ptx") -> list:
    calls = analyze_calls(FunctionReader(ptx, path), analysis)
    return [project(calls, k.name) for k in calls.kernels]


def violations(projection, seed: int = 0) -> list:
    """The claims of a projection contradicted by the interpreter (every launch)."""
    result = projection.projected
    launches = ptx_launches(original(result.ssa.cfg.kernel), seed, result.block)
    return check_kernel(result, launches, run=run_ptx_growing).violations


def assert_sound_and_explained(ptx: str, seed: int = 0, analysis: str = "simple") -> list:
    """No claim contradicted by a run (gains over inlining included), no variable whose
    reads got different claims, every loss with a known cause; the projections."""
    found = projections(ptx, analysis)
    for projection in found:
        assert not violations(projection, seed), projection.kernel
        assert not projection.conflicts
        assert all(d.why.startswith(KNOWN_CAUSES) for d in projection.losses)
    return found


@pytest.mark.parametrize(("path", "analysis"), CALL_SAMPLES)
def test_samples_with_calls_hold_on_the_interpreter_and_every_loss_is_explained(path,
                                                                               analysis):
    """The samples that call device functions: no claim of the summaries is contradicted
    by a run, nothing is claimed that inlining does not claim, and every variable that
    loses precision has a known cause."""
    found = assert_sound_and_explained(path.read_text(), analysis=analysis)
    assert not any(p.gains for p in found)
    if path.name in LOSSLESS:  # scalar, literal and affine arguments, no frame escapes
        assert not any(p.losses or p.unmapped or p.branch_losses for p in found)


def test_device_functions_lose_nothing_against_inlining():
    """device_functions.G (scalar arguments, no literals, no frame passed by address):
    every variable of every inlined kernel has the class inlining gives it."""
    for projection in projections((SAMPLES / "cuda" / "device_functions.G.ptx").read_text()):
        assert projection.mapped >= len(projection.inlined.variables)
        assert not projection.losses and not projection.unmapped


def test_the_oracle_sees_through_the_projection(monkeypatch):
    """Summaries that claim every result uniform (no dependence on any argument) are
    caught on many_calls.G: the projection does not blind the oracle."""
    original_summary = call_summaries._summary

    def careless(*args):
        found = original_summary(*args)
        outputs = {slot: replace(out, depends=frozenset(), intrinsic=False, local=frozenset())
                   for slot, out in found.summary.outputs.items()}
        return replace(found, summary=replace(found.summary, outputs=outputs))

    monkeypatch.setattr(call_summaries, "_summary", careless)
    found = projections((SAMPLES / "cuda" / "many_calls.G.ptx").read_text())
    kernel = next(p for p in found if p.kernel == "calls_divergent")
    assert violations(kernel)


@pytest.mark.parametrize(("seed", "analysis"), [
    (4, "simple"), pytest.param(17, "affine2", marks=pytest.mark.slow)])
def test_random_programs_with_calls(seed, analysis):
    """Random programs whose operations go through device functions (returns in
    divergent arms, a nested call, a loop with a divergent exit, a local stack frame,
    %tid.x read in the callee)."""
    assert_sound_and_explained(random_ptx(seed, 20, calls=True), seed, analysis)


def test_a_loop_in_a_callee_inside_a_divergent_region_stays_uniform():
    """Seed 1 calls `gd_mul` (a loop over its uniform second argument) inside the region
    of a divergent branch: inlining makes the loop's μ a join of that branch (divergent);
    analysed on its own the callee's loop is uniform, which every run confirms."""
    (projection,) = assert_sound_and_explained(random_ptx(1, 20, calls=True))
    gained = {d.source.split("@")[0] for d in projection.gains}
    assert {"%r2", "%p1"} <= gained
    assert all(d.inlined == "divergent" and d.summarised == "uniform"
               for d in projection.gains)


@pytest.mark.slow
@settings(max_examples=int(60 * SCALE), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1), statements=st.integers(3, 30),
       unstructured=st.booleans(), analysis=st.sampled_from(ANALYSES))
def test_random_programs_with_calls_property(seed, statements, unstructured, analysis):
    """The same on many random programs, structured and unstructured."""
    ptx = random_ptx(seed, statements, calls=True, unstructured=unstructured)
    assert_sound_and_explained(ptx, seed, analysis)


@pytest.mark.slow
@pytest.mark.parametrize("analysis", ANALYSES)
@pytest.mark.parametrize("path", sorted((SAMPLES / "cuda").glob("*.ptx"))
                         + sorted((SAMPLES / "cuda_large").glob("*.ptx")),
                         ids=lambda p: p.name)
def test_every_sample_holds_with_call_summaries(path, analysis):
    """Every sample (the large program with 33 device functions too)."""
    assert_sound_and_explained(path.read_text(), analysis=analysis)
