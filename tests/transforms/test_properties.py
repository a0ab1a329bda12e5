"""Properties over random μ-SIMD programs (`gpudiv.verify.randprog`): printing reads back to
the same IR, and every shipped pass keeps kernels well formed and equivalent on the
interpreter (structured programs with `sync`, unstructured ones under ipdom)."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpudiv.ir.verify import verify_kernel
from gpudiv.lang.compare import first_difference
from gpudiv.lang.load import parse_text
from gpudiv.lang.printing import print_program
from gpudiv.transforms import Pipeline
from gpudiv.verify.equivalence import compare_kernels
from gpudiv.verify.randprog import random_program

SCALE = settings.default.max_examples / 100  # 1 under the ci profile (tests/conftest.py)
PROPERTY = settings(max_examples=max(int(60 * SCALE), 3), deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
PIPELINES = ["canonicalize", "dedicated-exits", "split-critical-edges",
             "dedicated-exits,split-critical-edges,canonicalize"]


def program_of(seed: int, statements: int, unstructured: bool):
    text = random_program(seed, statements, unstructured=unstructured,
                          barriers=not unstructured and seed % 3 == 0)
    program = parse_text(text, "rand.musimd")
    assert program.errors == [], text
    return program


@settings(PROPERTY)
@given(seed=st.integers(0, 2**31 - 1), statements=st.integers(3, 30),
       unstructured=st.booleans())
def test_print_then_parse_is_the_identity(seed, statements, unstructured):
    program = program_of(seed, statements, unstructured)
    again = parse_text(print_program(program), "rand.musimd")
    assert first_difference(program, again) is None


@pytest.mark.slow
@pytest.mark.parametrize("spec", PIPELINES)
@settings(PROPERTY)
@given(seed=st.integers(0, 2**31 - 1), statements=st.integers(3, 25),
       unstructured=st.booleans())
def test_passes_preserve_behaviour(spec, seed, statements, unstructured):
    program = program_of(seed, statements, unstructured)
    result = Pipeline.parse(spec).run(program)
    (kernel,) = result.kernels
    assert verify_kernel(kernel) == []
    again = parse_text(print_program(result), "rand.musimd")
    assert again.errors == []
    outcome = compare_kernels(program.kernels[0], again.kernels[0], "musimd", seed % 1000)
    assert outcome.status == "verified", (outcome.difference, outcome.reason,
                                          print_program(result))
