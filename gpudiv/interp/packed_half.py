"""Packed half precision (`.f16x2`): two IEEE float16 values in one 32-bit register.

The lower 16 bits hold the first element, the upper 16 bits the second (`mov.b32 %r,
{lo, hi}`). Arithmetic runs on each half separately and is correctly rounded: float16
sums, differences and products computed through float32 are (24 ≥ 2·11 + 2 bits, so
rounding twice gives the result of rounding once), and a fused multiply-add is rounded
once (`float_rounding.fma_rounded_once`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from gpudiv.interp.float_rounding import fma_rounded_once

_F16_MIN_NORMAL = np.float16(2.0**-14)


def unpack(word) -> tuple[np.ndarray, np.ndarray]:
    """The (low, high) float16 halves of 32-bit words."""
    bits = np.asarray(word).astype(np.uint32)
    low = (bits & np.uint32(0xFFFF)).astype(np.uint16).view(np.float16)
    high = (bits >> np.uint32(16)).astype(np.uint16).view(np.float16)
    return low, high


def pack(low, high) -> np.ndarray:
    """32-bit words from float16 halves."""
    low_bits = np.asarray(low, dtype=np.float16).view(np.uint16).astype(np.uint32)
    high_bits = np.asarray(high, dtype=np.float16).view(np.uint16).astype(np.uint32)
    return (high_bits << np.uint32(16)) | low_bits


def fma16(a, b, c) -> np.ndarray:
    """Correctly rounded float16 a·b + c."""
    return fma_rounded_once(a, b, c, np.float16)


def flush(x) -> np.ndarray:
    """`.ftz`: subnormal float16 values become zero of the same sign."""
    x = np.asarray(x, dtype=np.float16)
    return np.where(np.abs(x) < _F16_MIN_NORMAL, np.copysign(np.float16(0), x), x).astype(
        np.float16)


def saturate(x) -> np.ndarray:
    """`.sat`: clamp to [0, 1], NaN → 0."""
    x = np.asarray(x, dtype=np.float16)
    return np.where(np.isnan(x), np.float16(0), np.clip(x, np.float16(0), np.float16(1)))


def relu(x) -> np.ndarray:
    """`.relu`: negative values become 0, NaN stays the canonical NaN."""
    x = np.asarray(x, dtype=np.float16)
    return np.where(np.isnan(x), np.float16(np.nan), np.maximum(x, np.float16(0)))


def elementwise(fn: Callable, mods: list[str]) -> Callable:
    """A function of packed words applying `fn` to the low halves and to the high halves,
    with `.ftz` on inputs and result and `.sat`/`.relu` on the result."""
    ftz, sat, rectify = "ftz" in mods, "sat" in mods, "relu" in mods

    def half(*values):
        if ftz:
            values = tuple(flush(v) for v in values)
        with np.errstate(all="ignore"):
            out = np.asarray(fn(*values), dtype=np.float16)
        if ftz:
            out = flush(out)
        if sat:
            out = saturate(out)
        if rectify:
            out = relu(out)
        return out

    def packed(*words):
        halves = [unpack(w) for w in words]
        low = half(*(h[0] for h in halves))
        high = half(*(h[1] for h in halves))
        return pack(low, high)
    return packed
