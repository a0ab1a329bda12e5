"""From lowered items to an IR kernel: basic blocks, the register table, generic
accesses that point into local memory, launch directives, and the record the PTX
printer needs to write the kernel back (`_source_record`)."""

from __future__ import annotations

from gpudiv import ir
from gpudiv.lang.ptx.flatten import _FuncInfo
from gpudiv.lang.ptx.forms import (
    PFunction,
)
from gpudiv.lang.ptx.forms import number as _number
from gpudiv.lang.ptx.forms import type_bytes as _type_bytes
from gpudiv.lang.ptx.lower import _KernelLowering
from gpudiv.lang.ptx.types import infer_types

# ---------------------------------------------------------------------------------------
# From lowered items to a kernel.
# ---------------------------------------------------------------------------------------

def _source_record(fn: PFunction, info: _FuncInfo, lowering: _KernelLowering,
                   kernel: ir.Kernel) -> dict[str, object]:
    """What the PTX printer needs to write the kernel back: its header, the declarations
    of its body, its labels, and for each group of IR instructions the PTX instruction it
    came from with the forms the group had when it was read (a group whose instructions
    no longer have those forms was rewritten and is printed from the IR)."""
    groups: dict[int, list[tuple]] = {}
    for instr in kernel.instructions():
        if instr.group is not None:
            groups.setdefault(instr.group, []).append(instr.form())
    return {
        "linkage": tuple(fn.linkage),
        "params": tuple(fn.params),
        "directives": tuple(fn.directives),
        "symbols": dict(info.symbol_details),
        "param_decls": dict(info.param_decls),
        "tables": dict(info.table_forms),
        "labels": frozenset(lowering.own_labels),
        "forms": dict(lowering.group_forms),
        "group_forms": {g: tuple(forms) for g, forms in groups.items()},
        "inlined": dict(lowering.inlined_groups),
        "inlined_forms": dict(lowering.inlined_forms),
        "bodies": {body.fn.name: (frozenset(body.registers), frozenset(body.register_ranges),
                                  frozenset(body.labels), dict(body.symbol_details))
                   for body in list(lowering.bodies.values())[1:]},
    }


def _register_table(lowering: _KernelLowering, instructions: list[ir.Instruction],
                    guard_temps: dict[str, str]) -> dict[str, str]:
    """The type of every register of the kernel: as declared; a guard temporary has the
    type of the register its select updates; the others (`.param` slots, parameters of
    inlined functions, the carry flag) as their defining instruction says."""
    table = dict(lowering.var_types)
    for temp, dest in guard_temps.items():
        if dest in table:
            table[temp] = table[dest]
    table = infer_types(instructions, table)
    # A `.param` slot no instruction types (the result of an indirect call): its
    # declaration's type, when it declares a scalar.
    declared = dict(lowering.kernel_info.param_decls)
    for suffix, (*_, callee) in lowering.call_instances.items():  # inlined copies' slots
        declared.update({name + suffix: detail for name, detail
                         in lowering.unit.info(callee).param_decls.items()})
    for instr in instructions:
        for name in (*instr.used_vars, *([instr.dest] if instr.dest else [])):
            if name in table:
                continue
            type_, _, size = declared.get(name.split("+", 1)[0], ("", 0, 0))
            if type_ and size == _type_bytes(type_):
                table[name] = type_
    return table


def _split_blocks(items: list, referenced: set[str]) -> list[ir.Block]:
    """Basic blocks: a referenced label starts a block, as does the instruction after a
    terminator. Labels nothing branches to (debug markers) do not split a block."""
    blocks: list[ir.Block] = []
    pending: list[tuple[str, ir.Loc, bool]] = []
    current: ir.Block | None = None
    counter = 0
    for item in items:
        if isinstance(item, tuple):
            _, name, loc, user = item
            if (name not in referenced and not pending and current is not None
                    and current.terminator is None):
                continue
            pending.append((name, loc, user))
            continue
        if pending or current is None or current.terminator is not None:
            if pending:
                keep = [p for p in pending if p[0] in referenced] or [pending[0]]
                for name, loc, user in keep[:-1]:
                    blocks.append(ir.Block(name, [], loc, user_label=user))
                name, loc, user = keep[-1]
                pending = []
            else:
                counter += 1
                name, loc, user = f"bb{counter}", item.loc, False
            current = ir.Block(name, [], loc, user_label=user)
            blocks.append(current)
        current.instructions.append(item)
    for name, loc, user in pending:
        if name in referenced:
            blocks.append(ir.Block(name, [], loc, user_label=user))
    return blocks


