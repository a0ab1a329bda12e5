"""Guarded definitions as selects: the form of `@p op d, …` the analyses want.

The PTX lowering keeps a guarded definition as one guarded instruction (`d = op …` with
`Instruction.guard`), which is what PTX says and what the printer writes back. The
analyses and the interpreter want the value flow explicit: `guard_to_select` rewrites it
into the speculated computation `d@gN = op …` (still guarded: it reads the guard) and
`d = select(g, d@gN, d)` (`select.not` under `@!g`): where the guard fails `d` keeps its
old value. When `d` has no other definition in the kernel, the select does not read the
old value (it would only be an undefined one). `gpudiv.lang.load` applies it to every PTX
kernel it reads (`canonical=True`, the default); the `guard-to-select` pass
(`gpudiv.transforms.canonical`) applies it to a kernel read with `canonical=False`.
"""

from __future__ import annotations

from gpudiv import ir

# The attributes of a guarded definition that its select shares (where it came from).
_SHARED_ATTRS = ("opcode", "origin", "inlined_at", "function")


def guard_to_select(kernel: ir.Kernel) -> dict[str, str]:
    """Rewrite every guarded definition of the kernel (in place, in program order) into a
    speculated computation and a select. Guard temporary → the register it updates."""
    done = {i.args[1].name for i in kernel.instructions() if i.attrs.get("guarded_select")
            and len(i.args) > 1 and isinstance(i.args[1], ir.Var)}
    temps: dict[str, str] = {}
    selects: list[ir.Instruction] = []
    counter = 0
    for block in kernel.blocks:
        rewritten: list[ir.Instruction] = []
        for instr in block.instructions:
            rewritten.append(instr)
            guard, dest = instr.guard, instr.dest
            if guard is None or dest is None or dest in done or instr.kind in ir.TERMINATORS:
                continue
            counter += 1
            temp = f"{dest}@g{counter}"
            while temp in kernel.registers or temp in temps:
                counter += 1
                temp = f"{dest}@g{counter}"
            instr.dest = temp
            attrs: dict[str, object] = {k: instr.attrs[k] for k in _SHARED_ATTRS
                                        if k in instr.attrs}
            attrs["guarded_select"] = True
            select = ir.Instruction(ir.ASSIGN, instr.loc, dest=dest,
                                    args=(guard.operand, ir.Var(temp), ir.Var(dest)),
                                    operator="select.not" if guard.negated else "select",
                                    text=instr.text, attrs=attrs, group=instr.group)
            rewritten.append(select)
            selects.append(select)
            temps[temp] = dest
        block.instructions = rewritten
    _drop_undefined_old_values(kernel, selects)
    for temp, dest in temps.items():
        if dest in kernel.registers:
            kernel.registers[temp] = kernel.registers[dest]
    return temps


def _drop_undefined_old_values(kernel: ir.Kernel, selects: list[ir.Instruction]) -> None:
    """A select whose register has no other definition in the kernel does not read the
    register's old value."""
    if not selects:
        return
    counts: dict[str, int] = {}
    for instr in kernel.instructions():
        if instr.dest is not None:
            counts[instr.dest] = counts.get(instr.dest, 0) + 1
    for select in selects:
        if counts.get(select.dest or "") == 1:
            select.args = select.args[:2]
