"""PTX front end: Lark grammar `grammar/ptx.lark` → IR (`gpudiv.ir`), the same IR as μ-SIMD.

Reading happens in three steps:

1. **Parse** — the file is cut into top-level chunks (a function with its body, a DWARF
   section, a run of directives) by a brace-depth scan, and each chunk is parsed on its
   own, so a syntax error loses only its own chunk. Function bodies are read by the fast
   path of `ptx_fast` (regexes built from the grammar's terminals); any chunk it does not
   recognise is parsed by the LALR parser, whose callbacks run inside it (no parse tree
   is built). Both yield the same plain parsed forms (`ptx_forms`).
2. **Flatten** — each function body becomes one list of instructions, labels and `.loc`
   marks; nested `{ }` scopes are resolved (a name that shadows an outer one or repeats
   a sibling scope's is renamed) and the declarations give the register, symbol and
   `.param` tables.
3. **Lower** — every `.entry` becomes an `ir.Kernel`: opcodes map to IR kinds through the
   tables below, guarded definitions become selects, calls to `.func` bodies in the file
   are inlined, `ret`/`exit` become `stop`, and instructions are split into basic blocks.

The decisions (what is uniform, how calls and guards are modelled) are documented in
`docs/ptx.md`; DESIGN.md "Semantics choices for PTX" is the specification.
"""

from __future__ import annotations

import gc
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache

from lark import Lark, Token
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from gpudiv import ir
from gpudiv.frontend import ptx_fast
from gpudiv.frontend.grammars import lalr_parser
from gpudiv.frontend.marks import read_marks
from gpudiv.frontend.ptx_forms import COMMENT as _COMMENT
from gpudiv.frontend.ptx_forms import TYPE_BYTES as _TYPE_BYTES
from gpudiv.frontend.ptx_forms import (
    PDecl,
    PFile,
    PFunction,
    PInstr,
    PLabel,
    PLoc,
    PParam,
    PScope,
    PTable,
    number,
)
from gpudiv.frontend.ptx_forms import decl_layout as _decl_layout
from gpudiv.frontend.ptx_forms import float_bits as _float_bits
from gpudiv.frontend.ptx_forms import number as _number
from gpudiv.frontend.ptx_forms import perf_text as _perf_text
from gpudiv.frontend.ptx_forms import type_bytes as _type_bytes
from gpudiv.frontend.ptx_types import infer_types

# ---------------------------------------------------------------------------------------
# Tables: what an opcode or a special register means. The grammar knows none of this.
# ---------------------------------------------------------------------------------------

# Special registers that hold one value in all lanes of a warp. Every other special
# register (%tid.*, %laneid, %clock*, %globaltimer*, %lanemask_*, %pm*, unknown ones) is
# divergent; DESIGN.md: %tid.y/%tid.z are divergent unless the launch shape says otherwise.
UNIFORM_SPECIALS = frozenset({
    "%ntid", "%ctaid", "%nctaid", "%gridid", "%warpid", "%nwarpid", "%smid", "%nsmid",
    "%total_smem_size", "%dynamic_smem_size", "%aggr_smem_size", "%is_explicit_cluster",
    "%clusterid", "%nclusterid", "%cluster_ctaid", "%cluster_nctaid", "%cluster_ctarank",
    "%cluster_nctarank", "%current_graph_exec",
})
KNOWN_SPECIALS = UNIFORM_SPECIALS | frozenset({
    "%tid", "%laneid", "%clock", "%clock_hi", "%clock64", "%globaltimer",
    "%globaltimer_lo", "%globaltimer_hi", "%lanemask_eq", "%lanemask_le", "%lanemask_lt",
    "%lanemask_ge", "%lanemask_gt",
})
_SPECIAL_FAMILIES = (("%envreg", "uniform"), ("%reserved_smem", "uniform"), ("%pm", "divergent"))

# Opcode roots (the text before the first dot) by what they lower to.
ASSIGN_ROOTS = frozenset("""
    add sub mul mad mul24 mad24 sad div rem abs neg min max popc clz bfind fns brev bfe bfi
    bmsk szext prmt lop3 shf shl shr and or xor not cnot copysign rcp sqrt rsqrt sin cos lg2
    ex2 tanh fma testp setp set selp slct cvt cvta mov isspacep istypep mapa getctarank
    addc subc madc dp4a dp2a txq suq createpolicy alloca stacksave
    vadd vsub vabsdiff vmin vmax vshl vshr vmad vset vadd2 vsub2 vavrg2 vabsdiff2 vmin2 vmax2
    vset2 vadd4 vsub4 vavrg4 vabsdiff4 vmin4 vmax4 vset4
""".split())
# Warp collectives whose result is the same in every active lane that executes them
# (documented choice: uniform, i.e. an assignment without operands).
UNIFORM_COLLECTIVE_ROOTS = frozenset({"vote", "activemask", "redux"})
# Lane-exchanging or per-lane collective operations: the result is opaque (divergent).
OPAQUE_ROOTS = frozenset({
    "shfl", "match", "wmma", "mma", "wgmma", "ldmatrix", "movmatrix", "elect", "mbarrier",
    "tcgen05", "clusterlaunchcontrol", "tensormap", "multimem",
})
LOAD_ROOTS = frozenset({"ld", "ldu"})
TEXTURE_ROOTS = frozenset({"tex", "tld4", "suld"})
STORE_ROOTS = frozenset({"st", "stmatrix", "sust", "cp"})
ATOMIC_ROOTS = frozenset({"atom"})
REDUCTION_ROOTS = frozenset({"red", "sured"})
BARRIER_ROOTS = frozenset({"bar", "barrier"})
# Ordering, hint and scheduling instructions with no effect on values or control flow
# (lowered to `ir.FENCE`, which the analyses and the interpreter pass over).
DROPPED_ROOTS = frozenset({
    "membar", "fence", "prefetch", "prefetchu", "nanosleep", "pmevent", "brkpt",
    "griddepcontrol", "setmaxnreg", "discard", "applypriority", "stackrestore",
})
CARRY_READERS = frozenset({"addc", "subc", "madc"})
MEMORY_SPACES = ("param", "global", "shared", "const", "local")
MAX_INLINE_DEPTH = 8

# The carry flag written by `.cc` instructions and read by addc/subc/madc ('%%' cannot
# start a PTX name, so it cannot collide with a register).
CARRY = "%%cc"


def special_class(name: str) -> str:
    """'uniform' or 'divergent' for a special register such as `%ctaid.x`."""
    base = name.split(".", 1)[0]
    if base in UNIFORM_SPECIALS:
        return "uniform"
    for prefix, klass in _SPECIAL_FAMILIES:
        if base.startswith(prefix):
            return klass
    return "divergent"


def _is_special_name(name: str) -> bool:
    base = name.split(".", 1)[0]
    return (base in KNOWN_SPECIALS or "." in name
            or any(base.startswith(prefix) for prefix, _ in _SPECIAL_FAMILIES))


def _memory_space(mods: list[str]) -> str | None:
    for mod in mods:
        base = mod.split("::", 1)[0]
        if base in MEMORY_SPACES:
            return base
    return None


def _element_bytes(mods: list[str]) -> int:
    """Bytes of one element of a typed opcode (`ld.param.v2.b32` → 4)."""
    for mod in reversed(mods):
        if mod[:1] in "bsuf" and mod[1:] in _TYPE_BYTES:
            return _TYPE_BYTES[mod[1:]]
        if mod in ("f16x2", "bf16x2", "e4m3x2", "e5m2x2"):
            return 4
    return 4




def _operand(item) -> tuple:
    if isinstance(item, tuple):
        return item
    kind = item.type
    if kind == "REG":
        return ("r", item.value)
    if kind == "IDENT":
        return ("i", item.value)
    if kind == "INT":
        return ("n", _number(item.value))
    if kind == "FLOAT":
        return ("n", _float_bits(item.value), item.value)
    return ("i", item.value)


