"""The shared intermediate representation: programs, kernels, basic blocks, instructions.

Every front end (μ-SIMD, PTX) lowers to these plain dataclasses; every later stage (CFG,
SSA, facts, interpreter, reports) reads them. Nothing here knows about a concrete syntax.
"""

from __future__ import annotations

from gpudiv.ir.record import Record

# Instruction kinds. `assign` covers copies, unary and binary operators (the operator says
# which); loads, stores and atomics name a memory space; `branch` is conditional (`bz`/`bnz`
# in μ-SIMD) and falls through to the next block; the rest end or synchronise execution.
ASSIGN = "assign"
LOAD = "load"
STORE = "store"
ATOMIC = "atomic"
BRANCH = "branch"
JUMP = "jump"
SYNC = "sync"
BARRIER = "barrier"
STOP = "stop"
# An instruction whose result the analyses cannot see through (an unknown opcode, a call
# to an unknown function, a lane-exchanging operation): its destination is divergent.
OPAQUE = "opaque"
# An instruction with no effect on values or control flow that the program still says:
# memory ordering (PTX `membar`, `fence`), hints (`prefetch`, `nanosleep`) and
# `bar.warp.sync` (convergent). Kept so that a printed program says it too.
FENCE = "fence"

TERMINATORS = frozenset({BRANCH, JUMP, STOP})

# The explicit reconvergence point of a conditional branch: `Instruction.attrs[RECONVERGE]`
# is the label of the block where the lanes that split at the branch meet again. The
# interpreter honours it under `--reconvergence sync` (and `auto`); both printers write
# it as a comment on the branch's line (`# gpudiv: reconverge LABEL` in μ-SIMD,
# `// gpudiv: reconverge LABEL` in PTX) that the parsers read back (docs/execution.md).
RECONVERGE = "reconverge"

BINARY_OPERATORS = (
    "+", "-", "*", "/", "%", "<", "<=", ">", ">=", "==", "!=",
    "&", "|", "^", "<<", ">>", "min", "max",
)
UNARY_OPERATORS = ("-", "!", "~")


class Loc(Record, frozen=True):
    """A position in a source file (1-based line and column)."""

    line: int
    column: int

    __slots__ = ("line", "column")

    def __init__(self, line: int, column: int = 1) -> None:
        object.__setattr__(self, "line", line)
        object.__setattr__(self, "column", column)


class Var(Record, frozen=True):
    """A program variable (a μ-SIMD name or a PTX register)."""

    name: str

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "name", name)

    def __str__(self) -> str:
        return self.name


class Const(Record, frozen=True):
    """An integer literal."""

    value: int

    __slots__ = ("value",)

    def __init__(self, value: int) -> None:
        object.__setattr__(self, "value", value)

    def __str__(self) -> str:
        return str(self.value)


class Special(Record, frozen=True):
    """A special register such as `tid`, `laneid`, `warpid`, `ntid` (or PTX `%tid.x`)."""

    name: str

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "name", name)

    def __str__(self) -> str:
        return self.name


Operand = Var | Const | Special


class Guard(Record, frozen=True):
    """The predicate that guards an instruction (PTX `@%p` / `@!%p`): the instruction only
    acts in the lanes where `operand` is true (false when `negated`)."""

    operand: Operand
    negated: bool

    __slots__ = ("operand", "negated")

    def __init__(self, operand: Operand, negated: bool = False) -> None:
        object.__setattr__(self, "operand", operand)
        object.__setattr__(self, "negated", negated)

    def __str__(self) -> str:
        return ("!" if self.negated else "") + str(self.operand)


# An instruction without an id yet (it gets one when its kernel numbers its instructions).
NO_ID = -1


class Instruction(Record):
    """One instruction; `args` are read, `dest` (if any) is written.

    `id` is stable for the life of the kernel (results, facts, observers and the oracle
    name instructions by it, never by position); `group` is shared by the instructions
    lowered from one source instruction (a PTX `ld.v2` gives two loads of one group).
    Besides `args`, an instruction reads its `guard` (when it is guarded) and its
    `implicit` operands (values a collective reads but whose result does not depend on
    them for the analyses: the predicate of `vote`, the membermask of `activemask`).
    """

    kind: str
    loc: Loc
    dest: str | None
    args: tuple[Operand, ...]
    operator: str | None
    space: str | None
    target: str | None
    text: str
    # Front-end specific facts: "opcode" (the full PTX opcode), "uniform_hint" (bra.uni),
    # "origin" ((file, line, column) of the CUDA source from .loc), ...
    attrs: dict[str, object]
    id: int
    group: int | None
    guard: Guard | None
    implicit: tuple[Operand, ...]

    __slots__ = ("kind", "loc", "dest", "args", "operator", "space", "target", "text", "attrs",
                 "id", "group", "guard", "implicit")

    def __init__(self, kind: str, loc: Loc, dest: str | None = None, args: tuple[Operand, ...] = (),
                       operator: str | None = None, space: str | None = None,
                       target: str | None = None, text: str = "",
                       attrs: dict[str, object] | None = None, id: int = NO_ID,
                       group: int | None = None, guard: Guard | None = None,
                       implicit: tuple[Operand, ...] = ()) -> None:
        self.kind = kind
        self.loc = loc
        self.dest = dest
        self.args = args
        self.operator = operator
        self.space = space
        self.target = target
        self.text = text
        self.attrs = {} if attrs is None else attrs
        self.id = id
        self.group = group
        self.guard = guard
        self.implicit = implicit

    @property
    def reads(self) -> tuple[Operand, ...]:
        """Every operand this instruction reads: `args`, then `implicit`, then the guard."""
        if self.guard is None:
            return (*self.args, *self.implicit) if self.implicit else self.args
        return (*self.args, *self.implicit, self.guard.operand)

    @property
    def used_vars(self) -> list[str]:
        """Names of the variables this instruction reads (all of `reads`), in order."""
        return [a.name for a in self.reads if type(a) is Var]

    def form(self) -> tuple:
        """What the instruction does, without identity, position or notes: two
        instructions with equal forms are interchangeable."""
        return (self.kind, self.dest, self.args, self.operator, self.space, self.target,
                self.guard, self.implicit)


