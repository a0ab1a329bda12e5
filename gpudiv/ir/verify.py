"""Well-formedness of a kernel: what every pass must leave true (tests run it after
every pass). Each problem is one message naming the block and the instruction."""

from __future__ import annotations

from gpudiv import ir

# Operand counts of μ-SIMD-style assignments (PTX opcodes carry their own).
_ARITY = {"copy": 1, "neg": 1, "!": 1, "~": 1, **dict.fromkeys(ir.BINARY_OPERATORS, 2)}


def verify_kernel(kernel: ir.Kernel) -> list[str]:
    """Problems of a kernel (empty when it is well formed): blocks and labels, ids,
    terminators, branch targets, registers without a type, malformed operands."""
    problems: list[str] = []
    if not kernel.blocks:
        return [f"kernel {kernel.name}: no blocks"]
    labels = [b.label for b in kernel.blocks]
    for label in {x for x in labels if labels.count(x) > 1}:
        problems.append(f"kernel {kernel.name}: label '{label}' defined twice")
    seen: set[int] = set()
    known = set(labels)
    for block in kernel.blocks:
        for n, instr in enumerate(block.instructions):
            where = f"kernel {kernel.name}, block {block.label}, instruction {n} " \
                    f"('{instr.text or instr.kind}', id {instr.id})"
            problems += [f"{where}: {p}" for p in _instruction_problems(kernel, instr, known)]
            if instr.id in seen:
                problems.append(f"{where}: id {instr.id} used twice")
            seen.add(instr.id)
            if instr.kind in ir.TERMINATORS and n != len(block.instructions) - 1:
                problems.append(f"{where}: {instr.kind} is not the last instruction")
    return problems


def _instruction_problems(kernel: ir.Kernel, instr: ir.Instruction,
                          labels: set[str]) -> list[str]:
    problems = []
    if instr.id < 0:
        problems.append("no id")
    if instr.kind in (ir.BRANCH, ir.JUMP) and instr.target not in labels:
        problems.append(f"target '{instr.target}' is not a block")
    if instr.kind == ir.BRANCH and len(instr.args) != 1:
        problems.append("a branch reads one condition")
    if instr.kind in (ir.ASSIGN, ir.LOAD) and instr.dest is None:
        problems.append(f"{instr.kind} without a destination")
    if instr.kind in (ir.LOAD, ir.STORE, ir.ATOMIC) and not instr.space:
        problems.append(f"{instr.kind} without a memory space")
    arity = _ARITY.get(instr.operator or "")
    if instr.kind == ir.ASSIGN and arity is not None and len(instr.args) != arity:
        problems.append(f"'{instr.operator}' takes {arity} operands, has {len(instr.args)}")
    for operand in instr.reads:
        if not isinstance(operand, ir.Var | ir.Const | ir.Special):
            problems.append(f"operand {operand!r} is not a variable, constant or special")
        elif isinstance(operand, ir.Special) and operand.name not in kernel.specials:
            problems.append(f"special register {operand.name} is not declared")
    if kernel.registers:
        names = [*instr.used_vars, *([instr.dest] if instr.dest else [])]
        for name in names:
            if name not in kernel.registers and name not in kernel.params:
                problems.append(f"register {name} has no type in the register table")
    return problems
