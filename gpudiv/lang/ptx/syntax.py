"""The LALR parser of PTX and its callbacks (`grammar/ptx.lark`): tokens become the plain
parsed forms of `ptx_forms` while the parser runs (no parse tree is built). Imported only
for the chunks the fast path (`ptx_fast`) does not read by itself; a function body it reads
skips the parser even then. Syntax errors become one readable message."""

from __future__ import annotations

import threading
from functools import cache

from lark import Lark, Token
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from gpudiv.lang.grammars import lalr_parser
from gpudiv.lang.ptx import fast as ptx_fast
from gpudiv.lang.ptx.forms import COMMENT as _COMMENT
from gpudiv.lang.ptx.forms import (
    PDecl,
    PFile,
    PFunction,
    PInstr,
    PLabel,
    PLoc,
    PParam,
    PScope,
    PTable,
)
from gpudiv.lang.ptx.forms import decl_layout as _decl_layout
from gpudiv.lang.ptx.forms import float_bits as _float_bits
from gpudiv.lang.ptx.forms import number as _number
from gpudiv.lang.ptx.forms import perf_text as _perf_text


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
        lists = {c[0]: c[1] for c in children if isinstance(c, tuple)}
        return PTable("callprototype", [], *self._pos(token), lists.get("rets", []),
                      lists.get("params", []))

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
