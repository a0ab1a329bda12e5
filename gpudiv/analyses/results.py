"""Typed results of a divergence analysis of one kernel (what reports and the oracle read)."""

from __future__ import annotations

from collections.abc import Iterable

from gpudiv import ir
from gpudiv.analyses.launch_shape import BlockShape
from gpudiv.ir.record import Record
from gpudiv.ir.ssa import SSAForm

CLASSES = ("constant", "uniform", "constaffine", "affine", "divergent")


class VariableResult(Record):
    """The class of one SSA variable and where it comes from."""

    name: str
    source: str
    line: int
    klass: str
    kind: str
    value: int | None
    reason: tuple[str, str] | None
    gated_by: list[str]
    # Affine analyses: the coefficients (tid², tid, const) of the value, None for ⊥.
    affine: tuple[int | None, int | None, int | None] | None

    def __init__(self, name: str, source: str, line: int, klass: str, kind: str,
                       value: int | None = None, reason: tuple[str, str] | None = None,
                       gated_by: list[str] | None = None,
                       affine: tuple[int | None, int | None, int | None] | None = None) -> None:
        self.name = name
        self.source = source
        self.line = line
        self.klass = klass
        self.kind = kind
        self.value = value
        self.reason = reason
        self.gated_by = [] if gated_by is None else gated_by
        self.affine = affine

    @property
    def uniform(self) -> bool:
        """Whether the analysis claims one value across the active lanes at every use."""
        return self.klass in ("constant", "uniform")

    @property
    def affine_text(self) -> str:
        """The affine value as `a2·tid² + a1·tid + a0` with ⊥ for unknown coefficients."""
        if self.affine is None:
            return ""
        a2, a1, a0 = ("⊥" if c is None else str(c) for c in self.affine)
        return f"{a2}·tid² + {a1}·tid + {a0}"


class BranchResult(Record):
    """A conditional branch and whether it may split a warp."""

    label: str
    line: int
    column: int
    divergent: bool
    condition: str | None
    instruction: int  # the branch's `ir.Instruction.id`
    target: str | None
    # (file, line, column) of the CUDA source the branch comes from (a PTX `.loc`)
    origin: tuple | None

    def __init__(self, label: str, line: int, column: int, divergent: bool, condition: str | None,
                       instruction: int, target: str | None = None,
                       origin: tuple | None = None) -> None:
        self.label = label
        self.line = line
        self.column = column
        self.divergent = divergent
        self.condition = condition
        self.instruction = instruction
        self.target = target
        self.origin = origin


class CallingContext(Record):
    """Which function a result is about and in which calling context (call summaries)."""

    function: str
    context: str
    call_sites: list[tuple[str, int, int]]

    def __init__(self, function: str, context: str, call_sites: list[tuple[str, int, int]]) -> None:
        self.function = function
        self.context = context
        self.call_sites = call_sites


