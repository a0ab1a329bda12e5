"""`scm` and `sscm`: sparse code motion and its divergence-aware speculative variant
(Fukuhara 2023 §4.2), solved by rules/safety.lp and rules/sscm.lp.

Both run the seed's four steps: (1) LCM (the `lcm` pass's rules), (2) down- and
up-safety, with SSCM's Fig 4.5 union at blocks ending in a divergent branch (from the
divergence analysis chosen by the `divergence` option: simple, affine or affine2), (3-4)
the closed down-safety region with the fewest R-Earliest points (`#minimize`), solved
one expression at a time (the regions are independent; one solve of the sum grows
exponentially with the expressions). Then
`t := E` goes to each R-Earliest point (its entry insertion point when that is
down-safe, else its exit one) and the entry computations of the RelComp blocks go away.

The region step needs `t` to hold E wherever E is available, so before it every
remaining computation `d := E` of an expression that moves becomes `t := E; d := t`
(notes §3.9.6: one temporary per expression, LCM's and SCM's unified). Only pure
computations move (motion.py), so speculation cannot fault; exit computations of blocks
that modify an operand stay where they are (the region is over blocks, notes §3.9.4).
"""

from __future__ import annotations

from typing import ClassVar

from gpudiv import ir
from gpudiv.ir.record import replace
from gpudiv.transforms.base import Pass, register
from gpudiv.transforms.builder import Rewriter, clone_kernel
from gpudiv.transforms.coalesce import coalesce_new
from gpudiv.transforms.critical_edges import drop_unused_edge_blocks
from gpudiv.transforms.lcm import (
    apply,
    computation,
    entry_anchor,
    exit_anchor,
    insert_at,
    lcm_places,
    solve_each,
    solve_lcm,
)
from gpudiv.transforms.motion import Model, build_model, is_candidate, key_of
from gpudiv.transforms.motion_explain import ExpressionMotion, lcm_records, region_records

Relations = dict[str, set[tuple[int, str]]]


def divergent_blocks(kernel: ir.Kernel, analysis: str) -> set[str]:
    """Blocks that end in a branch the divergence analysis calls divergent."""
    result = Pass.analysis(kernel, analysis)
    return {b.label for b in result.branches if b.divergent}


def moves(relations: Relations, e: int) -> bool:
    """Whether the region of expression `e` changes the program: an R-Earliest point
    that is not a kept RelComp entry computation, or a RelComp that is removed."""
    rel = {n for x, n in relations.get("relcomp", ()) if x == e}
    early = {n for x, n in relations.get("rearliest", ()) if x == e}
    safe = {n for x, n in relations.get("ndsafe", ()) if x == e}
    kept = {n for n in early if n in rel and n in safe}
    return bool(early - kept) or bool(rel - kept)


def unify(kernel: ir.Kernel, keys: set, temps: dict) -> None:
    """Every computation `d := E` of the expressions `keys` becomes `t := E; d := t`."""
    rewriter = Rewriter(kernel)
    for instr in list(kernel.instructions()):
        if not is_candidate(instr, kernel):
            continue
        key = key_of(instr, kernel)
        if key not in keys:
            continue
        if key not in temps:
            temps[key] = rewriter.fresh_register("cm_t", key[2])
        temp = temps[key]
        if instr.dest == temp:
            continue
        rhs = instr.text.split(" = ", 1)[1] if " = " in instr.text else instr.text
        twin = replace(instr, dest=temp, attrs=dict(instr.attrs), id=ir.NO_ID, group=None,
                       text=f"{temp} = {rhs}")
        rewriter.insert_before(instr, twin)
        instr.operator, instr.args, instr.group = "copy", (ir.Var(temp),), None
        instr.attrs.pop("opcode", None)
        instr.text = f"{instr.dest} = {temp}"


def place(kernel: ir.Kernel, model: Model, relations: Relations, chosen: set[int],
          temps: dict) -> None:
    """Insert at the R-Earliest points and delete the RelComp entry computations of the
    expressions `chosen`."""
    rewriter = Rewriter(kernel)
    rel = relations.get("relcomp", set())
    safe = relations.get("ndsafe", set())
    for e, label in sorted(relations.get("rearliest", set())):
        if e not in chosen:
            continue
        view = model.views[(e, label)]
        kept = (e, label) in rel and (e, label) in safe
        if kept:
            for instr in view.entry[1:]:
                rewriter.erase(instr)
            continue
        anchor = entry_anchor(model, e, label) if (e, label) in safe \
            else exit_anchor(model, e, label)
        insert_at(rewriter, label, anchor, computation(model, e, temps[model.keys[e]]))
    early = relations.get("rearliest", set())
    for e, label in sorted(rel):
        if e in chosen and not ((e, label) in early and (e, label) in safe):
            for instr in model.views[(e, label)].entry:
                rewriter.erase(instr)


