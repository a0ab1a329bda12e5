"""Operator normalisation: every assignment's operator as one name the rules understand.

μ-SIMD operators (`+`, `<`, `!`, …) and PTX opcodes (`mad.lo.s32`, `setp.lt.s32`, …) map to
the same small vocabulary, so that the affine analysis (rules/affine.lp) runs unchanged on
both languages. The `assign_op/2` facts (gpudiv/analyses/facts.py) carry these names; the Python
reference solver (gpudiv/analyses/affine_reference.py) reads them from here as well.

Names and their meaning (operand order is the instruction's):

- `copy` (o0): μ-SIMD `v = o`; PTX `mov`, the IR's `copy`, integer `cvt` that does not
  narrow;
- `add`, `sub` (o0 ± o1): `+`, `-`; PTX `add`/`sub` on integers (not `.cc`, not `.sat`);
- `mul` (o0 × o1, low bits): `*`; PTX `mul.lo`, `mul.wide` on integers;
- `mad` (o0 × o1 + o2): PTX `mad.lo`, `mad.wide` on integers (not `.cc`, not `.sat`);
- `shl` (o0 × 2^o1): `<<`; PTX `shl` on integers;
- `neg` (−o0): unary `-`; PTX `neg` on signed integers;
- `lt` `le` `gt` `ge` `eq` `ne` (1 or 0): `<` `<=` `>` `>=` `==` `!=`;
- `cmp` (a comparison of o0 and o1, not folded): PTX `setp`/`set` on integers, two
  operands: `eq`/`ne` on any integer type, `lt`/`le`/`gt`/`ge` on signed ones (ordered
  comparisons of unsigned values are `generic`: they wrap at 0);
- `div` `rem` `and` `or` `xor` `shr` `min` `max`, `not` (`!`), `inv` (`~`): μ-SIMD, as the
  interpreter computes them;
- `generic`: an operator the analysis does not look into (every other PTX opcode).

A name is only given when the operand count fits (two for `add`, three for `mad`, …);
otherwise the operator is `generic`. Floating-point PTX instructions are `generic`: their
bits are not an affine function of anything the analysis tracks.
"""

from __future__ import annotations

from functools import lru_cache

from gpudiv import ir

# Each answer depends only on an opcode's text and operand count, and a kernel repeats a
# few dozen opcodes thousands of times: the answers are cached (bounded, for files with
# many distinct opcodes).
_CACHED_OPCODES = 4096

MUSIMD_BINARY = {
    "+": "add", "-": "sub", "*": "mul", "/": "div", "%": "rem", "<": "lt", "<=": "le",
    ">": "gt", ">=": "ge", "==": "eq", "!=": "ne", "&": "and", "|": "or", "^": "xor",
    "<<": "shl", ">>": "shr", "min": "min", "max": "max",
}
MUSIMD_UNARY = {"-": "neg", "neg": "neg", "!": "not", "~": "inv", "copy": "copy"}

# Operand count of every normalised name (except `generic`, which takes any).
ARITY = {
    "copy": 1, "neg": 1, "not": 1, "inv": 1, "mad": 3,
    **{name: 2 for name in ("add", "sub", "mul", "shl", "lt", "le", "gt", "ge", "eq", "ne",
                            "cmp", "div", "rem", "and", "or", "xor", "shr", "min", "max")},
}

INTEGER_TYPES = {f"{kind}{width}": width for kind in "sub" for width in (8, 16, 32, 64)}
FLOAT_TYPES = frozenset({"f16", "f16x2", "bf16", "bf16x2", "f32", "f64", "tf32", "e4m3",
                         "e5m2"})


def _ptx_types(modifiers: list[str]) -> list[str]:
    return [m for m in modifiers if m in INTEGER_TYPES or m in FLOAT_TYPES or m == "pred"]


# PTX comparison operators on integers: equality, and ordered ones of signed and unsigned
# (`lo`/`ls`/`hi`/`hs`) values.
EQUALITY = frozenset({"eq", "ne"})
ORDERED = frozenset({"lt", "le", "gt", "ge"})
UNSIGNED_ORDERED = frozenset({"lo", "ls", "hi", "hs"})


