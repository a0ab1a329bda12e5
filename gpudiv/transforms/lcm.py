"""`lcm`: lazy code motion, its predicates solved by rules/safety.lp and rules/lcm.lp.

The pass splits critical edges, builds the model of `motion.py`, solves the predicates
for every candidate expression at once and applies them: at each insertion point it
inserts `t := E` (one fresh register `t` per expression, typed like the occurrences'
destination) and each replaced occurrence `d := E` becomes the copy `d := t`. All
occurrences in a replaced segment read `t` (the operands do not change inside it).
A kernel where a critical edge cannot be split (a PTX `brx.idx` table) is left as it
is.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpudiv import ir
from gpudiv.analyses.solve import RuleError, shipped_rule, solve
from gpudiv.ir.record import replace
from gpudiv.transforms.base import Pass, PassError, register
from gpudiv.transforms.builder import Rewriter, clone_kernel
from gpudiv.transforms.coalesce import coalesce_new
from gpudiv.transforms.critical_edges import (
    SplitCriticalEdges,
    critical_edges,
    drop_unused_edge_blocks,
)
from gpudiv.transforms.motion import Model, build_model, facts
from gpudiv.transforms.motion_explain import ExpressionMotion, lcm_records

PLACES = ("ninsert", "xinsert", "nreplace", "xreplace")


@dataclass
class Placement:
    """Where one kind of rewrite goes: (expression number, block label) per relation."""

    sets: dict[str, set[tuple[int, str]]] = field(default_factory=dict)
    predicates: dict[str, set[tuple[int, str]]] = field(default_factory=dict)

    def at(self, name: str) -> set[tuple[int, str]]:
        """The (expression, block) pairs of one relation."""
        return self.sets.get(name, set())


# sscm.lp's region is a minimum cut in disguise: clingo's default branch-and-bound did not
# prove one optimum of a 1,000-instruction chain of diamonds in minutes; core-guided
# optimisation (`usc`) proves it in tens of milliseconds. No other rule file optimises.
OPTIMISATION = ("--opt-strategy=usc",)


def solve_model(model: Model, rules: list[str], speculate: set[str] = frozenset(),
                extra: str = "", exprs: list[int] | None = None
                ) -> dict[str, set[tuple[int, str]]]:
    """Every shown (expression, block) relation of the rules on the model (for the
    expressions `exprs`, by default all)."""
    if not model.keys:
        return {}
    try:
        result = solve([shipped_rule(r) for r in rules], facts(model, speculate, exprs),
                       extra, options=OPTIMISATION)
    except RuleError as error:
        raise PassError(f"code motion rules failed: {error}") from error
    return {name: {(e, model.labels[n]) for e, n in tuples}
            for name, tuples in result.atoms.items() if tuples and len(tuples[0]) == 2}


def solve_each(model: Model, rules: list[str], speculate: set[str] = frozenset()
               ) -> dict[str, set[tuple[int, str]]]:
    """`solve_model` one expression at a time, the relations joined: for rules whose
    optimisation is per expression (sscm.lp), where one solve of their sum must prove
    the optimum of every combination and grows exponentially with the expressions."""
    joined: dict[str, set[tuple[int, str]]] = {}
    for e in range(len(model.keys)):
        for name, pairs in solve_model(model, rules, speculate, exprs=[e]).items():
            joined.setdefault(name, set()).update(pairs)
    return joined


def prepare(kernel: ir.Kernel) -> bool:
    """Split the critical edges; False when one cannot be split (leave the kernel)."""
    SplitCriticalEdges().run(kernel)
    return not critical_edges(kernel)


def computation(model: Model, e: int, dest: str) -> ir.Instruction:
    """A fresh `dest := E` built from a sample occurrence of expression `e`."""
    sample = model.sample[e]
    text = f"{dest} = {sample.operator}({', '.join(map(str, sample.args))})"
    return replace(sample, dest=dest, attrs=dict(sample.attrs), id=ir.NO_ID, group=None,
                   text=text)


def as_copy(instr: ir.Instruction, temp: str) -> None:
    """Make occurrence `d := E` read the temporary: `d := t`."""
    instr.operator, instr.args, instr.group = "copy", (ir.Var(temp),), None
    instr.attrs.pop("opcode", None)
    instr.text = f"{instr.dest} = {temp}"


def entry_anchor(model: Model, e: int, label: str) -> ir.Instruction | None:
    """The instruction the entry insertion point is right before (None: block end)."""
    view = model.views[(e, label)]
    return view.entry[0] if view.entry else view.first_mod


def exit_anchor(model: Model, e: int, label: str) -> ir.Instruction | None:
    """The instruction the exit insertion point is right before (None: block end)."""
    view = model.views[(e, label)]
    return view.exit[0] if view.exit else None


def insert_at(rewriter: Rewriter, label: str, anchor: ir.Instruction | None,
              instr: ir.Instruction) -> None:
    """Insert before `anchor`, or at the end of block `label` when there is none."""
    if anchor is None:
        rewriter.insert_at_end(label, instr)
    else:
        rewriter.insert_before(anchor, instr)


def apply(kernel: ir.Kernel, model: Model, places: dict[str, set[tuple[int, str]]],
          temps: dict[int, str] | None = None) -> dict[int, str]:
    """Insert and replace as `places` says; the temporary of each expression touched."""
    rewriter = Rewriter(kernel)
    temps = dict(temps or {})
    touched = {e for name in PLACES for e, _ in places.get(name, ())}
    for e in sorted(touched):
        if e not in temps:
            type_ = model.keys[e][2]
            temps[e] = rewriter.fresh_register(f"cm_t{e}", type_)
    for e, label in sorted(places.get("ninsert", ())):
        insert_at(rewriter, label, entry_anchor(model, e, label), computation(model, e, temps[e]))
    for e, label in sorted(places.get("xinsert", ())):
        insert_at(rewriter, label, exit_anchor(model, e, label), computation(model, e, temps[e]))
    for e, label in sorted(places.get("nreplace", ())):
        for instr in model.views[(e, label)].entry:
            as_copy(instr, temps[e])
    for e, label in sorted(places.get("xreplace", ())):
        for instr in model.views[(e, label)].exit:
            as_copy(instr, temps[e])
    return temps


def changes(places: dict[str, set[tuple[int, str]]]) -> bool:
    """Whether applying `places` changes the kernel."""
    return any(places.get(name) for name in PLACES)


def solve_lcm(kernel: ir.Kernel) -> tuple[Model, dict[str, set[tuple[int, str]]]] | None:
    """Split critical edges and solve LCM; None when the kernel cannot be prepared."""
    if not prepare(kernel):
        return None
    model = build_model(kernel)
    return model, solve_model(model, ["safety.lp", "lcm.lp"])


def lcm_places(solved: dict[str, set[tuple[int, str]]]) -> dict[str, set[tuple[int, str]]]:
    """The insert and replace relations of a solution."""
    return {name: solved.get(name, set()) for name in PLACES}


@register
class LazyCodeMotion(Pass):
    """Lazy code motion (safe partial-redundancy elimination)."""

    name = "lcm"
    description = "lazy code motion of pure computations (rules/safety.lp, rules/lcm.lp)"
    records: list[ExpressionMotion]
    speculate_blocks: frozenset[str] = frozenset()

    def run(self, kernel: ir.Kernel) -> ir.Kernel:
        """The kernel with its partial redundancies removed, lazily placed (what moved
        and why in `records`)."""
        self.records = []
        work = clone_kernel(kernel)
        solved = solve_lcm(work)
        if solved is None or not changes(lcm_places(solved[1])):
            return kernel  # nothing to move: leave even the critical edges alone
        model, relations = solved
        self.records = lcm_records(model, relations)
        apply(work, model, lcm_places(relations))
        drop_unused_edge_blocks(work, {b.label for b in kernel.blocks})
        coalesce_new(work, kernel, bool(self.options.get("coalesce", True)))
        return work
