"""`dedicated-exits`: every loop exit becomes a real block reached only from its loop.

The CFG gives a loop exit target that is also reached from outside the loop a virtual
block on the exit edges (`X^L` in the facts, `ControlFlowGraph.synthetic`): SSA puts the
loop's η definitions there (LCSSA). This pass makes each such block a block of the IR:
a new block that jumps to X, placed right before X when a block of the loop falls
through to X, else where no block falls into it; the loop's branches to X are retargeted
to it. Afterwards the CFG needs no virtual blocks for these loops, and a rewrite can put
code on a loop's exit.
"""

from __future__ import annotations

from gpudiv import ir
from gpudiv.ir.cfg import build_cfg
from gpudiv.transforms.base import Pass, PassError, register
from gpudiv.transforms.builder import Rewriter


@register
class DedicatedExits(Pass):
    """Make the CFG's virtual loop-exit blocks real IR blocks."""

    name = "dedicated-exits"
    description = "give every loop exit a real block reached only from inside the loop"

    def run(self, kernel: ir.Kernel) -> ir.Kernel:
        """The kernel with one new block per virtual loop exit."""
        cfg = build_cfg(kernel)
        if cfg.incomplete:  # (without its loops, the CFG has no loop exits to give)
            raise PassError(f"kernel {kernel.name}: too large: {cfg.incomplete}")
        rewriter = Rewriter(kernel)
        for split, target in list(cfg.synthetic.items()):
            sources = sorted(cfg.graph.predecessors(split), key=rewriter.index)
            loop = split.rsplit("^", 1)[1]
            label = rewriter.fresh_label(f"{target}_exit_{loop}")
            jump = ir.Instruction(ir.JUMP, kernel.block(target).loc, target=target,
                                  text=f"jump {target}")
            falling = [s for s in sources if rewriter.fall_through(rewriter.index(s)) == target]
            if falling:
                rewriter.add_block(label, [jump], after=falling[0])
            else:
                where = rewriter.detached_position()
                if where is None:
                    raise PassError(f"kernel {kernel.name}: no place for the exit block of "
                                    f"loop {loop} into {target}")
                rewriter.add_block(label, [jump], after=where)
            for source in sources:
                rewriter.retarget(source, target, label)
        return kernel