class _Builder:
    """Parser callbacks (run inside the LALR parser): tokens → parsed forms.

    `source`, `line0` and `column0` describe the chunk being parsed, so that positions are
    those of the whole file.
    """

    def __init__(self) -> None:
        self.source = ""
        self.line0 = 1
        self.column0 = 1

    def _pos(self, token: Token) -> tuple[int, int]:
        line = token.line
        column = token.column + (self.column0 - 1 if line == 1 else 0)
        return line + self.line0 - 1, column

    # -- top level -----------------------------------------------------------------
    def start(self, children):
        return [c for c in children if c is not None and not isinstance(c, Token)]

    def version(self, children):
        return None

    def target(self, children):
        return None

    def address_size(self, children):
        return None

    def section(self, children):
        return None

    def pragma(self, children):
        return None

    def file_dir(self, children):
        index, path = 0, ""
        for child in children:
            if child.type == "STRING":
                path = child.value[1:-1]
                break
            index = _number(child.value)
        return PFile(index, path)

    def loc_dir(self, children):
        file, line, column = (_number(c.value) for c in children[:3])
        inlined = next((c for c in children[3:] if isinstance(c, tuple)), None)
        return PLoc(file, line, column, inlined)

    def loc_name(self, children):
        return None

    def loc_inlined(self, children):
        return tuple(_number(c.value) for c in children[1:4])

    # -- functions -------------------------------------------------------------------
    def linkages(self, children):
        return [c.value for c in children]

    def function(self, children):
        linkage, kind = children[0], children[1]
        rets: list[PParam] = []
        params: list[PParam] = []
        name = None
        body = None
        directives: list[str] = []
        for child in children[2:]:
            if isinstance(child, Token):
                if child.type == "IDENT" and name is None:
                    name = child
            elif isinstance(child, tuple) and child[0] == "rets":
                rets = child[1]
            elif isinstance(child, tuple) and child[0] == "params":
                params = child[1]
            elif isinstance(child, tuple) and child[0] == "perf":
                directives.append(child[1])
            elif isinstance(child, PScope):
                body = child
        line, column = self._pos(kind)
        return PFunction(kind.value[1:], name.value, linkage, rets, params, body, line, column,
                         directives)

    def ret_params(self, children):
        return ("rets", [c for c in children if c is not None])

    def params(self, children):
        return ("params", [c for c in children if c is not None])

    def param(self, children):
        name = next(c for c in children if isinstance(c, tuple) and c[0] == "name")
        type_, align, size = _decl_layout(children[1:], name[2])
        return PParam(children[0].value, name[1], type_, size, align)

    def perf(self, children):
        tokens = [c for c in children if isinstance(c, Token)]
        if not tokens or tokens[0].type != "PERF_DIRECTIVE":
            return None  # a `.pragma` in the header
        return ("perf", _perf_text(" ".join([tokens[0].value, ", ".join(
            t.value for t in tokens[1:])])))

    def body(self, children):
        return PScope([c for c in children if c is not None and not isinstance(c, Token)])

    def label(self, children):
        token = children[0]
        return PLabel(token.value, *self._pos(token))

    def _table(self, kind: str, children) -> PTable:
        names = [c.value for c in children if isinstance(c, Token) and c.type == "IDENT"]
        first = children[0]
        return PTable(kind, names, *self._pos(first))

    def branch_targets(self, children):
        return self._table("branchtargets", children)

    def call_targets(self, children):
        return self._table("calltargets", children)

    def call_prototype(self, children):
        token = next(c for c in children if isinstance(c, Token))
        return PTable("callprototype", [], *self._pos(token))

    # -- declarations ------------------------------------------------------------------
    def module_var(self, children):
        return children[1]

    def var_decl(self, children):
        space = children[0]
        items = [c for c in children[1:] if isinstance(c, tuple) and c[0] == "name"]
        details = {}
        for item in items:
            type_, align, size = _decl_layout(children[1:], item[2])
            details[item[1]] = (type_, align, size, item[3] if len(item) > 3 else ())
        return PDecl(space.value[1:], [(c[1], c[2]) for c in items], *self._pos(space),
                     details)

    def var_item(self, children):
        name = children[0]
        init = children[1] if len(children) > 1 and children[1] is not None else ()
        return (*name, tuple(init))

    def var_name(self, children):
        shape = children[1] if len(children) > 1 else None
        return ("name", children[0].value, shape)

    def reg_range(self, children):
        return f"<{children[0].value}>"

    def array(self, children):
        dims = [c.value for c in children if isinstance(c, Token) and c.type == "INT"]
        return "[" + "][".join(dims) + "]"

    def var_mod(self, children):
        tokens = [c for c in children if isinstance(c, Token)]
        if len(tokens) == 1 and tokens[0].type == "INT":
            return ("align", _number(tokens[0].value))
        return ("mod", tokens[0].value if len(tokens) == 1 else "")

    def init(self, children):
        """Initializer items, flattened: ("n", int), ("f", text), ("sym", name, offset)."""
        items: list[tuple] = []
        tokens = [c for c in children if isinstance(c, Token)]
        if tokens and tokens[0].type == "IDENT":
            names = [t.value for t in tokens if t.type == "IDENT"]
            offset = next((_number(t.value) for t in tokens if t.type == "INT"), 0)
            if len(names) == 1 or names[0] == "generic":  # not `field = value`
                items.append(("sym", names[-1], offset))
            return items
        for child in children:
            if isinstance(child, list):
                items.extend(child)
            elif isinstance(child, Token) and child.type == "INT":
                items.append(("n", _number(child.value)))
            elif isinstance(child, Token) and child.type == "FLOAT":
                items.append(("f", child.value))
        return items

    # -- instructions ----------------------------------------------------------------
    def instruction(self, children):
        first = children[0]
        guard = None
        negated = False
        index = 0
        if first.type == "GUARD":
            guard = first.value[1:]
            if guard.startswith("!"):
                negated, guard = True, guard[1:]
            index = 1
        opcode = children[index]
        semi = children[-1]
        operands = [_operand(c) for c in children[index + 1:-1] if c is not None]
        text = self.source[first.start_pos:semi.end_pos]
        if "/" in text:
            text = _COMMENT.sub(" ", text)
        line, column = self._pos(first)
        return PInstr(guard, negated, opcode.value, operands, line, column, " ".join(text.split()))

    def pair(self, children):
        return ("|", _operand(children[0]), _operand(children[1]))

    def sum(self, children):
        base, sign, offset = children
        value = _number(offset.value)
        return ("s", _operand(base), -value if sign.value == "-" else value)

    def vector(self, children):
        return ("v", [_operand(c) for c in children if c is not None])

    def address(self, children):
        return ("a", [_operand(c) for c in children if c is not None])

    def plist(self, children):
        return ("p", [_operand(c) for c in children if c is not None])

    def negated(self, children):
        return ("!", _operand(children[0]))


_BUILDER = _Builder()
# The callbacks live in one shared parser and know the chunk being parsed: one file parses
# at a time (threads wait; processes are independent).
_PARSE_LOCK = threading.Lock()


@cache
def parser() -> Lark:
    """The LALR parser for PTX with its callbacks (built once)."""
    return lalr_parser("ptx.lark", transformer=_BUILDER, maybe_placeholders=True)


@cache
def fast_patterns() -> ptx_fast.Patterns:
    """The fast path's regexes, built from the grammar's terminals (built once)."""
    lark = parser()
    return ptx_fast.build_patterns(lambda name: lark.get_terminal(name).pattern.to_regexp())


def _parse_chunk(lark: Lark, fast: ptx_fast.Patterns | None, names: dict[str, tuple]) -> list:
    """The parsed forms of the chunk in `_BUILDER` (Lark raises on a syntax error);
    `names` shares operand tuples across the fast path's chunks."""
    if fast is not None:
        items = _parse_function_fast(lark, fast, names)
        if items is not None:
            return items
    return lark.parse(_BUILDER.source)


def _parse_function_fast(lark: Lark, fast: ptx_fast.Patterns,
                         names: dict[str, tuple]) -> list | None:
    """A function chunk whose body the fast path reads, and its header too when the chunk
    holds nothing else (else Lark parses the header with an empty body and the fast path's
    body goes in); None when the fast path cannot read the body (then Lark parses the
    whole chunk, and any error message is its own)."""
    source = _BUILDER.source
    brace = ptx_fast.find_body(source)
    if brace is None:
        return None
    reader = ptx_fast.BodyReader(fast, source, _BUILDER.line0, _BUILDER.column0, names)
    function = reader.header(brace)
    body = reader.read(brace)
    if body is None:
        return None
    close, scope = body
    if function is not None and reader.only_gap_after(close + 1):
        function.body = scope
        return [function]
    try:
        items = lark.parse(source[:brace + 1] + source[close:])
    except LarkError:
        return None
    function = items[-1] if items else None
    if not isinstance(function, PFunction) or function.body != PScope([]):
        return None
    function.body = scope
    return items


# ---------------------------------------------------------------------------------------
# Chunks: top-level pieces parsed on their own.
# ---------------------------------------------------------------------------------------

# Block comments are found by `_scan` (an unterminated `/*` must not make the scan look
# for `*/` again at every later `/*`: that would be quadratic); an unterminated string runs
# to the end of its line, and the possessive loop never backtracks into it.
_SCAN = re.compile(r'//[^\n]*|/\*|"(?:[^"\\\n]|\\.)*+"?|[{};]'
                   r'|(?P<header>^[ \t]*(?:\.(?:visible|weak|extern)[ \t]+)?\.(?:entry|func)\b)',
                   re.M)
_HEADER = re.compile(r"^[ \t]*(?:\.(?:visible|weak|extern)[ \t]+)*\.(?:entry|func)\b", re.M)
_REST_OF_LINE = re.compile(r"[ \t\r\f]*(?://[^\n]*)?(?:\n|$)")
_NEXT_CHAR = re.compile(r"\s*(\S)")


def _scan(text: str) -> Iterator[re.Match]:
    """The braces, semicolons and function headers of a text outside comments and
    strings, in one linear pass."""
    last_close = text.rfind("*/")
    pos = 0
    while (match := _SCAN.search(text, pos)) is not None:
        pos = match.end()
        first = match.group()[0]
        if first == "/":
            if match.group() == "/*" and pos <= last_close:  # a `*/` follows: skip to it
                pos = text.find("*/", pos) + 2
            continue  # (an unterminated `/*` is an error Lark reports; scanning goes on)
        if first != '"':
            yield match


def _chunks(text: str) -> list[tuple[int, int]]:
    """(start, end) offsets of top-level pieces: each ends after a `;` or a closing `}`
    at brace depth 0 (and the rest of that line when it holds only a comment). A function
    header inside an unclosed body starts a new piece, so a missing `}` loses one function."""
    cuts: list[tuple[int, int]] = []
    depth = 0
    start = 0
    for match in _scan(text):
        char = match.group()
        if match.lastgroup == "header":  # `.entry` / `.func` at the start of a line
            if depth and match.start() > start:
                cuts.append((start, match.start()))
                start, depth = match.start(), 0
            continue
        if char == "{":
            depth += 1
            continue
        if char == "}":
            depth = max(depth - 1, 0)
            if depth:
                continue
            following = _NEXT_CHAR.match(text, match.end())
            if following and following.group(1) in ";,=":
                continue  # the end of an initializer, not of a body
        elif char != ";" or depth:
            continue
        end = match.end()
        rest = _REST_OF_LINE.match(text, end)
        if rest:
            end = rest.end()
        cuts.append((start, end))
        start = end
    if text[start:].strip():
        cuts.append((start, len(text)))
    return cuts


# ---------------------------------------------------------------------------------------
# Syntax error messages.
# ---------------------------------------------------------------------------------------

