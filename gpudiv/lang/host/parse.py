"""Host-program front end: `grammar/host.lark` → `gpudiv.ir.host.HostProgram`.

Parses, imports the kernels (μ-SIMD or PTX files, paths relative to the host file),
types every variable (scalar, array or buffer: one type per variable) and lowers the
statements to a CFG of single statements. Errors are `HostError`s whose message is one
`FILE:LINE:COL: error: ...` line.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from gpudiv import ir
from gpudiv.ir import host as h
from gpudiv.lang.grammars import lalr_parser
from gpudiv.lang.load import LoadError, load, read_source

# Parameters of a μ-SIMD kernel the host fills itself: the block index and the grid size.
IMPLICIT_PARAMS = ("ctaid", "nctaid")
CALL_ARITY = {"memcpy": 2, "memset": 2, "free": 1, "sync": 0}
FUNC_TYPES = {"malloc": h.BUFFER, "array": h.ARRAY}


class HostError(Exception):
    """A host program that cannot be read, typed or run: one `FILE:LINE:COL: error:` line."""


@cache
def parser() -> Lark:
    """The LALR parser of host programs (built once)."""
    return lalr_parser("host.lark", propagate_positions=True)


def _loc(item: Tree | Token) -> ir.Loc:
    """The line and column where a token or subtree starts."""
    if isinstance(item, Token):
        return ir.Loc(item.line or 0, item.column or 1)
    return ir.Loc(getattr(item.meta, "line", 0), getattr(item.meta, "column", 1))


def explicit_params(ref: h.KernelRef) -> list[str]:
    """The parameters a launch passes (μ-SIMD `ctaid` and `nctaid` are filled implicitly)."""
    if ref.language != "musimd":
        return list(ref.kernel.params)
    return [p for p in ref.kernel.params if p not in IMPLICIT_PARAMS]


def pointer_params(kernel: ir.Kernel) -> frozenset[str]:
    """Parameters whose value reaches a memory address through copies, `+` and `-` (they
    take device buffers; the implicit `ctaid`/`nctaid` never do)."""
    sources: dict[str, set[str]] = {p: {p} for p in kernel.params}
    changed = True
    while changed:
        changed = False
        for instr in kernel.instructions():
            if instr.dest is None:
                continue
            got: set[str] = set()
            if instr.kind == ir.LOAD and instr.space == "param":
                got = {a.name for a in instr.args if isinstance(a, ir.Var)} & set(kernel.params)
            elif instr.kind == ir.ASSIGN and (instr.operator in ("copy", "+", "-") or str(
                    instr.attrs.get("opcode", "")).split(".")[0] in ("cvta", "mov", "add")):
                got = set().union(*(sources.get(v, set()) for v in instr.used_vars))
            if not got <= sources.setdefault(instr.dest, set()):
                sources[instr.dest] |= got
                changed = True
    found: set[str] = set()
    for instr in kernel.instructions():
        if (instr.kind in (ir.LOAD, ir.STORE, ir.ATOMIC) and instr.args
                and instr.space not in ("param", "local")
                and isinstance(instr.args[0], ir.Var)):
            found |= sources.get(instr.args[0].name, set())
    return frozenset(found & set(kernel.params) - set(IMPLICIT_PARAMS))


class _Reader:
    """Walks the parse tree: imports, inputs, types, and the CFG."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.program = h.HostProgram(path, [], {}, {}, {}, {}, {}, 0, 0)
        self.labels: dict[str, int] = {}
        self.gotos: list[tuple[int, int, str, ir.Loc]] = []  # node, slot, label, where

    def error(self, loc: ir.Loc, message: str) -> HostError:
        """A HostError at a place of this file."""
        return HostError(f"{self.path}:{loc.line}:{loc.column}: error: {message}")

    # -- declarations -------------------------------------------------------------------

    def import_(self, tree: Tree) -> None:
        """Load every kernel of an imported file."""
        token = tree.children[0]
        name = str(token)[1:-1]
        target = Path(self.path).parent / name
        try:
            read_source(target)
            program = load(target)
        except LoadError as error:
            raise self.error(_loc(token), f"cannot import '{name}': {error}") from None
        if program.errors:
            raise self.error(_loc(token), f"cannot import '{name}': {program.errors[0]}")
        self.program.imports.append(name)
        for kernel in program.kernels:
            if kernel.name in self.program.kernels:
                raise self.error(_loc(token), f"kernel '{kernel.name}' imported twice")
            self.program.kernels[kernel.name] = h.KernelRef(
                kernel, program.language, str(target), pointer_params(kernel))

    def input_(self, tree: Tree) -> None:
        """`input n = 1 | 2`: a scalar input and the values to try (the first by default)."""
        name = tree.children[0]
        if str(name) in self.program.inputs:
            raise self.error(_loc(name), f"input '{name}' declared twice")
        self.declare(str(name), h.SCALAR, _loc(name))
        self.program.inputs[str(name)] = [int(v.children[0]) for v in tree.children[1:]]

    def declare(self, name: str, kind: str, loc: ir.Loc) -> None:
        """Give a variable its type; a variable keeps one type."""
        old = self.program.types.setdefault(name, kind)
        if old != kind:
            raise self.error(loc, f"type mismatch: '{name}' is a {old}, assigned a {kind}")

    # -- expressions --------------------------------------------------------------------

    def expr(self, tree: Tree | Token) -> h.Expr:
        """An expression tree (types are checked later, when all are declared)."""
        loc = _loc(tree)
        if tree.data == "number":
            return h.Num(int(tree.children[0]), loc)
        if tree.data == "var":
            return h.Name(str(tree.children[0]), loc)
        if tree.data == "index":
            return h.Index(str(tree.children[0]), self.expr(tree.children[1]), loc)
        if tree.data == "func":
            return h.Func(str(tree.children[0]), self.args(tree.children[1]), loc)
        if tree.data == "binary":
            left, op, right = tree.children
            return h.Binary(str(op), self.expr(left), self.expr(right), loc)
        if tree.data == "unary":
            return h.Unary(str(tree.children[0]), self.expr(tree.children[1]), loc)
        raise self.error(loc, f"unexpected expression {tree.data}")

    def args(self, tree: Tree | None) -> tuple[h.Expr, ...]:
        """The expressions of an argument list (none when absent)."""
        return () if tree is None else tuple(self.expr(c) for c in tree.children)

    # -- statements ---------------------------------------------------------------------

    def node(self, stmt: h.Stmt, loc: ir.Loc) -> int:
        """A new node."""
        return self.program.add(stmt, loc)

    def block(self, stmts: list[Tree], follow: int) -> int:
        """Lower statements that continue at `follow`; return the first node."""
        entry = follow
        for stmt in reversed(stmts):
            entry = self.stmt(stmt, entry)
        return entry

    def stmt(self, tree: Tree, follow: int) -> int:
        """Lower one (possibly labelled) statement continuing at `follow`."""
        label, core = tree.children
        entry = self.core(core, follow)
        if label is not None:
            if str(label) in self.labels:
                raise self.error(_loc(label), f"label '{label}' defined twice")
            self.labels[str(label)] = entry
        return entry

    def core(self, tree: Tree, follow: int) -> int:
        """Lower a statement without its label."""
        loc, kids = _loc(tree), tree.children
        kind = tree.data
        if kind == "assign":
            n = self.node(h.Assign(str(kids[0]), self.expr(kids[1])), loc)
        elif kind == "hstore":
            stmt = h.Store(str(kids[0]), self.expr(kids[1]), self.expr(kids[2]))
            n = self.node(stmt, loc)
        elif kind == "launch":
            stmt = h.Launch(str(kids[0]), self.expr(kids[2]), self.expr(kids[3]),
                            self.args(kids[4]))
            n = self.node(stmt, loc)
        elif kind == "call":
            n = self.node(h.Call(str(kids[0]), self.args(kids[1])), loc)
        elif kind == "nop":
            n = self.node(h.Nop(), loc)
        elif kind == "goto":
            n = self.node(h.Nop(), loc)
            self.gotos.append((n, 0, str(kids[1]), _loc(kids[1])))
            self.program.succ[n] = [-1]
            return n
        elif kind == "cbranch":
            n = self.node(h.Branch(self.expr(kids[1])), loc)
            self.program.succ[n] = [-1, -1]
            self.gotos.append((n, 0, str(kids[3]), _loc(kids[3])))
            self.gotos.append((n, 1, str(kids[4]), _loc(kids[4])))
            return n
        elif kind == "if_":
            then = self.block(kids[2].children, follow)
            other = kids[3]
            if other is None:
                otherwise = follow
            elif other.data == "block":
                otherwise = self.block(other.children, follow)
            else:
                otherwise = self.core(other, follow)
            n = self.node(h.Branch(self.expr(kids[1])), loc)
            self.program.succ[n] = [then, otherwise]
            return n
        elif kind == "while_":
            n = self.node(h.Branch(self.expr(kids[1])), loc)
            body = self.block(kids[2].children, n)
            self.program.succ[n] = [body, follow]
            return n
        else:
            raise self.error(loc, f"unexpected statement {kind}")
        self.program.succ[n] = [follow]
        return n

    # -- the whole program --------------------------------------------------------------

    def read(self, text: str) -> h.HostProgram:
        """Parse, lower, resolve gotos, check."""
        tree = _parse(text, self.path)
        prog = self.program
        stmts = []
        for item in tree.children:
            if item.data == "import_":
                self.import_(item)
            elif item.data == "input_":
                self.input_(item)
            else:
                stmts.append(item)
        for assign in tree.iter_subtrees_topdown():  # one type per variable, in source order
            if assign.data == "assign":
                value = assign.children[1]
                kind = FUNC_TYPES.get(str(value.children[0]), h.SCALAR) \
                    if value.data == "func" else h.SCALAR
                self.declare(str(assign.children[0]), kind, _loc(assign.children[0]))
        prog.end = self.node(h.Nop(), ir.Loc(text.count("\n") + 1))
        first = self.block(stmts, prog.end)
        prog.start = self.node(h.Nop(), ir.Loc(1))
        prog.succ[prog.start] = [first]
        for n, slot, label, loc in self.gotos:
            if label not in self.labels:
                raise self.error(loc, f"unknown label '{label}'")
            prog.succ[n][slot] = self.labels[label]
        _drop_gotos(prog)
        for n, node in prog.nodes.items():
            if n in self.labels.values():
                node.label = next(k for k, v in self.labels.items() if v == n)
        check(prog, self.error)
        return prog


