"""μ-SIMD front end: Lark grammar `grammar/musimd.lark` → IR (`gpudiv.ir`).

Each kernel is parsed on its own so that a syntax error in one kernel does not hide the
others; instructions are then split into basic blocks and labels are resolved.
"""

from __future__ import annotations

import re
import time
from functools import cache

from lark import Lark, Token, Transformer
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from gpudiv import ir
from gpudiv.lang.grammars import lalr_parser
from gpudiv.lang.marks import read_marks

# Special registers of μ-SIMD and whether they differ between the lanes of a warp.
SPECIALS = {"tid": "divergent", "laneid": "divergent", "warpid": "uniform", "ntid": "uniform"}
# Words that cannot name a variable or parameter (README, "μ-SIMD syntax").
RESERVED = frozenset({"kernel", "bz", "bnz", "jump", "sync", "barrier", "stop", "shared",
                      "local", "atominc", "atomadd", "min", "max", *SPECIALS})
_KERNEL_HEADER = re.compile(r"\s*kernel[ \t]+[A-Za-z_]")
_ASSIGNED = re.compile(r"\s*(?:[A-Za-z_][A-Za-z0-9_.]*\s*:)?\s*([A-Za-z_][A-Za-z0-9_.]*)\s*=(?!=)")


@cache
def parser() -> Lark:
    """The LALR parser for μ-SIMD (built once), building IR while it parses."""
    # The transformer runs inside the parser: no parse tree is built (several times faster).
    return lalr_parser("musimd.lark", transformer=_ToIR())


def _loc(token: Token) -> ir.Loc:
    return ir.Loc(token.line or 0, token.column or 1)


class _ToIR(Transformer):
    """Builds (name, params, [(label, instruction)]) per kernel; locations from tokens."""

    def name(self, children):
        token: Token = children[0]
        if token.value in SPECIALS:
            return ir.Special(token.value)
        return ir.Var(token.value)

    def integer(self, children):
        return ir.Const(int(children[0]))

    def copy(self, children):
        return dict(kind=ir.ASSIGN, operator="copy", args=(children[0],))

    def binary(self, children):
        left, op, right = children
        return dict(kind=ir.ASSIGN, operator=str(op), args=(left, right))

    def unary(self, children):
        op, operand = children
        return dict(kind=ir.ASSIGN, operator="neg" if op == "-" else str(op), args=(operand,))

    def load(self, children):
        space, address = children
        return dict(kind=ir.LOAD, space=str(space), args=(address,))

    def atominc(self, children):
        return dict(kind=ir.ATOMIC, space="shared", operator="inc", args=(children[0],))

    def atomadd(self, children):
        return dict(kind=ir.ATOMIC, space="shared", operator="add", args=tuple(children))

    def assign(self, children):
        dest, rhs = children
        return ir.Instruction(dest=str(dest), loc=_loc(dest), **rhs)

    def store(self, children):
        space, address, value = children
        return ir.Instruction(ir.STORE, _loc(space), space=str(space), args=(address, value))

    def branch(self, children):
        op, cond, label = children
        return ir.Instruction(ir.BRANCH, _loc(op), operator=str(op), args=(cond,),
                              target=str(label))

    def jump(self, children):
        return ir.Instruction(ir.JUMP, _loc(children[0]), target=str(children[1]))

    def sync(self, children):
        return ir.Instruction(ir.SYNC, _loc(children[0]))

    def barrier(self, children):
        return ir.Instruction(ir.BARRIER, _loc(children[0]))

    def stop(self, children):
        return ir.Instruction(ir.STOP, _loc(children[0]))

    def label_def(self, children):
        return ("label", str(children[0]), _loc(children[0]))

    def line(self, children):
        return children

    def params(self, children):
        return list(children)  # tokens: their places are needed to report reserved words

    def kernel(self, children):
        keyword, name, params, *lines = children
        return (str(name), params or [], _loc(keyword), lines)

    def start(self, children):
        return children


