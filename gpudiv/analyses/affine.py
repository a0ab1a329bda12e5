"""Divergence analysis with affine constraints, degree 1 (Sampaio 2013 §3.5, Fig 3.8).

Rules: rules/cfg.lp (join points of branches) and rules/affine.lp (the coefficients of
a1·tid + a0 for every SSA variable, classes, divergent branches, reasons). The degree-2
variant (`gpudiv.analyses.affine2`) adds rules/affine2.lp. This module only builds the
facts, chooses the options, solves, and turns atoms into typed results; the equations
are in the rule file (and, for the tests, in `affine_reference.py`).

Options switch off the completions the seed leaves open (all on by default; see
rules/affine.lp): `sub_linear`, `cmp_difference`, `shl_linear`, `neg_linear`, `fold`.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

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
from gpudiv.analyses.simple import (
    HIDDEN_KINDS,
    _gates,
    joins_by_block,
    uniform_branch_rows,
    write_back,
)
from gpudiv.analyses.solve import Budget, SolveResult, shipped_rule
from gpudiv.ir.ssa import SSAForm

RULE_FILES = ("cfg.lp", "affine.lp")
DEGREE_RULES = {1: (), 2: ("affine2.lp",)}
OPTIONS = ("sub_linear", "cmp_difference", "shl_linear", "neg_linear", "fold")

Coefficients = tuple[int | None, int | None, int | None]
ALL_UNKNOWN: Coefficients = (None, None, None)
# Shown by affine.lp for users and rule files, implied for the driver by affine_coef/3,
# affine_class/2 and affine_divergent_branch/1 (see `coefficients` and `build_result`):
# left out of its model, they were about a third of the atoms it read.
IMPLIED = frozenset({("affine_bot", 2), ("affine_constant", 2), ("affine_uniform_branch", 1)})


def option_facts(options: Mapping[str, bool] | None) -> str:
    """`affine_off(F).` for every option switched off; ValueError for unknown names."""
    options = options or {}
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise ValueError(f"unknown affine option '{unknown[0]}' (known: {', '.join(OPTIONS)})")
    return "".join(f"affine_off({name}).\n" for name in OPTIONS if not options.get(name, True))


def coefficients(solved: SolveResult, degree: int) -> dict[str, Coefficients]:
    """(tid², tid, const) of the SSA variables with a known coefficient, None for ⊥
    (degree 1: tid² is 0 when the tid coefficient is known, ⊥ otherwise); a variable
    missing has every coefficient ⊥. affine.lp gives each coefficient either
    affine_coef/3 or affine_bot/2, never both: ⊥ is the absence of affine_coef."""
    known: dict[str, dict[int, int]] = {}
    for var, power, value in solved.relation("affine_coef"):
        known.setdefault(var, {})[power] = value
    values: dict[str, Coefficients] = {}
    for var, coef in known.items():
        tid2 = coef.get(2) if degree >= 2 else (0 if coef.get(1) is not None else None)
        values[var] = (tid2, coef.get(1), coef.get(0))
    return values


def build_result(name: str, kernel: ir.Kernel, ssa: SSAForm, solved: SolveResult,
                 timing: dict[str, float], degree: int = 1) -> KernelResult:
    """The typed result of an affine analysis of the given degree from its solved atoms."""
    values = coefficients(solved, degree)
    classes = dict(solved.relation("affine_class"))
    # affine_constant(V, K) is class `constant` with K its known constant term.
    constants = {var: values[var][2] for var, klass in classes.items() if klass == "constant"}
    reasons = grouped_reasons(solved.relation("affine_reason"))
    joins = joins_by_block(solved)
    variables = []
    for var in ssa.variables.values():
        if var.kind in HIDDEN_KINDS:
            continue
        variables.append(VariableResult(
            var.name, var.source, var.loc.line, classes[var.name], var.kind,
            constants.get(var.name), first_reason(reasons, var.name),
            _gates(var, joins, ssa.cfg.rejoins), values.get(var.name, ALL_UNKNOWN)))
    divergent_branches = solved.unary("affine_divergent_branch")
    branches = branch_results(ssa, divergent_branches)
    warnings = kernel_warnings(ssa)
    relations = dict(solved.atoms)
    write_back(relations, {
        "affine_bot": _bottoms(ssa, values, degree), "affine_constant": list(constants.items()),
        "affine_uniform_branch": uniform_branch_rows(ssa, divergent_branches)})
    # The generic names that reports and findings read (reason/3, as divergence.lp).
    relations["reason"] = list(relations.get("affine_reason", []))
    relations["divergent_loop_exit"] = list(relations.get("affine_divergent_loop_exit", []))
    result = KernelResult(
        kernel.name, name, kernel.instruction_count, len(kernel.blocks), variables, branches,
        ssa, timing, {"atoms": solved.atom_count, "rules": solved.rule_count}, warnings,
        relations)
    result.keep_reasons(reasons)
    return result


def _bottoms(ssa: SSAForm, values: dict[str, Coefficients], degree: int) -> list[tuple]:
    """The rows of affine_bot/2: every coefficient of every SSA variable without a
    known value (degree 1: powers 0 and 1)."""
    powers = range(degree + 1)
    rows = []
    for name in ssa.variables:
        known = values.get(name, ALL_UNKNOWN)
        rows.extend((name, power) for power in powers if known[2 - power] is None)
    return rows


def analysis(name: str = "affine", degree: int = 1, options: Mapping[str, bool] | None = None,
             extra_rules: tuple[str, ...] = (), budget: Budget | None = None) -> Analysis:
    """An affine analysis as a driver (`Analysis.run` for many kernels at once); `budget`
    limits the clingo runs (`gpudiv.analyses.solve.Budget`; default: only with `extra_rules`)."""
    if degree not in DEGREE_RULES:
        raise ValueError(f"unsupported degree {degree} (1 or 2)")
    files = tuple(shipped_rule(f) for f in RULE_FILES + DEGREE_RULES[degree]) + extra_rules
    # Copies are folded for the shipped rules alone: an extra rule file (explain's
    # because/4, deadlock.lp) may read a copy's own facts.
    return Analysis(name, files, partial(build_result, degree=degree), option_facts(options),
                    budget, fold_copies=not extra_rules,
                    hidden=UNREAD_RELATIONS | (IMPLIED if not extra_rules else frozenset()))


def analyze_kernel(kernel: ir.Kernel, name: str = "affine", degree: int = 1,
                   options: Mapping[str, bool] | None = None,
                   extra_rules: tuple[str, ...] = (), budget: Budget | None = None
                   ) -> KernelResult:
    """Run the affine divergence analysis of the given degree on one kernel."""
    return analysis(name, degree, options, extra_rules, budget)(kernel)