def _parse(text: str, path: str) -> Tree:
    """The parse tree, or a HostError at the offending token."""
    try:
        return parser().parse(text)
    except UnexpectedEOF:
        line = text.count("\n") + 1
        raise HostError(f"{path}:{line}:1: error: unexpected end of file") from None
    except UnexpectedToken as error:
        if error.token.type == "$END":
            line = text.count("\n") + 1
            raise HostError(f"{path}:{line}:1: error: unexpected end of file") from None
        raise HostError(f"{path}:{error.line}:{error.column}: error: unexpected "
                        f"'{error.token}'") from None
    except UnexpectedCharacters as error:
        raise HostError(f"{path}:{error.line}:{error.column}: error: unexpected character "
                        f"'{text[error.pos_in_stream]}'") from None
    except UnexpectedInput as error:
        raise HostError(f"{path}:{error.line}:{error.column}: error: syntax error") from None


def _drop_gotos(prog: h.HostProgram) -> None:
    """Remove `goto` nodes (no statement, one successor) and unreachable nodes."""
    def through(n: int, seen: frozenset = frozenset()) -> int:
        node = prog.nodes[n]
        if (isinstance(node.stmt, h.Nop) and n not in (prog.start, prog.end)
                and len(prog.succ[n]) == 1 and n not in seen):
            return through(prog.succ[n][0], seen | {n})
        return n
    for n in prog.nodes:
        prog.succ[n] = [through(m) for m in prog.succ[n]]
    keep = set(prog.rpo()) | {prog.end}
    for n in list(prog.nodes):
        if n not in keep:
            del prog.nodes[n], prog.succ[n]


