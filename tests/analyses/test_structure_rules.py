"""rules/structure.lp agrees with the Python structural analysis: on every sample, on the
minimal shapes of each kind of unstructured edge, and on random unstructured programs
(the verdict, the loops, the irreducible cycles, every Cut and Backward Copy edge, and
whether Forward Copy is needed)."""

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpudiv.analyses.structure import analyze_kernel
from gpudiv.analyses.structure_rules import compare, solve_kernel
from gpudiv.lang.load import load, parse_text
from gpudiv.verify.randprog import random_program

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
MUSIMD = sorted((SAMPLES / "musimd").glob("*.musimd"))
PTX = sorted((SAMPLES / "cuda").glob("*.ptx"))
SCALE = settings.default.max_examples / 100
PROPERTY = settings(max_examples=max(int(30 * SCALE), 3), deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


def disagreements(path) -> list[str]:
    """`kernel: difference` for every kernel of the file where the two disagree."""
    program = load(path)
    assert program.errors == []
    return [f"{k.name}: {d}" for k in program.kernels
            for d in compare(analyze_kernel(k), solve_kernel(k))]


def test_musimd_samples_agree():
    assert [d for path in MUSIMD for d in disagreements(path)] == []


@pytest.mark.slow
def test_cuda_samples_agree():
    assert [d for path in PTX for d in disagreements(path)] == []


def kernel(body: str):
    program = parse_text(f"kernel k(out)\n{body}", "shape.musimd")
    assert program.errors == []
    return program.kernels[0]


def test_fig1_needs_forward_copy_at_b2_and_b4():
    (fig1,) = load(SAMPLES / "musimd" / "wu_fig1_short_circuit.musimd").kernels
    rules = solve_kernel(fig1)
    assert not rules.structured and rules.needs_forward_copy
    assert rules.edges == frozenset() and rules.blocking == {"B2", "B4"}


def test_cut_and_backward_copy_edges_on_minimal_shapes():
    cut = solve_kernel(kernel("""
        i = 0
HEAD:   p = i < 8
        bz p, END
        q = i == tid
        bnz q, OUT
        i = i + 1
        jump HEAD
OUT:    i = 100
END:    shared[tid] = i
        stop
"""))
    assert cut.loops == {"HEAD"} and cut.edges == {("bb2", "OUT", "cut")}
    side = solve_kernel(kernel("""
        i = 0
        a = tid & 1
        bnz a, IN
HEAD:   i = i + 1
IN:     i = i + 2
        p = i < 20
        bnz p, HEAD
        shared[tid] = i
        stop
"""))
    assert side.irreducible == {"HEAD"} and side.edges == {("bb1", "IN", "backward_copy")}
    assert not side.structured


@PROPERTY
@given(seed=st.integers(0, 2**31 - 1), statements=st.integers(3, 25))
def test_random_unstructured_programs_agree(seed, statements):
    program = parse_text(random_program(seed, statements, unstructured=True), "r.musimd")
    (k,) = program.kernels
    assert compare(analyze_kernel(k), solve_kernel(k)) == []