_TOKEN_WORDS = {
    "IDENT": "identifier", "REG": "register", "INT": "integer", "FLOAT": "float",
    "STRING": "string", "GUARD": "guard", "DOTWORD": "directive or type", "SEMI": "';'",
    "COMMA": "','", "COLON": "':'", "LPAR": "'('", "RPAR": "')'", "LSQB": "'['",
    "RSQB": "']'", "LBRACE": "'{'", "RBRACE": "'}'", "VBAR": "'|'", "BANG": "'!'",
    "PLUS": "'+'", "MINUS": "'-'", "EQUAL": "'='", "LESSTHAN": "'<'", "MORETHAN": "'>'",
    "SPACE": "state space", "LINKAGE": "linkage", "FUNC_KIND": ".entry/.func",
    "PERF_DIRECTIVE": "performance directive", "SECTION_BODY": "section body",
    "VERSION_NUMBER": "version number",
}


def _token_word(name: str) -> str:
    if name in _TOKEN_WORDS:
        return _TOKEN_WORDS[name]
    try:
        pattern = parser().get_terminal(name).pattern
    except KeyError:
        return name.lower()
    return f"'{pattern.value}'" if pattern.type == "str" else name.lower()


def _syntax_message(error: UnexpectedInput) -> str:
    if isinstance(error, UnexpectedCharacters):
        return f"unexpected character {error.char!r}"
    if isinstance(error, UnexpectedToken):
        token = error.token
        if token.type == "$END":
            return "unexpected end of input (missing '}' or ';'?)"
        expected = sorted({_token_word(e) for e in error.expected if e != "$END"})
        hint = f"; expected one of {', '.join(expected[:10])}" if expected else ""
        # a body token spans lines; the message names only where it starts
        shown = str(token.value).split("\n", 1)[0].strip()
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        return f"unexpected {shown!r}{hint}"
    return str(error).splitlines()[0]


# ---------------------------------------------------------------------------------------
# Flattening: one function body → a list of instructions, labels, .loc marks.
# ---------------------------------------------------------------------------------------

@dataclass
class _FuncInfo:
    fn: PFunction
    stmts: list = field(default_factory=list)
    registers: set[str] = field(default_factory=set)
    register_ranges: set[str] = field(default_factory=set)
    symbols: dict[str, str] = field(default_factory=dict)  # local variable → space
    labels: dict[str, PLabel] = field(default_factory=dict)
    tables: dict[str, list[str]] = field(default_factory=dict)  # branch-target tables
    errors: list[tuple[str, int, int]] = field(default_factory=list)
    # For the interpreter: declared register types (plain names and `%r<N>` stems) and
    # the layout of variables declared in the body (type, alignment, size, initializer).
    reg_types: dict[str, str] = field(default_factory=dict)
    range_types: dict[str, str] = field(default_factory=dict)
    symbol_details: dict[str, tuple] = field(default_factory=dict)
    # `.param` variables declared in the body (call sequences): name → (type, align, size)
    param_decls: dict[str, tuple] = field(default_factory=dict)

    def is_register(self, name: str) -> bool:
        if name in self.registers:
            return True
        stem = name.rstrip("0123456789")
        return stem != name and stem in self.register_ranges

    def reg_type(self, name: str) -> str | None:
        if name in self.reg_types:
            return self.reg_types[name]
        return self.range_types.get(name.rstrip("0123456789"))


def _rename_operand(op: tuple, names: dict[str, str]) -> tuple:
    tag = op[0]
    if tag in ("r", "i"):
        new = names.get(op[1])
        return (tag, new) if new else op
    if tag in ("v", "a", "p"):
        return (tag, [_rename_operand(o, names) for o in op[1]])
    if tag == "s":
        return ("s", _rename_operand(op[1], names), op[2])
    if tag == "|":
        return ("|", _rename_operand(op[1], names), _rename_operand(op[2], names))
    if tag == "!":
        return ("!", _rename_operand(op[1], names))
    return op


def _flatten(fn: PFunction) -> _FuncInfo:
    info = _FuncInfo(fn)
    for param in (*fn.params, *fn.rets):
        if param.space == ".reg":
            info.registers.add(param.name)
            info.reg_types[param.name] = param.type
    renames: dict[str, str] = {}
    counter = 0
    # Every name declared so far: a declaration in a sibling scope (`{ .param .b8
    # retval0[4]; … }` then `{ .param .b32 retval0; … }`, as nvcc -G writes call
    # sequences) is another variable, possibly of another type, so it gets its own name.
    declared = {p.name for p in (*fn.params, *fn.rets)}

    def declare(decl: PDecl, visible: set[str], ranges: set[str], undo: list) -> None:
        nonlocal counter
        for name, shape in decl.names:
            final = name
            stem = name.rstrip("0123456789")
            shadows = name in visible or (stem != name and stem in ranges) or name in declared
            is_range = bool(shape) and shape.startswith("<")
            declared.add(name)
            if shadows and not is_range:
                counter += 1
                final = f"{name}$s{counter}"
                while final in declared:
                    counter += 1
                    final = f"{name}$s{counter}"
                declared.add(final)
                undo.append((name, renames.get(name)))
                renames[name] = final
            detail = decl.details.get(name)
            if decl.space == "reg":
                type_ = detail[0] if detail else ""
                if shape and shape.startswith("<"):
                    info.register_ranges.add(name)
                    info.range_types[name] = type_
                    ranges.add(name)
                else:
                    info.registers.add(final)
                    info.reg_types[final] = type_
                    visible.add(name)
                continue
            visible.add(name)
            if decl.space == "param" and detail is not None:
                info.param_decls[final] = detail[:3]
            if decl.space != "param":  # .param variables are value slots (see read_slot)
                info.symbols[final] = decl.space
                if detail is not None:
                    info.symbol_details[final] = (decl.space, *detail)

    def walk(scope: PScope, outer: set[str], outer_ranges: set[str]) -> None:
        visible = set(outer)
        ranges = set(outer_ranges)
        undo: list = []
        pending_label: PLabel | None = None
        for stmt in scope.stmts:
            if isinstance(stmt, PInstr):
                if renames:
                    stmt.operands = [_rename_operand(o, renames) for o in stmt.operands]
                    if stmt.guard in renames:
                        stmt.guard = renames[stmt.guard]
                info.stmts.append(stmt)
            elif isinstance(stmt, PLabel):
                if stmt.name in info.labels:
                    first = info.labels[stmt.name]
                    info.errors.append((f"label '{stmt.name}' already defined at line "
                                        f"{first.line}", stmt.line, stmt.column))
                    continue
                info.labels[stmt.name] = stmt
                info.stmts.append(stmt)
                pending_label = stmt
                continue
            elif isinstance(stmt, PTable):
                if pending_label is not None and info.stmts and info.stmts[-1] is pending_label:
                    # `name: .branchtargets …` names a table, not a place in the code.
                    info.stmts.pop()
                    del info.labels[pending_label.name]
                    info.tables[pending_label.name] = stmt.names
            elif isinstance(stmt, PDecl):
                declare(stmt, visible, ranges, undo)
            elif isinstance(stmt, PScope):
                walk(stmt, visible, ranges)
            elif isinstance(stmt, PLoc):
                info.stmts.append(stmt)
            pending_label = None
        for name, previous in reversed(undo):
            if previous is None:
                renames.pop(name, None)
            else:
                renames[name] = previous

    if fn.body is not None:
        walk(fn.body, {p.name for p in (*fn.params, *fn.rets)}, set())
    return info


# ---------------------------------------------------------------------------------------
# Lowering one kernel.
# ---------------------------------------------------------------------------------------

@dataclass
class _Unit:
    """What a file offers to every kernel: functions, module symbols, the .file table."""

    path: str
    functions: dict[str, PFunction]
    symbols: dict[str, str]
    files: dict[int, str]
    infos: dict[str, _FuncInfo] = field(default_factory=dict)

    def info(self, name: str) -> _FuncInfo:
        if name not in self.infos:
            self.infos[name] = _flatten(self.functions[name])
        return self.infos[name]


@dataclass
class _Frame:
    """One function body being lowered: the kernel itself or an inlined call."""

    info: _FuncInfo
    suffix: str = ""
    ret_label: str | None = None
    stack: tuple[str, ...] = ()
    inlined_at: tuple = ()
    origin: tuple | None = None
    origin_inlined: tuple | None = None
    call: PInstr | None = None  # the kernel's call instruction this body is inlined for
    call_origin: tuple | None = None  # the CUDA position of that call
    # ("r" | "i", name) → the IR operands it reads in this frame (`_KernelLowering.value`)
    names: dict[tuple, tuple] = field(default_factory=dict)

    @property
    def is_kernel(self) -> bool:
        return self.ret_label is None


# Operand tags that may name a symbol or a negation (what `operand_notes` records).
_NOTED_TAGS = frozenset("is!")


def _slot(base: str, offset: int) -> str:
    return base if offset == 0 else f"{base}+{offset}"


def _slot_offset(name: str, base: str) -> int:
    """The offset a slot variable `base+N` stands for."""
    return int(name[len(base) + 1:]) if len(name) > len(base) else 0


def _element(attrs: dict, element) -> dict:
    """Attributes with `element` (vector/pair position) or `carry` added when it applies."""
    if element is None:
        return dict(attrs)
    if element == "carry":
        return {**attrs, "carry": True}
    return {**attrs, "element": element}


