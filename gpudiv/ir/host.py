"""Host programs as a control-flow graph of single statements (README "Host programs and
kernel fusion"; Fukuhara 2023 §5.1, shared/notes §5.6 item 5: one statement per node).

A host program imports kernels, declares inputs and runs statements on host scalars,
host arrays and device buffers. The front end (`gpudiv.lang.host.parse`) lowers `if` and
`while` to branch nodes, so every later stage (the KFCM rules, the fusion rewrite, the
host interpreter, the printer) sees nodes with one statement each and successor lists.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpudiv import ir

SCALAR, BUFFER, ARRAY = "scalar", "buffer", "array"


@dataclass(frozen=True)
class Num:
    """An integer literal."""

    value: int
    loc: ir.Loc = field(default=ir.Loc(0), compare=False)

    def __str__(self) -> str:
        return str(self.value)


@dataclass(frozen=True)
class Name:
    """A host variable: a scalar, an array or a buffer."""

    name: str
    loc: ir.Loc = field(default=ir.Loc(0), compare=False)

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Binary:
    """`left OP right` with C semantics on 32-bit integers (`&&`, `||` give 0 or 1)."""

    op: str
    left: Expr
    right: Expr
    loc: ir.Loc = field(default=ir.Loc(0), compare=False)

    def __str__(self) -> str:
        return f"({self.left} {self.op} {self.right})"


@dataclass(frozen=True)
class Unary:
    """`-e` or `!e`."""

    op: str
    operand: Expr
    loc: ir.Loc = field(default=ir.Loc(0), compare=False)

    def __str__(self) -> str:
        return f"{self.op}{self.operand}"


@dataclass(frozen=True)
class Index:
    """`h[i]`: an element of a host array."""

    array: str
    index: Expr
    loc: ir.Loc = field(default=ir.Loc(0), compare=False)

    def __str__(self) -> str:
        return f"{self.array}[{self.index}]"


@dataclass(frozen=True)
class Func:
    """`malloc(n)` (a device buffer of n 32-bit words) or `array(n)` (a host array)."""

    name: str
    args: tuple[Expr, ...]
    loc: ir.Loc = field(default=ir.Loc(0), compare=False)

    def __str__(self) -> str:
        return f"{self.name}({', '.join(map(str, self.args))})"


Expr = Num | Name | Binary | Unary | Index | Func


def names_in(expr: Expr) -> set[str]:
    """Every variable an expression reads."""
    if isinstance(expr, Name):
        return {expr.name}
    if isinstance(expr, Binary):
        return names_in(expr.left) | names_in(expr.right)
    if isinstance(expr, Unary):
        return names_in(expr.operand)
    if isinstance(expr, Index):
        return {expr.array} | names_in(expr.index)
    if isinstance(expr, Func):
        return set().union(*(names_in(a) for a in expr.args))
    return set()


@dataclass(frozen=True)
class Assign:
    """`v = e` (e may be `malloc(n)` or `array(n)`)."""

    target: str
    value: Expr

    def __str__(self) -> str:
        return f"{self.target} = {_bare(self.value)}"


@dataclass(frozen=True)
class Store:
    """`h[i] = e`: write an element of a host array."""

    array: str
    index: Expr
    value: Expr

    def __str__(self) -> str:
        return f"{self.array}[{_bare(self.index)}] = {_bare(self.value)}"


@dataclass(frozen=True)
class Call:
    """`memcpy(dst, src)`, `memset(buf, v)`, `free(buf)` or `sync()`."""

    name: str
    args: tuple[Expr, ...]

    def __str__(self) -> str:
        return f"{self.name}({', '.join(_bare(a) for a in self.args)})"


@dataclass(frozen=True)
class Launch:
    """`K<<<grid, block>>>(args)`: grid blocks of `block` threads each."""

    kernel: str
    grid: Expr
    block: Expr
    args: tuple[Expr, ...]

    def __str__(self) -> str:
        args = ", ".join(_bare(a) for a in self.args)
        return f"{self.kernel}<<<{_bare(self.grid)}, {_bare(self.block)}>>>({args})"

    def reads(self) -> set[str]:
        """The host variables the launch reads (shape and arguments)."""
        return set().union(names_in(self.grid), names_in(self.block),
                           *(names_in(a) for a in self.args))


@dataclass(frozen=True)
class Branch:
    """A conditional branch: successor 0 when the condition is non-zero, else 1."""

    cond: Expr

    def __str__(self) -> str:
        return f"if {_bare(self.cond)}"


@dataclass(frozen=True)
class Nop:
    """No statement: the start and end nodes, joins and nodes on split edges."""

    def __str__(self) -> str:
        return "pass"


Stmt = Assign | Store | Call | Launch | Branch | Nop


def _bare(expr: Expr) -> str:
    """An expression without its outermost parentheses."""
    text = str(expr)
    return text[1:-1] if isinstance(expr, Binary) else text


@dataclass
class Node:
    """One CFG node: one statement and where it came from."""

    stmt: Stmt
    loc: ir.Loc
    label: str | None = None


@dataclass
class KernelRef:
    """An imported (or fused) kernel: its IR, its language and the file it came from."""

    kernel: ir.Kernel
    language: str
    source: str
    pointer_params: frozenset[str] = frozenset()
    text: str = ""  # a fused PTX kernel's module text (imported ones are read from source)
    fused: bool = False


@dataclass
class HostProgram:
    """A host program: imports, inputs (each with the values to try), variable types and
    its CFG (node ids, successor lists, one start and one end node)."""

    path: str
    imports: list[str]
    kernels: dict[str, KernelRef]
    inputs: dict[str, list[int]]
    types: dict[str, str]
    nodes: dict[int, Node]
    succ: dict[int, list[int]]
    start: int
    end: int
    next_id: int = 0

    def preds(self) -> dict[int, list[int]]:
        """Predecessor lists (in node order)."""
        result: dict[int, list[int]] = {n: [] for n in self.nodes}
        for n in sorted(self.nodes):
            for m in self.succ[n]:
                result[m].append(n)
        return result

    def add(self, stmt: Stmt, loc: ir.Loc, succ: list[int] | None = None) -> int:
        """A new node with a fresh id."""
        n = self.next_id
        self.next_id += 1
        self.nodes[n] = Node(stmt, loc)
        self.succ[n] = list(succ or [])
        return n

    def rpo(self) -> list[int]:
        """The nodes reachable from the start in reverse postorder."""
        seen: set[int] = set()
        order: list[int] = []
        stack: list[tuple[int, int]] = [(self.start, 0)]
        seen.add(self.start)
        while stack:
            n, i = stack.pop()
            if i < len(self.succ[n]):
                stack.append((n, i + 1))
                m = self.succ[n][i]
                if m not in seen:
                    seen.add(m)
                    stack.append((m, 0))
            else:
                order.append(n)
        return order[::-1]

    def launches(self) -> list[int]:
        """The nodes that launch a kernel, in reverse postorder."""
        return [n for n in self.rpo() if isinstance(self.nodes[n].stmt, Launch)]
