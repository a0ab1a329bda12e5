"""PTX register types: what the register table of a lowered kernel holds for registers
the source never declares (`.param` slots, inlined parameters, the carry flag), guessed
from the instruction that defines them."""

from __future__ import annotations

from gpudiv import ir

TYPE_NAMES = frozenset({
    "pred", "b8", "u8", "s8", "b16", "u16", "s16", "f16", "bf16", "b32", "u32", "s32",
    "f32", "f16x2", "bf16x2", "tf32", "b64", "u64", "s64", "f64",
})


def guess_type(instr: ir.Instruction, types: dict[str, str]) -> str | None:
    """The PTX type of a register missing from the kernel's register table (`.param`
    slots of inlined calls, the carry flag) from the instruction defining it."""
    if instr.attrs.get("carry"):
        return "u32"
    opcode = str(instr.attrs.get("opcode", ""))
    parts = opcode.split(".")
    type_names = [p for p in parts[1:] if p in TYPE_NAMES]
    root = parts[0]
    if instr.kind == ir.ASSIGN and instr.operator in ("copy", "select", "select.not"):
        source = instr.args[1] if instr.operator != "copy" else instr.args[0]
        if isinstance(source, ir.Var) and source.name in types:
            return types[source.name]
        return type_names[-1] if type_names else None
    if root == "setp" or (root in ("vote",) and "ballot" not in parts) or root == "testp":
        return "pred"
    if root == "shfl":
        return "pred" if instr.attrs.get("element") == 1 else "b32"
    if root in ("cvt", "set", "slct") and type_names:
        return type_names[0]
    if root in ("mul", "mad") and "wide" in parts and type_names:
        return f"{type_names[-1][0]}{2 * int(type_names[-1][1:])}"
    if root in ("popc", "clz", "bfind"):
        return "u32"
    return type_names[-1] if type_names else None


def infer_types(instructions: list[ir.Instruction], table: dict[str, str]) -> dict[str, str]:
    """`table` completed with a guessed type for every register an instruction defines
    (a few passes: a copy takes the type of its source once that is known)."""
    types = dict(table)
    for _ in range(3):
        changed = False
        for instr in instructions:
            if instr.dest is not None and instr.dest not in types:
                guess = guess_type(instr, types)
                if guess is not None:
                    types[instr.dest] = guess
                    changed = True
        if not changed:
            break
    return types