def _expr_type(expr: h.Expr, types: dict[str, str], error) -> str:
    """The type of an expression: scalar, or the type of a bare variable."""
    if isinstance(expr, h.Name):
        if expr.name not in types:
            raise error(expr.loc, f"undefined variable '{expr.name}'")
        return types[expr.name]
    if isinstance(expr, h.Index):
        if types.get(expr.array) != h.ARRAY:
            raise error(expr.loc, f"type mismatch: '{expr.array}' is not a host array")
        _scalar(expr.index, types, error)
        return h.SCALAR
    if isinstance(expr, h.Func):
        if len(expr.args) != 1:
            raise error(expr.loc, f"{expr.name} takes 1 argument, got {len(expr.args)}")
        _scalar(expr.args[0], types, error)
        return FUNC_TYPES[expr.name]
    for part in (expr.left, expr.right) if isinstance(expr, h.Binary) else \
            (expr.operand,) if isinstance(expr, h.Unary) else ():
        _scalar(part, types, error)
    return h.SCALAR


def _scalar(expr: h.Expr, types: dict[str, str], error) -> None:
    """Refuse a buffer or array where a number is needed."""
    kind = _expr_type(expr, types, error)
    if kind != h.SCALAR:
        raise error(expr.loc, f"type mismatch: a {kind} ('{expr}') where a number is needed")