class _KernelLowering:
    """Lowers one `.entry` (and the bodies it calls) to a list of IR instructions/labels."""

    def __init__(self, unit: _Unit, info: _FuncInfo, diagnostics: list[ir.Diagnostic]):
        self.unit = unit
        self.kernel_info = info
        self.diagnostics = diagnostics
        self.items: list = []  # ir.Instruction or ("label", name, loc, user)
        self.exit_blocks: list[ir.Block] = []
        self.referenced: set[str] = set()
        self.specials: dict[str, str] = {}
        self.slots: dict[str, set[int]] = {}
        self.params = [p.name for p in info.fn.params]
        self.param_set = set(self.params)
        self.unknown: dict[str, int] = {}
        self.bodiless: dict[str, int] = {}
        self.notes: list[str] = []
        self.failed = False
        self.calls = 0
        self.guards = 0
        self.exits = 0
        self.var_types: dict[str, str] = {}  # IR register name → declared PTX type
        self.bodies = [info]  # the kernel and every function inlined into it
        self.symbol_names: set[str] = set()
        self.guard_temps: dict[str, str] = {}  # guard temporary → the register it updates
        self.group_forms: dict[int, PInstr] = {}  # group → the kernel's PTX instruction
        self.kernel_groups: dict[int, int] = {}  # id() of a kernel's PInstr → its group
        # group of an inlined body → (the kernel's call, its CUDA position)
        self.inlined_groups: dict[int, tuple[PInstr, tuple | None]] = {}
        self.own_labels: set[str] = set()  # labels of the kernel's body (not inlined)
        self.groups = 0  # the group id of the last PTX instruction lowered
        self.group_source: PInstr | None = None

    # -- small helpers -----------------------------------------------------------------
    def error(self, message: str, line: int, column: int) -> None:
        diagnostic = ir.Diagnostic("error", message, self.unit.path, line, column)
        if not any(str(d) == str(diagnostic) for d in self.diagnostics[-20:]):
            self.diagnostics.append(diagnostic)
        self.failed = True

    def instr(self, frame: _Frame, pi: PInstr, kind: str, **fields) -> ir.Instruction:
        attrs = {"opcode": pi.opcode}
        if frame.origin is not None:
            attrs["origin"] = frame.origin
        if frame.origin_inlined:
            attrs["inlined_at"] = (frame.origin_inlined, *frame.inlined_at)
        elif frame.inlined_at:
            attrs["inlined_at"] = frame.inlined_at
        if frame.suffix:
            attrs["function"] = frame.info.fn.name
        extra = fields.pop("attrs", None)
        if extra:
            attrs.update(extra)
        return ir.Instruction(kind, ir.Loc(pi.line, pi.column), text=pi.text, attrs=attrs,
                              group=self.group(frame, pi), **fields)

    def group(self, frame: _Frame, pi: PInstr) -> int:
        """The group id of the IR instructions lowered from `pi`: one per PTX instruction
        of the kernel, one per inlined copy of a callee's instruction."""
        if frame.is_kernel:
            known = self.kernel_groups.get(id(pi))
            if known is not None:
                self.group_source = pi
                return known
        if pi is not self.group_source:
            self.group_source = pi
            self.groups += 1
            if frame.is_kernel:
                self.kernel_groups[id(pi)] = self.groups
                self.group_forms[self.groups] = pi
            elif frame.call is not None:
                self.inlined_groups[self.groups] = (frame.call, frame.call_origin)
        return self.groups

    def label(self, name: str, line: int, column: int, user: bool = True) -> None:
        self.items.append(("label", name, ir.Loc(line, column), user))

    def value(self, frame: _Frame, op: tuple) -> tuple[ir.Operand, ...]:
        """The IR operands an operand reads (flattened: vectors give several)."""
        tag = op[0]
        if tag == "r" or tag == "i":
            # Names recur on most lines: their operands are worked out once per frame.
            known = frame.names.get(op)
            if known is None:
                known = frame.names[op] = self.name_value(frame, tag, op[1])
            return known
        if tag == "n":
            return (ir.Const(op[1]),)
        if tag == "s" or tag == "!":
            return self.value(frame, op[1])
        if tag in ("v", "a", "p"):
            return tuple(v for o in op[1] for v in self.value(frame, o))
        if tag == "|":
            return self.value(frame, op[1]) + self.value(frame, op[2])
        return ()

    def name_value(self, frame: _Frame, tag: str, name: str) -> tuple[ir.Operand, ...]:
        """The operand of a `%`-name (tag "r") or identifier (tag "i"): a register, a
        special register, a symbol's address, or nothing for `_`."""
        if tag == "r":
            if (not frame.info.is_register(name) and _is_special_name(name)
                    and not frame.info.is_register(name.split(".", 1)[0])):
                self.specials.setdefault(name, special_class(name))
                return (ir.Special(name),)
            return (self.register(frame, name),)
        if name == "_":
            return ()
        if frame.info.is_register(name):
            return (self.register(frame, name),)
        return (self.symbol_address(name),)

    def symbol_address(self, name: str) -> ir.Special:
        """A symbol used as a value (`mov.u64 %rd1, sym`): its address is the same in every
        lane but not a number the analyses know, so it is a uniform special register
        named after the symbol (never the constant 0)."""
        self.specials[name] = "uniform"
        self.symbol_names.add(name)
        return ir.Special(name)

    def register(self, frame: _Frame, name: str) -> ir.Var:
        """The IR variable of a register; its declared type is noted for the interpreter."""
        full = name + frame.suffix
        if full not in self.var_types:
            type_ = frame.info.reg_type(name)
            if type_:
                self.var_types[full] = type_
        return ir.Var(full)

    def values(self, frame: _Frame, ops: list) -> tuple[ir.Operand, ...]:
        return tuple(v for o in ops for v in self.value(frame, o))

    def operand_notes(self, frame: _Frame, ops: list) -> dict[str, tuple]:
        """What `values` flattens away, aligned with its result: for each IR operand the
        symbol and offset it names (`sym`, `sym+4`), and whether it is negated (`!%p`).
        Empty when there is nothing to note."""
        if not any(op[0] in _NOTED_TAGS for op in ops):  # the commonest: registers, numbers
            return {}
        symbols: list = []
        negated: list[int] = []
        for op in ops:
            count = len(self.value(frame, op))
            inner = op[1] if op[0] == "!" else op
            base, offset = (inner[1], inner[2]) if inner[0] == "s" else (inner, 0)
            if (base[0] == "i" and base[1] != "_" and not frame.info.is_register(base[1])
                    and count == 1):
                symbols.append((base[1], offset))
            else:
                symbols.extend([None] * count)
            if op[0] == "!" and count == 1:
                negated.append(len(symbols) - 1)
        notes: dict[str, tuple] = {}
        if any(symbols):
            notes["arg_symbols"] = tuple(symbols)
        if negated:
            notes["negated"] = tuple(negated)
        return notes

    def dests(self, frame: _Frame, op: tuple) -> list[str]:
        """Names an operand in destination position writes."""
        return [name for name, _ in self.dest_elements(frame, op)]

    def dest_elements(self, frame: _Frame, op: tuple) -> list[tuple[str, int | None]]:
        """(name, element) for each name a destination operand writes; the element is the
        position in a vector `{a, _, c}` or pair `a|b` (None for a plain register)."""
        tag = op[0]
        if tag in ("r", "i"):
            if op[1] == "_":
                return []
            if frame.info.is_register(op[1]):
                self.register(frame, op[1])
            return [(op[1] + frame.suffix, None)]
        if tag in ("v", "|"):
            parts = op[1] if tag == "v" else [op[1], op[2]]
            return [(d, k) for k, p in enumerate(parts) for d, _ in self.dest_elements(frame, p)]
        return []

    def address(self, frame: _Frame, op: tuple) -> tuple[ir.Operand, str | None, int]:
        """(base operand, symbol or None, offset) of an address operand `[…]`."""
        inner = op[1][0] if op[0] == "a" and op[1] else op
        offset = 0
        if inner[0] == "s":
            inner, offset = inner[1], inner[2]
        if inner[0] == "i" and not frame.info.is_register(inner[1]):
            return ir.Const(0), inner[1], offset
        if inner[0] == "n":
            return ir.Const(inner[1]), None, offset
        values = self.value(frame, inner)
        return (values[0] if values else ir.Const(0)), None, offset

    def symbol_space(self, frame: _Frame, name: str) -> str | None:
        if name in frame.info.symbols:
            return frame.info.symbols[name]
        return self.unit.symbols.get(name)

    def read_slot(self, base: str, offset: int, size: int | None) -> list[ir.Operand]:
        """The slot variables a `.param` read at base+offset sees."""
        written = self.slots.get(base)
        if not written or offset in written:
            return [ir.Var(_slot(base, offset))]
        if size:
            overlap = sorted(o for o in written if offset <= o < offset + size)
            if overlap:
                return [ir.Var(_slot(base, o)) for o in overlap]
        return [ir.Var(_slot(base, o)) for o in sorted(written)]

    def slot_name(self, frame: _Frame, op: tuple) -> str | None:
        """The renamed `.param` slot an operand names, if it names one: any symbol but a
        parameter of the kernel itself (old ABIs pass the callee's own parameter names,
        undeclared in the caller, as call arguments)."""
        if op[0] == "a" and op[1]:
            op = op[1][0]
        if op[0] == "s":
            op = op[1]
        if op[0] != "i" or op[1] == "_" or frame.info.is_register(op[1]):
            return None
        if frame.is_kernel and op[1] in self.param_set:
            return None
        return op[1] + frame.suffix

    def copy(self, frame: _Frame, pi: PInstr, dest: str, args: list[ir.Operand],
             **attrs) -> ir.Instruction:
        operator = "copy" if len(args) == 1 else pi.opcode
        return self.instr(frame, pi, ir.ASSIGN, dest=dest, args=tuple(args), operator=operator,
                          attrs=attrs or None)

    # -- emission with guards ----------------------------------------------------------
    def guard_operand(self, frame: _Frame, pi: PInstr) -> ir.Operand:
        name = pi.guard
        if frame.info.is_register(name) or not _is_special_name(name):
            return self.register(frame, name)
        return self.value(frame, ("r", name))[0]

    def emit(self, frame: _Frame, pi: PInstr, produced: list[ir.Instruction]) -> None:
        """Append instructions; under a guard, a definition becomes tmp = op; d = select."""
        if pi.guard is None:
            self.items.extend(produced)
            return
        guard = self.guard_operand(frame, pi)
        typed = ir.Guard(guard, pi.negated)
        for instr in produced:
            instr.guard = typed
            if instr.dest is None:
                self.items.append(instr)
                continue
            self.guards += 1
            dest = instr.dest
            temp = f"{dest}@g{self.guards}"
            instr.dest = temp
            self.items.append(instr)
            select = self.instr(frame, pi, ir.ASSIGN, dest=dest,
                                args=(guard, ir.Var(temp), ir.Var(dest)),
                                operator="select.not" if pi.negated else "select",
                                attrs={"guarded_select": True})
            self.guard_temps[temp] = dest
            self.items.append(select)

    def branch_on_guard(self, frame: _Frame, pi: PInstr, target: str, when: bool,
                        **attrs) -> ir.Instruction:
        """A conditional branch to `target` taken when the guard holds (`when`) or not."""
        taken_if_true = when != pi.negated
        return self.instr(frame, pi, ir.BRANCH, operator="bnz" if taken_if_true else "bz",
                          args=(self.guard_operand(frame, pi),), target=target,
                          attrs=attrs or None)

    # -- the body walk -------------------------------------------------------------------
    def lower_body(self, frame: _Frame) -> None:
        info = frame.info
        if info.errors:
            for message, line, column in info.errors:
                self.error(message, line, column)
            return
        files = self.unit.files
        for stmt in info.stmts:
            if isinstance(stmt, PInstr):
                self.lower_instr(frame, stmt)
            elif isinstance(stmt, PLabel):
                self.label(stmt.name + frame.suffix, stmt.line, stmt.column)
                if frame.is_kernel:
                    self.own_labels.add(stmt.name)
            elif isinstance(stmt, PLoc):
                path = files.get(stmt.file, f"<file {stmt.file}>")
                frame.origin = (path, stmt.line, stmt.column) if stmt.line > 0 else None
                frame.origin_inlined = None
                if stmt.inlined_at is not None:
                    f, line, column = stmt.inlined_at
                    frame.origin_inlined = (files.get(f, f"<file {f}>"), line, column)

    def lower_instr(self, frame: _Frame, pi: PInstr) -> None:
        opcode = pi.opcode
        parts = opcode.split(".")
        root, mods = parts[0], parts[1:]
        ops = pi.operands
        if root in ASSIGN_ROOTS:
            self.lower_assign(frame, pi, root, mods)
        elif root in LOAD_ROOTS:
            self.lower_load(frame, pi, mods)
        elif root in STORE_ROOTS:
            self.lower_store(frame, pi, root, mods)
        elif root in ATOMIC_ROOTS or root in REDUCTION_ROOTS:
            has_dest = root in ATOMIC_ROOTS and len(ops) >= 2 and ops[0][0] != "a"
            dests = self.dests(frame, ops[0]) if has_dest else []
            rest = ops[1:] if has_dest else ops
            space = _memory_space(mods) or ("surface" if root == "sured" else "generic")
            base, symbol, offset = (self.address(frame, rest[0]) if rest
                                    else (ir.Const(0), None, 0))
            args = (base, *self.values(frame, rest[1:]))
            attrs = self.address_attrs(frame, space, symbol, offset)
            produced = [self.instr(frame, pi, ir.ATOMIC, dest=d, args=args, operator=opcode,
                                   space=space, attrs=dict(attrs))
                        for d in dests or [None]]
            self.emit(frame, pi, produced)
        elif root in TEXTURE_ROOTS:
            elements = self.dest_elements(frame, ops[0]) if ops else []
            coords = [v for v in self.values(frame, ops[1:]) if not isinstance(v, ir.Const)
                      and not (isinstance(v, ir.Special) and v.name in self.symbol_names)]
            args = tuple(coords) or (ir.Const(0),)
            attrs = self.texture_attrs(frame, ops[1] if len(ops) > 1 else ("a", []))
            self.emit(frame, pi, [self.instr(frame, pi, ir.LOAD, dest=d, args=args,
                                             operator=opcode, space="texture",
                                             attrs=_element(attrs, k))
                                  for d, k in elements])
        elif root == "bra":
            self.lower_bra(frame, pi, mods)
        elif root == "brx":
            self.lower_brx(frame, pi, mods)
        elif root == "call":
            self.lower_call(frame, pi, mods)
        elif root == "ret":
            if frame.is_kernel:
                self.lower_exit(frame, pi)
            elif pi.guard is None:
                self.items.append(self.instr(frame, pi, ir.JUMP, target=frame.ret_label))
                self.referenced.add(frame.ret_label)
            else:
                self.items.append(self.branch_on_guard(frame, pi, frame.ret_label, True))
                self.referenced.add(frame.ret_label)
        elif root in ("exit", "trap"):
            self.lower_exit(frame, pi)
        elif root in BARRIER_ROOTS:
            if "warp" in mods:  # bar.warp.sync (__syncwarp): no block-wide effect
                self.emit(frame, pi, [self.instr(frame, pi, ir.FENCE, operator=opcode,
                                                 implicit=self.values(frame, ops))])
                return
            reduction = "red" in mods and ops  # bar.red, barrier.red, barrier.cta.red
            read = self.values(frame, ops[1:] if reduction else ops)  # not the destination
            produced = [self.instr(frame, pi, ir.BARRIER, implicit=read)]
            if reduction:
                notes = self.operand_notes(frame, ops[1:])
                produced += [self.instr(frame, pi, ir.ASSIGN, dest=d, operator=opcode,
                                        implicit=self.values(frame, ops[1:]),
                                        attrs=dict(notes))
                             for d in self.dests(frame, ops[0])]
            self.emit(frame, pi, produced)
        elif root in DROPPED_ROOTS:
            self.emit(frame, pi, [self.instr(frame, pi, ir.FENCE, operator=opcode,
                                             implicit=self.values(frame, ops))])
        elif root in UNIFORM_COLLECTIVE_ROOTS:
            # The operands are implicit reads, not arguments (the result is uniform).
            dests = self.dests(frame, ops[0]) if ops else []
            notes = self.operand_notes(frame, ops[1:])
            self.emit(frame, pi, [self.instr(frame, pi, ir.ASSIGN, dest=d, operator=opcode,
                                             implicit=self.values(frame, ops[1:]),
                                             attrs=dict(notes))
                                  for d in dests])
        else:
            if root not in OPAQUE_ROOTS:
                self.unknown.setdefault(opcode, pi.line)
            self.lower_opaque(frame, pi, opcode)

    def lower_opaque(self, frame: _Frame, pi: PInstr, operator: str) -> None:
        ops = pi.operands
        if ops and ops[0][0] in ("r", "i", "v", "|"):
            dests = self.dest_elements(frame, ops[0])
            args, notes = self.values(frame, ops[1:]), self.operand_notes(frame, ops[1:])
        else:
            dests = []
            args, notes = self.values(frame, ops), self.operand_notes(frame, ops)
        self.emit(frame, pi, [self.instr(frame, pi, ir.OPAQUE, dest=d, args=args,
                                         operator=operator, attrs=_element(notes, k))
                              for d, k in dests or [(None, None)]])

    def lower_assign(self, frame: _Frame, pi: PInstr, root: str, mods: list[str]) -> None:
        ops = pi.operands
        if not ops:
            return
        dests = self.dest_elements(frame, ops[0])
        args = self.values(frame, ops[1:])
        notes = self.operand_notes(frame, ops[1:])
        if root in CARRY_READERS:
            args = (*args, ir.Var(CARRY))
            if "arg_symbols" in notes:
                notes["arg_symbols"] = (*notes["arg_symbols"], None)
        if "cc" in mods:
            dests.append((CARRY, "carry"))
        attrs = dict(notes)
        symbols = [o[1][1] if o[0] == "s" else o[1] for o in ops[1:]
                   if (o[0] == "i" or (o[0] == "s" and o[1][0] == "i"))]
        symbols = [s for s in symbols if s != "_" and not frame.info.is_register(s)]
        if symbols:
            attrs.update({"symbols": tuple(symbols),
                          "symbol_spaces": tuple(self.symbol_space(frame, s) for s in symbols)})
        self.emit(frame, pi, [self.instr(frame, pi, ir.ASSIGN, dest=d, args=args,
                                         operator=pi.opcode, attrs=_element(attrs, k))
                              for d, k in dests])

    def lower_load(self, frame: _Frame, pi: PInstr, mods: list[str]) -> None:
        ops = pi.operands
        if len(ops) < 2:
            self.lower_opaque(frame, pi, pi.opcode)
            return
        elements = self.dest_elements(frame, ops[0])
        space = _memory_space(mods) or "generic"
        size = _element_bytes(mods)
        base, symbol, offset = self.address(frame, ops[1])
        produced: list[ir.Instruction] = []
        if space == "param":
            slot = self.slot_name(frame, ops[1])
            if slot is not None:
                for dest, k in elements:
                    where = offset + (k or 0) * size
                    sources = self.read_slot(slot, where, size)
                    extra = {}
                    if len(sources) > 1:  # several slots: the interpreter joins their bytes
                        extra = {"slot_read": (where, size, tuple(
                            _slot_offset(v.name, slot) for v in sources))}
                    produced.append(self.copy(frame, pi, dest, sources,
                                              slot=_slot(slot, where), **extra))
            elif symbol is not None and frame.is_kernel and symbol in self.param_set:
                produced = [self.instr(frame, pi, ir.LOAD, dest=d, args=(ir.Var(symbol),),
                                       operator=pi.opcode, space="param",
                                       attrs=_element({"symbol": symbol,
                                                       "offset": offset + (k or 0) * size,
                                                       "disp": offset + (k or 0) * size}, k))
                            for d, k in elements]
            elif symbol is None and not frame.is_kernel:
                # A .param read through a register inside a called function: the value
                # may come from any argument, so it is not seen through.
                produced = [self.instr(frame, pi, ir.OPAQUE, dest=d, args=(base,),
                                       operator=pi.opcode) for d, _ in elements]
            else:
                produced = [self.instr(frame, pi, ir.LOAD, dest=d, args=(base,),
                                       operator=pi.opcode, space="param",
                                       attrs=_element(self.address_attrs(
                                           frame, space, symbol, offset + (k or 0) * size,
                                           offset), k))
                            for d, k in elements]
            self.emit(frame, pi, produced)
            return
        self.emit(frame, pi, [
            self.instr(frame, pi, ir.LOAD, dest=d, args=(base,), operator=pi.opcode,
                       space=space, attrs=_element(self.address_attrs(
                           frame, space, symbol, offset + (k or 0) * size, offset), k))
            for d, k in elements])

    def texture_attrs(self, frame: _Frame, address: tuple) -> dict[str, object]:
        """`texture`: the handle of `[tex, {x, y}]` (or `[tex, smp, {…}]`), and `coords`:
        every coordinate operand, constants included."""
        parts = address[1] if address[0] == "a" else []
        handle = next((p[1] for p in parts if p[0] == "i" and not frame.info.is_register(p[1])),
                      None)
        vector = next((p for p in parts if p[0] == "v"), None)
        coords = self.values(frame, [vector]) if vector is not None else ()
        return {"texture": handle, "coords": coords} if handle else {}

    def address_attrs(self, frame: _Frame, space: str, symbol: str | None, disp: int,
                      offset: int | None = None) -> dict[str, object]:
        """Attributes of a memory access: `disp`, the byte displacement from the base
        operand (the symbol's address for `[sym+4]`), and for symbols `symbol`, `offset`
        (the offset written in the operand) and, in generic space, `symbol_space`."""
        attrs: dict[str, object] = {}
        if symbol is not None:
            attrs = {"symbol": symbol, "offset": disp if offset is None else offset}
            if space == "generic":
                attrs["symbol_space"] = self.symbol_space(frame, symbol)
        attrs["disp"] = disp
        return attrs

    def lower_store(self, frame: _Frame, pi: PInstr, root: str, mods: list[str]) -> None:
        ops = pi.operands
        addresses = [o for o in ops if o[0] == "a"]
        if not addresses:
            return  # cp.async.commit_group, cp.async.wait_group N, …: ordering only
        space = _memory_space(mods) or ("surface" if root == "sust" else "generic")
        base, symbol, offset = self.address(frame, ops[0])
        values = self.values(frame, ops[1:])
        if root == "st" and space == "param":
            slot = self.slot_name(frame, ops[0])
            if slot is not None:
                size = _element_bytes(mods)
                written = self.slots.setdefault(slot, set())
                produced = []
                for k, val in enumerate(values):
                    where = offset + k * size
                    written.add(where)
                    produced.append(self.copy(frame, pi, _slot(slot, where), [val]))
                self.emit(frame, pi, produced)
                return
        attrs = self.address_attrs(frame, space, symbol, offset)
        if root == "st" and len(ops) == 2:
            # One store per element: (address, value), the shape μ-SIMD stores have.
            size = _element_bytes(mods)
            notes = self.operand_notes(frame, ops[1:]).get("arg_symbols")
            vector = ops[1][0] == "v"
            produced = []
            for k, v in enumerate(values):
                extra = dict(self.address_attrs(frame, space, symbol, offset + k * size,
                                                offset))
                if vector:
                    extra["element"] = k
                if notes and notes[k]:
                    extra["arg_symbols"] = (None, notes[k])
                produced.append(self.instr(frame, pi, ir.STORE, args=(base, v),
                                           operator=pi.opcode, space=space, attrs=extra))
        else:
            # sust, stmatrix, cp.async, st.async: one store; the address (the surface
            # coordinates for sust) first, then everything else it reads.
            coords = [v for v in self.values(frame, [ops[0]]) if not isinstance(v, ir.Const)
                      and not (isinstance(v, ir.Special) and v.name in self.symbol_names)]
            address = tuple(coords) if root == "sust" and coords else (base,)
            produced = [self.instr(frame, pi, ir.STORE, args=(*address, *values),
                                   operator=pi.opcode, space=space, attrs=attrs or None)]
        self.emit(frame, pi, produced)

    # -- control flow ----------------------------------------------------------------------
    def check_label(self, frame: _Frame, name: str, pi: PInstr) -> str:
        if name not in frame.info.labels:
            kernel = self.kernel_info.fn.name
            where = f"function {frame.info.fn.name}" if frame.suffix else f"kernel {kernel}"
            self.error(f"undefined label '{name}' in {where}", pi.line, pi.column)
        target = name + frame.suffix
        self.referenced.add(target)
        return target

    def lower_bra(self, frame: _Frame, pi: PInstr, mods: list[str]) -> None:
        ops = pi.operands
        if not ops or ops[0][0] != "i":
            self.error(f"'{pi.opcode}' needs a label operand", pi.line, pi.column)
            return
        target = self.check_label(frame, ops[0][1], pi)
        attrs = {"uniform_hint": True} if "uni" in mods else {}
        if pi.guard is None:
            self.items.append(self.instr(frame, pi, ir.JUMP, target=target, attrs=attrs))
        else:
            self.items.append(self.branch_on_guard(frame, pi, target, True, **attrs))

    def lower_brx(self, frame: _Frame, pi: PInstr, mods: list[str]) -> None:
        ops = pi.operands
        if len(ops) < 2:
            self.error(f"'{pi.opcode}' needs an index and a target list", pi.line, pi.column)
            return
        table = ops[1]
        if table[0] == "i" and table[1] in frame.info.tables:
            names = frame.info.tables[table[1]]
        elif table[0] in ("p", "v"):
            names = [o[1] for o in table[1] if o[0] == "i"]
        else:
            self.error(f"undefined branch-target table '{table[1] if len(table) > 1 else ''}'",
                       pi.line, pi.column)
            return
        if not names:
            return
        targets = [self.check_label(frame, n, pi) for n in names]
        index = self.value(frame, ops[0])
        index_arg = index[0] if index else ir.Const(0)
        skip = None
        attrs = {"uniform_hint": True} if "uni" in mods else {}
        if pi.guard is not None:
            self.exits += 1
            skip = f"$brx.{self.exits}"
            self.items.append(self.branch_on_guard(frame, pi, skip, False))
            self.referenced.add(skip)
        for case, target in enumerate(targets[:-1]):
            self.items.append(self.instr(frame, pi, ir.BRANCH, operator="brx.idx",
                                         args=(index_arg,), target=target,
                                         attrs={"case": case, **attrs}))
        self.items.append(self.instr(frame, pi, ir.JUMP, target=targets[-1],
                                     attrs={"case": len(targets) - 1, **attrs}))
        if skip is not None:
            self.label(skip, pi.line, pi.column, user=False)

    def lower_exit(self, frame: _Frame, pi: PInstr) -> None:
        if pi.guard is None:
            self.items.append(self.instr(frame, pi, ir.STOP))
            return
        self.exits += 1
        label = f"$exit.{self.exits}"
        self.referenced.add(label)
        self.items.append(self.branch_on_guard(frame, pi, label, True))
        stop = self.instr(frame, pi, ir.STOP)
        self.exit_blocks.append(ir.Block(label, [stop], ir.Loc(pi.line, pi.column),
                                         user_label=False))

    def lower_call(self, frame: _Frame, pi: PInstr, mods: list[str]) -> None:
        ops = pi.operands
        rets: list = []
        position = 0
        if ops and ops[0][0] == "p":
            rets, position = ops[0][1], 1
        if position >= len(ops):
            self.error("call without a target", pi.line, pi.column)
            return
        target = ops[position]
        args = ops[position + 1][1] if (len(ops) > position + 1
                                       and ops[position + 1][0] == "p") else []
        name = target[1] if target[0] == "i" else None
        callee = self.unit.functions.get(name) if name else None
        if callee is None or callee.body is None:
            reason = f"{name}" if name else f"indirect call through {target[1]}"
            self.bodiless.setdefault(reason, pi.line)
            self.opaque_call(frame, pi, rets, args)
            return
        if name in frame.stack:
            self.notes.append(f"recursive call to '{name}' at line {pi.line} is treated as "
                              f"opaque")
            self.opaque_call(frame, pi, rets, args)
            return
        if len(frame.stack) >= MAX_INLINE_DEPTH:
            self.notes.append(f"call to '{name}' at line {pi.line} is nested deeper than "
                              f"{MAX_INLINE_DEPTH} calls and is treated as opaque")
            self.opaque_call(frame, pi, rets, args)
            return
        self.inline_call(frame, pi, callee, rets, args)

    def opaque_call(self, frame: _Frame, pi: PInstr, rets: list, args: list) -> None:
        inputs: list[ir.Operand] = []
        for arg in args:
            slot = self.slot_name(frame, arg)
            if slot is not None:
                inputs.extend(self.read_slot(slot, 0, None))
            else:
                inputs.extend(self.value(frame, arg))
        produced = []
        for ret in rets:
            slot = self.slot_name(frame, ret)
            if slot is not None:
                self.slots[slot] = {0}
                dests = [slot]
            else:
                dests = self.dests(frame, ret)
            produced += [self.instr(frame, pi, ir.OPAQUE, dest=d, args=tuple(inputs),
                                    operator="call") for d in dests]
        if not produced:
            produced = [self.instr(frame, pi, ir.OPAQUE, args=tuple(inputs), operator="call")]
        self.emit(frame, pi, produced)

    def inline_call(self, frame: _Frame, pi: PInstr, callee: PFunction, rets: list,
                    args: list) -> None:
        self.calls += 1
        suffix = f"@{self.calls}"
        info = self.unit.info(callee.name)
        if info not in self.bodies:
            self.bodies.append(info)
        chain = tuple(o for o in (frame.origin, frame.origin_inlined) if o) + frame.inlined_at
        inner = _Frame(info, suffix, f"$ret{suffix}", (*frame.stack, frame.info.fn.name), chain,
                       call=pi if frame.is_kernel else frame.call,
                       call_origin=frame.origin if frame.is_kernel else frame.call_origin)
        skip = None
        if pi.guard is not None:
            skip = f"$skip{suffix}"
            self.items.append(self.branch_on_guard(frame, pi, skip, False))
            self.referenced.add(skip)
        bound: list[ir.Instruction] = []
        for param, arg in zip(callee.params, args, strict=False):
            if param.space == ".reg":
                bound.append(self.copy(frame, pi, param.name + suffix, self.value(frame, arg)))
                continue
            base = param.name + suffix
            source = self.slot_name(frame, arg)
            if source is not None:
                offsets = sorted(self.slots.get(source) or {0})
                for o in offsets:
                    bound.append(self.copy(frame, pi, _slot(base, o), [ir.Var(_slot(source, o))]))
                self.slots[base] = set(offsets)
            else:
                bound.append(self.copy(frame, pi, base, self.value(frame, arg)))
                self.slots[base] = {0}
        self.items.extend(bound)
        self.lower_body(inner)
        self.label(inner.ret_label, pi.line, pi.column, user=False)
        self.referenced.add(inner.ret_label)
        results: list[ir.Instruction] = []
        for param, ret in zip(callee.rets, rets, strict=False):
            base = param.name + suffix
            offsets = [0] if param.space == ".reg" else sorted(self.slots.get(base) or {0})
            target = self.slot_name(frame, ret)
            if target is not None:
                for o in offsets:
                    results.append(self.copy(frame, pi, _slot(target, o),
                                             [ir.Var(_slot(base, o))]))
                self.slots[target] = set(offsets)
            else:
                for dest in self.dests(frame, ret):
                    source = ([ir.Var(base)] if param.space == ".reg"
                              else self.read_slot(base, 0, None))
                    results.append(self.copy(frame, pi, dest, source))
        self.items.extend(results)
        if skip is not None:
            self.label(skip, pi.line, pi.column, user=False)


