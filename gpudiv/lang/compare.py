"""Structural equality of programs, for round trips: parse(print(p)) must equal p.

Two kernels are the same when they have the same name, parameters, specials, register
table and blocks (label, whether the source named it) with instructions of equal forms
and equal notes. Source positions, instruction ids and texts are not compared (a printer
changes line numbers and spacing), nor the `inlined_at` note (the printer drops the
DWARF references it comes from).
"""

from __future__ import annotations

from gpudiv import ir

IGNORED_NOTES = frozenset({"inlined_at"})


def instruction_shape(instr: ir.Instruction) -> tuple:
    """What a round trip keeps of an instruction."""
    notes = tuple(sorted((k, repr(v)) for k, v in instr.attrs.items() if k not in IGNORED_NOTES))
    return (*instr.form(), notes)


def kernel_shape(kernel: ir.Kernel) -> dict[str, object]:
    """What a round trip keeps of a kernel, part by part."""
    return {
        "params": tuple(kernel.params),
        "specials": tuple(sorted(kernel.specials.items())),
        "registers": tuple(sorted(kernel.registers.items())),
        "blocks": tuple((b.label, b.user_label, len(b.instructions)) for b in kernel.blocks),
        "instructions": tuple(instruction_shape(i) for i in kernel.instructions()),
    }


def first_difference(before: ir.Program, after: ir.Program) -> str | None:
    """None when the programs are structurally equal, else where they first differ."""
    names = [k.name for k in before.kernels]
    if names != [k.name for k in after.kernels]:
        return f"kernels {names} became {[k.name for k in after.kernels]}"
    for old, new in zip(before.kernels, after.kernels, strict=True):
        a, b = kernel_shape(old), kernel_shape(new)
        for part in a:
            if a[part] == b[part]:
                continue
            if part == "instructions":
                pairs = zip(a[part], b[part], strict=False)  # type: ignore[call-overload]
                for n, (x, y) in enumerate(pairs):
                    if x != y:
                        return f"kernel {old.name}: instruction {n}: {x} became {y}"
            return f"kernel {old.name}: {part} differ"
    return None
