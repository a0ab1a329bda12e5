"""gpudiv.ir.digraph keeps networkx's orders: the CFG's facts list blocks and edges as before."""

import random

import networkx as nx

from gpudiv.ir import digraph


def _pair(seed: int, nodes: int = 12, edges: int = 20) -> tuple[digraph.DiGraph, nx.DiGraph]:
    """The same random graph built with both classes (with some edges removed again)."""
    rng = random.Random(seed)
    ours, theirs = digraph.DiGraph(), nx.DiGraph()
    names = [f"b{i}" for i in range(nodes)]
    for g in (ours, theirs):
        g.add_nodes_from(names)
    pairs = [(rng.choice(names), rng.choice(names)) for _ in range(edges)]
    for g in (ours, theirs):
        g.add_edges_from(pairs)
        for u, v in pairs[::5]:
            if g.has_edge(u, v):
                g.remove_edge(u, v)
        g.remove_nodes_from(names[-1:])
    return ours, theirs


def test_orders_match_networkx():
    """Nodes, edges, neighbours, copies, SCCs, DFS postorder and reachability agree."""
    for seed in range(30):
        ours, theirs = _pair(seed)
        assert list(ours.nodes) == list(theirs.nodes)
        assert ours.edges == list(theirs.edges)
        assert ours.copy().edges == list(theirs.copy().edges)
        for n in theirs.nodes:
            assert list(ours.predecessors(n)) == list(theirs.predecessors(n))
            assert list(ours.reverse().successors(n)) == list(theirs.predecessors(n))
            assert ours.out_degree(n) == theirs.out_degree(n)
        assert digraph.strongly_connected_components(ours) == list(
            nx.strongly_connected_components(theirs))
        assert digraph.dfs_postorder_nodes(ours, "b0") == list(
            nx.dfs_postorder_nodes(theirs, "b0"))
        assert digraph.descendants(ours, "b0") == nx.descendants(theirs, "b0")
        assert digraph.ancestors(ours, "b0") == nx.ancestors(theirs, "b0")


def test_sink_components_are_networkx_condensation_order():
    """The components without successors, in networkx's topological order."""
    several = 0
    for seed in range(60):
        ours, theirs = _pair(seed, edges=14)
        condensation = nx.condensation(theirs)
        sinks = [condensation.nodes[c]["members"] for c in nx.topological_sort(condensation)
                 if condensation.out_degree(c) == 0]
        assert digraph.sink_components(ours) == sinks
        several += len(sinks) > 1
    assert several > 10  # the order of several sinks is checked, not only the first


def test_analysis_path_does_not_import_networkx():
    """Start-up of `gpudiv analyze` (issue 16): the drivers, CFG and SSA need no networkx."""
    import subprocess
    import sys

    code = ("import sys\nimport gpudiv.analyses.affine2, gpudiv.analyses.simple, gpudiv.api\n"
            "print('networkx' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "False"