# ---------------------------------------------------------------------------------------
# From lowered items to a kernel.
# ---------------------------------------------------------------------------------------

def _source_record(fn: PFunction, info: _FuncInfo, lowering: _KernelLowering,
                   kernel: ir.Kernel) -> dict[str, object]:
    """What the PTX printer needs to write the kernel back: its header, the declarations
    of its body, its labels, and for each group of IR instructions the PTX instruction it
    came from with the forms the group had when it was read (a group whose instructions
    no longer have those forms was rewritten and is printed from the IR)."""
    groups: dict[int, list[tuple]] = {}
    for instr in kernel.instructions():
        if instr.group is not None:
            groups.setdefault(instr.group, []).append(instr.form())
    return {
        "linkage": tuple(fn.linkage),
        "params": tuple(fn.params),
        "directives": tuple(fn.directives),
        "symbols": dict(info.symbol_details),
        "param_decls": dict(info.param_decls),
        "labels": frozenset(lowering.own_labels),
        "forms": dict(lowering.group_forms),
        "group_forms": {g: tuple(forms) for g, forms in groups.items()},
        "inlined": dict(lowering.inlined_groups),
    }


def _register_table(lowering: _KernelLowering,
                    instructions: list[ir.Instruction]) -> dict[str, str]:
    """The type of every register of the kernel: as declared; a guard temporary has the
    type of the register its select updates; the others (`.param` slots, parameters of
    inlined functions, the carry flag) as their defining instruction says."""
    table = dict(lowering.var_types)
    for temp, dest in lowering.guard_temps.items():
        if dest in table:
            table[temp] = table[dest]
    table = infer_types(instructions, table)
    # A `.param` slot no instruction types (the result of an indirect call): its
    # declaration's type, when it declares a scalar.
    declared = lowering.kernel_info.param_decls
    for instr in instructions:
        for name in (*instr.used_vars, *([instr.dest] if instr.dest else [])):
            type_, _, size = declared.get(name.split("+", 1)[0], ("", 0, 0))
            if name not in table and type_ and size == _type_bytes(type_):
                table[name] = type_
    return table


