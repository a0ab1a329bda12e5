"""The soundness oracle on random programs with cycles (issue 19).

`random_program(..., cycles=True)` builds irreducible cycles with several entries (chosen
by parameters or by the thread id), switches lowered as chains of branches with cases
back into the cycle and out through several exits, cycles nested inside irreducible ones
and values read where lanes of different trips meet; `random_ptx` is the same programs
in PTX. Every program is analysed by simple, affine and affine2, and one interpreter run
per launch checks the claims of all three at every dynamic use.

Before the rejoin copies (commit 9eed5c8, the parent of the fix), these tests failed:
see "Random programs for the oracle" in README.md for the measured first failures.
"""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpudiv.ir.ssa
from gpudiv.api import analyze
from gpudiv.interp.musimd import ExecutionError, run_kernel
from gpudiv.interp.ptx import PtxExecutionError, run_ptx_kernel
from gpudiv.interp.ptx_synthesis import synthesize_launches
from gpudiv.lang.load import parse_text
from gpudiv.verify.call_runs import run_ptx_any
from gpudiv.verify.oracle import ClaimObserver, random_launches
from gpudiv.verify.randprog import random_program
from gpudiv.verify.randptx import random_ptx

ANALYSES = ("simple", "affine", "affine2")
# One lane, a partial warp, a full warp of 32 and two warps (one partial).
SHAPES = ((1, 4), (7, 4), (32, 32), (45, 32))
# PTX: one block each (the blocks of a grid would all run the same program): a warp, two
# warps (one partial), 2-D and 3-D blocks; parameters drawn by synthesize_launches.
PTX_SHAPES = (((1, 1, 1), (32, 1, 1), "zeros"), ((1, 1, 1), (45, 1, 1), "ints"),
              ((1, 1, 1), (8, 4, 1), "ints"), ((1, 1, 1), (4, 3, 2), "zeros"))
