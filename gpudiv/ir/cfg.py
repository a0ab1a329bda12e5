"""Control-flow graph of a kernel: edges, dominator and post-dominator trees, loop forest.

The graph has a virtual entry (`^entry`) and a virtual exit (`^exit`). Blocks that cannot
be reached from the entry are removed (and reported); blocks from which the exit cannot be
reached (endless loops) get a fake edge to the exit so that post-dominance is defined.
The graph is `gpudiv.ir.digraph.DiGraph`; the rules reason about the trees (control
dependence, regions).
"""

from __future__ import annotations

from gpudiv import ir
from gpudiv.ir.digraph import (
    DiGraph,
    ancestors,
    sink_components,
    strongly_connected_components,
)
from gpudiv.ir.dominators import (
    IndexedGraph,
    dominator_tree,
    immediate_dominators,
    numbers_of_idom,
    tree_by_node,
    tree_by_number,
)
from gpudiv.ir.record import Record

ENTRY = "^entry"
EXIT = "^exit"

# The most blocks the search for rejoin points walks in all (`_rejoin_points`). Its walks
# are part of what `region_walk` counts, so a kernel over this is over the analysis's
# region limit too (gpudiv.analyses.driver.MAX_REGION_WALK is this number): the search
# stops there instead of going on quadratically in, say, a loop of many `continue`s.
MAX_REJOIN_WALK = 4_000_000
# The most (block, loop) memberships the loop forest finds (each loop holds its inner
# loops' blocks: a nest of N loops has about N²/2): a nest of 1,000 loops has 500,000
# and took 5 s to build; one of 2,000, 31 s; one of 4,000, more than 5 minutes.
MAX_LOOP_BLOCKS = 1_000_000


class CFGLimit(Exception):
    """SSA asked of a CFG whose construction stopped a search at its limit
    (`ControlFlowGraph.incomplete` says which)."""


class Loop(Record):
    """A cycle of the loop-nesting forest: its headers (entry blocks) and all its blocks."""

    name: str
    headers: list[str]
    blocks: set[str]
    parent: str | None
    depth: int

    def __init__(self, name: str, headers: list[str], blocks: set[str], parent: str | None = None,
                       depth: int = 1) -> None:
        self.name = name
        self.headers = headers
        self.blocks = blocks
        self.parent = parent
        self.depth = depth


class Rejoin(Record):
    """A block where lanes split by a branch inside a cycle may meet again after different
    numbers of trips around that cycle (temporal divergence inside the cycle).

    `block` is the immediate post-dominator of every branch in `branches`; it lies in
    `loop`, the outermost cycle that contains the branch and the block and that some path
    from the branch re-enters through one of the cycle's headers before reaching `block`.
    A value defined in `loop` and read at or after `block` may then hold the value of a
    different iteration in each lane.
    """

    block: str
    loop: str
    branches: list[str]

    def __init__(self, block: str, loop: str, branches: list[str]) -> None:
        self.block = block
        self.loop = loop
        self.branches = branches