def _split_blocks(items: list, referenced: set[str]) -> list[ir.Block]:
    """Basic blocks: a referenced label starts a block, as does the instruction after a
    terminator. Labels nothing branches to (debug markers) do not split a block."""
    blocks: list[ir.Block] = []
    pending: list[tuple[str, ir.Loc, bool]] = []
    current: ir.Block | None = None
    counter = 0
    for item in items:
        if isinstance(item, tuple):
            _, name, loc, user = item
            if (name not in referenced and not pending and current is not None
                    and current.terminator is None):
                continue
            pending.append((name, loc, user))
            continue
        if pending or current is None or current.terminator is not None:
            if pending:
                keep = [p for p in pending if p[0] in referenced] or [pending[0]]
                for name, loc, user in keep[:-1]:
                    blocks.append(ir.Block(name, [], loc, user_label=user))
                name, loc, user = keep[-1]
                pending = []
            else:
                counter += 1
                name, loc, user = f"bb{counter}", item.loc, False
            current = ir.Block(name, [], loc, user_label=user)
            blocks.append(current)
        current.instructions.append(item)
    for name, loc, user in pending:
        if name in referenced:
            blocks.append(ir.Block(name, [], loc, user_label=user))
    return blocks


def _drop_undefined_old_values(instructions: list[ir.Instruction]) -> None:
    """A guarded definition of a register that has no other definition in the kernel does
    not read the register's old value (it would only be an undefined value)."""
    counts: dict[str, int] = {}
    for instr in instructions:
        if instr.dest is not None:
            counts[instr.dest] = counts.get(instr.dest, 0) + 1
    for instr in instructions:
        if instr.attrs.get("guarded_select") and counts.get(instr.dest) == 1:
            instr.args = instr.args[:2]


