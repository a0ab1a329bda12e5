"""Explicit reconvergence points written as comments on branch lines.

`bz p, ELSE  # gpudiv: reconverge JOIN` (μ-SIMD) and `@%p bra $L1; // gpudiv: reconverge
$L5` (PTX) set `attrs[ir.RECONVERGE]` of the branch to the named block's label (see
`ir.RECONVERGE`); the printers write the same comment back.
"""

from __future__ import annotations

import re

from gpudiv import ir

_MARK = re.compile(r"(?:#|//)\s*gpudiv:\s*reconverge\s+(\S+)")


def read_marks(kernel: ir.Kernel, lines: list[str], path: str,
               diagnostics: list[ir.Diagnostic]) -> bool:
    """Annotate each conditional branch whose source line carries a reconvergence
    comment; an error per comment that names no block of the kernel (False if any)."""
    labels = {b.label for b in kernel.blocks}
    ok = True
    for block in kernel.blocks:
        term = block.terminator
        if term is None or term.kind != ir.BRANCH or not 0 < term.loc.line <= len(lines):
            continue
        match = _MARK.search(lines[term.loc.line - 1])
        if match is None:
            continue
        if match[1] not in labels:
            diagnostics.append(ir.Diagnostic(
                "error", f"reconvergence point '{match[1]}' is no label of kernel "
                f"{kernel.name}", path, term.loc.line, match.start(1) + 1))
            ok = False
            continue
        term.attrs[ir.RECONVERGE] = match[1]
    return ok


def mark_comment(instr: ir.Instruction, comment: str, spell=str) -> str:
    """The reconvergence comment to append to a printed branch ('' if it has none);
    `spell` writes a label as the printer does."""
    label = instr.attrs.get(ir.RECONVERGE) if instr.kind == ir.BRANCH else None
    return "" if label is None else f"  {comment} gpudiv: reconverge {spell(str(label))}"


def marked_labels(kernel: ir.Kernel) -> set[str]:
    """Labels named as reconvergence points (a printer must write them)."""
    return {str(i.attrs[ir.RECONVERGE]) for i in kernel.instructions()
            if i.kind == ir.BRANCH and ir.RECONVERGE in i.attrs}