class ControlFlowGraph(Record):
    """Per-kernel CFG with its dominance information and loops."""

    kernel: ir.Kernel
    graph: DiGraph
    order: list[str]
    idom: dict[str, str]
    ipdom: dict[str, str]
    loops: dict[str, Loop]
    unreachable: list[str]
    no_exit: list[str]
    falls_off_end: bool
    loop_exits: dict[str, list[str]]
    synthetic: dict[str, str]
    rejoins: dict[str, Rejoin]
    sync_ipdom: dict[str, str]
    doomed: set[str]
    incomplete: str | None

    def __init__(self, kernel: ir.Kernel, graph: DiGraph, order: list[str], idom: dict[str, str],
                       ipdom: dict[str, str], loops: dict[str, Loop],
                       unreachable: list[str] | None = None, no_exit: list[str] | None = None,
                       falls_off_end: bool = False, loop_exits: dict[str, list[str]] | None = None,
                       synthetic: dict[str, str] | None = None,
                       rejoins: dict[str, Rejoin] | None = None,
                       sync_ipdom: dict[str, str] | None = None,
                       doomed: set[str] | None = None, incomplete: str | None = None) -> None:
        self.kernel = kernel
        self.graph = graph
        self.order = order
        self.idom = idom
        self.ipdom = ipdom
        self.loops = loops
        self.unreachable = [] if unreachable is None else unreachable
        self.no_exit = [] if no_exit is None else no_exit
        self.falls_off_end = falls_off_end
        self.loop_exits = {} if loop_exits is None else loop_exits
        self.synthetic = {} if synthetic is None else synthetic
        self.rejoins = {} if rejoins is None else rejoins
        self.sync_ipdom = {} if sync_ipdom is None else sync_ipdom
        self.doomed = set() if doomed is None else doomed
        self.incomplete = incomplete

    def successors(self, label: str) -> list[str]:
        """Successor blocks in a stable order (branch target last)."""
        return list(self.graph.successors(label))

    def predecessors(self, label: str) -> list[str]:
        """Predecessor blocks."""
        return list(self.graph.predecessors(label))

    def numbering(self) -> tuple[IndexedGraph, list[int]]:
        """The graph's nodes numbered (`IndexedGraph`), and the number of each one's
        immediate dominator (-1: ENTRY): made once, kept out of pickles and copies. The
        graph is not to be edited once the CFG is built."""
        found = self.__dict__.get("_numbering")
        if found is None:
            numbered = IndexedGraph(self.graph)
            found = self.__dict__["_numbering"] = (numbered,
                                                   numbers_of_idom(numbered, self.idom))
        return found

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_numbering", None)
        return state

    def innermost_loop(self, label: str) -> Loop | None:
        """The deepest loop that contains the block, if any."""
        best = None
        for loop in self.loops.values():
            if label in loop.blocks and (best is None or loop.depth > best.depth):
                best = loop
        return best


def successor_labels(kernel: ir.Kernel, index: int) -> list[str]:
    """Labels a block flows to: fall-through first, then the branch or jump target."""
    block = kernel.blocks[index]
    following = kernel.blocks[index + 1].label if index + 1 < len(kernel.blocks) else EXIT
    term = block.terminator
    if term is None:
        return [following]
    if term.kind == ir.STOP:
        return [EXIT]
    if term.kind == ir.JUMP:
        return [term.target]
    return [following] if following == term.target else [following, term.target]


def _loop_forest(graph: DiGraph, order: dict[str, int], parent: Loop | None,
                 loops: dict[str, Loop], budget: int, entering: DiGraph | None = None
                 ) -> bool:
    """Find the cycles of `graph` and, in each with its header edges removed, the cycles
    within; a member is a header when an edge of `entering` (default: `graph`) comes in
    from outside. `loops` gets them outermost first, each loop's inner loops before its
    next sibling (a stack of the nests being searched, not recursion: a nest a thousand
    loops deep exceeded Python's recursion limit). False (the search stopped) once the
    loops found hold more than `budget` blocks in all."""
    searching = [(graph, graph if entering is None else entering, parent,
                  iter(strongly_connected_components(graph)))]
    while searching:
        graph, entering, parent, components = searching[-1]
        for component in components:
            if len(component) == 1:
                (only,) = component
                if not graph.has_edge(only, only):
                    continue
            headers = sorted(
                (n for n in component
                 if any(p not in component for p in entering.predecessors(n))),
                key=order.get)
            if not headers:
                headers = [min(component, key=order.get)]
            budget -= len(component)
            if budget < 0:
                return False
            loop = Loop(headers[0], headers, set(component),
                        parent.name if parent else None, (parent.depth + 1) if parent else 1)
            loops[loop.name] = loop
            # the cycle's own edges, header entries removed (walking only its members: a
            # copy of the graph per cycle was quadratic in a kernel of many loop nests)
            members = sorted(component, key=order.get)
            inner = DiGraph()
            inner.add_nodes_from(members)
            inner.add_edges_from((u, v) for u in members for v in graph.successors(u)
                                 if v in component and v not in headers)
            searching.append((inner, inner, loop, iter(strongly_connected_components(inner))))
            break
        else:
            searching.pop()
    return True