def infer_generic_spaces(instructions: list[ir.Instruction]) -> None:
    """Make a generic load/store/atomic a `.local` one when its address may point into
    thread-private memory (derived from `cvta.local` or from a `.local` symbol).

    Flow-insensitive: a register may point wherever any value assigned to it may point.
    Only `.local` is inferred: it is what makes a load a source of divergence."""
    local: set[str] = set()
    users: dict[str, list[ir.Instruction]] = {}
    for instr in instructions:
        if instr.kind != ir.ASSIGN or instr.dest is None:
            continue
        opcode = str(instr.attrs.get("opcode", ""))
        if opcode.startswith("cvta.local") or "local" in instr.attrs.get("symbol_spaces", ()):
            local.add(instr.dest)
        for name in instr.used_vars:
            users.setdefault(name, []).append(instr)
    work = list(local)
    while work:
        name = work.pop()
        for instr in users.get(name, ()):
            if instr.dest not in local:
                local.add(instr.dest)
                work.append(instr.dest)
    for instr in instructions:
        if instr.space != "generic" or instr.kind not in (ir.LOAD, ir.STORE, ir.ATOMIC):
            continue
        address = instr.args[0] if instr.args else None
        if ((isinstance(address, ir.Var) and address.name in local)
                or instr.attrs.get("symbol_space") == "local"):
            instr.space = "local"
            instr.attrs["generic"] = True


def _launch_directives(directives: list[str]) -> dict[str, tuple[int, ...]]:
    """`.reqntid` and `.maxntid` of a header (`.reqntid 32, 8, 1` → {"reqntid": (32, 8,
    1)}): the block shape a kernel requires or bounds (gpudiv.launch_shape)."""
    found: dict[str, tuple[int, ...]] = {}
    for directive in directives:
        name, _, values = directive.partition(" ")
        if name in (".reqntid", ".maxntid"):
            try:
                found[name[1:]] = tuple(_number(v) for v in values.split(", ") if v)
            except ValueError:
                continue
    return found


