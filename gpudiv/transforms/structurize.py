"""`structurize`: make unstructured control flow structured (Wu et al. 2011, B.5).

The driver of the note: analyse the kernel (`gpudiv.analyses.structure`), apply one
transformation to the first unstructured edge, analyse again, until the kernel reduces
to one node. Forward Copy removes an unstructured acyclic edge s → x by giving s its own
copy of the region x enters (the blocks already reduced into x's node, a whole loop
included; edges leaving the region keep their targets). On Fig 1 this unfolds the shared
code of the short-circuit condition into a tree, Fig 1(c). Copies write the same registers as the
original, so no register repair is needed. Cut moves the loop exits that go elsewhere
than the main exit out of the loop: every exit goes to a chain of checks of new flag
registers (innermost loop first). Backward Copy moves a side entry into a cycle onto a
copy of the cycle without its header (loop peeling). Growth is capped
(`max_growth`, default 4x the instructions).
"""

from __future__ import annotations

import copy as _copy

from gpudiv import ir
from gpudiv.analyses.structure import (
    BACKWARD_COPY,
    CUT,
    FORWARD_COPY,
    UnstructuredEdge,
    analyze_kernel,
    block_graph,
)
from gpudiv.ir.record import replace
from gpudiv.transforms.base import Pass, PassError, register
from gpudiv.transforms.builder import Rewriter, flag_type, set_flag

STATS = "transform_stats"


def forward_copy(rewriter: Rewriter, source: str, target: str,
                 region: tuple[str, ...] = ()) -> dict[str, str]:
    """Give the edge source → target its own copy of the region that `target` enters
    (its blocks: `region`, by default `target` alone); old label → copy label."""
    block = rewriter.kernel.block(source)
    taken = any(i.kind in (ir.BRANCH, ir.JUMP) and i.target == target
                for i in block.instructions)
    if not taken:  # a fall-through edge: put a jump on it first
        source = rewriter.split_edge(source, target).label
    order = {b.label: n for n, b in enumerate(rewriter.kernel.blocks)}
    labels = sorted(set(region) | {target}, key=order.__getitem__)
    names = rewriter.clone_region(labels, "fc")
    for old, new in names.items():
        _copy_ptx_groups(rewriter.kernel, old, new)
    rewriter.retarget(source, target, names[target])
    return names


def backward_copy(rewriter: Rewriter, edge: UnstructuredEdge) -> dict[str, str]:
    """Backward Copy (Zhang's Alg. 3, loop peeling): the side entry p → x goes to a copy
    of the cycle without its header, whose edges to the header go to the original one:
    the copy runs the rest of the first iteration, then the loop is entered at its
    header. Old label → copy label."""
    region = tuple(b for b in edge.region if b != edge.header)
    return forward_copy(rewriter, edge.source, edge.target, region)


def _copy_ptx_groups(kernel: ir.Kernel, original: str, copy: str) -> None:
    """Give the copy's instructions fresh PTX groups that print as the original's PTX
    instructions (a copy of a block read from PTX prints as the same PTX text; a copy of
    an inlined call's code as the same callee instruction, the call written inline)."""
    source = kernel.attrs.get("ptx_source")
    if not isinstance(source, dict):
        return
    forms, recorded, inlined = source["forms"], source["group_forms"], source["inlined"]
    inlined_forms = source.get("inlined_forms", {})
    calls = {id(pi) for pi, _ in inlined.values()}
    fresh: dict[int, int] = {}
    pairs = zip(kernel.block(original).instructions, kernel.block(copy).instructions,
                strict=False)
    for old, new in pairs:
        group = old.group
        if group is None or group not in recorded or (group not in forms
                                                      and group not in inlined_forms):
            continue
        if group in forms and id(forms[group]) in calls:
            continue  # the parameter passing of an inlined call: that call is written inline

        if group not in fresh:
            fresh[group] = max([*forms, *recorded, -1]) + 1
            recorded[fresh[group]] = recorded[group]
            if group in forms:
                forms[fresh[group]] = _copy.copy(forms[group])
            else:
                inlined[fresh[group]] = inlined[group]
                inlined_forms[fresh[group]] = inlined_forms[group]
        new.group = fresh[group]


def _named(rewriter: Rewriter, label: str) -> str:
    """A label for a block that new branches target which the printed program keeps:
    an automatic name (`bb2`) would be printed and may clash with the automatic names
    given when the result is read back, so such a block is renamed first."""
    block = rewriter.kernel.block(label)
    if block.user_label:
        return label
    name = rewriter.fresh_label(f"{label}_target")
    for other in rewriter.kernel.blocks:
        rewriter.retarget(other.label, label, name)
    block.label, block.user_label = name, True
    return name