SCALE = settings.default.max_examples / 100  # 1 under the ci profile (tests/conftest.py)
PROPERTY = settings(max_examples=int(1000 * SCALE), deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
STOPPED = {"musimd": 0, "ptx": 0}  # launches stopped by the interpreter's step budget


class _All:
    """Interpreter observer that lets the claim observers of several analyses watch one run."""

    def __init__(self, observers: list[ClaimObserver]) -> None:
        self.observers = observers

    def before(self, *args) -> None:
        """Check every analysis' claims on what the instruction reads."""
        for observer in self.observers:
            observer.before(*args)

    def branch(self, *args) -> None:
        """Check every analysis' uniform-branch claims."""
        for observer in self.observers:
            observer.branch(*args)


def violations(text: str, language: str, seed: int,
               analyses: tuple[str, ...] = ANALYSES) -> dict[str, list]:
    """Analysis → the violated claims found over several launches (one run per launch)."""
    program = parse_text(text, f"random.{language}", language)
    assert not program.errors, (program.errors, text)
    results = {name: analyze(program, name) for name in analyses}
    kernels = {name: result.kernels[0] for name, result in results.items()}
    assert all(not r.errors for r in results.values()), text
    kernel = program.kernels[0]
    if language == "ptx":
        launches, run, failure = synthesize_launches(kernel, seed, PTX_SHAPES), \
            run_ptx_kernel, PtxExecutionError
    else:
        launches, run, failure = random_launches(kernel, seed, SHAPES, "ipdom"), run_kernel, \
            ExecutionError
    found: dict[str, list] = {name: [] for name in analyses}
    for config in launches:
        observers = {name: ClaimObserver(k, config) for name, k in kernels.items()}
        try:
            if kernel.attrs.get("calls_not_inlined"):  # recursion: it runs as calls, and
                for observer in observers.values():  # each observer checks deep activations
                    run_ptx_any(kernel, config, observer=observer)
            else:
                run(kernel, config, observer=_All(list(observers.values())))
        except failure as error:
            # Deep nests of divergent cycles may run past the step budget; the claims
            # were checked up to there. Any other fault is a bug of the generator.
            if "did not finish within" not in str(error):
                raise AssertionError(f"{error}\n{text}") from None
            STOPPED[language] += 1
        for name, observer in observers.items():
            found[name] += observer.violations
    return found


def assert_sound(text: str, language: str, seed: int) -> None:
    """No analysis makes a claim the interpreter contradicts."""
    found = violations(text, language, seed)
    bad = {name: str(v[0]) for name, v in found.items() if v}
    assert not bad, (bad, text)


@pytest.mark.slow
@PROPERTY
@given(seed=st.integers(0, 2**31 - 1), statements=st.integers(3, 30))
def test_musimd_programs_with_cycles(seed, statements):
    """Irreducible cycles, multi-way exits, nested cycles: every claim of every analysis."""
    assert_sound(random_program(seed, statements, cycles=True), "musimd", seed)


@pytest.mark.slow
@settings(PROPERTY, max_examples=int(200 * SCALE))
@given(seed=st.integers(0, 2**31 - 1), statements=st.integers(3, 30))
def test_musimd_programs_with_cycles_and_more_nesting(seed, statements):
    """Deeper nesting (cycles in cycles in cycles) and barriers at the top level."""
    program = random_program(seed, statements, cycles=True, max_depth=4,
                             barriers=seed % 2 == 0)
    assert_sound(program, "musimd", seed)


@pytest.mark.slow
@settings(PROPERTY, max_examples=int(300 * SCALE))
@given(seed=st.integers(0, 2**31 - 1), statements=st.integers(3, 30))
def test_ptx_programs_with_cycles(seed, statements):
    """The same shapes in PTX, run on the PTX interpreter (2-D and 3-D blocks too)."""
    assert_sound(random_ptx(seed, statements), "ptx", seed)


@pytest.mark.slow
@settings(PROPERTY, max_examples=int(50 * SCALE))
@given(seed=st.integers(0, 2**31 - 1), statements=st.integers(3, 30))
def test_ptx_programs_with_calls(seed, statements):
    """The same programs with some operations through device functions in nvcc's -G call
    sequence (inlined by the front end: returns in divergent arms, a nested call, a loop
    with a divergent exit, a local stack frame, %tid.x read in the callee)."""
    assert_sound(random_ptx(seed, statements, calls=True), "ptx", seed)


@pytest.mark.slow
@settings(PROPERTY, max_examples=int(30 * SCALE))
@given(seed=st.integers(0, 2**31 - 1), statements=st.integers(3, 30))
def test_ptx_programs_with_recursive_calls(seed, statements):
    """The same programs with `*` through a recursive device function: the kernels run
    with their calls as calls, and activations deeper than inlining went are checked
    against the function analysed on its own for any caller."""
    assert_sound(random_ptx(seed, statements, calls="recursive"), "ptx", seed)


@pytest.mark.parametrize("seed", [0, 17, 25,  # the fast loop's share
                                  *(pytest.param(s, marks=pytest.mark.slow) for s in range(1, 10))])
def test_a_few_programs_in_both_languages(seed):
    """The fast loop's share: a few fixed seeds, both languages (17 and 25 broke claims
    in both before the rejoin copies)."""
    assert_sound(random_program(seed, 20, cycles=True), "musimd", seed)
    if seed % 4 == 0 or seed > 10:
        assert_sound(random_ptx(seed, 20), "ptx", seed)
    if seed in (1, 17):
        assert_sound(random_ptx(seed, 20, calls=True), "ptx", seed)
    if seed == 2:  # recursion: activations deeper than inlining are checked too
        assert_sound(random_ptx(seed, 20, calls="recursive"), "ptx", seed)


@pytest.mark.slow
def test_the_generator_finds_temporal_divergence_inside_cycles(monkeypatch):
    """Without rejoin copies (the analysis before issue 19) the generated programs expose
    a wrong "uniform" within the first hundred seeds, in μ-SIMD and in PTX."""
    monkeypatch.setattr(gpudiv.ir.ssa, "_place_rejoins", lambda *args: {})
    first = {}
    for language, make in (("musimd", random_program), ("ptx", random_ptx)):
        for seed in range(100):
            found = violations(make(seed, 20, cycles=True), language, seed, ("simple",))
            if found["simple"]:
                first[language] = (seed, found["simple"][0])
                break
    assert set(first) == {"musimd", "ptx"}, first
    assert all(v.claim == "uniform" for _, v in first.values())
