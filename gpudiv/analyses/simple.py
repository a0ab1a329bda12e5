"""Simple divergence analysis (Sampaio 2013 §3.4, Fig 3.6) as a thin driver.

Rules: rules/cfg.lp (control dependence, regions, join points) and rules/divergence.lp
(divergent/uniform variables and branches). This module only builds facts, solves, and
turns atoms into typed results.
"""

from __future__ import annotations

from gpudiv import ir
from gpudiv.analyses.driver import UNREAD_RELATIONS, Analysis
from gpudiv.analyses.results import (
    KernelResult,
    VariableResult,
    branch_results,
    first_reason,
    grouped_reasons,
    kernel_warnings,
)
from gpudiv.analyses.solve import SolveResult, shipped_rule
from gpudiv.ir.cfg import Rejoin
from gpudiv.ir.ssa import SSAForm, SSAVar

RULE_FILES = ("cfg.lp", "divergence.lp")

# Variables that are not program variables of the kernel and so are not listed.
HIDDEN_KINDS = ("special", "undef")


def _gates(var: SSAVar, joins: dict[str, list[str]], rejoins: dict[str, Rejoin]) -> list[str]:
    """What gates a φ/η: the loop of a μ or η, the branch blocks a γ joins, the branches
    whose lanes meet at a rejoin copy."""
    if var.phi_kind in ("mu", "eta"):
        return [var.loop]
    if var.phi_kind == "gamma":
        return joins.get(var.block, [])
    if var.phi_kind == "rejoin":
        return list(rejoins[var.block].branches)
    return []


def joins_by_block(solved: SolveResult) -> dict[str, list[str]]:
    """For each join block, the branch blocks whose paths meet there (join/2), sorted."""
    joins: dict[str, list[str]] = {}
    for branch_block, join_block in solved.relation("join"):
        joins.setdefault(join_block, []).append(branch_block)
    for branch_blocks in joins.values():
        branch_blocks.sort()
    return joins


def build_result(name: str, kernel: ir.Kernel, ssa: SSAForm, solved: SolveResult,
                 timing: dict[str, float]) -> KernelResult:
    """The typed result of the simple analysis from its solved atoms."""
    divergent = solved.unary("divergent")
    constants = {v: k for v, k in solved.relation("constant")}
    reasons = grouped_reasons(solved.relation("reason"))
    joins = joins_by_block(solved)
    variables = []
    for var in ssa.variables.values():
        if var.kind in HIDDEN_KINDS:
            continue
        if var.name in divergent:
            klass = "divergent"
        elif var.name in constants:
            klass = "constant"
        else:
            klass = "uniform"
        variables.append(VariableResult(var.name, var.source, var.loc.line, klass, var.kind,
                                        constants.get(var.name), first_reason(reasons, var.name),
                                        _gates(var, joins, ssa.cfg.rejoins)))
    divergent_branches = solved.unary("divergent_branch")
    branches = branch_results(ssa, divergent_branches)
    warnings = kernel_warnings(ssa)
    relations = dict(solved.atoms)
    write_back(relations, {
        "uniform": [(v,) for v in ssa.variables if v not in divergent],
        "uniform_branch": uniform_branch_rows(ssa, divergent_branches)})
    result = KernelResult(
        kernel.name, name, kernel.instruction_count, len(kernel.blocks), variables, branches,
        ssa, timing, {"atoms": solved.atom_count, "rules": solved.rule_count}, warnings,
        relations)
    result.keep_reasons(reasons)
    return result


def uniform_branch_rows(ssa: SSAForm, divergent_blocks: set[str]) -> list[tuple[str]]:
    """The rows of a uniform-branch relation: every branch block not divergent (as
    `uniform_branch(B) :- branch(B, _), not divergent_branch(B).` derives them)."""
    return [(block,) for block in dict.fromkeys(b.block for b in ssa.branches)
            if block not in divergent_blocks]


def write_back(relations: dict[str, list[tuple]], implied: dict[str, list[tuple]]) -> None:
    """Give `relations` the rows of each implied relation the model left out (`hidden`),
    as the rules derive them; a relation without rows stays absent, as in a model."""
    for name, rows in implied.items():
        if rows and name not in relations:
            relations[name] = rows


# Shown by divergence.lp for users and rule files, the complements of divergent/1 and
# divergent_branch/1 for the driver: left out of its model and written back.
IMPLIED = frozenset({("uniform", 1), ("uniform_branch", 1)})


def analysis(name: str = "simple") -> Analysis:
    """The simple analysis as a driver (`Analysis.run` for many kernels at once)."""
    return Analysis(name, tuple(shipped_rule(f) for f in RULE_FILES), build_result,
                    fold_copies=True, hidden=UNREAD_RELATIONS | IMPLIED)


def analyze_kernel(kernel: ir.Kernel, name: str = "simple") -> KernelResult:
    """Run the simple divergence analysis on one kernel."""
    return analysis(name)(kernel)