def _assignment_users(instructions: list[ir.Instruction]) -> dict[str, list[ir.Instruction]]:
    """For each register, the assignments that read it (how addresses flow)."""
    users: dict[str, list[ir.Instruction]] = {}
    for instr in instructions:
        if instr.kind == ir.ASSIGN and instr.dest is not None:
            for name in instr.used_vars:
                users.setdefault(name, []).append(instr)
    return users


def _derived(seeds: set[str], users: dict[str, list[ir.Instruction]]) -> set[str]:
    """The seeds and every register assigned from one of them, transitively."""
    found = set(seeds)
    work = list(found)
    while work:
        for instr in users.get(work.pop(), ()):
            if instr.dest not in found:
                found.add(instr.dest)
                work.append(instr.dest)
    return found


def local_registers(instructions: list[ir.Instruction],
                    local_inputs: frozenset[str] = frozenset(),
                    users: dict[str, list[ir.Instruction]] | None = None) -> set[str]:
    """The registers that may hold an address into thread-private memory: derived from
    `cvta.local`, from a `.local` symbol, or from the given inputs of a `.func` analysed
    on its own (`call.input` registers that point into the caller's stack frame).
    `users`: `_assignment_users` of the instructions, when the caller has them."""
    seeds = set(local_inputs)
    for instr in instructions:
        if instr.kind == ir.ASSIGN and instr.dest is not None and (
                str(instr.attrs.get("opcode", "")).startswith("cvta.local")
                or "local" in instr.attrs.get("symbol_spaces", ())):
            seeds.add(instr.dest)
    return _derived(seeds, users if users is not None else _assignment_users(instructions))


def _addresses(instr: ir.Instruction) -> list[str]:
    """The registers an instruction uses as addresses whose memory space matters: a
    generic access's address, a summarised call's pointer arguments (`address_args`)."""
    if instr.space == "generic" and instr.kind in (ir.LOAD, ir.STORE, ir.ATOMIC):
        chosen = instr.args[:1]
    else:
        keys = instr.attrs.get("address_args")
        if not keys:  # (most instructions: no generator made for them)
            return []
        chosen = [instr.args[k] for k in keys]
    return [a.name for a in chosen if isinstance(a, ir.Var)]


def local_objects(kernel: ir.Kernel) -> set[str]:
    """Names of the kernel's `.local` symbols (the stack frame `__local_depot*` included)."""
    symbols = kernel.attrs.get("symbols") or {}
    return {name for name, detail in symbols.items() if detail and detail[0] == "local"}


def infer_generic_spaces(instructions: list[ir.Instruction]) -> None:
    """Make a generic load/store/atomic a `.local` one when its address may point into
    thread-private memory (`local_registers`); a summarised call's result that reads
    memory through a pointer argument that may becomes an opaque `call` (thread-private:
    divergent). In a `.func` lowered on its own, an access or call whose address derives
    from parameters notes them (`via_inputs`): it reads thread-private memory in a calling
    context that passes a `.local` address there (`gpudiv.analyses.call_summaries`).

    Flow-insensitive: a register may point wherever any value assigned to it may point.
    Only `.local` is inferred: it is what makes a load a source of divergence."""
    users = _assignment_users(instructions)
    local = local_registers(instructions, users=users)
    inputs = [i.dest for i in instructions if i.operator == "call.input" and i.dest]
    via = {name: _derived({name}, users) for name in inputs}
    for instr in instructions:
        access = instr.space == "generic" and instr.kind in (ir.LOAD, ir.STORE, ir.ATOMIC)
        names = _addresses(instr)
        if access and (not local.isdisjoint(names)
                       or instr.attrs.get("symbol_space") == "local"):
            instr.space = "local"
            instr.attrs["generic"] = True
        elif not access and not local.isdisjoint(names):
            instr.kind, instr.operator = ir.OPAQUE, "call"
        elif names and inputs:
            through = tuple(name for name in inputs if not via[name].isdisjoint(names))
            if through:
                instr.attrs["via_inputs"] = through


def _launch_directives(directives: list[str]) -> dict[str, tuple[int, ...]]:
    """`.reqntid` and `.maxntid` of a header (`.reqntid 32, 8, 1` → {"reqntid": (32, 8,
    1)}): the block shape a kernel requires or bounds (gpudiv.analyses.launch_shape)."""
    found: dict[str, tuple[int, ...]] = {}
    for directive in directives:
        name, _, values = directive.partition(" ")
        if name in (".reqntid", ".maxntid"):
            try:
                found[name[1:]] = tuple(_number(v) for v in values.split(", ") if v)
            except ValueError:
                continue
    return found
