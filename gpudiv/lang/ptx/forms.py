"""Parsed forms of PTX: what the Lark callbacks (`ptx_parser._Builder`) and the fast path
(`ptx_fast`) build from a function body, and the values of PTX literals.

Both parsers must build equal forms for the same text; tests/lang/ptx/test_parse.py compares
them on every committed sample.
"""

from __future__ import annotations

import re
import struct

from gpudiv.ir.record import Record
from gpudiv.lang.regex_cache import LazyPattern

TYPE_BYTES = {"8": 1, "16": 2, "32": 4, "64": 8, "128": 16}
# The bits of a scalar type modifier of an opcode: `u32` → 32.
SCALAR_TYPE_BITS = {f"{kind}{bits}": int(bits) for kind in "bsuf" for bits in TYPE_BYTES}

# Comments inside an instruction's text (removed from `PInstr.text`; few instructions
# hold one).
COMMENT = LazyPattern(r"//[^\n]*|/\*[\s\S]*?\*/")


def decl_layout(children, shape: str | None) -> tuple[str, int, int]:
    """(type, alignment, byte size) of a declaration from its modifiers and array shape;
    size 0 for an unsized array (`.extern .shared .b8 buf[]`)."""
    type_, vector, align = "", 1, 0
    for child in children:
        if not isinstance(child, tuple):
            continue
        if child[0] == "align":
            align = child[1]
        elif child[0] == "mod":
            mod = child[1][1:]
            if mod in ("v2", "v4", "v8"):
                vector = int(mod[1:])
            elif mod == "pred" or (mod[:1] in "bsuf" and mod[1:] in TYPE_BYTES) or mod in (
                    "f16x2", "bf16", "bf16x2", "tf32"):
                type_ = mod
    size = (1 if type_ == "pred" else type_bytes(type_)) * vector
    if shape and shape.startswith("["):
        for dim in shape[1:-1].split("]["):
            size = size * number(dim) if dim else 0
    return type_, align or size or 1, size


def type_bytes(type_: str) -> int:
    """Bytes of a declared type (`b32` → 4, `f16x2` → 4; unknown → 4)."""
    if type_ in ("f16x2", "bf16x2", "tf32"):
        return 4
    if type_ == "bf16":
        return 2
    return TYPE_BYTES.get(type_[1:], 4)


# ---------------------------------------------------------------------------------------
# Parsed forms (what both parsers yield; positions are file line/column).
# ---------------------------------------------------------------------------------------

class PInstr(Record):
    """An instruction: `[@guard] opcode operands;` (`text` without comments, spaces collapsed)."""

    guard: str | None
    negated: bool
    opcode: str
    operands: list
    line: int
    column: int
    text: str

    __slots__ = ("guard", "negated", "opcode", "operands", "line", "column", "text")

    def __init__(self, guard: str | None, negated: bool, opcode: str, operands: list, line: int,
                       column: int, text: str) -> None:
        self.guard = guard
        self.negated = negated
        self.opcode = opcode
        self.operands = operands
        self.line = line
        self.column = column
        self.text = text


class PLabel(Record):
    """A label `name:`."""

    name: str
    line: int
    column: int

    __slots__ = ("name", "line", "column")

    def __init__(self, name: str, line: int, column: int) -> None:
        self.name = name
        self.line = line
        self.column = column


class PLoc(Record):
    """A `.loc F L C` line (with the `inlined_at` part, if any)."""

    file: int
    line: int
    column: int
    inlined_at: tuple[int, int, int] | None

    __slots__ = ("file", "line", "column", "inlined_at")

    def __init__(self, file: int, line: int, column: int,
                       inlined_at: tuple[int, int, int] | None = None) -> None:
        self.file = file
        self.line = line
        self.column = column
        self.inlined_at = inlined_at


class PDecl(Record):
    """A declaration `.reg/.shared/… mods names;` (space without its dot)."""

    space: str
    names: list[tuple[str, str | None]]
    line: int
    column: int
    # name → (type, alignment, byte size, initializer items): what the interpreter needs
    details: dict[str, tuple]

    __slots__ = ("space", "names", "line", "column", "details")

    def __init__(self, space: str, names: list[tuple[str, str | None]], line: int, column: int,
                       details: dict[str, tuple] | None = None) -> None:
        self.space = space
        self.names = names
        self.line = line
        self.column = column
        self.details = {} if details is None else details


