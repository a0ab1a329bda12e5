"""`canonicalize`: a smaller CFG with the same executions.

1. blocks that no path from the entry reaches are removed (the CFG already ignores them);
2. a `jump` to the block that follows it is removed (the block falls through instead),
   unless it is a piece of a larger PTX instruction (`brx.idx`). A jump inside an
   inlined call may go: the printer then writes that call inline.

Both keep every executed instruction but such jumps, so memory and the order of
convergent operations are unchanged.
"""

from __future__ import annotations

from gpudiv import ir
from gpudiv.ir.cfg import build_cfg
from gpudiv.transforms.base import Pass, register
from gpudiv.transforms.builder import Rewriter


@register
class Canonicalize(Pass):
    """Remove unreachable blocks and jumps to the next block."""

    name = "canonicalize"
    description = "remove unreachable blocks and jumps to the next block"

    def run(self, kernel: ir.Kernel) -> ir.Kernel:
        """The kernel, simplified in place."""
        unreachable = set(build_cfg(kernel).unreachable)
        kernel.blocks = [b for b in kernel.blocks if b.label not in unreachable]
        rewriter = Rewriter(kernel)
        for index, block in enumerate(kernel.blocks[:-1]):
            term = block.terminator
            following = kernel.blocks[index + 1].label
            if (term is not None and term.kind == ir.JUMP and term.target == following
                    and term.guard is None and not _part_of_larger_instruction(term)):
                rewriter.erase(term)
        return kernel


def _part_of_larger_instruction(instr: ir.Instruction) -> bool:
    """A jump that is one piece of a PTX `brx.idx` (removing it alone would leave the
    rest unprintable)."""
    return "case" in instr.attrs
