"""Semantics of PTX arithmetic, logic, compare, convert and move instructions on NumPy lanes.

`assign_semantics(spec)` turns one lowered instruction (its full opcode and what the front
end recorded in `attrs`) into the PTX types its operands are read as, the type of its
result and a function from operand arrays to the result array. Values are bit-exact to the
PTX type: integers wrap at their width (NumPy fixed-width arithmetic), `.f32` is computed
in float32 and `.f64` in float64 (IEEE round-to-nearest-even), `.f16` in float16; the
directed rounding modes `.rz/.rm/.rp` of `add sub mul fma mad div rcp sqrt cvt` are
computed exactly (`gpudiv.interp.float_rounding`).
The transcendental `.approx` instructions (`sin cos lg2 ex2 rsqrt tanh`) are computed in
float64 and rounded to the type, so they are at least as accurate as the hardware, not
equal to it.

Anything outside the table raises `Unsupported` with a one-line reason; the interpreter
then stops the kernel when (and only when) the instruction is executed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from fractions import Fraction

import numpy as np

from gpudiv.interp import float_rounding, packed_half
from gpudiv.interp.float_rounding import DIRECTED, directed

# PTX type → (bit width, kind): kind "u" unsigned/bit, "s" signed, "f" float, "p" predicate.
TYPES: dict[str, tuple[int, str]] = {
    "pred": (1, "p"),
    "b8": (8, "u"), "u8": (8, "u"), "s8": (8, "s"),
    "b16": (16, "u"), "u16": (16, "u"), "s16": (16, "s"), "f16": (16, "f"), "bf16": (16, "u"),
    "b32": (32, "u"), "u32": (32, "u"), "s32": (32, "s"), "f32": (32, "f"),
    "f16x2": (32, "u"), "bf16x2": (32, "u"), "tf32": (32, "u"),
    "b64": (64, "u"), "u64": (64, "u"), "s64": (64, "s"), "f64": (64, "f"),
}
DTYPES: dict[str, type] = {
    "pred": np.bool_,
    "u8": np.uint8, "s8": np.int8, "u16": np.uint16, "s16": np.int16, "f16": np.float16,
    "u32": np.uint32, "s32": np.int32, "f32": np.float32,
    "u64": np.uint64, "s64": np.int64, "f64": np.float64,
}

ROUNDING = frozenset({"rn", "rz", "rm", "rp", "rna", "rs"})
INT_ROUNDING = frozenset({"rni", "rzi", "rmi", "rpi"})


class Unsupported(Exception):
    """An instruction (or a form of one) the interpreter cannot execute."""


def bits(type_: str) -> int:
    """Bit width of a PTX type."""
    return TYPES[type_][0]


def kind(type_: str) -> str:
    """'u', 's', 'f' or 'p'."""
    return TYPES[type_][1]


def canonical(type_: str) -> str:
    """The NumPy-backed type a PTX type is computed in (`b32` → `u32`, `bf16` → `u16`)."""
    width, k = TYPES[type_]
    if k == "p":
        return "pred"
    if k == "f":
        return type_
    return f"{k}{width}"


def unsigned(type_: str) -> str:
    """The unsigned type of the same width."""
    return "pred" if type_ == "pred" else f"u{bits(type_)}"


def signed(type_: str) -> str:
    """The signed type of the same width."""
    return "pred" if type_ == "pred" else f"s{bits(type_)}"


def dtype(type_: str):
    """The NumPy dtype of a PTX type."""
    return DTYPES[canonical(type_)]


def constant(value: int, type_: str):
    """An immediate as a NumPy scalar of the type. Float immediates arrive as the integer
    of their IEEE bits (`0f3F800000`, `0d…`; decimal literals as double bits)."""
    type_ = canonical(type_)
    if type_ == "pred":
        return np.bool_(value != 0)
    if kind(type_) == "f":
        return _float_constant(value, type_)
    width = bits(type_)
    return np.array(value & ((1 << width) - 1), dtype=DTYPES[unsigned(type_)]).view(
        DTYPES[type_])[()]


def _float_constant(value: int, type_: str):
    negative = value < 0
    magnitude = -value if negative else value
    if type_ == "f32" and magnitude < 2**32:
        result = np.array(magnitude, dtype=np.uint32).view(np.float32)[()]
    elif type_ == "f16" and magnitude < 2**16:
        result = np.array(magnitude, dtype=np.uint16).view(np.float16)[()]
    elif magnitude < 2**64 and not (negative and magnitude >= 2**32):
        result = np.array(magnitude, dtype=np.uint64).view(np.float64)[()]
        result = DTYPES[type_](result)
    else:  # a negative decimal literal: the signed integer of its double bits
        result = np.array(value & (2**64 - 1), dtype=np.uint64).view(np.float64)[()]
        return DTYPES[type_](result)
    return -result if negative else result


@dataclass
class OpSpec:
    """What the semantics of one instruction depend on."""

    opcode: str
    nargs: int
    element: int | None = None
    carry: bool = False
    dest_bits: int | None = None
    negated: tuple[int, ...] = ()
    consts: list[int | None] = field(default_factory=list)

    @property
    def parts(self) -> list[str]:
        return self.opcode.split(".")

    @property
    def root(self) -> str:
        return self.parts[0]

    @property
    def mods(self) -> list[str]:
        return self.parts[1:]

    @property
    def types(self) -> list[str]:
        return [m for m in self.mods if m in TYPES]


@dataclass
class Semantics:
    """Operand types, result type and the function computing the result."""

    arg_types: list[str]
    result_type: str
    fn: Callable


# ---------------------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------------------

_F32_MIN_NORMAL = np.float32(1.1754944e-38)


def _ftz(x):
    """Flush subnormal float32 values to zero of the same sign."""
    return np.where(np.abs(x) < _F32_MIN_NORMAL, np.copysign(np.float32(0), x), x).astype(
        x.dtype)


def _float_post(spec: OpSpec, type_: str) -> Callable:
    """Saturation (`.sat`: clamp to [0, 1], NaN → 0) and `.ftz` on a float result."""
    mods = spec.mods
    sat = "sat" in mods
    ftz = "ftz" in mods and type_ == "f32"
    if not sat and not ftz:
        return lambda x: x
    dt = dtype(type_)

    def post(x):
        x = np.asarray(x, dtype=dt)
        if ftz:
            x = _ftz(x)
        if sat:
            x = np.where(np.isnan(x), dt(0), np.clip(x, dt(0), dt(1))).astype(dt)
        return x
    return post


def _float_in(spec: OpSpec, type_: str) -> Callable:
    """`.ftz` on float32 inputs."""
    if "ftz" in spec.mods and type_ == "f32":
        return lambda x: _ftz(np.asarray(x, dtype=np.float32))
    return lambda x: x


def _direction(spec: OpSpec, type_: str) -> str | None:
    """The directed rounding (`rz`, `rm`, `rp`) a float instruction names, if any."""
    mode = next((m for m in spec.mods if m in DIRECTED), None)
    if mode is not None and type_ not in ("f16", "f32", "f64"):
        raise Unsupported(f"'{spec.opcode}': directed rounding to {type_}")
    return mode


def _float_op(spec: OpSpec, type_: str, nearest: Callable, exact: Callable) -> Callable:
    """A float instruction: `nearest` on NumPy arrays, or, when the instruction names a
    directed rounding, `exact` (a `float_rounding.exact_*`) rounded in that direction;
    `.ftz` and `.sat` applied around it."""
    post, pre = _float_post(spec, type_), _float_in(spec, type_)
    mode = _direction(spec, type_)
    op = directed(exact, nearest, mode, type_) if mode else nearest
    return lambda *operands: post(op(*(pre(x) for x in operands)))


def _limits(type_: str) -> tuple[int, int]:
    width, k = TYPES[type_]
    if k == "s":
        return -(1 << (width - 1)), (1 << (width - 1)) - 1
    return 0, (1 << width) - 1


def _to_int(x, type_: str, rounding: str | None = None):
    """Float → integer type with rounding and saturation (PTX: NaN → 0, saturating)."""
    x = np.asarray(x, dtype=np.float64)
    if rounding in (None, "rzi", "rz"):
        r = np.trunc(x)
    elif rounding in ("rni", "rn"):
        r = np.rint(x)
    elif rounding in ("rmi", "rm"):
        r = np.floor(x)
    else:
        r = np.ceil(x)
    low, high = _limits(canonical(type_))
    r = np.where(np.isnan(r), 0.0, r)
    dt = dtype(type_)
    if bits(type_) < 64:
        return np.clip(r, low, high).astype(dt)
    big = r >= float(high)  # 2**63 - 1 and 2**64 - 1 are not float64 values
    small = r <= float(low)
    out = np.where(big | small, 0.0, r).astype(dt)
    return np.where(big, dt(high), np.where(small, dt(low), out)).astype(dt)


def _saturate_int(value64, type_: str):
    """Clamp a wide integer result into the range of `type_`."""
    low, high = _limits(canonical(type_))
    return np.clip(value64, low, high).astype(dtype(type_))


def _mask(width: int) -> int:
    return (1 << width) - 1


def _as_u64(x):
    return np.asarray(x).astype(np.uint64)


def _bit_length(x):
    """Number of significant bits of unsigned 64-bit values (0 for 0)."""
    x = np.asarray(x, dtype=np.uint64).copy()
    n = np.zeros(x.shape, dtype=np.int64)
    for shift in (32, 16, 8, 4, 2, 1):
        big = x >= (np.uint64(1) << np.uint64(shift))
        n = np.where(big, n + shift, n)
        x = np.where(big, x >> np.uint64(shift), x)
    return n + (x > 0)


_REVERSED_BYTES = np.array([int(f"{b:08b}"[::-1], 2) for b in range(256)], dtype=np.uint64)


def _brev(x, width: int):
    x = np.asarray(x).astype(np.uint64)
    out = np.zeros(x.shape, dtype=np.uint64)
    for k in range(width // 8):
        byte = (x >> np.uint64(8 * k)) & np.uint64(0xFF)
        out |= _REVERSED_BYTES[byte.astype(np.intp)] << np.uint64(width - 8 - 8 * k)
    return out


def _mul_hi_64(a, b, is_signed: bool):
    """High 64 bits of a 128-bit product (Python integers lane by lane)."""
    a = np.atleast_1d(a)
    b = np.atleast_1d(b)
    a, b = np.broadcast_arrays(a, b)
    out = [(int(x) * int(y)) >> 64 for x, y in zip(a.tolist(), b.tolist(), strict=True)]
    if is_signed:
        return np.array([v & _mask(64) for v in out], dtype=np.uint64).view(np.int64)
    return np.array(out, dtype=np.uint64)


def _fma32(a, b, c):
    """Correctly rounded float32 fused multiply-add."""
    return float_rounding.fma_rounded_once(a, b, c, np.float32)


def _fma64(a, b, c):
    """Correctly rounded float64 fused multiply-add (exact rationals lane by lane)."""
    a, b, c = np.broadcast_arrays(np.atleast_1d(np.asarray(a, dtype=np.float64)),
                                  np.atleast_1d(np.asarray(b, dtype=np.float64)),
                                  np.atleast_1d(np.asarray(c, dtype=np.float64)))
    out = np.empty(a.shape, dtype=np.float64)
    for k, (x, y, z) in enumerate(zip(a.tolist(), b.tolist(), c.tolist(), strict=True)):
        if all(np.isfinite((x, y, z))):
            exact = Fraction(x) * Fraction(y) + Fraction(z)
            try:
                out[k] = float(exact) if exact != 0 else (x * y + z)
            except OverflowError:
                out[k] = np.inf if exact > 0 else -np.inf
        else:
            out[k] = x * y + z
    return out


def _fma(type_: str):
    if type_ == "f32":
        return _fma32
    if type_ == "f64":
        return _fma64
    if type_ == "f16":
        return packed_half.fma16
    raise Unsupported(f"fused multiply-add on {type_}")


def _shift_amount(b, width: int):
    """Shift counts as unsigned, clamped to the width (larger counts handled by callers)."""
    b = np.asarray(b).astype(np.uint64)
    return np.minimum(b, np.uint64(width))


# ---------------------------------------------------------------------------------------
# Instruction families
# ---------------------------------------------------------------------------------------

def _type_of(spec: OpSpec, default: str | None = None) -> str:
    types = spec.types
    if types:
        return types[-1]
    if default is not None:
        return default
    raise Unsupported(f"'{spec.opcode}' has no type")


def _add_sub(spec: OpSpec) -> Semantics:
    t = _type_of(spec)
    root = spec.root
    subtract = root in ("sub", "subc")
    carry_in = root in ("addc", "subc")
    n = 2
    if kind(t) == "f":
        if t not in ("f32", "f64", "f16"):
            raise Unsupported(f"'{spec.opcode}': type {t}")
        if subtract:
            return Semantics([t, t], t, _float_op(spec, t, lambda a, b: a - b,
                                                  float_rounding.exact_sub))
        return Semantics([t, t], t, _float_op(spec, t, lambda a, b: a + b,
                                              float_rounding.exact_add))
    t = canonical(t)
    dt = dtype(t)
    types = [t] * n + (["u32"] if carry_in else [])
    if spec.carry:  # the carry (borrow) out of add.cc / addc.cc / sub.cc / subc.cc
        ut = unsigned(t)
        udt = dtype(ut)
        types = [ut] * n + (["u32"] if carry_in else [])

        def carry_out(a, b, cin=None):
            a = np.asarray(a).astype(udt)
            b = np.asarray(b).astype(udt)
            if subtract:
                first = a - b
                out = a < b
                if cin is not None:
                    cin = np.asarray(cin).astype(udt) & udt(1)
                    out = out | (first < cin)
            else:
                first = a + b
                out = first < a
                if cin is not None:
                    cin = np.asarray(cin).astype(udt) & udt(1)
                    out = out | ((first + cin) < first)
            return np.asarray(out).astype(np.uint32)
        return Semantics(types, "u32", carry_out)
    if "sat" in spec.mods:
        if subtract:
            return Semantics(types, t, lambda a, b: _saturate_int(
                np.asarray(a, np.int64) - np.asarray(b, np.int64), t))
        return Semantics(types, t, lambda a, b: _saturate_int(
            np.asarray(a, np.int64) + np.asarray(b, np.int64), t))
    if carry_in:
        if subtract:
            return Semantics(types, t, lambda a, b, c: a - b - (np.asarray(c).astype(dt)
                                                                 & dt(1)))
        return Semantics(types, t, lambda a, b, c: a + b + (np.asarray(c).astype(dt) & dt(1)))
    if subtract:
        return Semantics(types, t, lambda a, b: a - b)
    return Semantics(types, t, lambda a, b: a + b)


def _wide(t: str) -> str:
    return f"{kind(t)}{2 * bits(t)}"


def _mul(spec: OpSpec) -> Semantics:
    t = _type_of(spec)
    mods = spec.mods
    if kind(t) == "f":
        return Semantics([t, t], t, _float_op(spec, t, lambda a, b: a * b,
                                              float_rounding.exact_mul))
    t = canonical(t)
    if "wide" in mods:
        if bits(t) > 32:
            raise Unsupported(f"'{spec.opcode}'")
        w = _wide(t)
        wdt = dtype(w)
        return Semantics([t, t], w, lambda a, b: np.asarray(a).astype(wdt)
                         * np.asarray(b).astype(wdt))
    if "hi" in mods:
        return Semantics([t, t], t, _mul_hi(t))
    return Semantics([t, t], t, lambda a, b: a * b)


def _mul_hi(t: str) -> Callable:
    width = bits(t)
    dt = dtype(t)
    if width == 64:
        return lambda a, b: _mul_hi_64(a, b, kind(t) == "s")
    wide = np.int64 if kind(t) == "s" else np.uint64
    shift = wide(width)
    return lambda a, b: ((np.asarray(a).astype(wide) * np.asarray(b).astype(wide))
                         >> shift).astype(dt)


def _mad(spec: OpSpec) -> Semantics:
    t = _type_of(spec)
    mods = spec.mods
    root = spec.root
    if kind(t) == "f":
        return Semantics([t, t, t], t, _float_op(spec, t, _fma(t), float_rounding.exact_fma))
    t = canonical(t)
    dt = dtype(t)
    carry_in = root == "madc"
    extra = ["u32"] if carry_in else []
    if "wide" in mods:
        w = _wide(t)
        wdt = dtype(w)
        if spec.carry:
            raise Unsupported(f"'{spec.opcode}' carry out")

        def mad_wide(a, b, c, cin=None):
            r = np.asarray(a).astype(wdt) * np.asarray(b).astype(wdt) + c
            return r + (np.asarray(cin).astype(wdt) & wdt(1)) if cin is not None else r
        return Semantics([t, t, w] + extra, w, mad_wide)
    product = _mul_hi(t) if "hi" in mods else (lambda a, b: a * b)
    if "sat" in mods:  # mad.hi.sat.s32
        def mad_sat(a, b, c):
            return _saturate_int(np.asarray(product(a, b), np.int64) + np.asarray(c, np.int64),
                                 t)
        return Semantics([t, t, t], t, mad_sat)
    if spec.carry:
        ut = unsigned(t)
        udt = dtype(ut)

        def carry_out(a, b, c, cin=None):
            p = np.asarray(product(a, b)).astype(udt)
            c = np.asarray(c).astype(udt)
            s = p + c
            out = s < p
            if cin is not None:
                out = out | ((s + (np.asarray(cin).astype(udt) & udt(1))) < s)
            return np.asarray(out).astype(np.uint32)
        return Semantics([t, t, t] + extra, "u32", carry_out)

    def mad(a, b, c, cin=None):
        r = product(a, b) + c
        return r + (np.asarray(cin).astype(dt) & dt(1)) if cin is not None else r
    return Semantics([t, t, t] + extra, t, mad)


def _mul24(spec: OpSpec) -> Semantics:
    t = canonical(_type_of(spec))
    if bits(t) != 32:
        raise Unsupported(f"'{spec.opcode}'")
    hi = "hi" in spec.mods
    is_signed = kind(t) == "s"
    dt = dtype(t)

    def low24(x):
        x = np.asarray(x).astype(np.int64) & 0xFFFFFF
        return np.where(x >= 0x800000, x - 0x1000000, x) if is_signed else x

    def product(a, b):
        p = low24(a) * low24(b)
        p = (p >> 16) if hi else p
        return np.asarray(p & 0xFFFFFFFF).astype(np.uint32).view(dt)

    if spec.root == "mad24":
        return Semantics([t, t, t], t, lambda a, b, c: product(a, b) + c)
    return Semantics([t, t], t, product)


def _div_rem(spec: OpSpec) -> Semantics:
    t = _type_of(spec)
    if kind(t) == "f":
        if spec.root == "rem":
            raise Unsupported(f"'{spec.opcode}'")
        return Semantics([t, t], t, _float_op(spec, t, lambda a, b: a / b,
                                              float_rounding.exact_div))
    t = canonical(t)
    dt = dtype(t)
    is_signed = kind(t) == "s"
    remainder = spec.root == "rem"

    def divide(a, b):
        a = np.asarray(a)
        b = np.asarray(b)
        zero = b == 0
        if np.any(zero):  # no trap: quotient all ones, remainder the dividend
            a, b = np.broadcast_arrays(a, b)
            out = divide(a, np.where(zero, np.ones_like(b), b))
            by_zero = a if remainder else np.full_like(a, -1 if is_signed else ~dt(0))
            return np.where(zero, by_zero, out).astype(dt)
        if not is_signed:
            return (a % b if remainder else a // b).astype(dt)
        ua = np.where(a < 0, -(a.astype(np.int64)), a.astype(np.int64)).astype(np.uint64)
        ub = np.where(b < 0, -(b.astype(np.int64)), b.astype(np.int64)).astype(np.uint64)
        if remainder:
            mag = ua % ub
            negative = a < 0
        else:
            mag = ua // ub
            negative = (a < 0) != (b < 0)
        out = np.where(negative, (~mag) + np.uint64(1), mag)  # two's complement negate
        return np.asarray(out, dtype=np.uint64).astype(dtype(unsigned(t))).view(dt)
    return Semantics([t, t], t, divide)


def _abs_neg(spec: OpSpec) -> Semantics:
    t = _type_of(spec)
    if kind(t) == "f":
        post, pre = _float_post(spec, t), _float_in(spec, t)
        if spec.root == "abs":
            return Semantics([t], t, lambda a: post(np.abs(pre(a))))
        return Semantics([t], t, lambda a: post(-pre(a)))
    t = canonical(t)
    if spec.root == "abs":
        return Semantics([t], t, np.abs)
    return Semantics([t], t, np.negative)


def _min_max(spec: OpSpec) -> Semantics:
    t = _type_of(spec)
    is_max = spec.root == "max"
    if kind(t) == "f":
        post, pre = _float_post(spec, t), _float_in(spec, t)
        if "NaN" in spec.mods:
            op = np.maximum if is_max else np.minimum
        else:
            op = np.fmax if is_max else np.fmin
        return Semantics([t, t], t, lambda a, b: post(op(pre(a), pre(b))))
    t = canonical(t)
    op = np.maximum if is_max else np.minimum
    if "relu" in spec.mods:
        zero = dtype(t)(0)
        return Semantics([t, t], t, lambda a, b: np.maximum(op(a, b), zero))
    return Semantics([t, t], t, op)


def _logic(spec: OpSpec) -> Semantics:
    t = _type_of(spec)
    root = spec.root
    if t == "pred":
        ops = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}
        if root == "not":
            return Semantics(["pred"], "pred", np.logical_not)
        if root == "cnot":
            return Semantics(["pred"], "pred", np.logical_not)
        return Semantics(["pred", "pred"], "pred", ops[root])
    t = unsigned(canonical(t))
    dt = dtype(t)
    if root == "not":
        return Semantics([t], t, np.invert)
    if root == "cnot":
        return Semantics([t], t, lambda a: (np.asarray(a) == 0).astype(dt))
    ops = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}
    return Semantics([t, t], t, ops[root])


def _shift(spec: OpSpec) -> Semantics:
    t = canonical(_type_of(spec))
    width = bits(t)
    dt = dtype(t)
    left = spec.root == "shl"
    if left:
        t = unsigned(t)
        dt = dtype(t)

    count = spec.consts[1] if len(spec.consts) > 1 else None
    if count is not None and 0 <= count < width:  # the common case: a constant count
        amount = dt(count)
        if left:
            return Semantics([t, "u32"], t, lambda a, b: a << amount)
        return Semantics([t, "u32"], t, lambda a, b: a >> amount)

    def shift(a, b):
        a = np.asarray(a)
        n = _shift_amount(b, width)
        big = n >= width
        n = np.minimum(n, np.uint64(width - 1)).astype(dt)
        if left:
            return np.where(big, dt(0), a << n).astype(dt)
        if kind(t) == "s":
            return (a >> n).astype(dt)  # counts ≥ width: the sign fills every bit
        return np.where(big, dt(0), a >> n).astype(dt)
    return Semantics([t, "u32"], t, shift)


_COMPARE_INT = {
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal,
    "lo": np.less, "ls": np.less_equal, "hi": np.greater, "hs": np.greater_equal,
}


def _nan(a, b):
    return np.isnan(a) | np.isnan(b)


_COMPARE_FLOAT = {
    "eq": np.equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
    "ge": np.greater_equal,
    "ne": lambda a, b: (a != b) & ~_nan(a, b),
    "equ": lambda a, b: (a == b) | _nan(a, b),
    "neu": np.not_equal,
    "ltu": lambda a, b: ~(a >= b),
    "leu": lambda a, b: ~(a > b),
    "gtu": lambda a, b: ~(a <= b),
    "geu": lambda a, b: ~(a < b),
    "num": lambda a, b: ~_nan(a, b),
    "nan": _nan,
}

_BOOL_OPS = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}


def _comparison(spec: OpSpec, t: str) -> Callable:
    mods = spec.mods
    if kind(t) == "f":
        pre = _float_in(spec, t)
        name = next((m for m in mods if m in _COMPARE_FLOAT), None)
        if name is None:
            raise Unsupported(f"'{spec.opcode}': comparison")
        cmp = _COMPARE_FLOAT[name]
        return lambda a, b: np.asarray(cmp(pre(a), pre(b)))
    name = next((m for m in mods if m in _COMPARE_INT), None)
    if name is None:
        raise Unsupported(f"'{spec.opcode}': comparison")
    cmp = _COMPARE_INT[name]
    return lambda a, b: np.asarray(cmp(a, b))


def _setp(spec: OpSpec) -> Semantics:
    t = canonical(_type_of(spec))
    if t == "pred":
        raise Unsupported(f"'{spec.opcode}'")
    cmp = _comparison(spec, t)
    combine = next((_BOOL_OPS[m] for m in spec.mods if m in _BOOL_OPS), None)
    complement = spec.element == 1  # the second destination of `setp d|q` gets !t
    negate_c = 2 in spec.negated
    if combine is None:
        if complement:
            return Semantics([t, t], "pred", lambda a, b: ~cmp(a, b))
        return Semantics([t, t], "pred", cmp)

    def setp(a, b, c):
        r = cmp(a, b)
        r = ~r if complement else r
        c = ~np.asarray(c) if negate_c else c
        return combine(r, c)
    return Semantics([t, t, "pred"], "pred", setp)


def _set(spec: OpSpec) -> Semantics:
    types = spec.types
    if len(types) < 2:
        raise Unsupported(f"'{spec.opcode}'")
    dest, source = canonical(types[0]), canonical(types[1])
    cmp = _comparison(spec, source)
    combine = next((_BOOL_OPS[m] for m in spec.mods if m in _BOOL_OPS), None)
    negate_c = 2 in spec.negated
    dt = dtype(dest)
    true = dt(1.0) if kind(dest) == "f" else constant(-1, dest)

    def set_(a, b, c=None):
        r = cmp(a, b)
        if combine is not None:
            r = combine(r, ~np.asarray(c) if negate_c else c)
        return np.where(r, true, dt(0)).astype(dt)
    return Semantics([source, source] + (["pred"] if combine else []), dest, set_)


def _selp(spec: OpSpec) -> Semantics:
    t = canonical(_type_of(spec))
    dt = dtype(t)
    return Semantics([t, t, "pred"], t, lambda a, b, c: np.where(c, a, b).astype(dt))


def _slct(spec: OpSpec) -> Semantics:
    types = spec.types
    if len(types) < 2:
        raise Unsupported(f"'{spec.opcode}'")
    t, c_type = canonical(types[0]), canonical(types[1])
    dt = dtype(t)
    pre = _float_in(spec, c_type)
    return Semantics([t, t, c_type], t,
                     lambda a, b, c: np.where(pre(np.asarray(c)) >= 0, a, b).astype(dt))


def _cvt(spec: OpSpec) -> Semantics:
    types = spec.types
    if len(types) != 2:
        raise Unsupported(f"'{spec.opcode}'")
    dest_raw, source_raw = types
    if "bf16" in (dest_raw, source_raw):
        return _cvt_bf16(spec, dest_raw, source_raw)
    if {"f16x2", "bf16x2", "tf32"} & {dest_raw, source_raw} or "pred" in types:
        raise Unsupported(f"'{spec.opcode}'")
    dest, source = canonical(dest_raw), canonical(source_raw)
    mods = spec.mods
    rounding = next((m for m in mods if m in ROUNDING or m in INT_ROUNDING), None)
    sat = "sat" in mods
    ddt = dtype(dest)
    pre = _float_in(spec, source)
    post = _float_post(spec, dest) if kind(dest) == "f" else (lambda x: x)
    if kind(source) == "f" and kind(dest) != "f":
        return Semantics([source], dest, lambda a: _to_int(pre(a), dest, rounding))
    if kind(source) == "f" and kind(dest) == "f":
        if rounding in INT_ROUNDING:
            fn = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}[rounding]
            return Semantics([source], dest,
                             lambda a: post(np.asarray(fn(pre(a))).astype(ddt)))
        mode = _direction(spec, dest)
        if mode is None:
            return Semantics([source], dest, lambda a: post(np.asarray(pre(a)).astype(ddt)))
        narrow = directed(float_rounding.exact_value, lambda a: np.asarray(a).astype(ddt),
                          mode, dest)
        return Semantics([source], dest, lambda a: post(narrow(pre(a))))
    if kind(dest) == "f":  # integer → float (round to nearest unless directed)
        mode = _direction(spec, dest)
        if mode is None:
            return Semantics([source], dest, lambda a: post(np.asarray(a).astype(ddt)))
        return Semantics([source], dest, lambda a: post(_int_to_float(a, mode, dest)))
    if sat:
        low, high = _limits(dest)

        def saturate(a):
            a = np.asarray(a)
            if bits(source) == 64 or bits(dest) == 64:
                values = [min(max(int(v), low), high) for v in np.atleast_1d(a).tolist()]
                out = np.array([v & _mask(bits(dest)) for v in values],
                               dtype=dtype(unsigned(dest))).view(ddt)
                return out if a.ndim else out[0]
            return np.clip(a.astype(np.int64), low, high).astype(ddt)
        return Semantics([source], dest, saturate)
    return Semantics([source], dest, lambda a: np.asarray(a).astype(ddt))


def _int_to_float(a, mode: str, dest: str):
    """Integers (any width, exactly) rounded in a directed mode to a float type."""
    values = np.atleast_1d(np.asarray(a))
    out = np.array([float_rounding.round_rational(Fraction(int(v)), mode, dest)
                    for v in values.tolist()], dtype=dtype(dest))
    return out if np.ndim(a) else out[0]


def _cvt_bf16(spec: OpSpec, dest: str, source: str) -> Semantics:
    if dest == "bf16" and source == "f32":
        return Semantics(["f32"], "u16", packed_half.f32_to_bf16)
    if source == "bf16" and dest == "f32":
        return Semantics(["u16"], "f32", packed_half.bf16_to_f32)
    raise Unsupported(f"'{spec.opcode}'")


# bfloat16 instructions computed as their float32 forms, the result rounded to bfloat16:
# exact for neg/abs/min/max/setp, and correctly rounded for add/sub/mul (24 ≥ 2·8 + 2 bits).
_BF16_THROUGH_F32 = frozenset({"add", "sub", "mul", "neg", "abs", "min", "max", "setp"})


def _bf16(spec: OpSpec) -> Semantics:
    """Scalar `.bf16` arithmetic (the type holds bits, so the integer families must never
    see it); `fma.rn.bf16` rounds to odd twice, then to nearest once."""
    root = spec.root
    if any(m in DIRECTED for m in spec.mods):
        raise Unsupported(f"unsupported instruction '{spec.opcode}'")
    if root == "fma":
        relu = "relu" in spec.mods

        def fma(a, b, c):
            odd = packed_half.fma_bf16(*(packed_half.bf16_to_f32(x) for x in (a, b, c)))
            return packed_half.f32_to_bf16(packed_half.relu(odd) if relu else odd)
        return Semantics(["u16"] * 3, "u16", fma)
    if root not in _BF16_THROUGH_F32:
        raise Unsupported(f"unsupported instruction '{spec.opcode}'")
    inner = assign_semantics(replace(spec, opcode=spec.opcode.replace(".bf16", ".f32")))
    widen = [t == "f32" for t in inner.arg_types]
    narrow = inner.result_type == "f32"

    def through_f32(*args):
        out = inner.fn(*(packed_half.bf16_to_f32(a) if w else a for a, w in zip(args, widen,
                                                                        strict=True)))
        return packed_half.f32_to_bf16(out) if narrow else out
    return Semantics(["u16" if w else t for t, w in zip(inner.arg_types, widen, strict=True)],
                     "u16" if narrow else inner.result_type, through_f32)


def _bit_ops(spec: OpSpec) -> Semantics:
    root = spec.root
    t = canonical(_type_of(spec))
    width = bits(t)
    ut = unsigned(t)
    if root == "popc":
        return Semantics([ut], "u32", lambda a: np.bitwise_count(a).astype(np.uint32))
    if root == "clz":
        return Semantics([ut], "u32", lambda a: (width - _bit_length(_as_u64(a))).astype(
            np.uint32))
    if root == "brev":
        udt = dtype(ut)
        return Semantics([ut], ut, lambda a: _brev(a, width).astype(udt))
    if root == "bfind":
        shiftamt = "shiftamt" in spec.mods

        def bfind(a):
            a = np.asarray(a)
            if kind(t) == "s":
                a = np.where(a < 0, ~a, a)
            n = _bit_length(np.asarray(a).astype(dtype(ut)).astype(np.uint64))
            pos = n - 1
            if shiftamt:
                pos = np.where(n == 0, -1, width - 1 - pos)
            return np.where(n == 0, np.uint32(0xFFFFFFFF), (pos & 0xFFFFFFFF)).astype(
                np.uint32)
        return Semantics([t], "u32", bfind)
    raise Unsupported(f"'{spec.opcode}'")


def _bfe(spec: OpSpec) -> Semantics:
    t = canonical(_type_of(spec))
    width = bits(t)
    is_signed = kind(t) == "s"
    dt = dtype(t)
    ut = unsigned(t)
    wmask = np.uint64(_mask(width))

    def bfe(a, b, c):
        ua = np.asarray(a).astype(dtype(ut)).astype(np.uint64)
        pos = np.asarray(b).astype(np.uint64) & np.uint64(0xFF)
        length = np.asarray(c).astype(np.uint64) & np.uint64(0xFF)
        avail = np.where(pos >= width, np.uint64(0), np.uint64(width) - np.minimum(
            pos, np.uint64(width)))
        eff = np.minimum(length, avail)
        shifted = np.where(pos >= width, np.uint64(0), ua >> np.minimum(pos, np.uint64(63)))
        keep = np.where(eff >= 64, np.uint64(_mask(64)),
                        (np.uint64(1) << np.minimum(eff, np.uint64(63))) - np.uint64(1))
        field_ = shifted & keep
        if is_signed:
            top = np.minimum(pos + length - np.uint64(1), np.uint64(width - 1))
            top = np.where(length == 0, np.uint64(0), top)
            sbit = (ua >> top) & np.uint64(1)
            sbit = np.where(length == 0, np.uint64(0), sbit)
            field_ = np.where(sbit == 1, (field_ | ~keep) & wmask, field_)
        return np.asarray(field_, dtype=np.uint64).astype(dtype(ut)).view(dt)
    return Semantics([t, "u32", "u32"], t, bfe)


def _bfi(spec: OpSpec) -> Semantics:
    t = unsigned(canonical(_type_of(spec)))
    width = bits(t)
    dt = dtype(t)

    def bfi(a, b, c, d):
        ua = np.asarray(a).astype(np.uint64)
        ub = np.asarray(b).astype(np.uint64)
        pos = np.asarray(c).astype(np.uint64) & np.uint64(0xFF)
        length = np.asarray(d).astype(np.uint64) & np.uint64(0xFF)
        eff = np.minimum(length, np.uint64(width))
        ones = np.where(eff >= 64, np.uint64(_mask(64)),
                        (np.uint64(1) << np.minimum(eff, np.uint64(63))) - np.uint64(1))
        inside = pos < width
        p = np.minimum(pos, np.uint64(63))
        mask = np.where(inside, (ones << p) & np.uint64(_mask(width)), np.uint64(0))
        out = (ub & ~mask) | ((ua << p) & mask)
        return np.asarray(out).astype(dt)
    return Semantics([t, t, "u32", "u32"], t, bfi)


def _prmt(spec: OpSpec) -> Semantics:
    modes = [m for m in spec.mods if m in ("f4e", "b4e", "rc8", "ecl", "ecr", "rc16")]
    if modes:
        raise Unsupported(f"'{spec.opcode}': mode .{modes[0]}")

    def prmt(a, b, c):
        a, b, c = np.broadcast_arrays(np.atleast_1d(np.asarray(a).astype(np.uint64)),
                                      np.atleast_1d(np.asarray(b).astype(np.uint64)),
                                      np.atleast_1d(np.asarray(c).astype(np.uint64)))
        source = a | (b << np.uint64(32))
        out = np.zeros(a.shape, dtype=np.uint64)
        for k in range(4):
            selector = (c >> np.uint64(4 * k)) & np.uint64(0xF)
            byte = (source >> ((selector & np.uint64(7)) * np.uint64(8))) & np.uint64(0xFF)
            replicate = (selector & np.uint64(8)) != 0
            byte = np.where(replicate, np.where(byte & np.uint64(0x80), np.uint64(0xFF),
                                                np.uint64(0)), byte)
            out |= byte << np.uint64(8 * k)
        return out.astype(np.uint32)
    return Semantics(["u32", "u32", "u32"], "u32", prmt)


def _lop3(spec: OpSpec) -> Semantics:
    if spec.nargs != 4 or spec.consts[3] is None:
        raise Unsupported(f"'{spec.opcode}' needs an immediate lookup table")
    lut = spec.consts[3] & 0xFF

    def lop3(a, b, c, _):
        a, b, c = (np.asarray(x).astype(np.uint32) for x in (a, b, c))
        out = np.zeros(np.broadcast(a, b, c).shape, dtype=np.uint32)
        for index in range(8):
            if lut >> index & 1:
                out |= ((a if index & 4 else ~a) & (b if index & 2 else ~b)
                        & (c if index & 1 else ~c))
        return out
    return Semantics(["u32", "u32", "u32", "u32"], "u32", lop3)


def _shf(spec: OpSpec) -> Semantics:
    left = "l" in spec.mods
    clamp = "clamp" in spec.mods

    def shf(a, b, c):
        joined = (np.asarray(b).astype(np.uint64) << np.uint64(32)) | np.asarray(a).astype(
            np.uint64)
        n = np.asarray(c).astype(np.uint64)
        n = np.minimum(n, np.uint64(32)) if clamp else n & np.uint64(31)
        if left:
            return ((joined << n) >> np.uint64(32)).astype(np.uint32)
        return (joined >> n).astype(np.uint32)
    return Semantics(["u32", "u32", "u32"], "u32", shf)


def _unary_float(spec: OpSpec) -> Semantics:
    t = _type_of(spec)
    if kind(t) != "f":
        raise Unsupported(f"'{spec.opcode}'")
    dt = dtype(t)
    post, pre = _float_post(spec, t), _float_in(spec, t)
    root = spec.root
    exact = root in ("sqrt", "rcp") and "approx" not in spec.mods
    if _direction(spec, t) is not None:
        if not exact:
            raise Unsupported(f"'{spec.opcode}': directed rounding of {root} is not computed")
        if root == "rcp":
            return Semantics([t], t, _float_op(spec, t, lambda a: (1.0 / a).astype(dt),
                                               float_rounding.exact_rcp))
        return Semantics([t], t, _float_op(spec, t, lambda a: np.sqrt(a).astype(dt),
                                           float_rounding.exact_sqrt))
    functions = {
        "sqrt": np.sqrt, "rcp": lambda x: 1.0 / x, "rsqrt": lambda x: 1.0 / np.sqrt(x),
        "sin": np.sin, "cos": np.cos, "lg2": np.log2, "ex2": np.exp2, "tanh": np.tanh,
    }
    fn = functions[root]
    if exact:  # IEEE: computed in the type itself (correctly rounded by NumPy)
        return Semantics([t], t, lambda a: post(np.asarray(fn(pre(np.asarray(a, dt))),
                                                           dtype=dt)))
    return Semantics([t], t, lambda a: post(np.asarray(fn(np.asarray(pre(a), np.float64)))
                                            .astype(dt)))


def _testp(spec: OpSpec) -> Semantics:
    t = _type_of(spec)
    tests = {
        "finite": np.isfinite, "infinite": np.isinf, "number": lambda x: ~np.isnan(x),
        "notanumber": np.isnan,
        "normal": lambda x: np.isfinite(x) & (np.abs(x) >= np.finfo(x.dtype).tiny),
        "subnormal": lambda x: (x != 0) & (np.abs(x) < np.finfo(x.dtype).tiny),
    }
    name = next((m for m in spec.mods if m in tests), None)
    if name is None or kind(t) != "f":
        raise Unsupported(f"'{spec.opcode}'")
    test = tests[name]
    return Semantics([t], "pred", lambda a: test(np.asarray(a)))


def _copysign(spec: OpSpec) -> Semantics:
    t = _type_of(spec)
    return Semantics([t, t], t, lambda a, b: np.copysign(b, a).astype(dtype(t)))


def _sad(spec: OpSpec) -> Semantics:
    t = canonical(_type_of(spec))
    dt = dtype(t)

    def sad(a, b, c):
        diff = np.abs(np.asarray(a).astype(np.int64) - np.asarray(b).astype(np.int64))
        return (diff.astype(np.uint64).astype(dt) + c).astype(dt)
    return Semantics([t, t, t], t, sad)


def _dp4a(spec: OpSpec) -> Semantics:
    types = spec.types
    if spec.root != "dp4a" or len(types) != 2:
        raise Unsupported(f"'{spec.opcode}'")
    a_signed, b_signed = (kind(t) == "s" for t in types)
    result = "s32" if (a_signed or b_signed) else "u32"

    def byte(x, k, is_signed):
        v = (np.asarray(x).astype(np.int64) >> (8 * k)) & 0xFF
        return np.where(v >= 128, v - 256, v) if is_signed else v

    def dp4a(a, b, c):
        total = np.asarray(c).astype(np.int64)
        for k in range(4):
            total = total + byte(a, k, a_signed) * byte(b, k, b_signed)
        return np.asarray(total & 0xFFFFFFFF).astype(np.uint32).view(dtype(result))
    return Semantics(["u32", "u32", result], result, dp4a)


def _mov(spec: OpSpec) -> Semantics:
    t = _type_of(spec)
    t = canonical(t)
    if spec.nargs > 1:  # pack {a, b, …} into one register
        count = spec.nargs
        width = bits(t) // count
        part = f"u{width}"
        out = unsigned(t)
        odt = dtype(out)

        def pack(*values):
            result = np.asarray(values[0]).astype(odt)
            for k, v in enumerate(values[1:], start=1):
                result = result | (np.asarray(v).astype(odt) << odt(k * width))
            return result
        return Semantics([part] * count, out, pack)
    if spec.element is not None and spec.dest_bits and spec.dest_bits < bits(t):
        width = spec.dest_bits
        ut = unsigned(t)
        part = f"u{width}"
        shift = dtype(ut)(spec.element * width)
        pdt = dtype(part)
        return Semantics([ut], part, lambda a: (np.asarray(a) >> shift).astype(pdt))
    return Semantics([t], t, lambda a: a)


_FAMILIES: dict[str, Callable[[OpSpec], Semantics]] = {
    "add": _add_sub, "sub": _add_sub, "addc": _add_sub, "subc": _add_sub,
    "mul": _mul, "mad": _mad, "madc": _mad, "fma": _mad,
    "mul24": _mul24, "mad24": _mul24,
    "div": _div_rem, "rem": _div_rem,
    "abs": _abs_neg, "neg": _abs_neg,
    "min": _min_max, "max": _min_max,
    "and": _logic, "or": _logic, "xor": _logic, "not": _logic, "cnot": _logic,
    "shl": _shift, "shr": _shift,
    "setp": _setp, "set": _set, "selp": _selp, "slct": _slct,
    "cvt": _cvt,
    "popc": _bit_ops, "clz": _bit_ops, "brev": _bit_ops, "bfind": _bit_ops,
    "bfe": _bfe, "bfi": _bfi, "prmt": _prmt, "lop3": _lop3, "shf": _shf,
    "sqrt": _unary_float, "rcp": _unary_float, "rsqrt": _unary_float, "sin": _unary_float,
    "cos": _unary_float, "lg2": _unary_float, "ex2": _unary_float, "tanh": _unary_float,
    "testp": _testp, "copysign": _copysign, "sad": _sad, "dp4a": _dp4a,
    "mov": _mov,
}


_PACKED_HALF = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "neg": np.negative, "abs": np.abs, "min": np.fmin, "max": np.fmax,
}
_PACKED_FMA = {"f16": packed_half.fma16, "bf16": packed_half.fma_bf16}
# the largest finite value of each element format (`.satfinite`)
_LARGEST = {"f16": np.float32(np.finfo(np.float16).max),
            "bf16": packed_half.bf16_to_f32(np.uint16(0x7F7F))}


def _packed(spec: OpSpec) -> Semantics:
    """`.f16x2`/`.bf16x2` arithmetic, element by element (`gpudiv.interp.packed_half`);
    an instruction not in the table is unsupported, never integer arithmetic on the word."""
    root = spec.root
    element = "bf16" if "bf16x2" in spec.types else "f16"
    if root == "setp":
        return _setp_packed(spec, element)
    if (root not in _PACKED_HALF and root != "fma") or any(m in DIRECTED for m in spec.mods):
        raise Unsupported(f"unsupported instruction '{spec.opcode}'")
    fn = _PACKED_FMA[element] if root == "fma" else _PACKED_HALF[root]
    if root in ("min", "max") and "NaN" in spec.mods:
        fn = np.minimum if root == "min" else np.maximum
    operands = {"fma": 3, "neg": 1, "abs": 1}.get(root, 2)
    return Semantics(["b32"] * operands, "b32",
                     packed_half.elementwise(fn, spec.mods, element))


def _setp_packed(spec: OpSpec, element: str) -> Semantics:
    """`setp.cmp.f16x2 p|q, a, b`: p compares the lower elements, q the upper ones (the
    lowering gives q `element` 1). Elements compare exactly as float32."""
    if any(m in _BOOL_OPS for m in spec.mods):
        raise Unsupported(f"unsupported instruction '{spec.opcode}'")
    cmp = _comparison(replace(spec, opcode=f"setp.{'.'.join(spec.mods[:-1])}.f32"), "f32")
    half = 1 if spec.element == 1 else 0
    ftz = "ftz" in spec.mods and element == "f16"

    def setp(a, b):
        x, y = (packed_half.unpack(w, element)[half] for w in (a, b))
        if ftz:
            x, y = packed_half.flush(x), packed_half.flush(y)
        return cmp(np.asarray(x, np.float32), np.asarray(y, np.float32))
    return Semantics(["b32", "b32"], "pred", setp)


def _cvt_packed(spec: OpSpec) -> Semantics:
    """`cvt.rn{.relu}{.satfinite}.f16x2.f32 d, a, b` (and `.bf16x2`): d's upper element is
    a, its lower b."""
    mods = spec.mods
    element = {"f16x2": "f16", "bf16x2": "bf16"}.get(spec.types[0])
    if element is None or spec.types[1:] != ["f32"] or any(m in DIRECTED for m in mods):
        raise Unsupported(f"unsupported instruction '{spec.opcode}'")
    largest = _LARGEST[element]

    def convert(x):
        x = np.asarray(x, dtype=np.float32)
        if "satfinite" in mods:
            x = np.where(np.isnan(x), x, np.clip(x, -largest, largest))
        with np.errstate(all="ignore"):
            value = x if element == "bf16" else x.astype(np.float16)
        return packed_half.relu(value) if "relu" in mods else value
    return Semantics(["f32", "f32"], "b32",
                     lambda a, b: packed_half.pack(convert(b), convert(a), element))


def assign_semantics(spec: OpSpec) -> Semantics:
    """Operand types, result type and function of an arithmetic/logic/move instruction."""
    types = spec.types
    if "f16x2" in types or "bf16x2" in types:
        return _cvt_packed(spec) if spec.root == "cvt" else _packed(spec)
    if "bf16" in types and spec.root not in ("cvt", "mov"):
        return _bf16(spec)
    if "tf32" in types and spec.root not in ("cvt", "mov"):
        raise Unsupported(f"unsupported instruction '{spec.opcode}'")
    family = _FAMILIES.get(spec.root)
    if family is None:
        raise Unsupported(f"unsupported instruction '{spec.opcode}'")
    try:
        return family(spec)
    except KeyError as error:
        raise Unsupported(f"unsupported instruction '{spec.opcode}' ({error})") from None