def _block_successors(kernel: ir.Kernel, labels: list[str]) -> list[list[int]]:
    """Each block's successors by block index, as `successor_labels` gives them (the
    exit's index is the number of blocks, and its own list, last, is empty): made here
    without a list of labels per block, a third of the CFG's time on a small kernel."""
    count = len(labels)
    index_of = {label: i for i, label in enumerate(labels)}
    stop, jump = ir.STOP, ir.JUMP
    successors: list[list[int]] = []
    for following, block in enumerate(kernel.blocks, start=1):  # (count: the exit)
        term = block.terminator
        if term is None:
            successors.append([following])
        elif term.kind == stop:
            successors.append([count])
        else:
            target = index_of[term.target]
            if term.kind == jump or target == following:
                successors.append([target])
            else:
                successors.append([following, target])
    successors.append([])
    return successors


def _reach(adjacency: list[list[int]], start: int) -> bytearray:
    """Whether each node (by index) is reached from `start` along `adjacency`."""
    reached = bytearray(len(adjacency))
    reached[start] = True
    work = [start]
    while work:
        for v in adjacency[work.pop()]:
            if not reached[v]:
                reached[v] = True
                work.append(v)
    return reached


def build_cfg(kernel: ir.Kernel) -> ControlFlowGraph:
    """Build the CFG of a kernel, its dominator/post-dominator trees and loop forest.

    Which blocks are reachable, which reach the exit and whether any edge goes back up the
    block order are found on lists of block indices before the graph of labels is built
    (on the graph, each step was a lookup in a dict the size of the kernel)."""
    labels = [b.label for b in kernel.blocks]
    last = kernel.blocks[-1].terminator
    falls_off = last is None or last.kind == ir.BRANCH
    successors = _block_successors(kernel, labels)
    count = len(labels)  # (the exit's index)
    reached = _reach(successors, 0)
    unreachable = [labels[i] for i in range(count) if not reached[i]]
    order = [labels[i] for i in range(count) if reached[i]]
    targets = [*labels, EXIT]
    edges = [(ENTRY, labels[0])]
    predecessors: list[list[int]] = [[] for _ in targets]
    forward_only = True  # (every edge goes down the block order: no cycle to look for)
    for u in range(count):
        if reached[u]:
            for v in successors[u]:
                edges.append((labels[u], targets[v]))
                predecessors[v].append(u)
                forward_only = forward_only and v > u
    graph = DiGraph()
    graph.add_nodes_from((ENTRY, EXIT, *order))
    graph.add_edges_from(edges)
    reaching = _reach(predecessors, count)

    position = {label: i for i, label in enumerate(order)}
    # Post-dominance needs every block to reach the exit: connect endless loops to it, in
    # a copy of the graph made only then (otherwise the two stay equal: edits go to both).
    # Each component of the blocks that cannot reach the exit that has no successor among
    # them gets one edge, from its last block; every other such block reaches one of them.
    # (Adding one edge at a time and searching again was quadratic in the endless loops.)
    pdom_graph = graph
    no_exit: list[str] = []
    stuck = [labels[i] for i in range(count) if reached[i] and not reaching[i]]
    if stuck:
        pdom_graph = graph.copy()
        for sink in sink_components(graph.subgraph(stuck)):
            member = max(sink, key=position.__getitem__)
            pdom_graph.add_edge(member, EXIT)
            no_exit.append(member)

    position[ENTRY] = -1
    position[EXIT] = len(order)
    loops: dict[str, Loop] = {}
    incomplete = None
    # On the whole graph, not a copy without ENTRY and EXIT: neither is on a cycle, and
    # the depth-first search from ENTRY meets the blocks in the copy's order.
    if not forward_only and not _loop_forest(graph, position, None, loops, MAX_LOOP_BLOCKS):
        loops = {}  # (no loops, no loop exits, no rejoin points: the CFG is incomplete)
        incomplete = (f"its loops hold more than {MAX_LOOP_BLOCKS} blocks in all (a deep "
                      "nest of loops)")
    synthetic: dict[str, str] = {}
    innermost = _innermost_loops(loops)  # (kept up to date by `_dedicated_exits`)
    loop_exits = _dedicated_exits(graph, pdom_graph, loops, innermost, order, synthetic)

    numbered = IndexedGraph(graph)  # both trees walk one numbering of the graph
    tree = dominator_tree(numbered, numbered.number[ENTRY])
    idom = tree_by_node(numbered, *tree)
    ipdom = immediate_dominators(
        (numbered if pdom_graph is graph else IndexedGraph(pdom_graph)).reverse(), EXIT)
    idom.pop(ENTRY, None)
    ipdom.pop(EXIT, None)
    doomed = _doomed_blocks(kernel, pdom_graph)
    sync_ipdom = _sync_post_dominators(pdom_graph, ipdom, doomed)
    rejoins = _rejoin_points(graph, sync_ipdom, loops, innermost, MAX_REJOIN_WALK)
    if rejoins is None:
        incomplete = ("finding the rejoin points of its branches in cycles walks more than "
                      f"{MAX_REJOIN_WALK} blocks")
    cfg = ControlFlowGraph(kernel, graph, order, idom, ipdom, loops, unreachable, no_exit,
                           falls_off, loop_exits, synthetic, rejoins or {}, sync_ipdom,
                           doomed, incomplete)
    cfg.__dict__["_numbering"] = (numbered, tree_by_number(numbered, *tree))
    return cfg