def _difference_decides(modifiers: list[str], types: list[str]) -> bool:
    """Whether a uniform difference o0 − o1 makes an integer `setp`/`set` uniform (the
    affine rule for `cmp`): always for `eq`/`ne` (modulo 2^n, a == b exactly when
    a − b == 0); for ordered comparisons only on signed values. Unsigned values wrap at 0,
    where thread-dependent indices live: `tid < tid − 16` holds exactly in the lanes with
    tid < 16."""
    operator = next((m for m in modifiers if m in EQUALITY | ORDERED | UNSIGNED_ORDERED), None)
    if operator in EQUALITY:
        return True
    return operator in ORDERED and types[-1].startswith("s")


@lru_cache(maxsize=_CACHED_OPCODES)
def normalise_ptx(opcode: str, operands: int) -> str:
    """The normalised name of a PTX opcode with `operands` source operands."""
    root, *modifiers = opcode.split(".")
    types = _ptx_types(modifiers)
    integer = bool(types) and all(t in INTEGER_TYPES for t in types)
    plain = "cc" not in modifiers and "sat" not in modifiers
    name = "generic"
    if root == "mov":
        name = "copy"
    elif root in ("add", "sub") and integer and plain:
        name = root
    elif root == "mul" and integer and ("lo" in modifiers or "wide" in modifiers):
        name = "mul"
    elif root == "mad" and integer and plain and ("lo" in modifiers or "wide" in modifiers):
        name = "mad"
    elif root == "shl" and integer:
        name = "shl"
    elif root == "neg" and integer and types[-1].startswith("s"):
        name = "neg"
    elif root in ("setp", "set") and integer and _difference_decides(modifiers, types):
        name = "cmp"
    elif root == "cvt" and integer and plain and len(types) == 2:
        destination, source = types
        name = "copy" if INTEGER_TYPES[destination] >= INTEGER_TYPES[source] else "generic"
    if name != "generic" and ARITY[name] != operands:
        return "generic"
    return name


def integer_bits(instr: ir.Instruction) -> int | None:
    """The width of the integer type a PTX opcode names last (`shl.b64` → 64,
    `mul.wide.u32` → 32), or None: μ-SIMD (32-bit values) and opcodes on other types."""
    return _integer_bits(instr.operator or "")


@lru_cache(maxsize=_CACHED_OPCODES)
def _integer_bits(operator: str) -> int | None:
    """`integer_bits` of an operator."""
    if "." not in operator:
        return None
    types = _ptx_types(operator.split(".")[1:])
    if not types or not all(t in INTEGER_TYPES for t in types):
        return None
    return INTEGER_TYPES[types[-1]]


def zero_extended_bits(instr: ir.Instruction) -> int | None:
    """The width of the unsigned operands a PTX `copy`/`mul`/`mad` zero-extends
    (`cvt.u64.u32` → 32, `mul.wide.u16` → 16), or None when it does not widen unsigned
    values. Their value is then `v mod 2^w`, which is `v` only where 0 ≤ v < 2^w."""
    return _zero_extended_bits(instr.operator or "", len(instr.args))


@lru_cache(maxsize=_CACHED_OPCODES)
def _zero_extended_bits(operator: str, operands: int) -> int | None:
    """`zero_extended_bits` of an operator with `operands` source operands."""
    root, *modifiers = operator.split(".")
    if root not in ("cvt", "mul", "mad") or _normalised(operator, operands) not in (
            "copy", "mul", "mad"):
        return None
    types = _ptx_types(modifiers)
    if root == "cvt":
        destination, source = types
        wider = INTEGER_TYPES[destination] > INTEGER_TYPES[source]
        return INTEGER_TYPES[source] if wider and source.startswith("u") else None
    if "wide" in modifiers and types[-1].startswith("u"):
        return INTEGER_TYPES[types[-1]]
    return None


def normalise(instr: ir.Instruction) -> str:
    """The normalised operator name of an assignment (see the module table)."""
    return _normalised(instr.operator or "copy", len(instr.args))


def _normalised(operator: str, count: int) -> str:
    """`normalise` of an operator with `count` source operands."""
    if count == 2 and operator in MUSIMD_BINARY:
        return MUSIMD_BINARY[operator]
    if count == 1 and operator in MUSIMD_UNARY:
        return MUSIMD_UNARY[operator]
    if operator in MUSIMD_BINARY or operator in MUSIMD_UNARY or "." not in operator:
        # A μ-SIMD operator with the wrong operand count, or an unknown plain name.
        return "generic"
    return normalise_ptx(operator, count)
