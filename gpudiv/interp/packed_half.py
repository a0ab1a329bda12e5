"""16-bit floats (IEEE float16, bfloat16) and their packed pairs (`.f16x2`, `.bf16x2`).

A pair holds its first element in the lower 16 bits of a 32-bit register and its second in
the upper 16 bits (`mov.b32 %r, {lo, hi}`). Arithmetic runs on each element separately and
is correctly rounded. float16 sums, differences and products are computed in float16
(NumPy goes through float32: 24 ≥ 2·11 + 2 bits, so rounding twice gives the result of
rounding once); bfloat16 elements are computed in float32 and rounded to bfloat16
(24 ≥ 2·8 + 2). A fused multiply-add is rounded to odd in float64 (and, for bfloat16, in
float32) before its one rounding to the element format (`float_rounding`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from gpudiv.interp.float_rounding import fma_rounded_once, fma_to_odd, to_odd_float32

_F16_MIN_NORMAL = np.float16(2.0**-14)


def bf16_to_f32(bits) -> np.ndarray:
    """bfloat16 bits → float32 (exact)."""
    return (np.asarray(bits).astype(np.uint32) << np.uint32(16)).view(np.float32)


def f32_to_bf16(x) -> np.ndarray:
    """float32 → bfloat16 bits, rounded to nearest even (NaN stays a quiet NaN)."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    return np.where(nan, np.uint64(0x7FC0), rounded).astype(np.uint16)


def unpack(word, element: str = "f16") -> tuple[np.ndarray, np.ndarray]:
    """The (low, high) elements of 32-bit words: float16 values, or for `bf16` the
    bfloat16 values as float32 (exact)."""
    bits = np.asarray(word).astype(np.uint32)
    low = (bits & np.uint32(0xFFFF)).astype(np.uint16)
    high = (bits >> np.uint32(16)).astype(np.uint16)
    if element == "bf16":
        return bf16_to_f32(low), bf16_to_f32(high)
    return low.view(np.float16), high.view(np.float16)


def pack(low, high, element: str = "f16") -> np.ndarray:
    """32-bit words from two elements (for `bf16`, float32 values rounded to bfloat16)."""
    if element == "bf16":
        low_bits, high_bits = f32_to_bf16(low), f32_to_bf16(high)
    else:
        low_bits = np.asarray(low, dtype=np.float16).view(np.uint16)
        high_bits = np.asarray(high, dtype=np.float16).view(np.uint16)
    return (high_bits.astype(np.uint32) << np.uint32(16)) | low_bits.astype(np.uint32)


def fma16(a, b, c) -> np.ndarray:
    """Correctly rounded float16 a·b + c."""
    return fma_rounded_once(a, b, c, np.float16)


def fma_bf16(a, b, c) -> np.ndarray:
    """a·b + c for bfloat16 values (as float32), rounded to odd in float32: rounding that to
    bfloat16 (`pack`, `f32_to_bf16`) then gives the correctly rounded result."""
    return to_odd_float32(fma_to_odd(a, b, c))


def flush(x) -> np.ndarray:
    """`.ftz`: subnormal float16 values become zero of the same sign."""
    x = np.asarray(x, dtype=np.float16)
    return np.where(np.abs(x) < _F16_MIN_NORMAL, np.copysign(np.float16(0), x), x).astype(
        np.float16)


def saturate(x) -> np.ndarray:
    """`.sat`: clamp to [0, 1], NaN → 0."""
    x = np.asarray(x)
    return np.where(np.isnan(x), x.dtype.type(0), np.clip(x, 0, 1)).astype(x.dtype)


def relu(x) -> np.ndarray:
    """`.relu`: negative values become 0, NaN stays NaN."""
    x = np.asarray(x)
    return np.where(np.isnan(x), x, np.maximum(x, x.dtype.type(0))).astype(x.dtype)


def elementwise(fn: Callable, mods: list[str], element: str = "f16") -> Callable:
    """A function of packed words applying `fn` to the low elements and to the high ones,
    with `.ftz` (float16) on inputs and result and `.sat`/`.relu` on the result; both
    commute with the final rounding of a bfloat16 element."""
    ftz = "ftz" in mods and element == "f16"
    sat, rectify = "sat" in mods, "relu" in mods
    result_type = np.float32 if element == "bf16" else np.float16

    def one(*values):
        if ftz:
            values = tuple(flush(v) for v in values)
        with np.errstate(all="ignore"):
            out = np.asarray(fn(*values), dtype=result_type)
        if ftz:
            out = flush(out)
        if sat:
            out = saturate(out)
        if rectify:
            out = relu(out)
        return out

    def packed(*words):
        halves = [unpack(w, element) for w in words]
        low = one(*(h[0] for h in halves))
        high = one(*(h[1] for h in halves))
        return pack(low, high, element)
    return packed