def _aborting_stops(kernel: ir.Kernel) -> set[str]:
    """Blocks whose `trap` (or, in a kernel that also returns with `ret`, whose `exit`)
    ends the thread abnormally: the lanes that run it never meet their warp again."""
    stops = {b.label: str(b.terminator.attrs.get("opcode", "")) for b in kernel.blocks
             if b.terminator is not None and b.terminator.kind == ir.STOP}
    aborting = {label for label, op in stops.items() if op == "trap"}
    if any(op not in ("trap", "exit") for op in stops.values()):
        aborting |= {label for label, op in stops.items() if op == "exit"}
    return aborting if len(aborting) < len(stops) else set()


def _doomed_blocks(kernel: ir.Kernel, pdom_graph: DiGraph) -> set[str]:
    """Blocks from which every path ends in an aborting stop (see `_aborting_stops`)."""
    aborting = _aborting_stops(kernel)
    if not aborting:
        return set()
    normal = pdom_graph.copy()
    normal.remove_edges_from((label, EXIT) for label in aborting)
    ending = ancestors(normal, EXIT) | {EXIT}
    return {n for n in pdom_graph.nodes if n not in ending and n != ENTRY}


def _sync_post_dominators(pdom_graph: DiGraph, ipdom: dict[str, str],
                          doomed: set[str]) -> dict[str, str]:
    """The block where lanes split at each block meet again, ignoring the lanes that abort.

    Post-dominance over the blocks that can still end normally (not `doomed`): a lane
    leaving that part of the graph never meets the others, so it cannot make a value
    differ at a later meeting point. A doomed block keeps its immediate post-dominator.
    """
    if not doomed:
        return dict(ipdom)
    living = pdom_graph.subgraph(n for n in pdom_graph.nodes if n not in doomed)
    sync = immediate_dominators(living.reverse(), EXIT)
    sync.pop(EXIT, None)
    return {n: sync.get(n, post) for n, post in ipdom.items()}