def sparse(kernel: ir.Kernel, speculate: set[str],
           records: list[ExpressionMotion] | None = None, coalesce: bool = True) -> ir.Kernel:
    """LCM, then the sparse region step (speculating at `speculate` blocks), then copy
    coalescing (unless `coalesce` is false); what each step moved and why is appended
    to `records`."""
    records = [] if records is None else records
    work = clone_kernel(kernel)
    solved = solve_lcm(work)
    if solved is None:
        return kernel
    model, relations = solved
    records += lcm_records(model, relations)
    lcm_temps = apply(work, model, lcm_places(relations))
    temps = {model.keys[e]: t for e, t in lcm_temps.items()}
    trial = clone_kernel(work)
    unify(trial, set(build_model(trial).keys), dict(temps))
    trial_model = build_model(trial)
    found = solve_each(trial_model, ["safety.lp", "sscm.lp"], speculate)
    moving = {trial_model.keys[e] for e in range(len(trial_model.keys)) if moves(found, e)}
    if moving:
        unify(work, moving, temps)
        final = build_model(work)
        found = solve_each(final, ["safety.lp", "sscm.lp"], speculate)
        chosen = {e for e, key in enumerate(final.keys) if key in moving}
        place(work, final, found, chosen, temps)
        records += region_records(final, found, chosen, speculate)
    elif not any(relations.get(n) for n in ("ninsert", "xinsert", "nreplace", "xreplace")):
        records.clear()
        return kernel
    drop_unused_edge_blocks(work, {b.label for b in kernel.blocks})
    coalesce_new(work, kernel, coalesce)
    return work


@register
class SparseCodeMotion(Pass):
    """SCM: LCM, then the down-safety region with the fewest insertion points."""

    name = "scm"
    description = "sparse code motion: LCM, then the fewest safe insertion points (rules/sscm.lp)"

    def run(self, kernel: ir.Kernel) -> ir.Kernel:
        """The kernel after LCM and the sparse (non-speculative) region step."""
        self.records, self.speculate_blocks = [], frozenset()
        return sparse(kernel, set(), self.records, bool(self.options.get("coalesce", True)))


@register
class SpeculativeSparseCodeMotion(Pass):
    """SSCM: SCM that speculates exactly at divergent branches (Fig 4.5)."""

    name = "sscm"
    description = ("speculative sparse code motion: SCM that speculates only at divergent "
                   "branches (affine2 divergence; sscm-simple, sscm-affine)")
    divergence: ClassVar[str] = "affine2"

    def run(self, kernel: ir.Kernel) -> ir.Kernel:
        """The kernel after LCM and the speculative sparse region step."""
        analysis = str(self.options.get("divergence", self.divergence))
        self.records = []
        self.speculate_blocks = frozenset(divergent_blocks(kernel, analysis))
        return sparse(kernel, set(self.speculate_blocks), self.records,
                      bool(self.options.get("coalesce", True)))


@register
class SpeculativeSparseCodeMotionSimple(SpeculativeSparseCodeMotion):
    """SSCM with the simple divergence analysis."""

    name = "sscm-simple"
    description = "sscm with divergent branches from the simple divergence analysis"
    divergence = "simple"


@register
class SpeculativeSparseCodeMotionAffine(SpeculativeSparseCodeMotion):
    """SSCM with the affine divergence analysis."""

    name = "sscm-affine"
    description = "sscm with divergent branches from the affine divergence analysis"
    divergence = "affine"


def branch_blocks(kernel: ir.Kernel) -> set[str]:
    """Blocks that end in a conditional branch."""
    return {b.label for b in kernel.blocks
            if b.terminator is not None and b.terminator.kind == ir.BRANCH}


@register
class SpeculativeCodeMotionEverywhere(Pass):
    """SPRE-all: the SSCM equations with every branch treated as divergent (the
    seed's baseline, speculation that ignores divergence)."""

    name = "spre"
    description = "speculative sparse code motion at every branch, divergent or not (baseline)"

    def run(self, kernel: ir.Kernel) -> ir.Kernel:
        """The kernel after LCM and the region step speculating at every branch."""
        self.records = []
        self.speculate_blocks = frozenset(branch_blocks(kernel))
        return sparse(kernel, set(self.speculate_blocks), self.records,
                      bool(self.options.get("coalesce", True)))