def _chunks(text: str) -> list[tuple[int, str]]:
    """Split a file into (first line number, text) pieces, one per `kernel` header."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if _KERNEL_HEADER.match(line)]
    if not starts or starts[0] != 0:
        starts = [0, *starts]
    bounds = [*starts, len(lines)]
    return [(bounds[k] + 1, "".join(lines[bounds[k]:bounds[k + 1]]))
            for k in range(len(starts)) if bounds[k] < bounds[k + 1]]


_TOKEN_WORDS = {
    "INT": "integer", "NAME": "name", "MINUS": "'-'", "UNOP": "unary operator",
    "BINOP": "operator", "MINMAX": "min/max", "SPACE": "shared/local", "RSQB": "']'",
    "LSQB": "'['", "COMMA": "','", "LPAR": "'('", "RPAR": "')'", "EQUAL": "'='",
    "COLON": "':'", "BRANCH_OP": "bz/bnz", "KERNEL": "'kernel'", "JUMP": "'jump'",
    "SYNC": "'sync'", "BARRIER": "'barrier'", "STOP": "'stop'",
}


def _syntax_message(error: UnexpectedInput) -> str:
    if isinstance(error, UnexpectedCharacters):
        return f"unexpected character {error.char!r}"
    if isinstance(error, UnexpectedToken):
        token = error.token
        if token.type == "$END":
            return "unexpected end of file"
        shown = "end of line" if token.type == "_NL" else repr(token.value)
        if token.value in RESERVED:
            shown += " (a reserved word: it cannot name a variable or a parameter)"
        expected = sorted({_TOKEN_WORDS.get(e, e.lower()) for e in error.expected
                           if not e.startswith("_") and e != "$END"})
        hint = f"; expected one of {', '.join(expected[:8])}" if expected else ""
        return f"unexpected {shown}{hint}"
    return str(error).splitlines()[0]


def _split_blocks(name: str, lines: list, path: str,
                  diagnostics: list[ir.Diagnostic]) -> list[ir.Block]:
    """Group labelled instruction lines into basic blocks."""
    blocks: list[ir.Block] = []
    pending_labels: list[tuple[str, ir.Loc]] = []
    current: ir.Block | None = None
    seen: dict[str, ir.Loc] = {}
    counter = 0

    def open_block(label: str, loc: ir.Loc, user: bool) -> ir.Block:
        block = ir.Block(label, [], loc, user_label=user)
        blocks.append(block)
        return block

    for items in lines:
        for item in items:
            if isinstance(item, tuple):
                _, label, loc = item
                if label in seen:
                    diagnostics.append(ir.Diagnostic(
                        "error", f"label '{label}' already defined at line {seen[label].line}",
                        path, loc.line, loc.column))
                    continue
                seen[label] = loc
                pending_labels.append((label, loc))
                continue
            instr: ir.Instruction = item
            if pending_labels or current is None or current.terminator is not None:
                if pending_labels:
                    # Several labels on one spot: all but the last become empty blocks
                    # that fall through to it.
                    for alias, alias_loc in pending_labels[:-1]:
                        open_block(alias, alias_loc, True)
                    label, loc = pending_labels[-1]
                    current = open_block(label, loc, True)
                    pending_labels = []
                else:
                    counter += 1
                    current = open_block(f"bb{counter}", instr.loc, False)
            current.instructions.append(instr)
    for label, loc in pending_labels:
        blocks.append(ir.Block(label, [], loc))
    # Keep generated labels distinct from user labels.
    for block in blocks:
        while not block.user_label and block.label in seen:
            block.label = "_" + block.label
    return blocks


def _check_targets(kernel: ir.Kernel, path: str, diagnostics: list[ir.Diagnostic]) -> bool:
    labels = {b.label for b in kernel.blocks}
    ok = True
    for instr in kernel.instructions():
        if instr.target is not None and instr.target not in labels:
            diagnostics.append(ir.Diagnostic(
                "error", f"undefined label '{instr.target}' in kernel {kernel.name}",
                path, instr.loc.line, instr.loc.column))
            ok = False
    return ok


def _check_params(kernel: str, params: list[Token], path: str,
                  diagnostics: list[ir.Diagnostic]) -> list[str]:
    """The parameter names; errors for reserved words, warnings for repeated names."""
    seen: dict[str, Token] = {}
    for token in params:
        name = str(token)
        if name in RESERVED:
            diagnostics.append(ir.Diagnostic(
                "error", f"'{name}' is a reserved word and cannot name a parameter "
                f"(kernel {kernel})", path, token.line or 0, token.column or 1))
        elif name in seen:
            diagnostics.append(ir.Diagnostic(
                "warning", f"kernel {kernel}: parameter '{name}' is listed twice (also "
                f"column {seen[name].column}); both positions get the same value",
                path, token.line or 0, token.column or 1))
        seen.setdefault(name, token)
    return [str(t) for t in params]


def _check_literals(kernel: ir.Kernel, path: str, diagnostics: list[ir.Diagnostic]) -> None:
    """A warning for every integer literal that 32-bit values cannot hold."""
    for instr in kernel.instructions():
        for arg in instr.args:
            if isinstance(arg, ir.Const) and not -(1 << 31) <= arg.value < 1 << 32:
                wrapped = (arg.value + (1 << 31)) % (1 << 32) - (1 << 31)
                diagnostics.append(ir.Diagnostic(
                    "warning", f"kernel {kernel.name}: integer literal {arg.value} does not "
                    f"fit in 32 bits; it is taken modulo 2^32 ({wrapped})",
                    path, instr.loc.line, instr.loc.column))


def _reserved_assignments(chunk: str, first_line: int, path: str,
                          diagnostics: list[ir.Diagnostic]) -> bool:
    """Errors for assignments to reserved words (`tid = a`, `kernel = a`); True if any."""
    found = False
    for number, line in enumerate(chunk.splitlines(), first_line):
        match = _ASSIGNED.match(line.split("#", 1)[0])
        if match and match[1] in RESERVED:
            diagnostics.append(ir.Diagnostic(
                "error", f"'{match[1]}' is a reserved word and cannot be assigned",
                path, number, match.start(1) + 1))
            found = True
    return found


def _register_table(kernel: ir.Kernel) -> dict[str, str]:
    """Every parameter and assigned variable, all of μ-SIMD's one type (32-bit integer)."""
    names = [*kernel.params, *(i.dest for i in kernel.instructions() if i.dest is not None)]
    return dict.fromkeys(names, "s32")