def _innermost_loops(loops: dict[str, Loop]) -> dict[str, Loop]:
    """The deepest loop of every block that is in a loop."""
    innermost: dict[str, Loop] = {}
    for loop in sorted(loops.values(), key=lambda lp: lp.depth):
        for block in loop.blocks:
            innermost[block] = loop
    return innermost


def branch_region(graph: DiGraph, branch: str, stop: str) -> set[str]:
    """Blocks on paths from the successors of `branch` that do not pass `stop`."""
    seen: set[str] = set()
    work = [s for s in graph.successors(branch) if s != stop]
    while work:
        block = work.pop()
        if block in seen or block == EXIT:
            continue
        seen.add(block)
        work.extend(s for s in graph.successors(block) if s != stop)
    return seen


def _rejoin_points(graph: DiGraph, ipdom: dict[str, str], loops: dict[str, Loop],
                   innermost: dict[str, Loop], budget: int) -> dict[str, Rejoin] | None:
    """Rejoin points of branches in cycles (see `Rejoin`), keyed by block; None when the
    regions walked add up to more than `budget` blocks (each branch's region is walked on
    its own, so they add up quadratically in, say, a loop of many `continue`s).

    Lanes split at a branch meet again at its immediate post-dominator P. When P lies in a
    cycle with the branch and a path from the branch reaches a header of that cycle before
    P, some lanes go round the cycle again before they reach P, so the lanes meeting at P
    can be in different iterations. Cycles containing both blocks are nested, so the
    outermost such cycle decides which values may differ.
    """
    rejoins: dict[str, Rejoin] = {}
    for branch in graph.nodes:
        if graph.out_degree(branch) < 2 or branch not in innermost:
            continue
        post = ipdom.get(branch)
        enclosing: list[Loop] = []
        loop: Loop | None = innermost[branch]
        while loop is not None:
            if post in loop.blocks:
                enclosing.append(loop)
            loop = loops[loop.parent] if loop.parent else None
        # (the region stops before `post`: a cycle whose one header is `post`, as the
        # loop of a `continue` to its header, cannot be reentered; no walk needed)
        enclosing = [lp for lp in enclosing if lp.headers != [post]]
        if not enclosing:
            continue
        region = branch_region(graph, branch, post)
        budget -= len(region)
        if budget < 0:
            return None
        reentered = [lp for lp in enclosing if region.intersection(lp.headers)]
        if not reentered:
            continue
        outermost = reentered[-1]
        found = rejoins.setdefault(post, Rejoin(post, outermost.name, []))
        found.branches.append(branch)
        if loops[found.loop].depth > outermost.depth:
            found.loop = outermost.name
    for found in rejoins.values():
        found.branches.sort()
    return rejoins


def reconvergence_points(cfg: ControlFlowGraph) -> dict[str, str]:
    """For each block of the kernel, the block where its lanes reconverge (its immediate
    post-dominator, EXIT for the end); a synthetic loop exit stands for its real target."""
    points: dict[str, str] = {}
    for label, post in cfg.ipdom.items():
        if label in cfg.synthetic:
            continue
        while post in cfg.synthetic:
            post = cfg.synthetic[post]
        points[label] = post
    return points