class PTable(Record):
    """A `.branchtargets`, `.calltargets` or `.callprototype` statement."""

    kind: str  # "branchtargets", "calltargets", "callprototype"
    names: list[str]
    line: int
    column: int
    # `.callprototype`: its results and parameters (what the printer writes back)
    rets: list
    params: list

    __slots__ = ("kind", "names", "line", "column", "rets", "params")

    def __init__(self, kind: str, names: list[str], line: int, column: int,
                       rets: list | None = None, params: list | None = None) -> None:
        self.kind = kind
        self.names = names
        self.line = line
        self.column = column
        self.rets = [] if rets is None else rets
        self.params = [] if params is None else params


class PParam(Record):
    """A parameter of a function header (space with its dot: `.param`, `.reg`)."""

    space: str
    name: str
    type: str
    size: int
    align: int

    __slots__ = ("space", "name", "type", "size", "align")

    def __init__(self, space: str, name: str, type: str = "", size: int = 0,
                       align: int = 0) -> None:
        self.space = space
        self.name = name
        self.type = type
        self.size = size
        self.align = align


class PScope(Record):
    """A `{ … }` body or nested scope."""

    stmts: list

    __slots__ = ("stmts",)

    def __init__(self, stmts: list) -> None:
        self.stmts = stmts


class PFile(Record):
    """A `.file N "path"` directive."""

    index: int
    path: str

    __slots__ = ("index", "path")

    def __init__(self, index: int, path: str) -> None:
        self.index = index
        self.path = path


class PFunction(Record):
    """An `.entry` or `.func` with its header and body (None for a declaration)."""

    kind: str  # "entry" or "func"
    name: str
    linkage: list[str]
    rets: list[PParam]
    params: list[PParam]
    body: PScope | None
    line: int
    column: int
    # Performance directives of the header, as `perf_text` writes them (`.maxntid 256, 1, 1`)
    directives: list[str]

    def __init__(self, kind: str, name: str, linkage: list[str], rets: list[PParam],
                       params: list[PParam], body: PScope | None, line: int, column: int,
                       directives: list[str] | None = None) -> None:
        self.kind = kind
        self.name = name
        self.linkage = linkage
        self.rets = rets
        self.params = params
        self.body = body
        self.line = line
        self.column = column
        self.directives = [] if directives is None else directives


# Operands are small tuples, tag first:
#   ("r", "%r1")  %-name (register or special)     ("i", "name")  identifier
#   ("n", value)   number (floats as IEEE bits)     ("s", base, offset)  base+offset
#   ("v", [ops])   vector {…}                       ("a", [ops])   address […]
#   ("p", [ops])   parenthesised list (call)        ("|", a, b)    pair a|b
#   ("!", op)      negated predicate


def perf_text(text: str) -> str:
    """A performance directive (`.maxntid 256,1,1`) in one spelling: `.maxntid 256, 1, 1`."""
    return re.sub(r"\s*,\s*", ", ", " ".join(COMMENT.sub(" ", text).split()))


def number(text: str) -> int:
    """The value of a PTX integer literal (decimal, hex, binary, octal; U suffix)."""
    if text.isdigit() and (text[0] != "0" or len(text) == 1):  # the commonest: decimal
        return int(text)
    text = text.rstrip("uU")
    sign = -1 if text.startswith("-") else 1
    body = text.lstrip("-")
    if body[:2] in ("0x", "0X"):
        return sign * int(body[2:], 16)
    if body[:2] in ("0b", "0B"):
        return sign * int(body[2:], 2)
    if len(body) > 1 and body.startswith("0"):
        return sign * int(body, 8)
    return sign * int(body)


def float_bits(text: str) -> int:
    """A float literal as the integer of its IEEE-754 bits (0f… single, 0d… and decimals
    double)."""
    sign = -1 if text.startswith("-") else 1
    body = text.lstrip("-")
    if body[:2] in ("0f", "0F", "0d", "0D"):
        return sign * int(body[2:], 16)
    return struct.unpack("<q", struct.pack("<d", float(text)))[0]