class _Reader:
    """Everything about one file: parse all chunks, then lower every `.entry`."""

    def __init__(self, text: str, path: str):
        self.text = text
        self.path = path
        self.program = ir.Program(path, "ptx", [])
        self.functions: dict[str, PFunction] = {}
        self.order: list[PFunction] = []
        self.symbols: dict[str, str] = {}
        self.symbol_details: dict[str, tuple] = {}  # (space, type, align, size, init)
        self.files: dict[int, str] = {}

    def parse(self, fast: bool = True) -> None:
        with _PARSE_LOCK:
            self._parse_chunks(parser(), fast_patterns() if fast else None)
        for message, offset in _value_warnings(self.text):
            line = self.text.count("\n", 0, offset) + 1
            column = offset - self.text.rfind("\n", 0, offset)
            self.program.diagnostics.append(ir.Diagnostic("warning", message, self.path,
                                                          line, column))

    def _parse_chunks(self, lark: Lark, fast: ptx_fast.Patterns | None) -> None:
        text = self.text
        line = 1
        previous = 0
        line_start = 0  # offset after the last newline before `previous`
        names: dict[str, tuple] = {}
        for start, end in _chunks(text):
            newlines = text.count("\n", previous, start)
            if newlines:  # incremental, so that a file of one long line stays linear
                line += newlines
                line_start = text.rfind("\n", previous, start) + 1
            previous = start
            column = start - line_start + 1
            _BUILDER.source = text[start:end]
            _BUILDER.line0, _BUILDER.column0 = line, column
            try:
                items = _parse_chunk(lark, fast, names)
            except UnexpectedInput as error:
                err_line, err_column = error.line, error.column
                if not isinstance(err_line, int) or err_line < 1:  # at the end of the chunk
                    err_line = _BUILDER.source.count("\n") + 1
                    err_column = len(_BUILDER.source) - _BUILDER.source.rfind("\n")
                err_column += column - 1 if err_line == 1 else 0
                err_line += line - 1
                self.program.diagnostics.append(ir.Diagnostic(
                    "error", _syntax_message(error), self.path, err_line, err_column))
                continue
            except LarkError as error:
                self.program.diagnostics.append(ir.Diagnostic(
                    "error", str(error).splitlines()[0], self.path, line, column))
                continue
            for item in items:
                self.collect(item)
            self.record_chunk(_BUILDER.source, items)

    def record_chunk(self, text: str, items: list) -> None:
        """Keep a chunk for printing: an `.entry` with a body is printed from its IR
        kernel, everything else (directives, module variables, device functions) as
        read (`program.attrs["module"]`: ("text", text) and ("entry", name) items)."""
        module = self.program.attrs.setdefault("module", [])
        entry = next((i for i in items if isinstance(i, PFunction) and i.kind == "entry"
                      and i.body is not None), None)
        if entry is None:
            module.append(("text", text))
            return
        header = _HEADER.search(text)
        if header is not None and header.start() > 0:
            module.append(("text", text[:header.start()]))
        module.append(("entry", entry.name))

    def collect(self, item) -> None:
        if isinstance(item, PFunction):
            known = self.functions.get(item.name)
            if known is not None and known.body is not None and item.body is not None:
                self.program.diagnostics.append(ir.Diagnostic(
                    "error", f"{item.kind} '{item.name}' already defined at line {known.line}",
                    self.path, item.line, item.column))
                return
            if known is None or item.body is not None:
                self.functions[item.name] = item
            if item.body is not None:
                self.order.append(item)
                self.collect_files(item.body)
        elif isinstance(item, PDecl):
            for name, _ in item.names:
                self.symbols[name] = item.space
                if name in item.details:
                    self.symbol_details[name] = (item.space, *item.details[name])
        elif isinstance(item, PFile):
            self.files[item.index] = item.path

    def collect_files(self, scope: PScope) -> None:
        for stmt in scope.stmts:
            if isinstance(stmt, PFile):
                self.files[stmt.index] = stmt.path
            elif isinstance(stmt, PScope):
                self.collect_files(stmt)

    def lower(self, parse_ms: float) -> None:
        self.program.attrs["files"] = dict(self.files)
        unit = _Unit(self.path, self.functions, self.symbols, self.files)
        entries = [fn for fn in self.order if fn.kind == "entry"]
        for fn in entries:
            start = time.perf_counter()
            kernel = self.lower_kernel(unit, fn)
            if kernel is not None:
                self.program.kernels.append(kernel)
                self.program.parse_ms[fn.name] = (
                    parse_ms / len(entries) + (time.perf_counter() - start) * 1000)

    def lower_kernel(self, unit: _Unit, fn: PFunction) -> ir.Kernel | None:
        info = unit.info(fn.name)
        lowering = _KernelLowering(unit, info, self.program.diagnostics)
        frame = _Frame(info)
        lowering.lower_body(frame)
        if lowering.failed:
            return None
        instructions = [i for i in lowering.items if isinstance(i, ir.Instruction)]
        _drop_undefined_old_values(instructions)
        infer_generic_spaces(instructions)
        blocks = _split_blocks(lowering.items, lowering.referenced) + lowering.exit_blocks
        loc = ir.Loc(fn.line, fn.column)
        if not blocks or not any(b.instructions for b in blocks):
            blocks.append(ir.Block("$end", [ir.Instruction(ir.STOP, loc, text="")], loc,
                                   user_label=False))
        used = {a.name for i in instructions for a in i.reads if isinstance(a, ir.Special)}
        specials = {name: klass for name, klass in sorted(lowering.specials.items())
                    if name in used or name not in lowering.symbol_names}
        kernel = ir.Kernel(fn.name, [p.name for p in fn.params], blocks, loc,
                           specials=specials)
        symbols = {name: detail for name, detail in self.symbol_details.items()}
        for body in lowering.bodies:
            symbols.update(body.symbol_details)
        kernel.attrs = {
            "reg_types": lowering.var_types,
            "params": tuple((p.name, p.type, p.size, p.align) for p in fn.params),
            "symbols": symbols,
        }
        kernel.registers = _register_table(lowering, kernel.instructions())
        kernel.attrs["ptx_source"] = _source_record(fn, info, lowering, kernel)
        kernel.attrs.update(_launch_directives(fn.directives))
        labels = {b.label for b in blocks}
        for instr in kernel.instructions():
            if instr.target is not None and instr.target not in labels:
                self.program.diagnostics.append(ir.Diagnostic(
                    "error", f"undefined label '{instr.target}' in kernel {fn.name}",
                    self.path, instr.loc.line, instr.loc.column))
                return None
        if lowering.unknown:
            names = ", ".join(sorted(lowering.unknown))
            self.warn(f"kernel {fn.name}: unknown opcodes treated as opaque (results "
                      f"divergent): {names}", loc)
        if lowering.bodiless:
            names = ", ".join(sorted(lowering.bodiless))
            self.warn(f"kernel {fn.name}: calls to functions without a body in this file are "
                      f"opaque (results divergent): {names}", loc)
        for note in dict.fromkeys(lowering.notes):
            self.warn(f"kernel {fn.name}: {note}", loc)
        return kernel

    def warn(self, message: str, loc: ir.Loc) -> None:
        self.program.diagnostics.append(ir.Diagnostic("warning", message, self.path,
                                                      loc.line, loc.column))


@contextmanager
def _gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a file is read: parsing allocates millions of
    small objects that reference counting frees, and collections triggered by the
    allocation count alone cost about a third of the time on large files."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


_DIRECTIVE = re.compile(r"\.(version|target|address_size)[ \t]+([^\n;/]*)")
_WIDE_LITERAL = re.compile(r"//[^\n]*|/\*.*?(?:\*/|\Z)|\"[^\"\n]*\"?"
                           r"|(?<![\w.$%])-?(?:0[xX][0-9a-fA-F]{17,}|\d{20,})[uU]?\b", re.S)
_LONG_DIGITS = re.compile(r"[0-9a-fA-F]{17}")
_KNOWN_TARGET = re.compile(r"(?:sm|compute)_(\d+)[af]?")


def _value_warnings(text: str) -> list[tuple[str, int]]:
    """(warning, offset) for directives no PTX toolchain emits (`.version 99.0`,
    `.target sm_999`, `.address_size 128`) and integer literals beyond 64 bits."""
    found = []
    for match in _DIRECTIVE.finditer(text):
        line_start = text.rfind("\n", 0, match.start()) + 1
        if text[line_start:match.start()].strip():
            continue  # not a directive at the start of its line
        kind, value = match[1], match[2].strip()
        if kind == "version":
            major = value.split(".", 1)[0]
            if not major.isdigit() or not 1 <= int(major) <= 9:
                found.append((f".version {value}: not a PTX ISA version (1.0 to 9.x); "
                              "ignored", match.start(2)))
        elif kind == "address_size" and value not in ("32", "64"):
            found.append((f".address_size {value}: addresses are 32 or 64 bits; ignored",
                          match.start(2)))
        elif kind == "target":
            for name in (t.strip() for t in value.split(",")):
                known = _KNOWN_TARGET.fullmatch(name)
                if name.startswith(("sm_", "compute_")) and (
                        known is None or not 10 <= int(known[1]) < 200):
                    found.append((f".target {name}: not a GPU architecture (sm_10 to "
                                  "sm_1xx); ignored", match.start(2) + value.find(name)))
    if _LONG_DIGITS.search(text) is None:  # one quick scan: the usual case
        return found
    for match in _WIDE_LITERAL.finditer(text):
        token = match.group()
        if token[:1] in "/\"":
            continue
        value = number(token)
        if not -(1 << 63) <= value < 1 << 64:
            found.append((f"integer literal {token} does not fit in 64 bits; it is taken "
                          "modulo 2^64", match.start()))
    return found


_NESTING = re.compile(r"//[^\n]*|/\*.*?(?:\*/|\Z)|\"[^\"\n]*\"?|[{}()\[\]\n]", re.S)


def _deepest_nesting(text: str) -> tuple[int, int, int]:
    """(depth, line, column) of the first place where brackets nest deepest."""
    depth = best = 0
    line, line_start, where = 1, 0, (1, 1)
    for match in _NESTING.finditer(text):
        token = match.group()
        if token == "\n" or len(token) > 1:
            newlines = token.count("\n")
            if newlines:
                line += newlines
                line_start = match.start() + token.rfind("\n") + 1
            continue
        if token in "{([":
            depth += 1
            if depth > best:
                best, where = depth, (line, match.start() - line_start + 1)
        else:
            depth = max(depth - 1, 0)
    return best, *where


def parse_ptx(text: str, path: str = "<string>", *, fast: bool = True) -> ir.Program:
    """Parse PTX text into a Program (one kernel per `.entry`); errors are collected as
    diagnostics, never raised. `fast=False` reads function bodies with Lark alone instead
    of the fast path (`ptx_fast`); both give the same Program."""
    return parse_ptx_timed(text, path, fast=fast)[0]


def parse_ptx_timed(text: str, path: str = "<string>", *,
                    fast: bool = True) -> tuple[ir.Program, dict[str, float]]:
    """`parse_ptx` and the milliseconds of its two stages: `parse` (chunks to parsed
    forms) and `lower` (parsed forms to IR kernels)."""
    reader = _Reader(text, path)
    timings = {"parse": 0.0, "lower": 0.0}
    start = time.perf_counter()
    try:
        with _gc_paused():
            reader.parse(fast)
            parsed = time.perf_counter()
            timings["parse"] = (parsed - start) * 1000
            reader.lower(timings["parse"])
            timings["lower"] = (time.perf_counter() - parsed) * 1000
    except RecursionError:
        depth, line, column = _deepest_nesting(text)
        reader.program.diagnostics.append(ir.Diagnostic(
            "error", f"input nested too deeply ({depth} levels of braces, brackets and "
            "parentheses here)", path, line, column))
        return reader.program, timings
    if "gpudiv:" in text:
        lines = text.splitlines()
        for kernel in reader.program.kernels:
            read_marks(kernel, lines, path, reader.program.diagnostics)
    reader.program.diagnostics.sort(key=lambda d: (d.line, d.column))
    if not reader.program.kernels and not reader.program.diagnostics:
        reader.program.diagnostics.append(ir.Diagnostic(
            "warning", "no .entry kernel in this file", path, 1, 1))
    return reader.program, timings
