"""Directed rounding (.rz/.rm/.rp) of the PTX interpreter against its definition: the
result is a value of the format, on the right side of the exact rational result, and no
value of the format lies strictly between the two."""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpudiv.interp.float_rounding import round_rational
from gpudiv.interp.ptx import PtxLaunch, run_ptx_kernel
from gpudiv.interp.ptx_ops import OpSpec, Unsupported, assign_semantics
from gpudiv.lang.load import parse_text

# Overflow to infinity and NaN from infinities are expected here, not warnings to show.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def scaled(ci_examples: int) -> int:
    """The examples of a property under the profile (tests/conftest.py): the `ci` count,
    a tenth of it under `dev`, three times it under `thorough`."""
    return max(10, ci_examples * settings.default.max_examples // 100)


DTYPES = {"f16": np.float16, "f32": np.float32, "f64": np.float64}
EXACT = {
    "add": lambda a, b: exact(a) + exact(b),
    "sub": lambda a, b: exact(a) - exact(b),
    "mul": lambda a, b: exact(a) * exact(b),
    "div": lambda a, b: exact(a) / exact(b),
    "fma": lambda a, b, c: exact(a) * exact(b) + exact(c),
}


def exact(x) -> Fraction:
    """The rational value of a NumPy float."""
    return Fraction(float(x))


def floats_of(type_: str):
    width = {"f16": 16, "f32": 32, "f64": 64}[type_]
    return st.floats(width=width, allow_nan=False, allow_infinity=False)


def assert_directed(result, exact: Fraction, mode: str, type_: str) -> None:
    """`result` is `exact` rounded toward zero (rz), −∞ (rm) or +∞ (rp) in `type_`."""
    dt = DTYPES[type_]
    result = dt(result)
    if np.isinf(result):
        # only rounding away from zero may overflow to infinity
        assert (mode == "rp" and result > 0) or (mode == "rm" and result < 0), (result, exact)
        assert abs(exact) > Fraction(float(np.finfo(dt).max))
        return
    value = Fraction(float(result))
    toward_minus = mode == "rm" or (mode == "rz" and exact >= 0)
    if toward_minus:
        assert value <= exact
        above = np.nextafter(result, dt(np.inf))
        assert np.isinf(above) or Fraction(float(above)) > exact
    else:
        assert value >= exact
        below = np.nextafter(result, dt(-np.inf))
        assert np.isinf(below) or Fraction(float(below)) < exact


def run_op(opcode: str, *operands):
    semantics = assign_semantics(OpSpec(opcode, len(operands)))
    return semantics.fn(*operands)


@pytest.mark.parametrize("type_", ["f32", "f64", "f16"])
@pytest.mark.parametrize("mode", ["rz", "rm", "rp"])
@pytest.mark.parametrize("root", ["add", "sub", "mul", "div"])
def test_binary_directed_rounding(root, mode, type_):
    @settings(max_examples=scaled(150), deadline=None)
    @given(floats_of(type_), floats_of(type_))
    def check(a, b):
        if root == "div" and b == 0:
            return
        dt = DTYPES[type_]
        result = run_op(f"{root}.{mode}.{type_}", dt(a), dt(b))
        assert_directed(result, EXACT[root](dt(a), dt(b)), mode, type_)
    check()


@pytest.mark.parametrize("type_", ["f32", "f64"])
@pytest.mark.parametrize("mode", ["rz", "rm", "rp"])
def test_fma_and_mad_directed_rounding(mode, type_):
    @settings(max_examples=scaled(150), deadline=None)
    @given(floats_of(type_), floats_of(type_), floats_of(type_))
    def check(a, b, c):
        dt = DTYPES[type_]
        for root in ("fma", "mad"):
            result = run_op(f"{root}.{mode}.{type_}", dt(a), dt(b), dt(c))
            assert_directed(result, EXACT["fma"](dt(a), dt(b), dt(c)), mode, type_)
    check()


@pytest.mark.parametrize("mode", ["rz", "rm", "rp"])
def test_conversions_with_directed_rounding(mode):
    @settings(max_examples=scaled(200), deadline=None)
    @given(floats_of("f64"), st.integers(-2**63, 2**63 - 1), st.integers(0, 2**64 - 1))
    def check(x, s64, u64):
        assert_directed(run_op(f"cvt.{mode}.f32.f64", np.float64(x)), Fraction(x), mode,
                        "f32")
        assert_directed(run_op(f"cvt.{mode}.f32.s64", np.int64(s64)), Fraction(s64), mode,
                        "f32")
        assert_directed(run_op(f"cvt.{mode}.f64.u64", np.uint64(u64)), Fraction(u64), mode,
                        "f64")
    check()


def test_exact_results_and_their_zeros():
    one_third = run_op("div.rz.f32", np.float32(1), np.float32(3))
    assert one_third < Fraction(1, 3) and run_op("div.rp.f32", np.float32(1), np.float32(3)) \
        == np.nextafter(one_third, np.float32(1))
    assert run_op("add.rz.f32", np.float32(1.5), np.float32(2.25)) == np.float32(3.75)
    # an exact zero sum is −0 only when rounding toward −∞ (IEEE 754 §6.3)
    assert np.signbit(run_op("sub.rm.f32", np.float32(2), np.float32(2)))
    assert not np.signbit(run_op("sub.rz.f32", np.float32(2), np.float32(2)))
    assert np.signbit(run_op("add.rp.f32", np.float32(-0.0), np.float32(-0.0)))
    assert np.signbit(run_op("mul.rz.f32", np.float32(-3), np.float32(0)))
    # overflow: toward zero stops at the largest finite value
    big = np.finfo(np.float32).max
    assert run_op("add.rz.f32", big, big) == big and np.isinf(run_op("add.rp.f32", big, big))
    assert run_op("mul.rm.f32", big, np.float32(-2)) == -np.inf
    # infinities and NaN do not depend on the direction
    assert np.isnan(run_op("add.rz.f32", np.float32(np.inf), np.float32(-np.inf)))
    assert run_op("div.rz.f32", np.float32(1), np.float32(0)) == np.inf
    # lanes: one array in, one array out
    lanes = run_op("add.rm.f32", np.array([1, 2, 3], np.float32), np.float32(2**-30))
    assert list(lanes) == [1, 2, 3]


def test_round_rational_subnormals():
    tiny = Fraction(1, 2**160)  # below the smallest f32 subnormal (2^-149)
    assert round_rational(tiny, "rz", "f32") == 0.0
    assert round_rational(tiny, "rp", "f32") == 2.0**-149
    assert round_rational(-tiny, "rm", "f32") == -(2.0**-149)


@pytest.mark.parametrize("type_", ["f32", "f64", "f16"])
@pytest.mark.parametrize("mode", ["rz", "rm", "rp"])
def test_square_root_directed_rounding(mode, type_):
    """√x is irrational in general: compare squares (v ≤ √x ⇔ v² ≤ x for v ≥ 0)."""
    dt = DTYPES[type_]

    @settings(max_examples=scaled(200), deadline=None)
    @given(floats_of(type_).map(abs))
    def check(x):
        x = dt(x)
        result = dt(run_op(f"sqrt.{mode}.{type_}", x))
        assert result >= 0 and not np.isinf(result)
        value = exact(result)
        up = np.nextafter(result, dt(np.inf))
        if mode == "rp":
            assert value * value >= exact(x)
            below = np.nextafter(result, dt(0))
            assert result == 0 or exact(below) ** 2 < exact(x)
        else:  # toward zero and toward −∞ agree for a non-negative root
            assert value * value <= exact(x)
            assert np.isinf(up) or exact(up) ** 2 > exact(x)
    check()
    assert np.isnan(run_op(f"sqrt.{mode}.{type_}", dt(-4)))
    assert run_op(f"sqrt.{mode}.{type_}", dt(2.25)) == dt(1.5)


def test_approximate_square_root_takes_no_direction():
    with pytest.raises(Unsupported, match="directed rounding of sqrt"):
        assign_semantics(OpSpec("sqrt.approx.rz.f32", 1))


def test_kernel_with_directed_rounding_runs_exactly():
    text = """.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 k_p0)
{
	.reg .b32 %r<4>;
	.reg .f32 %f<6>;
	.reg .b64 %rd<4>;
	ld.param.u64 %rd1, [k_p0];
	mov.u32 %r1, %tid.x;
	cvt.rn.f32.u32 %f1, %r1;
	add.f32 %f2, %f1, 1.0;
	div.rz.f32 %f3, %f1, %f2;
	div.rp.f32 %f4, %f1, %f2;
	sub.f32 %f5, %f4, %f3;
	mul.wide.u32 %rd2, %r1, 4;
	add.s64 %rd3, %rd1, %rd2;
	st.global.f32 [%rd3], %f5;
	ret;
}
"""
    kernel = parse_text(text, "k.ptx", "ptx").kernels[0]
    out = np.zeros(32, np.float32)
    result = run_ptx_kernel(kernel, PtxLaunch(args={0: out}))
    gaps = result.buffers[kernel.params[0]]
    for tid, gap in enumerate(gaps):
        exact = Fraction(tid, tid + 1)
        representable = Fraction(float(np.float32(exact))) == exact
        assert gap == 0 if representable else gap > 0  # rz and rp bracket tid/(tid+1)
