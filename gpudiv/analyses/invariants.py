"""Which φ-like SSA variables only ever carry one kernel input (Issue 19, item 4).

A φ (γ or μ), η or rejoin copy is gated: it becomes divergent at a join of a divergent
branch, at a divergent loop exit or at a divergent rejoin point, because lanes arriving by
different paths or in different iterations may bring different values. When every value
that can reach it is the same kernel input — one parameter, one uniform special register,
one literal, or one read of a `.param` slot — through copies and other such variables
only, every lane holds that input whatever path it took, so the gate cannot make it
differ. LLVM's UniformityAnalysis makes the same exception for a PHI whose incoming
values are all one value (`hasConstantOrUndefValue`); after PTX lowering and phi
elimination those values are copies in different registers, which is why the roots are
followed through copies here.

Computed in Python (a meet over the copy graph, optimistic for φ cycles) and given to the
rules as `invariant_value/1` (rules/SCHEMA.md).
"""

from __future__ import annotations

from gpudiv import ir
from gpudiv.ir.ssa import SSAForm, SSAVar

PHI_LIKE = ("phi", "eta", "rejoin")

# Lattice of a variable's root: _TOP (no value seen yet, only inside φ cycles), one root
# (a hashable description of the input), or _BOTTOM (anything else).
_TOP = ("top",)
_BOTTOM = ("bottom",)


def _own_root(instrs: dict[int, ir.Instruction], var: SSAVar,
              uniform_specials: set[str]) -> tuple | None:
    """The root of a variable that is not a copy: an input, or None for anything else."""
    if var.kind == "param" or (var.kind == "special" and var.name in uniform_specials):
        return ("input", var.name)
    if var.instruction is None:
        return None
    instr = instrs[var.instruction]
    if instr.kind == ir.LOAD and instr.space == "param" and "symbol" in instr.attrs:
        return ("param", instr.attrs["symbol"], instr.attrs.get("offset"), instr.operator)
    if instr.kind == ir.ASSIGN and instr.operator == "copy":
        arg = instr.args[0]
        if isinstance(arg, ir.Const):
            return ("literal", arg.value)
    return None


def _copied(instrs: dict[int, ir.Instruction], var: SSAVar) -> list[str] | None:
    """The variables whose value `var` takes unchanged, or None if it computes one."""
    if var.kind in PHI_LIKE:
        return list(var.operands)
    if var.instruction is None:
        return None
    instr = instrs[var.instruction]
    if instr.kind == ir.ASSIGN and instr.operator == "copy" and var.operands:
        return list(var.operands)
    return None


def invariant_values(ssa: SSAForm) -> set[str]:
    """φ-like variables whose every reaching value is one and the same kernel input."""
    variables = ssa.variables
    phis = [name for name, var in variables.items() if var.kind in PHI_LIKE]
    if not phis:
        return set()
    specials = {name for name, klass in ssa.cfg.kernel.specials.items() if klass == "uniform"}
    instrs = ssa.cfg.kernel.by_id()
    roots: dict[str, tuple] = {}
    sources: dict[str, list[str]] = {}
    # Only what the φ-like variables take their values from, through copies, matters.
    pending = list(phis)
    while pending:
        name = pending.pop()
        if name in roots or name not in variables:
            continue
        var = variables[name]
        copied = _copied(instrs, var)
        if copied is None:
            roots[name] = _own_root(instrs, var, specials) or _BOTTOM
        else:
            roots[name] = _TOP
            sources[name] = copied
            pending.extend(copied)
    users: dict[str, list[str]] = {}
    for name, copied in sources.items():
        for operand in copied:
            users.setdefault(operand, []).append(name)
    work = list(sources)
    while work:
        name = work.pop()
        value = _meet(roots.get(u, _BOTTOM) for u in sources[name] if u != name)
        if value != roots[name]:
            roots[name] = value
            work.extend(users.get(name, ()))
    return {name for name in phis if roots[name] not in (_TOP, _BOTTOM)}


def _meet(values) -> tuple:
    """Meet of roots: equal roots stay, different ones give _BOTTOM; _TOP is neutral."""
    result = _TOP
    for value in values:
        if value == _TOP:
            continue
        if result == _TOP:
            result = value
        elif value != result:
            return _BOTTOM
    return result