class KernelResult(Record):
    """Everything one analysis says about one kernel, plus timings and solver statistics."""

    name: str
    analysis: str
    instructions: int
    blocks: int
    variables: list[VariableResult]
    branches: list[BranchResult]
    ssa: SSAForm
    timing_ms: dict[str, float]
    stats: dict[str, int]
    warnings: list[tuple[str, ir.Loc]]
    relations: dict[str, list[tuple]]
    # The block shape the claims assume (`.reqntid` or the user's); None: any shape.
    block: BlockShape | None
    # A `.func` analysed in one calling context (call summaries), else None: the function,
    # the context in words and the call sites that have it, as (caller, line, column).
    calling_context: CallingContext | None

    def __init__(self, name: str, analysis: str, instructions: int, blocks: int,
                       variables: list[VariableResult], branches: list[BranchResult], ssa: SSAForm,
                       timing_ms: dict[str, float] | None = None,
                       stats: dict[str, int] | None = None,
                       warnings: list[tuple[str, ir.Loc]] | None = None,
                       relations: dict[str, list[tuple]] | None = None,
                       block: BlockShape | None = None,
                       calling_context: CallingContext | None = None) -> None:
        self.name = name
        self.analysis = analysis
        self.instructions = instructions
        self.blocks = blocks
        self.variables = variables
        self.branches = branches
        self.ssa = ssa
        self.timing_ms = {} if timing_ms is None else timing_ms
        self.stats = {} if stats is None else stats
        self.warnings = [] if warnings is None else warnings
        self.relations = {} if relations is None else relations
        self.block = block
        self.calling_context = calling_context
        self._grouped_reasons: dict[str, list[tuple[str, str]]] | None = None

    def __getstate__(self) -> dict:
        """Pickled without the memoised reasons (`reasons`: rebuilt where needed)."""
        state = dict(self.__dict__)
        state["_grouped_reasons"] = None
        return state

    def reasons(self) -> dict[str, list[tuple[str, str]]]:
        """Each variable's `(rule, origin)` reasons of the reason/3 relation, sorted
        (memoised: the drivers give a new result the grouping they chose its variables'
        reasons from, so findings do not group the relation a second time)."""
        if self._grouped_reasons is None:
            self._grouped_reasons = grouped_reasons(self.relations.get("reason", ()))
        return self._grouped_reasons

    def keep_reasons(self, grouped: dict[str, list[tuple[str, str]]]) -> None:
        """Memoise `reasons()` as `grouped` (`grouped_reasons` of this result's reason/3)."""
        self._grouped_reasons = grouped

    def variable(self, name: str) -> VariableResult:
        """The result for one SSA variable."""
        for var in self.variables:
            if var.name == name:
                return var
        raise KeyError(name)

    def by_source(self, source: str) -> list[VariableResult]:
        """All SSA variables of one source variable, in definition order."""
        return [v for v in self.variables if v.source == source]

    @property
    def summary(self) -> dict[str, int]:
        """Counts for reports: variables by class, branches, divergent branches."""
        count = dict.fromkeys(CLASSES, 0)
        for var in self.variables:  # (one pass, not one per class)
            if var.klass in count:
                count[var.klass] += 1
        return {
            "variables": len(self.variables),
            "uniform": count["constant"] + count["uniform"],
            "constant": count["constant"],
            "affine": count["constaffine"] + count["affine"],
            "divergent": count["divergent"],
            "branches": len(self.branches),
            "divergent_branches": sum(1 for b in self.branches if b.divergent),
        }


def grouped_reasons(rows: Iterable[tuple]) -> dict[str, list[tuple[str, str]]]:
    """The `(rule, origin)` pairs of reason/3 rows by variable, each variable's sorted
    (its first is the reason `VariableResult.reason` shows)."""
    grouped: dict[str, list[tuple[str, str]]] = {}
    several = []
    for var, why, origin in rows:
        listed = grouped.get(var)
        if listed is None:
            grouped[var] = [(why, origin)]
        else:
            if len(listed) == 1:
                several.append(listed)
            listed.append((why, origin))
    for listed in several:  # (most variables have one reason: no sort call for those)
        listed.sort()
    return grouped


def first_reason(grouped: dict[str, list[tuple[str, str]]], var: str) -> tuple[str, str] | None:
    """The reason a variable's result shows: the least of its `grouped_reasons`, if any."""
    listed = grouped.get(var)
    return listed[0] if listed else None


def kernel_warnings(ssa: SSAForm) -> list[tuple[str, ir.Loc]]:
    """The warnings of an analysed kernel: code never executed, then variables read
    before they are defined."""
    return unreachable_warnings(ssa) + undefined_variable_warnings(ssa)


def unreachable_warnings(ssa: SSAForm) -> list[tuple[str, ir.Loc]]:
    """One warning per block that no path from the entry reaches (it is left out)."""
    blocks = {b.label: b for b in ssa.cfg.kernel.blocks}
    warnings = []
    for label in ssa.cfg.unreachable:
        block = blocks[label]
        loc = block.instructions[0].loc if block.instructions else block.loc
        named = f" (block {label})" if block.user_label else ""
        warnings.append((f"unreachable code{named}: never executed, left out of the "
                         "analysis", loc))
    return warnings


def undefined_variable_warnings(ssa: SSAForm) -> list[tuple[str, ir.Loc]]:
    """One warning per variable read before any definition, at its first such read."""
    return [(f"variable '{source}' may be read before it is defined (treated as divergent)",
             loc) for source, loc in ssa.undefined]


def branch_results(ssa: SSAForm, divergent_blocks: set[str]) -> list[BranchResult]:
    """The conditional branches of a kernel, divergent where their block is listed."""
    instructions = ssa.cfg.kernel.by_id()
    return [BranchResult(b.block, b.loc.line, b.loc.column, b.block in divergent_blocks,
                         b.condition, b.instruction, instructions[b.instruction].target,
                         instructions[b.instruction].attrs.get("origin"))
            for b in ssa.branches]
