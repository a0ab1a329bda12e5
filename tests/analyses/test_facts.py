"""facts_text with a set of relations is the full facts text with only those relations
(kernel_facts leaves out groups of facts nobody reads: that must never drop one that is
read)."""

from pathlib import Path

import pytest

from gpudiv.analyses import affine2, simple
from gpudiv.analyses.driver import prepare
from gpudiv.analyses.facts import RELATIONS, facts_text
from gpudiv.lang.load import load

SAMPLE = Path(__file__).parents[2] / "samples" / "cuda" / "stack_slots.G.ptx"


@pytest.fixture(scope="module")
def forms():
    return [prepare(kernel)[0] for kernel in load(str(SAMPLE)).kernels]


@pytest.mark.parametrize("relations", [
    simple.analysis().relations, affine2.analysis().relations, frozenset(RELATIONS),
    frozenset({"store", "mem_read", "def_kind"}), frozenset({"arg", "load_arg"}), frozenset(),
])
def test_only_the_relations_asked_for(forms, relations):
    for ssa in forms:
        full = facts_text(ssa, "2|").splitlines(keepends=True)
        wanted = [line for line in full if line[:line.find("(")] in relations]
        assert facts_text(ssa, "2|", relations) == "".join(wanted)


def test_each_relation_alone(forms):
    for ssa in forms:
        full = facts_text(ssa).splitlines(keepends=True)
        for relation in RELATIONS:
            wanted = [line for line in full if line[:line.find("(")] == relation]
            assert facts_text(ssa, relations={relation}) == "".join(wanted), relation
