"""A small directed graph for control-flow graphs, and the walks the CFG needs.

It keeps nodes and each node's successors and predecessors in insertion order, as
networkx's `DiGraph` does, so facts and results list blocks and edges in the same order.
networkx took 0.12 s of processor time to import, more than a third of the start-up of
`gpudiv analyze` on a small file (issue 16); the analysis path no longer imports it.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator


class DiGraph:
    """Directed graph without edge data; iteration orders are insertion orders."""

    __slots__ = ("_succ", "_pred")

    def __init__(self) -> None:
        self._succ: dict = {}
        self._pred: dict = {}

    def add_node(self, node: Hashable) -> None:
        """Add a node (no-op when present)."""
        if node not in self._succ:
            self._succ[node] = {}
            self._pred[node] = {}

    def add_nodes_from(self, nodes: Iterable) -> None:
        """Add nodes in order."""
        succ, pred = self._succ, self._pred
        for node in nodes:
            if node not in succ:
                succ[node] = {}
                pred[node] = {}

    def add_edge(self, u: Hashable, v: Hashable) -> None:
        """Add an edge (and its nodes when missing)."""
        self.add_node(u)
        self.add_node(v)
        self._succ[u][v] = None
        self._pred[v][u] = None

    def add_edges_from(self, edges: Iterable) -> None:
        """Add edges in order (`add_edge` inlined: CFG, loop and subgraph building)."""
        succ, pred = self._succ, self._pred
        for u, v in edges:
            if u not in succ:
                succ[u] = {}
                pred[u] = {}
            if v not in succ:
                succ[v] = {}
                pred[v] = {}
            succ[u][v] = None
            pred[v][u] = None

    def remove_edge(self, u: Hashable, v: Hashable) -> None:
        """Remove an edge (KeyError when missing)."""
        del self._succ[u][v]
        del self._pred[v][u]

    def remove_edges_from(self, edges: Iterable) -> None:
        """Remove the edges that exist among `edges`."""
        for u, v in edges:
            if v in self._succ.get(u, ()):
                self.remove_edge(u, v)

    def remove_node(self, node: Hashable) -> None:
        """Remove a node and its edges (KeyError when missing)."""
        for v in self._succ[node]:
            del self._pred[v][node]
        for u in self._pred[node]:
            del self._succ[u][node]
        del self._succ[node]
        del self._pred[node]

    def remove_nodes_from(self, nodes: Iterable) -> None:
        """Remove the nodes that exist among `nodes`."""
        for node in nodes:
            if node in self._succ:
                self.remove_node(node)

    def has_edge(self, u: Hashable, v: Hashable) -> bool:
        """Whether the edge u → v exists."""
        return v in self._succ.get(u, ())

    def successors(self, node: Hashable) -> Iterator:
        """Successors of a node in insertion order."""
        return iter(self._succ[node])

    def predecessors(self, node: Hashable) -> Iterator:
        """Predecessors of a node in insertion order."""
        return iter(self._pred[node])

    def out_degree(self, node: Hashable) -> int:
        """Number of successors."""
        return len(self._succ[node])

    def in_degree(self, node: Hashable) -> int:
        """Number of predecessors."""
        return len(self._pred[node])

    def adjacency(self) -> tuple[Iterable, Iterable]:
        """Each node's successors and each node's predecessors, both in node order (to go
        through every node's edges without a lookup per node)."""
        return self._succ.values(), self._pred.values()

    def number_of_nodes(self) -> int:
        """Number of nodes."""
        return len(self._succ)

    @property
    def nodes(self):
        """The nodes in insertion order (a live view)."""
        return self._succ.keys()

    @property
    def edges(self) -> list[tuple]:
        """The edges, by source in node order, then by successor order."""
        return [(u, v) for u, succ in self._succ.items() for v in succ]

    def __contains__(self, node: object) -> bool:
        return node in self._succ

    def __iter__(self) -> Iterator:
        return iter(self._succ)

    def __len__(self) -> int:
        return len(self._succ)

    def copy(self) -> DiGraph:
        """An independent copy (edges added by source in node order)."""
        other = DiGraph()
        other.add_nodes_from(self._succ)
        other.add_edges_from(self.edges)
        return other

    def subgraph(self, nodes: Iterable) -> DiGraph:
        """A copy of the subgraph induced by `nodes`: in this graph's node order for a set,
        in the given order otherwise (then it costs only what it keeps)."""
        if isinstance(nodes, (set, frozenset)):
            keep = nodes
            ordered = [n for n in self._succ if n in keep]
        else:
            ordered = [n for n in dict.fromkeys(nodes) if n in self._succ]
            keep = set(ordered)
        other = DiGraph()
        other.add_nodes_from(ordered)
        other.add_edges_from((u, v) for u in other._succ for v in self._succ[u] if v in keep)
        return other

    def reverse(self) -> DiGraph:
        """The graph with every edge reversed, sharing this graph's storage (a view)."""
        other = DiGraph.__new__(DiGraph)
        other._succ, other._pred = self._pred, self._succ
        return other


def _reach(adjacency: dict, start: Hashable) -> set:
    """Nodes reachable from `start` along `adjacency`, `start` excluded unless on a cycle."""
    seen: set = set()
    work = list(adjacency[start])
    while work:
        node = work.pop()
        if node not in seen:
            seen.add(node)
            work.extend(adjacency[node])
    return seen


def descendants(graph: DiGraph, start: Hashable) -> set:
    """Nodes reachable from `start`, `start` itself excluded (a new set, edited in place:
    a copy without `start` was a second set the size of the graph)."""
    found = _reach(graph._succ, start)
    found.discard(start)
    return found


def ancestors(graph: DiGraph, start: Hashable) -> set:
    """Nodes that reach `start`, `start` itself excluded."""
    found = _reach(graph._pred, start)
    found.discard(start)
    return found


def dfs_postorder_nodes(graph: DiGraph, start: Hashable) -> list:
    """Nodes reachable from `start` in depth-first postorder (successors in order)."""
    order: list = []
    seen = {start}
    stack = [(start, iter(graph._succ[start]))]
    while stack:
        node, children = stack[-1]
        for child in children:
            if child not in seen:
                seen.add(child)
                stack.append((child, iter(graph._succ[child])))
                break
        else:
            stack.pop()
            order.append(node)
    return order


def strongly_connected_components(graph: DiGraph) -> list[set]:
    """Tarjan's strongly connected components, each found when the depth-first search
    (roots and successors in insertion order) leaves its root: sinks first."""
    succ = graph._succ
    index: dict = {}
    low: dict = {}
    on_stack: set = set()
    stack: list = []
    found: list[set] = []
    for root in succ:
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(succ[root]))]
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(succ[child])))
                    break
                if child in on_stack and index[child] < low[node]:
                    low[node] = index[child]
            else:
                work.pop()
                if work and low[node] < low[work[-1][0]]:
                    low[work[-1][0]] = low[node]
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    found.append(component)
    return found


def sink_components(graph: DiGraph) -> list[set]:
    """The members of every component without successors, in a topological order of the
    condensation (components numbered as `strongly_connected_components` finds them,
    generation by generation from those without predecessors; networkx's order)."""
    components = strongly_connected_components(graph)
    which = {node: i for i, component in enumerate(components) for node in component}
    out: list[dict] = [{} for _ in components]
    indegree = [0] * len(components)
    for u, v in graph.edges:
        a, b = which[u], which[v]
        if a != b and b not in out[a]:
            out[a][b] = None
            indegree[b] += 1
    sinks = []
    generation = [i for i in range(len(components)) if indegree[i] == 0]
    while generation:
        following = []
        for i in generation:
            if not out[i]:
                sinks.append(components[i])
            for j in out[i]:
                indegree[j] -= 1
                if indegree[j] == 0:
                    following.append(j)
        generation = following
    return sinks
