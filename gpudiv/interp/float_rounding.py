"""Directed IEEE rounding (`.rz`, `.rm`, `.rp`) of float results, exactly.

NumPy computes only in round-to-nearest-even. For the PTX instructions that name another
rounding direction (`add.rz.f32`, `fma.rm.f64`, `div.rp.f32`, `cvt.rz.f32.f64`, …) the
interpreter computes the exact result as a rational number, lane by lane, and rounds it
to the destination format in the named direction. Such instructions are rare in real
kernels, so exactness matters more than speed here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction
from math import isqrt

import numpy as np

DIRECTED = ("rz", "rm", "rp")

# precision (significand bits, hidden bit included), smallest normal exponent, largest
# exponent of the IEEE formats PTX names
_FORMATS = {"f16": (11, -14, 15), "f32": (24, -126, 127), "f64": (53, -1022, 1023),
            "bf16": (8, -126, 127)}
_DTYPES = {"f16": np.float16, "f32": np.float32, "f64": np.float64}


def _round_integer(value: Fraction, mode: str) -> int:
    """An exact non-negative rational rounded to an integer: down, or up for `up`."""
    floor = value.numerator // value.denominator
    return floor + 1 if mode == "up" and floor != value else floor


def round_rational(value: Fraction, mode: str, type_: str) -> float:
    """`value` rounded in the direction `mode` (rz, rm, rp) to the format `type_`: a Python
    float holding a value of that format (±inf where it overflows away from zero)."""
    precision, emin, emax = _FORMATS[type_]
    if value == 0:
        return 0.0
    negative = value < 0
    magnitude = -value if negative else value
    # toward zero rounds the magnitude down; rm/rp round it down or up by the sign
    up = (mode == "rp" and not negative) or (mode == "rm" and negative)
    exponent = max(magnitude.numerator.bit_length() - magnitude.denominator.bit_length(),
                   emin)
    if Fraction(2) ** exponent > magnitude:
        exponent -= 1
    exponent = max(exponent, emin)
    quantum = Fraction(2) ** (exponent - precision + 1)
    units = _round_integer(magnitude / quantum, "up" if up else "down")
    result = units * quantum
    largest = (2 - Fraction(2) ** (1 - precision)) * Fraction(2) ** emax
    if result > largest:
        result_float = float("inf") if up else float(largest)
    else:
        result_float = float(result)  # exact: the result is a value of the format
    return -result_float if negative else result_float


def _sum_zero(addends: Sequence[float], mode: str) -> float:
    """The signed zero of an exactly zero sum (IEEE 754 §6.3): +0 unless rounding toward
    −∞, then −0; a sum of zeros that all have one sign keeps it."""
    signs = {np.signbit(a) for a in addends}
    if len(signs) == 1 and all(a == 0 for a in addends):
        return -0.0 if signs == {True} else 0.0
    return -0.0 if mode == "rm" else 0.0


def directed(exact: Callable[..., tuple[Fraction, Sequence[float] | None]],
             nearest: Callable, mode: str, type_: str) -> Callable:
    """A lane-wise function rounding `exact(*operands)` in `mode` to `type_`.

    `exact` gets the operands of one lane as Python floats (all finite) and returns the
    exact result and, for a sum, its addends (for the sign of an exact zero; None: the
    nearest result's zero is right). Lanes with an infinite or NaN operand, a division by
    zero or the square root of a negative number take `nearest` (NumPy's round-to-nearest
    result): their results do not depend on the rounding direction.
    """
    dt = _DTYPES[type_]

    def fn(*operands):
        arrays = np.broadcast_arrays(*(np.atleast_1d(np.asarray(o, dtype=np.float64))
                                       for o in operands))
        with np.errstate(all="ignore"):  # infinities and NaN are results here
            out = np.array(nearest(*arrays), dtype=dt)
        out = np.broadcast_to(out, arrays[0].shape).copy()
        for lane, values in enumerate(zip(*(a.tolist() for a in arrays), strict=True)):
            if not all(np.isfinite(values)):
                continue
            try:
                value, addends = exact(*values)
            except (ZeroDivisionError, ValueError):
                continue
            if value == 0:
                out[lane] = _sum_zero(addends, mode) if addends is not None else out[lane]
            else:
                out[lane] = round_rational(value, mode, type_)
        return out if np.ndim(operands[0]) or len(out) != 1 else out[0]
    return fn


def exact_add(a: float, b: float):
    """a + b."""
    return Fraction(a) + Fraction(b), (a, b)


def exact_sub(a: float, b: float):
    """a − b (the addends a and −b)."""
    return Fraction(a) - Fraction(b), (a, -b)


def exact_mul(a: float, b: float):
    """a × b."""
    return Fraction(a) * Fraction(b), None


def exact_fma(a: float, b: float, c: float):
    """a × b + c, rounded once."""
    product = a * b if a * b != 0 else (-0.0 if np.signbit(a) != np.signbit(b) else 0.0)
    return Fraction(a) * Fraction(b) + Fraction(c), (product, c)


def exact_div(a: float, b: float):
    """a / b (ZeroDivisionError for b = 0)."""
    return Fraction(a) / Fraction(b), None


def exact_rcp(a: float):
    """1 / a (ZeroDivisionError for a = 0)."""
    return 1 / Fraction(a), None


def exact_value(a: float):
    """a itself (conversions)."""
    return Fraction(a), None


def exact_sqrt(a: float):
    """√a, as a rational that every directed rounding treats like √a (ValueError for a < 0).

    With r = ⌊√a · 2^k⌋ for a k that gives r at least 57 bits, √a is r / 2^k when that is
    exact, else it lies strictly between r / 2^k and (r + 1) / 2^k, and so does the
    midpoint returned. No f16, f32 or f64 value lies strictly inside that interval (their
    spacing there is a multiple of 2^-k), so both round to the same value in any direction.
    """
    x = Fraction(a)
    if x < 0:
        raise ValueError("square root of a negative number")
    if x == 0:
        return x, None
    denominator_bits = x.denominator.bit_length() - 1  # a float's denominator is 2^d
    magnitude = x.numerator.bit_length() - 1 - denominator_bits  # ⌊log2 x⌋ or one less
    k = max((denominator_bits + 1) // 2, (116 - magnitude) // 2 + 1, 0)
    scaled = x.numerator * 4**k // x.denominator
    root = isqrt(scaled)
    if root * root == scaled:
        return Fraction(root, 2**k), None
    return Fraction(2 * root + 1, 2 ** (k + 1)), None


def fma_to_odd(a, b, c) -> np.ndarray:
    """a·b + c in float64 rounded to odd (the product of two float32 values is exact in
    float64; only the sum rounds)."""
    a64, b64, c64 = (np.asarray(x, dtype=np.float64) for x in (a, b, c))
    p = a64 * b64
    s = p + c64
    bb = s - p
    err = (p - (s - bb)) + (c64 - bb)
    fix = (err != 0) & np.isfinite(s) & ((s.view(np.int64) & 1) == 0)
    if np.any(fix):
        s = np.where(fix, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return s


def fma_rounded_once(a, b, c, dt) -> np.ndarray:
    """Correctly rounded a·b + c in float32 or float16 (`dt`): rounding to odd with at
    least two more bits than twice the target's makes the final rounding to `dt` exact
    (53 ≥ 2·24 + 2)."""
    with np.errstate(over="ignore"):
        return fma_to_odd(a, b, c).astype(dt)


def to_odd_float32(x) -> np.ndarray:
    """float64 values rounded to odd in float32 (of the two neighbours of an inexact value,
    the one whose last significand bit is 1)."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        nearest = x.astype(np.float32)
        inexact = np.isfinite(x) & (nearest.astype(np.float64) != x)
        even = (nearest.view(np.uint32) & 1) == 0
        other = np.nextafter(nearest, np.where(x > nearest, np.float32(np.inf),
                                                np.float32(-np.inf)).astype(np.float32))
    return np.where(inexact & even, other, nearest).astype(np.float32)
