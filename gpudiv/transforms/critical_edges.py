"""`split-critical-edges`: a block on every critical edge.

An edge u → v is critical when u has several successors and v several predecessors:
code placed at the end of u runs on u's other paths too, and code at the start of v on
v's other incoming paths. Code motion (LCM and its SIMT variants) needs a place that
runs exactly when the edge is taken, so this pass puts an empty block (a jump to v) on
each such edge with `Rewriter.split_edge`. Executions only gain jumps.
"""

from __future__ import annotations

from gpudiv import ir
from gpudiv.ir.cfg import EXIT, successor_labels
from gpudiv.transforms.base import Pass, register
from gpudiv.transforms.builder import Rewriter


def critical_edges(kernel: ir.Kernel) -> list[tuple[str, str]]:
    """The critical edges between blocks of the kernel, in block order."""
    successors = {b.label: [s for s in successor_labels(kernel, i) if s != EXIT]
                  for i, b in enumerate(kernel.blocks)}
    predecessors: dict[str, int] = {}
    for targets in successors.values():
        for target in set(targets):
            predecessors[target] = predecessors.get(target, 0) + 1
    if kernel.blocks:  # the entry block is also entered from outside
        entry = kernel.blocks[0].label
        predecessors[entry] = predecessors.get(entry, 0) + 1
    return [(u, v) for u, targets in successors.items() if len(set(targets)) > 1
            for v in dict.fromkeys(targets) if predecessors.get(v, 0) > 1]


@register
class SplitCriticalEdges(Pass):
    """Put an empty block on every critical edge."""

    name = "split-critical-edges"
    description = "put an empty block (a jump) on every edge from a branch to a join"

    def run(self, kernel: ir.Kernel) -> ir.Kernel:
        """The kernel with its critical edges split."""
        rewriter = Rewriter(kernel)
        for source, target in critical_edges(kernel):
            if _is_piece_of_larger_instruction(kernel, source, target):
                continue
            rewriter.split_edge(source, target)
        return kernel


def _is_piece_of_larger_instruction(kernel: ir.Kernel, source: str, target: str) -> bool:
    """An edge of a PTX `brx.idx` table: splitting it would change one piece of an
    instruction the printer writes whole. (An edge inside an inlined call is split; the
    printer then writes that call inline.)"""
    block = kernel.block(source)
    return any("case" in i.attrs for i in block.instructions
               if i.kind in (ir.BRANCH, ir.JUMP))


def drop_unused_edge_blocks(kernel: ir.Kernel, keep: set[str]) -> int:
    """Remove the blocks that only jump on (`jump T`), have one predecessor and are not
    in `keep` (the labels before splitting): the edge blocks code motion put nothing in.
    The predecessor's branches go to T again; one that fell through into the block must
    then fall through into T. The number removed."""
    removed = 0
    for block in list(kernel.blocks):
        if block.label in keep or len(block.instructions) != 1:
            continue
        (jump,) = block.instructions
        if jump.kind != ir.JUMP or jump.guard is not None or jump.target is None:
            continue
        index = kernel.blocks.index(block)
        sources = [i for i in range(len(kernel.blocks))
                   if block.label in successor_labels(kernel, i)]
        if len(sources) != 1:
            continue
        source, rewriter = sources[0], Rewriter(kernel)
        after = kernel.blocks[index + 1].label if index + 1 < len(kernel.blocks) else None
        if rewriter.fall_through(source) == block.label and after != jump.target:
            continue
        rewriter.retarget(kernel.blocks[source].label, block.label, jump.target)
        del kernel.blocks[index]
        removed += 1
    return removed
