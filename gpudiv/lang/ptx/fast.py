"""Fast path of the PTX parser: whole chunks (module directives, declarations, function
headers and bodies) read statement by statement with regular expressions, building exactly
the parsed forms (`ptx_forms`) that the callbacks of grammar/ptx.lark build.

Lark's pure-Python LALR parser costs several microseconds per token, and a PTX line has
four to six tokens. Bodies are statement-oriented — `;`-terminated instructions, labels,
`.loc` lines, declarations, nested `{ }` scopes — so a few regex matches per statement read
them several times faster. The token patterns are the grammar's own terminals (`TERMINALS`,
checked against the Lark parser by tests/lang/ptx/test_fast.py, so that reading a typical
file needs neither Lark nor its parser: process start-up); the statement shapes mirror the
grammar's rules, and every token is matched in an atomic group, as Lark's lexer commits to
a token once it has matched it. Each regex is compiled when first used.

Anything else — a directive the fast path does not know (`.branchtargets`, a `.loc`
outside a body, …), an initializer, `.attribute`, a syntax error — makes
`BodyReader.chunk` return None, and the caller parses the chunk with Lark: the grammar
stays the definition of the language and every error message comes from it.
tests/lang/ptx/test_parse.py and test_fast.py check that both paths build identical results
on every committed sample, on generated PTX and on mutated or random statements and module
items.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache

from gpudiv.lang.ptx.forms import (
    COMMENT,
    PDecl,
    PFile,
    PFunction,
    PInstr,
    PLabel,
    PLoc,
    PParam,
    PScope,
    PTable,
    decl_layout,
    float_bits,
    number,
    perf_text,
)
from gpudiv.lang.regex_cache import RegexCache

# Whitespace and comments between tokens (the grammar's ignored _GAP), possessive so that a
# failing match after it never backtracks into it.
GAP = r"(?:\s+|//[^\n]*|/\*[\s\S]*?\*/)*+"


# The regexes of the grammar terminals the fast path uses, exactly as Lark gives them
# (`Lark.get_terminal(NAME).pattern.to_regexp()`), written here so that the fast path needs
# neither Lark nor its parser: tests/lang/ptx/test_fast.py checks them against the grammar.
TERMINALS = {
    "GUARD": r"@!?[%$]?[A-Za-z_$][A-Za-z0-9_$]*",
    "IDENT": r"[A-Za-z_$][A-Za-z0-9_$]*(\.[A-Za-z0-9_$:]+)*",
    "REG": r"%[A-Za-z0-9_$]+(\.[A-Za-z0-9_]+)?",
    "INT": r"-?(0[xX][0-9a-fA-F]+|0[bB][01]+|[0-9]+)[uU]?",
    "FLOAT": r"-?0[fF][0-9a-fA-F]{8}|-?0[dD][0-9a-fA-F]{16}|-?[0-9]+\.[0-9]*([eE][+-]?[0-9]+)?"
             r"|-?[0-9]+[eE][+-]?[0-9]+",
    "DOTWORD": r"\.[A-Za-z_][A-Za-z0-9_$:.]*",
    "STRING": r'"(\\.|[^"\\' + "\n" + r'])*"',
    "SPACE": r"(?:\.samplerref|\.surfref|\.shared|\.global|\.texref|\.local|\.const|\.param"
             r"|\.sreg|\.reg|\.tex)",
    "LINKAGE": r"(?:\.visible|\.extern|\.common|\.weak)",
    "FUNC_KIND": r"(?:\.entry|\.func)",
    "PERF_DIRECTIVE": r"(?:\.reqnctapercluster|\.blocksareclusters|\.explicitcluster"
                      r"|\.maxclusterrank|\.minnctapersm|\.maxnctapersm|\.noreturn|\.maxntid"
                      r"|\.reqntid|\.maxnreg)",
    "VERSION_NUMBER": r"[0-9]+\.[0-9]+",
    "SECTION_BODY": r'\{([^}"\/]++|\/(?![\/*])|\/\/[^' + "\n" + r']*|\/\*[\s\S]*?\*\/'
                    r'|"(\\.|[^"\\' + "\n" + r'])*")*\}',
}


class _Fallback(Exception):
    """The text at this point is not one of the statement shapes the fast path knows."""


class Patterns:
    """The regexes of the fast path (built from the grammar's terminals), each compiled
    when first used (a file needs some of them), through the cache of compiled regexes
    on disk (`gpudiv.lang.regex_cache`): compiling them costs more than reading a small
    file."""

    statement: re.Pattern
    simple_operand: re.Pattern
    atom: re.Pattern
    sum_tail: re.Pattern
    pair_bar: re.Pattern
    separator: re.Pattern
    list_close: re.Pattern
    loc_attr: re.Pattern
    pragma: re.Pattern
    space: re.Pattern
    decl_mod: re.Pattern
    decl_int: re.Pattern
    decl_name: re.Pattern
    decl_range: re.Pattern
    decl_dim: re.Pattern
    decl_sep: re.Pattern
    init_item: re.Pattern
    init_sep: re.Pattern
    linkage: re.Pattern
    func_kind: re.Pattern
    ident: re.Pattern
    paren_open: re.Pattern
    paren_close: re.Pattern
    param_sep: re.Pattern
    perf: re.Pattern
    brace_open: re.Pattern
    gap: re.Pattern
    module_directive: re.Pattern
    item_end: re.Pattern

    def __init__(self, sources: dict[str, str]):
        self._sources = sources
        self._cache = RegexCache("ptx-fast", sources)

    def __getattr__(self, name: str) -> re.Pattern:
        """Compile the pattern `name` (called only while it is not yet an attribute)."""
        if name not in self.__dict__.get("_sources", ()):
            raise AttributeError(name)
        pattern = self._cache.compile(name)
        setattr(self, name, pattern)
        return pattern


def build_patterns(terminal: Callable[[str], str]) -> Patterns:
    """The fast path's regexes; `terminal(NAME)` is the regex of a grammar terminal."""
    tok = {name: f"(?>{terminal(name)})" for name in
           ("GUARD", "IDENT", "REG", "INT", "FLOAT", "DOTWORD", "STRING", "SPACE", "LINKAGE",
            "FUNC_KIND", "PERF_DIRECTIVE", "VERSION_NUMBER", "SECTION_BODY")}
    reg, ident, int_ = tok["REG"], tok["IDENT"], tok["INT"]
    # FLOAT before INT: the grammar gives FLOAT the higher priority.
    number_ = f"(?P<f>{tok['FLOAT']})|(?P<n>{int_})"
    three_ints = f"(?P<a>{int_}){GAP}(?P<b>{int_}){GAP}(?P<c>{int_})"
    return Patterns({
        # One match per statement: an instruction head (with `label:` and an empty
        # operand list folded in), a `.loc` line, or the first character of anything else.
        "statement":
            f"{GAP}(?:(?P<instr>(?:(?P<guard>{tok['GUARD']}){GAP})?(?P<op>{ident})"
            f"(?:(?P<colon>{GAP}:)|(?P<semi>{GAP};))?)"
            f"|\\.loc(?=\\s){GAP}{three_ints}(?P<more>(?={GAP},))?"
            f"|(?P<char>[\\s\\S]))",
        # The commonest operands — a register, name, number or `[base]`/`[base±INT]` —
        # with the ',' or ';' after them; the last named group says which.
        "simple_operand":
            f"{GAP}(?:(?P<r>{reg})|(?P<i>{ident})|{number_}"
            f"|\\[{GAP}(?:(?P<ar>{reg})|(?P<ai>{ident}))"
            f"(?:{GAP}(?P<sign>[+-]){GAP}(?P<offset>{int_}))?{GAP}\\]){GAP}[,;]",
        "atom": f"{GAP}(?:(?P<r>{reg})|(?P<i>{ident})|{number_}|(?P<o>[{{\\[(!]))",
        "sum_tail": f"{GAP}(?P<sign>[+-]){GAP}(?P<offset>{int_})",
        "pair_bar": f"{GAP}\\|",
        "separator": f"{GAP}([,;])",
        "list_close": f"{GAP}([,}}\\])])",
        "loc_attr": f"{GAP},{GAP}{ident}{GAP}(?:{ident}|{three_ints})",
        "pragma": f"\\.pragma(?=\\s){GAP}{tok['STRING']}(?:{GAP},{GAP}{tok['STRING']})*+{GAP};",
        "space": f"{GAP}({tok['SPACE']})(?=\\s)",
        "decl_mod": f"{GAP}({tok['DOTWORD']})",
        "decl_int": f"{GAP}({int_})",
        "decl_name": f"{GAP}({reg}|{ident})",
        "decl_range": f"{GAP}<{GAP}({int_}){GAP}>",
        "decl_dim": f"{GAP}\\[{GAP}({int_})?{GAP}\\]",
        "decl_sep": f"{GAP}([,;=])",
        # Initializers (grammar rule `init`): `{`, a number, or `name` / `name+INT`
        # followed by what may end an item (`name(…)` and `name = …` go to Lark).
        "init_item": f"{GAP}(?:(?P<open>\\{{)|{number_}"
                     f"|(?P<i>{ident})(?:{GAP}\\+{GAP}(?P<offset>{int_}))?(?={GAP}[,;}}]))",
        "init_sep": f"{GAP}([,}}])",
        # Function headers: keywords must end where a name character cannot follow.
        "linkage": f"{GAP}({tok['LINKAGE']})(?=\\s)",
        "func_kind": f"{GAP}({tok['FUNC_KIND']})(?![A-Za-z0-9_$.:])",
        "ident": f"{GAP}({ident})",
        "paren_open": f"{GAP}\\(",
        "paren_close": f"{GAP}\\)",
        "param_sep": f"{GAP}([,)])",
        "perf": f"{GAP}{tok['PERF_DIRECTIVE']}(?![A-Za-z0-9_$.:])"
                f"(?:{GAP}{int_}(?:{GAP},{GAP}{int_})*+)?",
        "brace_open": f"{GAP}\\{{",
        "gap": GAP,
        # Module directives (grammar rules `version`, `target`, `address_size`, `file_dir`,
        # `section`, `pragma`); only `.file` gives a parsed form (groups `index`, `path`).
        "module_directive":
            f"\\.version(?=\\s){GAP}{tok['VERSION_NUMBER']}"
            f"|\\.target(?=\\s){GAP}{ident}(?:{GAP},{GAP}{ident})*+"
            f"|\\.address_size(?=\\s){GAP}{int_}"
            f"|\\.file(?=\\s){GAP}(?:(?P<index>{int_}){GAP})?(?P<path>{tok['STRING']})"
            f"(?:{GAP},{GAP}{int_})*+"
            f"|\\.section(?=\\s){GAP}{tok['DOTWORD']}{GAP}{tok['SECTION_BODY']}"
            f"|\\.pragma(?=\\s){GAP}{tok['STRING']}(?:{GAP},{GAP}{tok['STRING']})*+{GAP};",
        # Where a module item may end without `;` or `}`: the token before cannot go on.
        "item_end": r"(?=\s|//|/\*|;|\Z)",
    })


@cache
def patterns() -> Patterns:
    """The fast path's regexes for grammar/ptx.lark (`TERMINALS`; built once)."""
    return build_patterns(TERMINALS.__getitem__)


_CLOSERS = {"{": "}", "[": "]", "(": ")"}
_LIST_TAGS = {"{": "v", "[": "a", "(": "p"}


class BodyReader:
    """Reads the body of the function in one chunk of a PTX file.

    `line0`/`column0` are the file position of the chunk's first character, so positions
    are those of the whole file (as the Lark callbacks compute them).
    """

    def __init__(self, patterns: Patterns, source: str, line0: int, column0: int,
                 names: dict[str, tuple] | None = None):
        self.p = patterns
        self.source = source
        self.line0 = line0
        self.column0 = column0
        # One operand tuple per distinct register or name (pass one dict for a whole
        # file): a large file repeats a few thousand names millions of times.
        self.names = {} if names is None else names
        # Line bookkeeping, advanced incrementally (positions are asked in order).
        self.mark = 0
        self.line = 1
        self.line_start = 0
        self.body_failed = False  # `chunk` gave up inside a function body

    def position(self, offset: int) -> tuple[int, int]:
        """File (line, column) of a chunk offset; offsets must not decrease."""
        source = self.source
        if offset > self.mark:
            newlines = source.count("\n", self.mark, offset)
            if newlines:
                self.line += newlines
                self.line_start = source.rfind("\n", self.mark, offset) + 1
            self.mark = offset
        column = offset - self.line_start + 1
        if self.line == 1:
            column += self.column0 - 1
        return self.line + self.line0 - 1, column

    def read(self, open_brace: int) -> tuple[int, PScope] | None:
        """(offset of the closing brace, body) of the body opened at `open_brace`, or None
        when some statement is not one the fast path knows."""
        try:
            return self._statements(open_brace + 1)
        except (_Fallback, RecursionError):  # operands nested too deeply: Lark's problem
            return None

    def _statements(self, pos: int) -> tuple[int, PScope]:
        """Statements up to the brace that closes the body; nested scopes on a stack."""
        source = self.source
        statement = self.p.statement.match
        stack: list[list] = [[]]
        while True:
            match = statement(source, pos)
            if match is None:  # the end of the chunk inside the body
                raise _Fallback
            if match.group("op") is not None:
                pos = self._instruction(match, stack[-1])
                continue
            if match.group("a") is not None:
                pos = self._loc(match, stack[-1])
                continue
            char = match.group("char")
            pos = match.end()
            if char == "}":
                if len(stack) == 1:
                    return pos - 1, PScope(stack[0])
                inner = stack.pop()
                stack[-1].append(PScope(inner))
            elif char == "{":
                stack.append([])
            elif char == ".":
                pos = self._directive(pos - 1, stack[-1])
            elif char != ";":  # `;` alone is an empty statement
                raise _Fallback

    # -- instructions and labels ---------------------------------------------------------
    def _instruction(self, match: re.Match, out: list) -> int:
        """`[@guard] opcode operands ;` or `label:` (head matched); the offset after it."""
        guard, opcode, colon, semi = match.group("guard", "op", "colon", "semi")
        start = match.start("instr")
        if colon is not None:
            if guard is not None:
                raise _Fallback
            out.append(PLabel(opcode, *self.position(start)))
            return match.end()
        if semi is not None:
            operands, end = [], match.end()
        else:
            operands, end = self._operands(match.end())
        text = self.source[start:end]
        if "/" in text:
            text = COMMENT.sub(" ", text)
        negated = False
        if guard is not None:
            guard = guard[1:]
            if guard.startswith("!"):
                negated, guard = True, guard[1:]
        out.append(PInstr(guard, negated, opcode, operands, *self.position(start),
                          " ".join(text.split())))
        return end

    def _operands(self, pos: int) -> tuple[list, int]:
        """The (non-empty) operand list after an opcode and the offset after its `;`."""
        source = self.source
        simple = self.p.simple_operand.match
        operands: list = []
        while True:
            match = simple(source, pos)
            if match is not None:
                kind = match.lastgroup
                if kind == "r" or kind == "i":  # the commonest: inline
                    text = match.group(kind)
                    operand = self.names.get(text)
                    if operand is None:
                        operand = self.names[text] = (kind, text)
                    operands.append(operand)
                else:
                    operands.append(_simple_operand(match))
                pos = match.end()
            else:
                operand, pos = self._operand(pos)
                operands.append(operand)
                sep = self.p.separator.match(source, pos)
                if sep is None:
                    raise _Fallback
                pos = sep.end()
            if source[pos - 1] == ";":
                return operands, pos

    def _operand(self, pos: int) -> tuple[tuple, int]:
        """`atom` or `atom | atom` (grammar rule `operand`)."""
        first, pos = self._atom(pos)
        bar = self.p.pair_bar.match(self.source, pos)
        if bar is None:
            return first, pos
        second, pos = self._atom(bar.end())
        return ("|", first, second), pos

    def _atom(self, pos: int) -> tuple[tuple, int]:
        """A register, name, number, `base±INT`, `{…}`, `[…]`, `(…)` or `!atom`."""
        match = self.p.atom.match(self.source, pos)
        if match is None:
            raise _Fallback
        kind = match.lastgroup
        end = match.end()
        if kind == "o":
            opener = match.group("o")
            if opener == "!":
                inner, end = self._atom(end)
                return ("!", inner), end
            return self._list(opener, end)
        if kind in ("f", "n"):
            return _simple_value(match), end
        base = (kind, match.group(kind))  # ("r", "%r1") or ("i", "name")
        tail = self.p.sum_tail.match(self.source, end)
        if tail is None:
            return base, end
        value = number(tail.group("offset"))
        return ("s", base, -value if tail.group("sign") == "-" else value), tail.end()

    def _list(self, opener: str, pos: int) -> tuple[tuple, int]:
        """A `{…}` vector, `[…]` address (never empty) or `(…)` list after its opener."""
        source = self.source
        closer = _CLOSERS[opener]
        operands: list = []
        close = self.p.list_close.match(source, pos)
        if close is not None and close.group(1) == closer and opener != "[":
            return (_LIST_TAGS[opener], operands), close.end()
        while True:
            operand, pos = self._operand(pos)
            operands.append(operand)
            close = self.p.list_close.match(source, pos)
            if close is None:
                raise _Fallback
            pos = close.end()
            if close.group(1) == closer:
                return (_LIST_TAGS[opener], operands), pos
            if close.group(1) != ",":
                raise _Fallback

    # -- directives ------------------------------------------------------------------------
    def _directive(self, pos: int, out: list) -> int:
        """`.pragma`, `.callprototype` or a declaration; any other directive falls back to
        Lark."""
        source = self.source
        if source.startswith(".pragma", pos):
            match = self.p.pragma.match(source, pos)
            if match is None:
                raise _Fallback
            return match.end()
        if source.startswith(".callprototype", pos):
            return self._call_prototype(pos + len(".callprototype"), out)
        return self._declaration(pos, out)

    def _call_prototype(self, pos: int, out: list) -> int:
        """`(rets)? name (params) ;` after `.callprototype` (grammar rule `call_prototype`;
        its callback places the table at the name)."""
        source = self.source
        p = self.p
        if source[pos:pos + 1] not in ("(", " ", "\t", "\n", "\r"):
            raise _Fallback  # a longer word than `.callprototype`
        rets: list[PParam] = []
        if p.paren_open.match(source, pos) is not None:
            rets, pos = self._params(pos)
        name = p.ident.match(source, pos)
        if name is None or p.paren_open.match(source, name.end()) is None:
            raise _Fallback
        params, pos = self._params(name.end())
        semi = p.separator.match(source, pos)
        if semi is None or semi.group(1) != ";":
            raise _Fallback
        out.append(PTable("callprototype", [], *self.position(name.start(1)), rets, params))
        return semi.end()

    def _loc(self, match: re.Match, out: list) -> int:
        """`.loc F L C` (matched) with `, function_name X` / `, inlined_at F L C` parts."""
        file, line, column = (number(text) for text in match.group("a", "b", "c"))
        inlined = None
        pos = match.end()
        if match.group("more") is not None:
            while (attr := self.p.loc_attr.match(self.source, pos)) is not None:
                if attr.group("a") is not None and inlined is None:
                    inlined = tuple(number(text) for text in attr.group("a", "b", "c"))
                pos = attr.end()
        out.append(PLoc(file, line, column, inlined))
        return pos

    def _declaration(self, pos: int, out: list) -> int:
        """`SPACE mods name[shape] (= init)?, … ;` (grammar rule `var_decl`)."""
        space, mods, end = self._space_and_mods(pos)
        names: list[tuple[str, str | None]] = []
        inits: list[tuple] = []
        while True:
            name, shape, end = self._declared_name(end)
            names.append((name, shape))
            sep = self.p.decl_sep.match(self.source, end)
            if sep is None:
                raise _Fallback
            init: list[tuple] = []
            if sep.group(1) == "=":
                end = self._initializer(sep.end(), init)
                sep = self.p.decl_sep.match(self.source, end)
                if sep is None or sep.group(1) == "=":
                    raise _Fallback
            inits.append(tuple(init))
            end = sep.end()
            if sep.group(1) == ";":
                break
        details = {}
        for (name, shape), init in zip(names, inits, strict=True):
            type_, align, size = decl_layout(mods, shape)
            details[name] = (type_, align, size, init)
        out.append(PDecl(space[1:], names, *self.position(pos), details))
        return end

    def _initializer(self, pos: int, items: list[tuple]) -> int:
        """One `init` at `pos`, its items appended flat as the grammar's callback gives
        them: ("n", int), ("f", text), ("sym", name, offset); the offset after it."""
        item = self.p.init_item.match(self.source, pos)
        if item is None:
            raise _Fallback
        if item.group("open") is None:
            if item.group("f") is not None:
                items.append(("f", item.group("f")))
            elif item.group("n") is not None:
                items.append(("n", number(item.group("n"))))
            else:
                offset = item.group("offset")
                items.append(("sym", item.group("i"), number(offset) if offset else 0))
            return item.end()
        end = item.end()
        close = self.p.init_sep.match(self.source, end)
        if close is not None and close.group(1) == "}":
            return close.end()
        while True:
            end = self._initializer(end, items)
            sep = self.p.init_sep.match(self.source, end)
            if sep is None:
                raise _Fallback
            end = sep.end()
            if sep.group(1) == "}":
                return end

    def _space_and_mods(self, pos: int) -> tuple[str, list[tuple], int]:
        """A state space and its modifiers (`.reg .b32`, `.shared .align 4 .b8`) as the
        grammar's `var_mod` callbacks give them, and the offset after them."""
        source = self.source
        p = self.p
        space = p.space.match(source, pos)
        if space is None:
            raise _Fallback
        mods: list[tuple] = []
        end = space.end()
        while (mod := p.decl_mod.match(source, end)) is not None:
            word = mod.group(1)
            end = mod.end()
            if word == ".align":
                value = p.decl_int.match(source, end)
                if value is None:
                    raise _Fallback
                mods.append(("align", number(value.group(1))))
                end = value.end()
            elif word == ".attribute":
                raise _Fallback
            else:
                mods.append(("mod", word))
        return space.group(1), mods, end

    def _declared_name(self, pos: int) -> tuple[str, str | None, int]:
        """A declared name with its shape (grammar rule `var_name`)."""
        name = self.p.decl_name.match(self.source, pos)
        if name is None:
            raise _Fallback
        shape, end = self._shape(name.end())
        return name.group(1), shape, end

    def _shape(self, pos: int) -> tuple[str | None, int]:
        """`<N>` (a register range) or `[N][M]…` after a declared name, as the grammar's
        callbacks spell it (an empty `[]` adds no dimension text)."""
        source = self.source
        reg_range = self.p.decl_range.match(source, pos)
        if reg_range is not None:
            return f"<{reg_range.group(1)}>", reg_range.end()
        dims: list[str] = []
        seen = False
        while (dim := self.p.decl_dim.match(source, pos)) is not None:
            seen = True
            if dim.group(1) is not None:
                dims.append(dim.group(1))
            pos = dim.end()
        return ("[" + "][".join(dims) + "]" if seen else None), pos

    # -- whole chunks ------------------------------------------------------------------
    def chunk(self) -> list | None:
        """The parsed forms of the whole chunk, as Lark's `start` rule gives them (module
        directives, declarations without initializers, function prototypes and functions
        with their bodies), or None when anything in it is not a shape the fast path
        knows; `body_failed` then says whether that was inside a function body."""
        try:
            return self._items()
        except (_Fallback, RecursionError):
            return None

    def _items(self) -> list:
        """`chunk` (raises `_Fallback`)."""
        source = self.source
        p = self.p
        end = len(source)
        items: list = []
        pos = p.gap.match(source, 0).end()
        while pos < end:
            char = source[pos]
            if char == ";":  # an empty item
                pos = p.gap.match(source, pos + 1).end()
                continue
            if char != ".":
                raise _Fallback
            directive = p.module_directive.match(source, pos)
            if directive is not None:
                if directive.group("path") is not None:
                    index = directive.group("index")
                    items.append(PFile(number(index) if index is not None else 0,
                                       directive.group("path")[1:-1]))
                pos = directive.end()
            else:
                pos = self._module_item(pos, items)
            if source[pos - 1] not in ";}" and p.item_end.match(source, pos) is None:
                raise _Fallback  # Lark may cut the tokens here otherwise
            pos = p.gap.match(source, pos).end()
        return items

    def _module_item(self, pos: int, out: list) -> int:
        """`linkage* var_decl` or `linkage* function` (a prototype ending in `;`, or with
        its body); the offset after it."""
        source = self.source
        p = self.p
        linkage: list[str] = []
        while (word := p.linkage.match(source, pos)) is not None:
            linkage.append(word.group(1))
            pos = word.end()
        pos = p.gap.match(source, pos).end()
        head = self._function_head(pos, linkage)
        if head is None:
            return self._declaration(pos, out)
        function, pos = head
        semi = p.separator.match(source, pos)
        if semi is not None and semi.group(1) == ";":
            out.append(function)
            return semi.end()
        opening = p.brace_open.match(source, pos)
        if opening is None:
            raise _Fallback
        try:
            close, function.body = self._statements(opening.end())
        except _Fallback:
            self.body_failed = True
            raise
        out.append(function)
        return close + 1

    # -- function headers ----------------------------------------------------------------
    def header(self, brace: int) -> PFunction | None:
        """The function of a chunk that holds nothing but `linkage* .entry/.func
        (rets)? name (params)? perf*` before the body's brace (its body still None), or None
        when anything else is there (a `.version` line, a `.pragma`): Lark reads that."""
        try:
            return self._header(brace)
        except (_Fallback, RecursionError):
            return None

    def _header(self, brace: int) -> PFunction | None:
        """`header` (raises `_Fallback` inside a parameter list it does not know)."""
        source = self.source
        p = self.p
        linkage: list[str] = []
        pos = 0
        while (word := p.linkage.match(source, pos)) is not None:
            linkage.append(word.group(1))
            pos = word.end()
        head = self._function_head(pos, linkage)
        if head is None:
            return None
        function, pos = head
        opening = p.brace_open.match(source, pos)
        if opening is None or opening.end() != brace + 1:
            return None
        return function

    def _function_head(self, pos: int, linkage: list[str]) -> tuple[PFunction, int] | None:
        """`.entry/.func (rets)? name (params)? perf*` at `pos` (after the linkages): the
        function (body None) and the offset after it, or None when no `.entry`/`.func`
        with a name is there."""
        source = self.source
        p = self.p
        kind = p.func_kind.match(source, pos)
        if kind is None:
            return None
        line, column = self.position(kind.start(1))
        rets: list[PParam] = []
        pos = kind.end()
        if p.paren_open.match(source, pos) is not None:
            rets, pos = self._params(pos)
        name = p.ident.match(source, pos)
        if name is None:
            return None
        params: list[PParam] = []
        pos = name.end()
        if p.paren_open.match(source, pos) is not None:
            params, pos = self._params(pos)
        directives: list[str] = []
        while (perf := p.perf.match(source, pos)) is not None:
            directives.append(perf_text(perf.group(0)))
            pos = perf.end()
        return PFunction(kind.group(1)[1:], name.group(1), linkage, rets, params, None,
                         line, column, directives), pos

    def _params(self, pos: int) -> tuple[list[PParam], int]:
        """A parenthesised parameter list (grammar rules `params`/`ret_params`)."""
        source = self.source
        p = self.p
        pos = p.paren_open.match(source, pos).end()
        close = p.paren_close.match(source, pos)
        if close is not None:
            return [], close.end()
        params: list[PParam] = []
        while True:
            space, mods, end = self._space_and_mods(pos)
            name, shape, end = self._declared_name(end)
            type_, align, size = decl_layout(mods, shape)
            params.append(PParam(space, name, type_, size, align))
            sep = p.param_sep.match(source, end)
            if sep is None:
                raise _Fallback
            pos = sep.end()
            if sep.group(1) == ")":
                return params, pos

    def only_gap_after(self, offset: int) -> bool:
        """Whether nothing but whitespace and comments follows `offset`."""
        return self.p.gap.match(self.source, offset).end() == len(self.source)


def _simple_value(match: re.Match) -> tuple:
    """The operand tuple of a register, name or number (groups r, i, f, n)."""
    kind = match.lastgroup
    text = match.group(kind)
    if kind == "n":
        return ("n", number(text))
    if kind == "f":
        return ("n", float_bits(text), text)
    return (kind, text)


def _simple_operand(match: re.Match) -> tuple:
    """The operand tuple of a `simple_operand` match: a register, name or number, or an
    address `[base]` / `[base±INT]` (the last named group that matched says which)."""
    kind = match.lastgroup
    if kind in ("ar", "ai"):
        return ("a", [(kind[1], match.group(kind))])
    if kind == "offset":
        base = match.group("ar")
        base_op = ("r", base) if base is not None else ("i", match.group("ai"))
        value = number(match.group("offset"))
        return ("a", [("s", base_op, -value if match.group("sign") == "-" else value)])
    return _simple_value(match)


def find_body(source: str) -> int | None:
    """Offset of the `{` that opens the body of a function chunk, or None when the chunk
    is not plainly one function (then Lark reads it): the text before the brace must name
    `.entry`/`.func` and hold no string or block comment, and no line comment may hide the
    brace."""
    brace = source.find("{")
    if brace < 0:
        return None
    header = source[:brace]
    if '"' in header or "/*" in header or not re.search(_FUNC_KIND, header):
        return None
    if "//" in source[header.rfind("\n") + 1:brace]:
        return None
    return brace


_FUNC_KIND = r"\.(?:entry|func)\b"  # compiled by `re` when first needed (rarely now)