def _dedicated_exits(graph: DiGraph, pdom_graph: DiGraph, loops: dict[str, Loop],
                     innermost: dict[str, Loop], order: list[str],
                     synthetic: dict[str, str]) -> dict[str, list[str]]:
    """Give every loop exit a block reached only from inside the loop (LCSSA needs it).

    An exit target that is also reached from outside the loop gets a new empty block on
    the exit edges; loop-exit (η) definitions are placed there. Inner loops come first, so
    a block that exits several loops lists the inner loop's η before the outer loop's.
    Each new block joins the loops around it and `innermost` (each block's deepest loop,
    `_innermost_loops`) gets it.
    """
    exits: dict[str, list[str]] = {}
    position = {label: i for i, label in enumerate(order)}
    for loop in sorted(loops.values(), key=lambda lp: (-lp.depth, position[lp.name])):
        targets: dict[str, list[str]] = {}
        for u in sorted(loop.blocks, key=lambda b: position.get(b, len(position))):
            for x in graph.successors(u):
                if x not in loop.blocks and x != EXIT:
                    targets.setdefault(x, []).append(u)
        exits[loop.name] = []
        for x, sources in targets.items():
            if all(p in loop.blocks for p in graph.predecessors(x)):
                exits[loop.name].append(x)
                continue
            split = f"{x}^{loop.name}"
            synthetic[split] = x
            order.append(split)
            for g in (graph,) if pdom_graph is graph else (graph, pdom_graph):
                for u in sources:
                    g.remove_edge(u, x)
                    g.add_edge(u, split)
                g.add_edge(split, x)
            # the split joins every loop that holds x and a source: loops around a source
            # (going up from its innermost one; all of them were walked for every split,
            # quadratic in a kernel of many loops)
            walked: set[str] = set()
            for u in sources:
                other = innermost.get(u)
                while other is not None and other.name not in walked:
                    walked.add(other.name)
                    if x in other.blocks:
                        other.blocks.add(split)
                        if split not in innermost or other.depth > innermost[split].depth:
                            innermost[split] = other
                    other = loops[other.parent] if other.parent else None
            exits[loop.name].append(split)
    return exits


def region_work(cfg: ControlFlowGraph) -> int:
    """An upper bound of what the rules walk to find the join points of every branch: per
    branch, its number of successors times the blocks its immediate post-dominator
    post-dominates (every block of a branch's influence region is among them).

    Linear to compute; the ground program of rules/cfg.lp grows with it (quadratically
    in the depth of a nest of branches), so the analysis refuses kernels where it is huge.
    """
    graph, ipdom = cfg.graph, cfg.ipdom
    below = dict.fromkeys(graph.nodes, 1)
    # `ipdom` lists every node after its immediate post-dominator (`immediate_dominators`
    # gives them in depth-first preorder): backwards, a node's count is complete before it
    # is added to its post-dominator's, without sorting the nodes by depth in the tree.
    for node in reversed(ipdom):
        parent = ipdom[node]
        below[parent] = below.get(parent, 1) + below.get(node, 1)
    work = 0
    for node in graph.nodes:
        fan_out = graph.out_degree(node)
        if fan_out > 1 and node in ipdom:
            work += fan_out * (below.get(ipdom[node], 1) - 1)
    return work


def region_walk(cfg: ControlFlowGraph, cap: int) -> int:
    """What the rules of cfg.lp walk to find every branch's join points, counted exactly
    up to `cap` (cap + 1: more): per successor of a branch, the blocks reached before its
    `sync_ipdom` and the edges leaving them (the `side_reaches` and `enters` atoms).

    `region_work` bounds this from above in linear time but counts every block the
    immediate post-dominator post-dominates: quadratic for a sequence of small if/else
    diamonds, whose regions are two blocks each. This count costs what it counts, so it
    is linear up to the cap; run it only when the bound is above the cap.
    """
    graph = cfg.graph
    total = 0
    for branch in graph.nodes:
        if graph.out_degree(branch) < 2:
            continue
        stop = cfg.sync_ipdom.get(branch, cfg.ipdom.get(branch))
        for successor in graph.successors(branch):
            seen = {successor}
            work = [successor]
            while work:
                block = work.pop()
                total += 1
                if total > cap:
                    return cap + 1
                if block == stop or block == EXIT:
                    continue
                for after in graph.successors(block):
                    total += 1
                    if after not in seen:
                        seen.add(after)
                        work.append(after)
    return total
