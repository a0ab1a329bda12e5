"""gpudiv.ir.dominators agrees with networkx, and keeps the orders the CFG relies on."""

import random

import networkx as nx

from gpudiv.ir import digraph
from gpudiv.ir.dominators import (
    IndexedGraph,
    dominance_frontiers,
    dominator_tree,
    frontiers_by_number,
    immediate_dominators,
    tree_by_number,
)


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


def test_trees_and_frontiers_from_a_start_that_does_not_reach_every_node():
    """From a start inside the graph (on a cycle, some nodes out of its reach): the same
    trees and frontiers as networkx, unreached nodes left out, by label and by number."""
    for seed in range(40):
        ours, theirs = _pair(seed)
        expected = nx.immediate_dominators(theirs, "b5")
        expected.pop("b5", None)
        assert immediate_dominators(ours, "b5") == expected
        assert dominance_frontiers(ours, "b5") == nx.dominance_frontiers(theirs, "b5")
        numbered = IndexedGraph(ours)
        tree = tree_by_number(numbered, *dominator_tree(numbered, numbered.number["b5"]))
        assert {numbered.nodes[n]: numbered.nodes[d] for n, d in enumerate(tree)
                if d >= 0} == expected
        by_number = frontiers_by_number(numbered, tree, numbered.number["b5"])
        assert {numbered.nodes[n]: {numbered.nodes[j] for j in joins}
                for n, joins in by_number.items()} == {
            n: f for n, f in nx.dominance_frontiers(theirs, "b5").items() if f}
