"""Register allocation on random μ-SIMD programs (`gpudiv.verify.randprog`) × register budgets ×
allocators: the allocated program leaves the same memory as the original on the launches
of `gpudiv check` (block sizes 1 to 100 with warps of 4 and 32 lanes: up to 25 warps)."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpudiv.lang.load import parse_text
from gpudiv.lang.printing import print_program
from gpudiv.transforms import PassError, Pipeline, get_pass
from gpudiv.transforms.spill_rules import ALLOCATORS
from gpudiv.verify.equivalence import compare_kernels
from gpudiv.verify.randprog import random_program
from gpudiv.verify.randptx import random_ptx

SCALE = settings.default.max_examples / 100  # 1 under the ci profile (tests/conftest.py)
PROPERTY = settings(max_examples=max(int(6 * SCALE), 3), deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.slow
@settings(PROPERTY)
@given(seed=st.integers(0, 2**31 - 1), statements=st.integers(4, 20),
       registers=st.integers(1, 4))
def test_every_allocator_keeps_random_programs_equivalent(seed, statements, registers):
    text = random_program(seed, statements, unstructured=False, barriers=seed % 3 == 0)
    program = parse_text(text, "rand.musimd")
    assert program.errors == [], text
    for allocator in ALLOCATORS:
        out = Pipeline([get_pass("regalloc", allocator=allocator, registers=registers)]) \
            .run(program)
        again = parse_text(print_program(out), "rand.musimd")
        assert again.errors == []
        outcome = compare_kernels(program.kernels[0], again.kernels[0], "musimd",
                                  seed % 1000, scratch=out.kernels[0].attrs["scratch"])
        assert outcome.status != "differs", (allocator, registers, outcome.difference, text)


@pytest.mark.slow
@settings(PROPERTY, max_examples=max(int(3 * SCALE), 2))
@given(seed=st.integers(0, 2**31 - 1), statements=st.integers(4, 10),
       registers=st.integers(3, 5))
def test_every_allocator_keeps_random_ptx_kernels_equivalent(seed, statements, registers):
    """The same on random PTX kernels (`gpudiv.verify.randptx`, every variable a `.b32`): the
    launches of `gpudiv check` have several warps and blocks."""
    text = random_ptx(seed, statements)
    program = parse_text(text, "rand.ptx", "ptx")
    assert program.errors == [], text
    for allocator in ALLOCATORS:
        try:
            out = Pipeline([get_pass("regalloc", allocator=allocator,
                                     registers=registers)]).run(program)
        except PassError as error:  # the spill code of one instruction needs more
            assert "too few" in str(error), error
            continue
        again = parse_text(print_program(out), "rand.ptx", "ptx")
        assert again.errors == []
        outcome = compare_kernels(program.kernels[0], again.kernels[0], "ptx", seed % 1000)
        assert outcome.status != "differs", (allocator, registers, outcome.difference, text)