def _attach_text(kernel: ir.Kernel, lines: list[str]) -> None:
    """Give each instruction its source text (without comment) for traces and reports
    (`lines`: the file's lines)."""
    for instr in kernel.instructions():
        source = lines[instr.loc.line - 1][instr.loc.column - 1:]
        instr.text = source.split("#", 1)[0].strip()


def _moved(parsed: list, offset: int) -> list:
    """The kernels of a chunk parsed on its own, with their places moved `offset` lines
    down to where the chunk starts in the file (padding the chunk with that many
    newlines instead made every kernel's parse as long as the file up to it: quadratic in
    a file of many kernels, 21 s for 4,000 small ones)."""
    if not offset:
        return parsed
    moved = []
    for kname, params, loc, lines in parsed:
        for token in params:
            if token.line:
                token.line += offset
        for items in lines:
            for k, item in enumerate(items):
                if isinstance(item, tuple):
                    kind, label, place = item
                    items[k] = (kind, label, ir.Loc(place.line + offset, place.column))
                else:
                    item.loc = ir.Loc(item.loc.line + offset, item.loc.column)
        moved.append((kname, params, ir.Loc(loc.line + offset, loc.column), lines))
    return moved


def parse_musimd(text: str, path: str = "<string>") -> ir.Program:
    """Parse μ-SIMD source text into a Program; errors are collected, not raised."""
    program = ir.Program(path, "musimd", [])
    names: dict[str, ir.Loc] = {}
    file_lines: list[str] | None = None  # split once, for every kernel's marks and text
    for first_line, chunk in _chunks(text):
        if not chunk.endswith("\n"):
            chunk += "\n"
        start = time.perf_counter()
        if _reserved_assignments(chunk, first_line, path, program.diagnostics):
            continue
        try:
            parsed = _moved(parser().parse(chunk), first_line - 1)
        except UnexpectedInput as error:
            line = error.line + first_line - 1 if error.line and error.line > 0 else error.line
            program.diagnostics.append(ir.Diagnostic(
                "error", _syntax_message(error), path, line, error.column))
            continue
        except LarkError as error:
            program.diagnostics.append(ir.Diagnostic(
                "error", str(error).splitlines()[0], path, first_line, 1))
            continue
        if file_lines is None:
            file_lines = text.splitlines()
        for kname, params, loc, lines in parsed:
            if kname in names:
                program.diagnostics.append(ir.Diagnostic(
                    "error", f"kernel '{kname}' already defined at line {names[kname].line}",
                    path, loc.line, loc.column))
                continue
            names[kname] = loc
            before = len(program.errors)
            params = _check_params(kname, params, path, program.diagnostics)
            blocks = _split_blocks(kname, lines, path, program.diagnostics)
            kernel = ir.Kernel(kname, params, blocks, loc, specials=dict(SPECIALS))
            kernel.registers = _register_table(kernel)
            if not blocks:
                program.diagnostics.append(ir.Diagnostic(
                    "error", f"kernel '{kname}' has no instructions", path, loc.line, loc.column))
                continue
            _check_literals(kernel, path, program.diagnostics)
            if (_check_targets(kernel, path, program.diagnostics)
                    and read_marks(kernel, file_lines, path, program.diagnostics)
                    and len(program.errors) == before):
                _attach_text(kernel, file_lines)
                program.kernels.append(kernel)
                program.parse_ms[kname] = (time.perf_counter() - start) * 1000 / len(parsed)
    if not program.kernels and not program.diagnostics:
        program.diagnostics.append(ir.Diagnostic("error", "no kernel found", path, 1, 1))
    return program
