"""gpudiv.ir.dominators agrees with networkx, and keeps the orders the CFG relies on."""

import random

import networkx as nx

from gpudiv.ir import digraph
from gpudiv.ir.dominators import dominance_frontiers, immediate_dominators


def _pair(seed: int, nodes: int = 14, edges: int = 24) -> tuple[digraph.DiGraph, nx.DiGraph]:
    """The same random graph built with both classes, every node reachable from b0."""
    rng = random.Random(seed)
    ours, theirs = digraph.DiGraph(), nx.DiGraph()
    names = [f"b{i}" for i in range(nodes)]
    pairs = [(names[i - 1], names[i]) for i in range(1, nodes)]  # a chain, so all reach
    rng.shuffle(pairs)
    pairs += [(rng.choice(names), rng.choice(names)) for _ in range(edges - len(pairs))]
    for g in (ours, theirs):
        g.add_nodes_from(names)
        g.add_edges_from(pairs)
    return ours, theirs


def test_immediate_dominators_match_networkx_in_preorder():
    """Same trees as networkx; every node listed after its immediate dominator."""
    for seed in range(40):
        ours, theirs = _pair(seed)
        idom = immediate_dominators(ours, "b0")
        expected = nx.immediate_dominators(theirs, "b0")
        expected.pop("b0", None)
        assert idom == expected
        seen = {"b0"}
        for node, parent in idom.items():
            assert parent in seen
            seen.add(node)
        assert immediate_dominators(ours.reverse(), "b5") == {
            n: d for n, d in nx.immediate_dominators(theirs.reverse(), "b5").items()
            if n != "b5"}


def test_dominance_frontiers_match_networkx():
    """All nodes (as networkx), or only those whose frontier is not empty."""
    for seed in range(40):
        ours, theirs = _pair(seed)
        frontiers = dominance_frontiers(ours, "b0")
        assert frontiers == nx.dominance_frontiers(theirs, "b0")
        assert dominance_frontiers(ours, "b0", all_nodes=False) == {
            n: f for n, f in frontiers.items() if f}
