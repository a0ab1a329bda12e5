"""Packed half precision (.f16x2): correctly rounded per half, and nothing else silently
taken for integer arithmetic on the 32-bit word."""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpudiv.interp import packed_half
from gpudiv.interp.ptx import PtxLaunch, run_ptx_kernel
from gpudiv.interp.ptx_ops import OpSpec, Unsupported, assign_semantics
from gpudiv.lang.load import parse_text

SCALE = settings.default.max_examples / 100  # 1 under the ci profile (tests/conftest.py)

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

halves = st.floats(width=16, allow_nan=False, allow_infinity=False).map(np.float16)


def nearest_half(value: Fraction) -> np.float16:
    """`value` rounded to nearest (ties to even) in float16, by brute force on neighbours."""
    guess = np.float16(float(value))  # one rounding of a float64 near value: a neighbour
    candidates = [guess, np.nextafter(guess, np.float16(np.inf)),
                  np.nextafter(guess, np.float16(-np.inf))]
    finite = [c for c in candidates if np.isfinite(c)]
    best = min(finite, key=lambda c: (abs(Fraction(float(c)) - value),
                                      int(c.view(np.uint16)) & 1))
    largest = Fraction(float(np.finfo(np.float16).max))
    if abs(value) >= largest + Fraction(2) ** 5 / 2:  # half an ulp (32) past the largest
        return np.float16(np.inf) if value > 0 else np.float16(-np.inf)
    return best


@settings(max_examples=int(400 * SCALE), deadline=None)
@given(halves, halves, halves)
def test_fma16_is_rounded_once(a, b, c):
    exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
    expected = nearest_half(exact)
    for result in (packed_half.fma16(a, b, c), assign_semantics(OpSpec("fma.rn.f16", 3)).fn(
            a, b, c)):
        assert result == expected or (result == 0 and expected == 0), (a, b, c, result)


@settings(max_examples=int(200 * SCALE), deadline=None)
@given(halves, halves, halves, halves)
def test_packed_add_and_mul_work_half_by_half(a_lo, a_hi, b_lo, b_hi):
    a = packed_half.pack(a_lo, a_hi)
    b = packed_half.pack(b_lo, b_hi)
    for opcode, exact in (("add.f16x2", lambda x, y: x + y), ("mul.rn.f16x2", lambda x, y: x * y),
                          ("sub.f16x2", lambda x, y: x - y)):
        low, high = packed_half.unpack(assign_semantics(OpSpec(opcode, 2)).fn(a, b))
        for got, x, y in ((low, a_lo, b_lo), (high, a_hi, b_hi)):
            expected = nearest_half(exact(Fraction(float(x)), Fraction(float(y))))
            assert got == expected or (got == 0 and expected == 0), (opcode, x, y, got)


def test_pack_layout_modifiers_and_conversion():
    word = packed_half.pack(np.float16(1.5), np.float16(-2))
    assert int(word) == (0xC000 << 16) | 0x3E00  # low half in the low 16 bits
    sat = assign_semantics(OpSpec("add.sat.f16x2", 2)).fn(word, word)
    assert [float(h) for h in packed_half.unpack(sat)] == [1.0, 0.0]
    relu = assign_semantics(OpSpec("fma.rn.relu.f16x2", 3)).fn(word, word, word)
    assert [float(h) for h in packed_half.unpack(relu)] == [3.75, 2.0]
    packed = assign_semantics(OpSpec("cvt.rn.f16x2.f32", 2)).fn(np.float32(2), np.float32(0.5))
    assert [float(h) for h in packed_half.unpack(packed)] == [0.5, 2.0]  # d.hi = a, d.lo = b
    tiny = packed_half.pack(np.float16(2.0**-20), np.float16(-(2.0**-20)))
    flushed = assign_semantics(OpSpec("mul.ftz.f16x2", 2)).fn(tiny, packed_half.pack(1, 1))
    low, high = packed_half.unpack(flushed)
    assert low == 0 and high == 0 and np.signbit(high)


def test_setp_f16x2_compares_each_half_into_its_own_predicate():
    text = """.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 k_p0)
{
	.reg .pred %p<3>;
	.reg .b16 %h<5>;
	.reg .b32 %r<10>;
	.reg .b64 %rd<4>;
	ld.param.u64 %rd1, [k_p0];
	mov.u32 %r1, %tid.x;
	cvt.rn.f16.u32 %h1, %r1;
	mov.b16 %h2, 0x4200;
	mov.b32 %r2, {%h1, %h2};
	mov.b16 %h3, 0x4000;
	mov.b32 %r3, {%h3, %h3};
	setp.lt.f16x2 %p1|%p2, %r2, %r3;
	selp.u32 %r4, 1, 0, %p1;
	selp.u32 %r5, 10, 0, %p2;
	add.u32 %r6, %r4, %r5;
	mul.wide.u32 %rd2, %r1, 4;
	add.s64 %rd3, %rd1, %rd2;
	st.global.u32 [%rd3], %r6;
	ret;
}
"""
    kernel = parse_text(text, "k.ptx", "ptx").kernels[0]
    result = run_ptx_kernel(kernel, PtxLaunch(args={0: np.zeros(32, np.uint32)}))
    # lower half: tid < 2 sets %p1; upper half 3.0 < 2.0 never sets %p2
    assert list(result.buffers[kernel.params[0]]) == [1, 1] + [0] * 30


@pytest.mark.parametrize("opcode", ["setp.gt.and.f16x2", "ex2.approx.bf16x2",
                                    "ex2.approx.f16x2", "add.rz.f16x2", "cvt.rn.f16x2.f64"])
def test_other_packed_instructions_are_unsupported_not_integer_arithmetic(opcode):
    with pytest.raises(Unsupported):
        assign_semantics(OpSpec(opcode, 2))
