"""Structural analysis: is a kernel's control flow structured, and which edges are not.

Following Wu, Diamos, Li and Yalamanchili (2011) and Zhang & D'Hollander (2004): a CFG is
structured when it reduces to one node by the region patterns block, if-then,
if-then-else, case, self loop and natural loop. The edges that block the reduction are
classified by the transformation that removes them:

- `backward_copy`: an edge from outside a cycle into a node of it other than its header
  (a side entry: the cycle is an irreducible loop);
- `cut`: an exit edge of a natural loop that goes to a target other than the loop's
  main exit (the header's outside successor, else a latch's): break to another place,
  early return, goto out of a loop. Exits from the middle of the loop to the main exit
  reduce (the arm ends the iteration), as in Ocelot's structural analysis;
- `forward_copy`: an edge into an acyclic join that keeps the acyclic reduction from
  going on (short-circuit conditions, goto into shared code).

The reduction runs on the block graph with back edges, Cut and Backward Copy edges
removed: loops are then single-entry, single-exit (the main exit), and the acyclic
patterns (block, if-then, if-then-else, case; an arm may end the kernel or the loop
iteration) reduce the rest. When no pattern applies, the edges into one arm that come
from outside its branch are marked Forward Copy and removed, and reduction goes on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx

from gpudiv import ir
from gpudiv.ir.cfg import EXIT, successor_labels
from gpudiv.lang.load import LoadError, load

CUT, BACKWARD_COPY, FORWARD_COPY = "cut", "backward_copy", "forward_copy"
KINDS = (CUT, FORWARD_COPY, BACKWARD_COPY)
PATTERNS = {CUT: "multi-exit loop (break, early return, goto out of a loop)",
            BACKWARD_COPY: "side entry into a loop (irreducible loop, goto into a loop)",
            FORWARD_COPY: "acyclic join (short-circuit condition, goto into shared code)"}


# The source pattern of an edge, where the graph names it: a Cut edge whose target
# cannot reach the loop's main exit leaves the kernel (an early return); a Forward Copy
# edge from a block that only tests a condition (no store, atomic or barrier) is a
# short-circuit condition.
SOURCE_PATTERNS = {"early_return": "early return (or trap) from inside a loop",
                   "break": "break or goto out of a loop to another place",
                   "short_circuit": "short-circuit condition",
                   "shared_code": "jump into shared code",
                   "side_entry": "side entry into a loop (irreducible loop, goto into a loop)"}


@dataclass(frozen=True)
class UnstructuredEdge:
    """One edge that blocks the reduction, with its kind and the line of its branch."""

    source: str
    target: str
    kind: str
    line: int
    # Cut: the loop's header, body and main exit target; Backward Copy: the cycle's
    # header and its blocks; Forward Copy: the blocks of the region the target enters
    # (what Forward Copy duplicates).
    header: str | None = None
    region: tuple[str, ...] = ()
    main_exit: str | None = None
    pattern: str = ""  # the source pattern where it can be named (SOURCE_PATTERNS)

    def to_json(self) -> dict[str, object]:
        """The JSON object of `gpudiv structure --format json`."""
        return {"source": self.source, "target": self.target, "kind": self.kind,
                "line": self.line, "pattern": self.pattern or PATTERNS[self.kind],
                "loop": self.header}


@dataclass
class KernelStructure:
    """The structure of one kernel."""

    name: str
    branches: int
    loops: int
    edges: list[UnstructuredEdge] = field(default_factory=list)
    irreducible_loops: list[str] = field(default_factory=list)

    @property
    def structured(self) -> bool:
        """Whether the control flow reduces to one node without marked edges."""
        return not self.edges

    def counts(self) -> dict[str, int]:
        """Number of marked edges of each kind."""
        return {kind: sum(e.kind == kind for e in self.edges) for kind in KINDS}

    def to_json(self) -> dict[str, object]:
        """The JSON object of one kernel."""
        return {"name": self.name, "structured": self.structured,
                "branches": self.branches, "loops": self.loops, **self.counts(),
                "irreducible_loops": self.irreducible_loops,
                "edges": [e.to_json() for e in self.edges]}


def block_graph(kernel: ir.Kernel) -> nx.DiGraph:
    """The blocks reachable from the entry and the edges between them (no EXIT node)."""
    graph = nx.DiGraph()
    if not kernel.blocks:
        return graph
    for index, block in enumerate(kernel.blocks):
        graph.add_node(block.label)
        for target in successor_labels(kernel, index):
            if target != EXIT:
                graph.add_edge(block.label, target)
    entry = kernel.blocks[0].label
    return graph.subgraph(nx.descendants(graph, entry) | {entry}).copy()


def _postorder(graph: nx.DiGraph, entry: str) -> list[str]:
    """Depth-first postorder from the entry."""
    return list(nx.dfs_postorder_nodes(graph, entry))


def _retreating_edges(graph: nx.DiGraph, entry: str) -> list[tuple[str, str]]:
    """Edges to a node on the depth-first stack (self loops included)."""
    found: list[tuple[str, str]] = []
    on_stack: set[str] = set()
    for u, v, kind in nx.dfs_labeled_edges(graph, entry):
        if kind == "forward":
            on_stack.add(v)
        elif kind == "reverse":
            on_stack.discard(v)
        elif kind == "nontree" and v in on_stack:
            found.append((u, v))
    return found


def _dominates(idom: dict[str, str], a: str, b: str) -> bool:
    """Whether `a` dominates `b`."""
    while True:
        if a == b:
            return True
        parent = idom.get(b, b)
        if parent == b:
            return False
        b = parent


def _side_entries(graph: nx.DiGraph, entry: str, order: dict[str, int]
                  ) -> tuple[list[tuple[str, str, str, tuple[str, ...]]], list[str]]:
    """Backward Copy edges (entries of irreducible cycles other than their header, the
    first entry in program order `order`, with that header and the cycle's blocks) and
    the headers; empty when every cycle is a natural loop."""
    idom = nx.immediate_dominators(graph, entry)
    natural = [(u, v) for u, v in _retreating_edges(graph, entry) if _dominates(idom, v, u)]
    acyclic = graph.copy()
    acyclic.remove_edges_from(natural)
    edges: list[tuple[str, str, str, tuple[str, ...]]] = []
    headers: list[str] = []
    for scc in nx.strongly_connected_components(acyclic):
        if len(scc) < 2:
            continue
        entries = sorted({v for u, v in graph.in_edges(scc) if u not in scc}
                         | ({entry} & scc), key=order.__getitem__)
        headers.append(entries[0])
        edges += [(u, v, entries[0], tuple(sorted(scc))) for u, v in graph.in_edges(scc)
                  if u not in scc and v != entries[0]]
    return edges, headers


def _natural_loops(graph: nx.DiGraph, entry: str) -> dict[str, tuple[set[str], set[str]]]:
    """Header → (body, latches) of each natural loop (back edges merged by header)."""
    idom = nx.immediate_dominators(graph, entry)
    loops: dict[str, tuple[set[str], set[str]]] = {}
    for u, v in _retreating_edges(graph, entry):
        if not _dominates(idom, v, u):
            continue
        body, latches = loops.setdefault(v, ({v}, set()))
        latches.add(u)
        work = [u]
        while work:
            n = work.pop()
            if n not in body:
                body.add(n)
                work.extend(graph.predecessors(n))
    return loops


def _cut_edges(graph: nx.DiGraph, loops: dict[str, tuple[set[str], set[str]]]
               ) -> list[tuple[str, str, str, tuple[str, ...], str]]:
    """Exit edges of loops (innermost first) that go to a target other than the main exit
    (the header's outside successor, else a latch's, else the first), with the loop's
    header, body and main exit."""
    found: list[tuple[str, str, str, tuple[str, ...], str]] = []
    seen: set[tuple[str, str]] = set()
    for header, (body, latches) in sorted(loops.items(), key=lambda h: len(h[1][0])):
        exits = [(u, t) for u in sorted(body) for t in sorted(graph.successors(u))
                 if t not in body]
        main = _main_exit(graph, header, body, latches)
        for u, t in exits:
            if t != main and (u, t) not in seen:
                seen.add((u, t))
                found.append((u, t, header, tuple(sorted(body)), main))
    return found


def _acyclic(graph: nx.DiGraph, loops: dict[str, tuple[set[str], set[str]]],
             cut: list[tuple[str, str, str, tuple[str, ...], str]]) -> nx.DiGraph:
    """The graph the acyclic patterns reduce: back edges and loop exits removed, each
    loop flowing from its header to its main exit (a break to the main exit is
    structured, as a BREAK of a structured loop)."""
    acyclic = graph.copy()
    acyclic.remove_edges_from((u, v) for u, v, *_ in cut)
    acyclic.remove_edges_from([(u, h) for h, (_, latches) in loops.items() for u in latches])
    for body, _ in loops.values():
        acyclic.remove_edges_from([(u, t) for u in body for t in graph.successors(u)
                                   if t not in body])
    for header, (body, latches) in loops.items():
        main = _main_exit(graph, header, body, latches)
        enclosing = [b for h, (b, _) in loops.items() if h != header and header in b]
        if main and all(main in b for b in enclosing):
            acyclic.add_edge(header, main)
    return acyclic


def _main_exit(graph: nx.DiGraph, header: str, body: set[str], latches: set[str]) -> str:
    """The loop's main exit: the header's outside successor, else a latch's, else the
    first exit's target ("" when the loop has no exit)."""
    exits = [(u, t) for u in sorted(body) for t in sorted(graph.successors(u))
             if t not in body]
    preferred = [t for u, t in exits if u == header] + \
        [t for u, t in exits if u in latches] + [t for _, t in exits]
    return preferred[0] if preferred else ""


class _Reducer:
    """The acyclic reduction over abstract nodes (named after their entry block)."""

    def __init__(self, graph: nx.DiGraph, entry: str):
        self.graph = graph
        self.entry = entry
        self.members = {n: {n} for n in graph}
        self.marked: list[tuple[str, str, tuple[str, ...]]] = []

    def _merge(self, into: str, arms: list[str], successors: set[str]) -> None:
        """Collapse the arms into `into`, which then flows to `successors`."""
        for arm in arms:
            self.members[into] |= self.members.pop(arm)
            self.graph.remove_node(arm)
        for s in list(self.graph.successors(into)):
            self.graph.remove_edge(into, s)
        self.graph.add_edges_from((into, s) for s in successors)

    def _reduce_at(self, c: str) -> bool:
        """Apply block, if-then, if-then-else or case at node `c`."""
        g = self.graph
        succ = set(g.successors(c))
        if not succ:
            return False
        if len(succ) == 1:  # block: c's only successor has c as its only predecessor
            (v,) = succ
            if v not in (c, self.entry) and set(g.predecessors(v)) == {c}:
                self._merge(c, [v], set(g.successors(v)))
                return True
        simple = [m for m in succ if m != self.entry and set(g.predecessors(m)) == {c}
                  and g.out_degree(m) <= 1]
        if not simple:
            return False
        rest = succ - set(simple)
        after = set().union(*(set(g.successors(m)) for m in simple))
        if len(rest) > 1 or len(after | rest) > 1:
            return False
        self._merge(c, simple, after | rest)
        return True

    def _mark(self) -> bool:
        """Remove the edges into one arm that do not come from its branch (Forward
        Copy); False when there is no join to mark."""
        g = self.graph
        order = _postorder(g, self.entry)

        def side_entered(c: str, m: str) -> bool:
            """m is a join entered from outside c's branch, not a join of c's arms."""
            return g.in_degree(m) > 1 and not any(
                m in nx.descendants(g, o) for o in g.successors(c) if o != m)

        branches = [(c, m) for c in order if g.out_degree(c) >= 2
                    for m in sorted(g.successors(c)) if side_entered(c, m)]
        candidates = [(c, m) for c, m in branches
                      if set(g.successors(m)) <= set(g.successors(c)) - {m}] + branches
        candidates += [(next(iter(sorted(g.predecessors(m)))), m) for m in order
                       if g.in_degree(m) > 1]
        if not candidates:
            return False
        c, m = candidates[0]
        for p in sorted(g.predecessors(m)):
            if p != c:
                self.marked.extend((b, m, tuple(sorted(self.members[m])))
                                   for b in sorted(self.members[p]))
                g.remove_edge(p, m)
        return True

    def run(self) -> list[tuple[str, str, tuple[str, ...]]]:
        """Reduce to one node; the edges marked on the way (from each block of the
        source node to the target node's entry, with the target node's blocks)."""
        while self.graph.number_of_nodes() > 1:
            if any(self._reduce_at(c) for c in _postorder(self.graph, self.entry)):
                continue
            if not self._mark():
                break
        return self.marked


def _line(kernel: ir.Kernel, source: str, target: str) -> int:
    """The source line of the branch or jump that makes the edge (else the block end)."""
    block = kernel.block(source)
    for instr in block.instructions:
        if instr.kind in (ir.BRANCH, ir.JUMP) and instr.target == target:
            return instr.loc.line
    return block.instructions[-1].loc.line if block.instructions else block.loc.line


def _cut_pattern(graph: nx.DiGraph, target: str, main: str) -> str:
    """An early return when the exit's target cannot reach the loop's main exit."""
    reaches = main and (target == main or main in nx.descendants(graph, target))
    return SOURCE_PATTERNS["break" if reaches else "early_return"]


def _join_pattern(block: ir.Block) -> str:
    """A short-circuit condition when the edge's source block only tests a condition."""
    effects = (ir.STORE, ir.ATOMIC, ir.BARRIER)
    tests = bool(block.instructions) and block.instructions[-1].kind == ir.BRANCH and \
        not any(i.kind in effects for i in block.instructions)
    return SOURCE_PATTERNS["short_circuit" if tests else "shared_code"]


def analyze_kernel(kernel: ir.Kernel) -> KernelStructure:
    """The structure of one kernel: its unstructured edges with their kinds."""
    branches = sum(i.kind == ir.BRANCH for i in kernel.instructions())
    graph = block_graph(kernel)
    if not kernel.blocks:
        return KernelStructure(kernel.name, branches, 0)
    entry = kernel.blocks[0].label
    order = {b.label: n for n, b in enumerate(kernel.blocks)}
    bc, irreducible = _side_entries(graph, entry, order)
    reducible = graph.copy()
    reducible.remove_edges_from((u, v) for u, v, _, _ in bc)
    loops = _natural_loops(reducible, entry)
    cut = _cut_edges(reducible, loops)
    acyclic = _acyclic(reducible, loops, cut)
    acyclic = acyclic.subgraph(nx.descendants(acyclic, entry) | {entry}).copy()
    marked = [m for m in _Reducer(acyclic, entry).run() if graph.has_edge(m[0], m[1])]
    side = SOURCE_PATTERNS["side_entry"]
    edges = [UnstructuredEdge(u, v, BACKWARD_COPY, _line(kernel, u, v), h, region,
                              pattern=side) for u, v, h, region in bc]
    edges += [UnstructuredEdge(u, v, CUT, _line(kernel, u, v), h, body, main,
                               pattern=_cut_pattern(graph, v, main))
              for u, v, h, body, main in cut]
    edges += [UnstructuredEdge(u, v, FORWARD_COPY, _line(kernel, u, v), None, region,
                               pattern=_join_pattern(kernel.block(u)))
              for u, v, region in marked]
    return KernelStructure(kernel.name, branches, len(loops), edges, sorted(irreducible))


@dataclass
class FileStructure:
    """The structure of every kernel of one file."""

    path: str
    kernels: list[KernelStructure]

    @property
    def structured(self) -> bool:
        """Whether every kernel is structured."""
        return all(k.structured for k in self.kernels)

    def to_json(self) -> dict[str, object]:
        """The JSON object of one file."""
        return {"path": self.path, "structured": self.structured,
                "kernels": [k.to_json() for k in self.kernels]}


def analyze_program(program: ir.Program) -> FileStructure:
    """The structure of every kernel of a parsed program."""
    return FileStructure(program.path, [analyze_kernel(k) for k in program.kernels])


def analyze_file(path: str | Path) -> FileStructure:
    """The structure of every kernel of a source file (LoadError on bad input)."""
    program = load(path)
    if program.errors:
        raise LoadError(str(program.errors[0]))
    return analyze_program(program)


def summarize(files: list[FileStructure]) -> dict[str, int]:
    """Table-1-style totals: files and kernels with unstructured control flow, edges."""
    kernels = [k for f in files for k in f.kernels]
    total = {"files": len(files), "files_unstructured": sum(not f.structured for f in files),
             "kernels": len(kernels),
             "kernels_unstructured": sum(not k.structured for k in kernels),
             "kernels_irreducible": sum(bool(k.irreducible_loops) for k in kernels),
             "branches": sum(k.branches for k in kernels)}
    for kind in KINDS:
        total[kind] = sum(k.counts()[kind] for k in kernels)
    return total


__all__ = ["BACKWARD_COPY", "CUT", "FORWARD_COPY", "KINDS", "SOURCE_PATTERNS",
           "KernelStructure",
           "FileStructure", "UnstructuredEdge", "analyze_file", "analyze_kernel",
           "analyze_program", "block_graph", "summarize"]
