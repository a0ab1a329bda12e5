"""`structurize`: make unstructured control flow structured (Wu et al. 2011, B.5).

The driver of the note: analyse the kernel (`gpudiv.analyses.structure`), apply one
transformation to the first unstructured edge, analyse again, until the kernel reduces
to one node. Forward Copy removes an unstructured acyclic edge s → x by giving s its own
copy of x (the copy keeps x's successors; repeating this unfolds the shared code of a
short-circuit condition into a tree, Fig 1(c)). Copies write the same registers as the
original, so no register repair is needed. Cut (unstructured loop exits) and Backward
Copy (side entries into loops) are not implemented yet: a kernel that needs them fails
with a clear error. Growth is capped (`max_growth`, default 4× the instructions).
"""

from __future__ import annotations

from gpudiv import ir
from gpudiv.analyses.structure import BACKWARD_COPY, CUT, FORWARD_COPY, analyze_kernel
from gpudiv.transforms.base import Pass, PassError, register
from gpudiv.transforms.builder import Rewriter

STATS = "transform_stats"


def forward_copy(rewriter: Rewriter, source: str, target: str) -> str:
    """Give the edge source → target its own copy of `target`; the copy's label."""
    block = rewriter.kernel.block(source)
    taken = any(i.kind in (ir.BRANCH, ir.JUMP) and i.target == target
                for i in block.instructions)
    if not taken:  # a fall-through edge: put a jump on it first
        source = rewriter.split_edge(source, target).label
    copy = rewriter.clone_region([target], "fc")[target]
    rewriter.retarget(source, target, copy)
    return copy


@register
class Structurize(Pass):
    """Forward Copy until the control flow is structured."""

    name = "structurize"
    description = ("make control flow structured: Forward Copy of unstructured joins "
                   "(Cut/Backward Copy not yet), capped growth")

    def run(self, kernel: ir.Kernel) -> ir.Kernel:
        """The kernel with its unstructured joins duplicated away."""
        growth = float(self.options.get("max_growth", 4.0))
        before = analyze_kernel(kernel)
        size = kernel.instruction_count
        limit = max(int(size * growth), size + 64)
        rewriter = Rewriter(kernel)
        copies = 0
        origin: dict[str, str] = {}
        state = before
        while not state.structured:
            blocking = [e for e in state.edges if e.kind in (CUT, BACKWARD_COPY)]
            if blocking:
                e = blocking[0]
                raise PassError(f"kernel {kernel.name}: line {e.line}: edge {e.source} -> "
                                f"{e.target} needs {e.kind.replace('_', ' ')}, which "
                                "structurize does not implement yet")
            edge = next(e for e in state.edges if e.kind == FORWARD_COPY)
            copy = forward_copy(rewriter, edge.source, edge.target)
            origin[copy] = origin.get(edge.target, edge.target)
            copies += 1
            if kernel.instruction_count > limit:
                raise PassError(f"kernel {kernel.name}: structurize stopped at "
                                f"{kernel.instruction_count} instructions (cap {limit}, "
                                f"{growth:g}x {size}) after {copies} Forward Copies")
            state = analyze_kernel(kernel)
        counts = before.counts()
        after = kernel.instruction_count
        kernel.attrs[STATS] = {
            "branches": before.branches, "cut": 0, "backward_copy": 0,
            "forward_copy": copies,
            "copies": {label: list(origin.values()).count(label)
                       for label in sorted(set(origin.values()))},
            "unstructured_edges_before": sum(counts.values()),
            "instructions_before": size, "instructions_after": after,
            "static_expansion_percent": round(100.0 * (after - size) / size, 2) if size
            else 0.0}
        return kernel
