"""bfloat16 arithmetic (.bf16, .bf16x2): correctly rounded, never integer arithmetic on bits."""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpudiv.interp import packed_half
from gpudiv.interp.float_rounding import round_rational
from gpudiv.interp.ptx_ops import OpSpec, Unsupported, assign_semantics

SCALE = settings.default.max_examples / 100  # 1 under the ci profile (tests/conftest.py)

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

# every finite bfloat16: the upper 16 bits of a float32 (exponent field not all ones)
bf16_bits = st.integers(0, 0xFFFF).filter(lambda b: (b >> 7) & 0xFF != 0xFF)


def value(bits: int) -> Fraction:
    return Fraction(float(np.uint32(bits << 16).view(np.float32)))


def nearest_bf16(exact: Fraction) -> int:
    """The bits of `exact` rounded to nearest, ties to even (from the two directed roundings,
    which tests/interp/test_float_rounding.py checks against their definition)."""
    down, up = (round_rational(exact, mode, "bf16") for mode in ("rm", "rp"))
    if down == up:
        choice = down
    elif exact - Fraction(down) != Fraction(up) - exact:
        choice = down if exact - Fraction(down) < Fraction(up) - exact else up
    else:
        choice = down if (int(np.float32(down).view(np.uint32)) >> 16) % 2 == 0 else up
    bits = int(np.float32(choice).view(np.uint32)) >> 16
    return bits if choice != 0 else (0x8000 if exact < 0 else 0)


def run(opcode: str, *bits: int):
    semantics = assign_semantics(OpSpec(opcode, len(bits)))
    return semantics.fn(*(np.uint16(b) for b in bits))


def same(got, expected: int) -> bool:
    got = int(got)
    return got == expected or (got & 0x7FFF == 0 and expected & 0x7FFF == 0)


@settings(max_examples=int(300 * SCALE), deadline=None)
@given(bf16_bits, bf16_bits, bf16_bits)
def test_bf16_arithmetic_is_correctly_rounded(a, b, c):
    x, y, z = value(a), value(b), value(c)
    cases = [("add.rn.bf16", (a, b), x + y), ("sub.rn.bf16", (a, b), x - y),
             ("mul.rn.bf16", (a, b), x * y), ("fma.rn.bf16", (a, b, c), x * y + z)]
    for opcode, operands, exact in cases:
        largest = Fraction(float(np.uint32(0x7F7F << 16).view(np.float32)))
        if abs(exact) >= largest:  # overflow handling is the float32 path's business
            continue
        assert same(run(opcode, *operands), nearest_bf16(exact)), (opcode, operands)


def test_bf16_exact_operations_and_compare():
    one, two, minus_half = 0x3F80, 0x4000, 0xBF00
    assert int(run("neg.bf16", one)) == 0xBF80
    assert int(run("abs.bf16", minus_half)) == 0x3F00
    assert int(run("max.bf16", one, two)) == two and int(run("min.bf16", one, two)) == one
    assert bool(run("setp.lt.bf16", one, two)) and not bool(run("setp.gt.bf16", one, two))
    assert int(run("fma.rn.relu.bf16", one, minus_half, 0)) == 0  # −0.5 → 0


@pytest.mark.parametrize("opcode", ["ex2.approx.bf16", "add.rz.bf16", "add.rn.tf32",
                                    "rcp.approx.bf16"])
def test_other_bf16_and_tf32_instructions_are_unsupported(opcode):
    with pytest.raises(Unsupported):
        assign_semantics(OpSpec(opcode, 1 if "approx" in opcode else 2))


@settings(max_examples=int(200 * SCALE), deadline=None)
@given(bf16_bits, bf16_bits, bf16_bits, bf16_bits, bf16_bits, bf16_bits)
def test_bf16x2_works_element_by_element(a_lo, a_hi, b_lo, b_hi, c_lo, c_hi):
    words = [np.uint32(hi << 16 | lo) for lo, hi in ((a_lo, a_hi), (b_lo, b_hi), (c_lo, c_hi))]
    largest = Fraction(float(np.uint32(0x7F7F << 16).view(np.float32)))
    for opcode, count, exact in (("add.rn.bf16x2", 2, lambda x, y, z: x + y),
                                 ("mul.rn.bf16x2", 2, lambda x, y, z: x * y),
                                 ("fma.rn.bf16x2", 3, lambda x, y, z: x * y + z)):
        out = int(assign_semantics(OpSpec(opcode, count)).fn(*words[:count]))
        for shift, (x, y, z) in ((0, (a_lo, b_lo, c_lo)), (16, (a_hi, b_hi, c_hi))):
            expected = exact(value(x), value(y), value(z))
            if abs(expected) < largest:
                assert same((out >> shift) & 0xFFFF, nearest_bf16(expected)), (opcode, x, y)


def test_bf16x2_conversion_and_layout():
    word = assign_semantics(OpSpec("cvt.rn.bf16x2.f32", 2)).fn(np.float32(-2), np.float32(1.5))
    low, high = packed_half.unpack(word, "bf16")
    assert (float(low), float(high)) == (1.5, -2.0)  # d.hi = a, d.lo = b
    relu = assign_semantics(OpSpec("cvt.rn.relu.bf16x2.f32", 2)).fn(np.float32(-2),
                                                                     np.float32(1.5))
    assert [float(x) for x in packed_half.unpack(relu, "bf16")] == [1.5, 0.0]