def _exit_through(rewriter: Rewriter, source: str, target: str, body: set[str],
                  new_target: str) -> None:
    """Make the exit edge source → target (of a loop with blocks `body`) go to
    `new_target`; a fall-through exit gets its branch inverted and a jump block (inside
    the loop) for the branch's old target."""
    block = rewriter.kernel.block(source)
    if rewriter.retarget(source, target, new_target):
        return
    branch = block.terminator
    if branch is None or branch.kind != ir.BRANCH or branch.target not in body:
        raise PassError(f"kernel {rewriter.kernel.name}: cannot redirect the loop exit "
                        f"{source} -> {target}")
    inside = branch.target
    branch.operator = "bz" if branch.operator == "bnz" else "bnz"
    branch.target = new_target
    branch.text = f"{branch.operator} ... {new_target}"
    jump = ir.Instruction(ir.JUMP, branch.loc, target=inside, text=f"jump {inside}")
    rewriter.add_block(rewriter.fresh_label(f"{source}_stay"), [jump], after=source)


def cut(rewriter: Rewriter, edges: list[UnstructuredEdge]) -> int:
    """Cut (Zhang's Alg. 2): the Cut edges of one loop all leave through one dispatcher
    block that the loop's other exits reach too; a flag per target, set in the exiting
    block, cleared at the header and in the exiting block's successors inside the loop,
    says where to go. The number of edges cut."""
    kernel = rewriter.kernel
    header = edges[0].header
    edges = [e for e in edges if e.header == header]
    names = {label: _named(rewriter, label) for label in
             {*edges[0].region, edges[0].main_exit or "", *(e.target for e in edges)} - {""}}
    header, main = names.get(header or "", header), names.get(edges[0].main_exit or "")
    body = {names[b] for b in edges[0].region}
    edges = [replace(e, source=names[e.source], target=names[e.target]) for e in edges]
    loc = kernel.block(header).loc
    graph = block_graph(kernel)
    flags: dict[str, str] = {}
    for e in edges:
        if e.target not in flags:
            flags[e.target] = rewriter.fresh_register("cut_flag", flag_type(kernel))
            rewriter.insert_at_start(header, set_flag(flags[e.target], 0, loc))
    for e in edges:
        rewriter.insert_at_end(e.source, set_flag(flags[e.target], 1, loc))
        for inside in sorted(set(graph.successors(e.source)) & body - {header}):
            rewriter.insert_at_start(inside, set_flag(flags[e.target], 0, loc))
    where = rewriter.detached_position()
    if where is None or header is None or main is None:
        raise PassError(f"kernel {kernel.name}: no place for the exit checks of loop {header}")
    labels: list[str] = []
    for target, flag in flags.items():
        test = ir.Instruction(ir.BRANCH, loc, args=(ir.Var(flag),), operator="bnz",
                              target=target, text=f"bnz {flag}, {target}")
        labels.append(rewriter.add_block(rewriter.fresh_label(f"{header}_exit"), [test],
                                         after=labels[-1] if labels else where).label)
    leave = ir.Instruction(ir.JUMP, loc, target=main, text=f"jump {main}")
    labels.append(rewriter.add_block(rewriter.fresh_label(f"{header}_exit"), [leave],
                                     after=labels[-1]).label)
    exits = [(u, t) for u in sorted(body) for t in sorted(graph.successors(u))
             if t not in body]
    for u, t in exits:
        _exit_through(rewriter, u, t, body, labels[0])
    return len(edges)


@register
class Structurize(Pass):
    """Backward Copy, Cut, then Forward Copy, until the control flow is structured."""

    name = "structurize"
    description = ("make control flow structured: Backward Copy of side entries, Cut of "
                   "multi-exit loops, Forward Copy of unstructured joins, capped growth")

    def run(self, kernel: ir.Kernel) -> ir.Kernel:
        """The kernel with its unstructured joins duplicated away."""
        growth = float(self.options.get("max_growth", 4.0))
        before = analyze_kernel(kernel)
        size = kernel.instruction_count
        limit = int(size * growth)
        rewriter = Rewriter(kernel)
        copies = cut_count = backward = 0
        origin: dict[str, str] = {}
        state = before
        while not state.structured:
            sides = [e for e in state.edges if e.kind == BACKWARD_COPY]
            cuts = [e for e in state.edges if e.kind == CUT]
            if sides:
                backward_copy(rewriter, sides[0])
                backward += 1
            elif cuts:
                cut_count += cut(rewriter, cuts)
            else:
                edge = next(e for e in state.edges if e.kind == FORWARD_COPY)
                names = forward_copy(rewriter, edge.source, edge.target, edge.region)
                origin.update({new: origin.get(old, old) for old, new in names.items()})
                copies += 1
            if kernel.instruction_count > limit:
                raise PassError(f"kernel {kernel.name}: structurize stopped at "
                                f"{kernel.instruction_count} instructions (cap {limit}, "
                                f"{growth:g}x {size}) after {copies} Forward Copies")
            state = analyze_kernel(kernel)
        counts = before.counts()
        after = kernel.instruction_count
        kernel.attrs[STATS] = {
            "branches": before.branches, "cut": cut_count, "backward_copy": backward,
            "forward_copy": copies,
            "copies": {label: list(origin.values()).count(label)
                       for label in sorted(set(origin.values()))},
            "unstructured_edges_before": sum(counts.values()),
            "instructions_before": size, "instructions_after": after,
            "static_expansion_percent": round(100.0 * (after - size) / size, 2) if size
            else 0.0}
        return kernel