class Block(Record):
    """A basic block: a label and a straight-line list of instructions."""

    label: str
    instructions: list[Instruction]
    loc: Loc
    user_label: bool

    def __init__(self, label: str, instructions: list[Instruction], loc: Loc,
                       user_label: bool = True) -> None:
        self.label = label
        self.instructions = instructions
        self.loc = loc
        self.user_label = user_label

    @property
    def terminator(self) -> Instruction | None:
        """The last instruction if it transfers control, else None (fall-through)."""
        if self.instructions and self.instructions[-1].kind in TERMINATORS:
            return self.instructions[-1]
        return None


class Kernel(Record):
    """A kernel: uniform parameters and its blocks in source order (first is the entry)."""

    name: str
    params: list[str]
    blocks: list[Block]
    loc: Loc
    specials: dict[str, str]
    # Front-end specific facts about the whole kernel (PTX: "reg_types", "params",
    # "symbols": what the PTX interpreter needs to lay out registers and memory).
    attrs: dict[str, object]
    # The register table: every register the kernel declares, with its type (PTX: the
    # declared type such as "u32" or "pred"; μ-SIMD: "s32", its only type).
    registers: dict[str, str]
    next_id: int

    def __init__(self, name: str, params: list[str], blocks: list[Block], loc: Loc,
                       specials: dict[str, str] | None = None,
                       attrs: dict[str, object] | None = None,
                       registers: dict[str, str] | None = None, next_id: int = 0) -> None:
        self.name = name
        self.params = params
        self.blocks = blocks
        self.loc = loc
        self.specials = {} if specials is None else specials
        self.attrs = {} if attrs is None else attrs
        self.registers = {} if registers is None else registers
        self.next_id = next_id
        self.__post_init__()

    def __post_init__(self) -> None:
        self.instructions()  # number the instructions in program order

    def block(self, label: str) -> Block:
        """The block with this label."""
        for b in self.blocks:
            if b.label == label:
                return b
        raise KeyError(label)

    @property
    def instruction_count(self) -> int:
        """Number of instructions in all blocks."""
        return sum(len(b.instructions) for b in self.blocks)

    def instructions(self) -> list[Instruction]:
        """All instructions in program order (each given an id if it has none yet)."""
        found = [i for b in self.blocks for i in b.instructions]
        for instr in found:
            if instr.id == NO_ID:
                instr.id = self.fresh_id()
        return found

    def fresh_id(self) -> int:
        """An instruction id no instruction of this kernel has had."""
        self.next_id += 1
        return self.next_id - 1

    def by_id(self) -> dict[int, Instruction]:
        """Every instruction by its id."""
        return {i.id: i for i in self.instructions()}


class Diagnostic(Record):
    """An error or warning tied to a place in a file."""

    severity: str
    message: str
    path: str
    line: int
    column: int

    def __init__(self, severity: str, message: str, path: str, line: int, column: int = 1) -> None:
        self.severity = severity
        self.message = message
        self.path = path
        self.line = line
        self.column = column

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.column}: {self.severity}: {self.message}"


class Program(Record):
    """A parsed file: its kernels plus the diagnostics found while reading it."""

    path: str
    language: str
    kernels: list[Kernel]
    diagnostics: list[Diagnostic]
    parse_ms: dict[str, float]
    # Front-end specific facts about the whole file (PTX: "module", what a printer needs
    # besides the kernels: directives, module variables, device functions).
    attrs: dict[str, object]

    def __init__(self, path: str, language: str, kernels: list[Kernel],
                       diagnostics: list[Diagnostic] | None = None,
                       parse_ms: dict[str, float] | None = None,
                       attrs: dict[str, object] | None = None) -> None:
        self.path = path
        self.language = language
        self.kernels = kernels
        self.diagnostics = [] if diagnostics is None else diagnostics
        self.parse_ms = {} if parse_ms is None else parse_ms
        self.attrs = {} if attrs is None else attrs

    @property
    def errors(self) -> list[Diagnostic]:
        """Diagnostics of severity error."""
        return [d for d in self.diagnostics if d.severity == "error"]

    def kernel(self, name: str) -> Kernel:
        """The kernel with this name."""
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(name)
