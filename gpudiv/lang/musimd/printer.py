"""IR → μ-SIMD text (the syntax of README "μ-SIMD syntax"); parse(print(k)) == k."""

from __future__ import annotations

from gpudiv import ir
from gpudiv.lang.marks import mark_comment, marked_labels
from gpudiv.lang.printing import PrintError

_UNARY = {"neg": "-", "!": "!", "~": "~"}


def print_musimd(program: ir.Program) -> str:
    """Every kernel of a μ-SIMD program, separated by blank lines."""
    return "\n".join(print_kernel(k) for k in program.kernels)


def print_kernel(kernel: ir.Kernel) -> str:
    """One kernel: header, then each block's label (when it has a name in the source or
    something jumps to it) and instructions."""
    targets = {i.target for i in kernel.instructions() if i.target is not None}
    targets |= marked_labels(kernel)
    lines = [f"kernel {kernel.name}({', '.join(kernel.params)})"]
    for block in kernel.blocks:
        if block.user_label or block.label in targets or not block.instructions:
            lines.append(f"{block.label}:")
        lines += [f"    {instruction_text(i)}{mark_comment(i, '#')}" for i in block.instructions]
    return "\n".join(lines) + "\n"


def _operand(value: ir.Operand) -> str:
    return str(value)


def instruction_text(instr: ir.Instruction) -> str:
    """One instruction in μ-SIMD syntax (PrintError for one μ-SIMD cannot say)."""
    if instr.guard is not None or instr.implicit:
        raise PrintError(f"cannot print guarded instruction '{instr.text}' as μ-SIMD",
                         instr.loc)
    kind, args, op = instr.kind, [_operand(a) for a in instr.args], instr.operator
    if kind == ir.ASSIGN and op == "copy" and len(args) == 1:
        return f"{instr.dest} = {args[0]}"
    if kind == ir.ASSIGN and op in _UNARY and len(args) == 1:
        return f"{instr.dest} = {_UNARY[op]} {args[0]}"  # `- 5` is neg(5), `-5` a literal
    if kind == ir.ASSIGN and op in ir.BINARY_OPERATORS and len(args) == 2:
        return f"{instr.dest} = {args[0]} {op} {args[1]}"
    if kind == ir.LOAD and instr.space in ("shared", "local") and len(args) == 1:
        return f"{instr.dest} = {instr.space}[{args[0]}]"
    if kind == ir.STORE and instr.space in ("shared", "local") and len(args) == 2:
        return f"{instr.space}[{args[0]}] = {args[1]}"
    if kind == ir.ATOMIC and instr.space == "shared" and op == "inc" and len(args) == 1:
        return f"{instr.dest} = atominc shared[{args[0]}]"
    if kind == ir.ATOMIC and instr.space == "shared" and op == "add" and len(args) == 2:
        return f"{instr.dest} = atomadd shared[{args[0]}], {args[1]}"
    if kind == ir.BRANCH and op in ("bz", "bnz") and len(args) == 1:
        return f"{op} {args[0]}, {instr.target}"
    if kind == ir.JUMP:
        return f"jump {instr.target}"
    if kind in (ir.SYNC, ir.BARRIER, ir.STOP) and not args:
        return kind
    raise PrintError(f"cannot print '{instr.text or kind}' ({kind} {op}) as μ-SIMD", instr.loc)