def _check_launch(stmt: h.Launch, loc: ir.Loc, prog: h.HostProgram, error) -> None:
    """Known kernel, right argument count, buffers for pointer parameters only."""
    ref = prog.kernels.get(stmt.kernel)
    if ref is None:
        raise error(loc, f"unknown kernel '{stmt.kernel}'"
                    + (f" (imported: {', '.join(sorted(prog.kernels))})" if prog.kernels else
                       " (no kernel imported)"))
    params = explicit_params(ref)
    if len(params) != len(stmt.args):
        raise error(loc, f"kernel '{stmt.kernel}' takes {len(params)} arguments "
                    f"({', '.join(params)}), got {len(stmt.args)}")
    _scalar(stmt.grid, prog.types, error)
    _scalar(stmt.block, prog.types, error)
    for param, arg in zip(params, stmt.args, strict=True):
        kind = _expr_type(arg, prog.types, error)
        want = h.BUFFER if param in ref.pointer_params else h.SCALAR
        if kind != want:
            raise error(arg.loc, f"type mismatch: parameter '{param}' of kernel "
                        f"'{stmt.kernel}' takes a {want}, got a {kind} ('{arg}')")


def _check_call(stmt: h.Call, loc: ir.Loc, types: dict[str, str], error) -> None:
    """Argument count and types of memcpy, memset, free and sync."""
    if len(stmt.args) != CALL_ARITY[stmt.name]:
        raise error(loc, f"{stmt.name} takes {CALL_ARITY[stmt.name]} arguments, "
                    f"got {len(stmt.args)}")
    kinds = [_expr_type(a, types, error) for a in stmt.args]
    if stmt.name == "memcpy" and (h.BUFFER not in kinds or h.SCALAR in kinds):
        raise error(loc, "type mismatch: memcpy copies between a buffer and a host array "
                    f"or buffer, got {' and '.join(kinds)}")
    if stmt.name in ("memset", "free") and kinds[0] != h.BUFFER:
        raise error(stmt.args[0].loc, f"type mismatch: {stmt.name} takes a buffer, "
                    f"got a {kinds[0]} ('{stmt.args[0]}')")
    if stmt.name == "memset" and kinds[1] != h.SCALAR:
        raise error(stmt.args[1].loc, "type mismatch: memset takes a number to write")


def check(prog: h.HostProgram, error) -> None:
    """Type-check every statement of a lowered program."""
    for n in sorted(prog.nodes):
        stmt, loc = prog.nodes[n].stmt, prog.nodes[n].loc
        if isinstance(stmt, h.Launch):
            _check_launch(stmt, loc, prog, error)
        elif isinstance(stmt, h.Call):
            _check_call(stmt, loc, prog.types, error)
        elif isinstance(stmt, h.Assign):
            _expr_type(stmt.value, prog.types, error)
            if not isinstance(stmt.value, (h.Func, h.Name)):
                _scalar(stmt.value, prog.types, error)
            elif isinstance(stmt.value, h.Name) and \
                    prog.types[stmt.value.name] != prog.types[stmt.target]:
                raise error(loc, f"type mismatch: '{stmt.target}' is a "
                            f"{prog.types[stmt.target]}, assigned a "
                            f"{prog.types[stmt.value.name]}")
        elif isinstance(stmt, h.Store):
            _expr_type(h.Index(stmt.array, stmt.index, loc), prog.types, error)
            _scalar(stmt.value, prog.types, error)
        elif isinstance(stmt, h.Branch):
            _scalar(stmt.cond, prog.types, error)


def parse_host(text: str, path: str) -> h.HostProgram:
    """Read a host program from its text (imports relative to `path`)."""
    return _Reader(path).read(text)


def load_host(path: str | Path) -> h.HostProgram:
    """Read a host program file."""
    try:
        text = read_source(Path(path))
    except LoadError as error:
        raise HostError(str(error)) from None
    return parse_host(text, str(path))
