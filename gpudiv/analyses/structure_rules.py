"""The structure detection of rules/structure.lp, as typed data.

The rules find loops, irreducible cycles, the Cut and Backward Copy edges and whether the
acyclic remainder reduces (no Forward Copy needed); `gpudiv.analyses.structure` does the
same in Python and also chooses the Forward Copy edges. `compare` says where the two
disagree (they must not: tests/analyses/test_structure_rules.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpudiv import ir
from gpudiv.analyses.facts import graph_facts
from gpudiv.analyses.solve import shipped_rule, solve
from gpudiv.analyses.structure import BACKWARD_COPY, CUT, FORWARD_COPY, KernelStructure
from gpudiv.ir.cfg import build_cfg

RULE_FILE = "structure.lp"


@dataclass(frozen=True)
class RuleStructure:
    """What rules/structure.lp derives for one kernel."""

    name: str
    structured: bool
    loops: frozenset[str]
    irreducible: frozenset[str]
    edges: frozenset[tuple[str, str, str]]  # (source, target, kind): Cut, Backward Copy
    stuck: frozenset[str]
    blocking: frozenset[str]

    @property
    def needs_forward_copy(self) -> bool:
        """Whether the acyclic remainder does not reduce to one node."""
        return bool(self.stuck)


def solve_kernel(kernel: ir.Kernel) -> RuleStructure:
    """Solve rules/structure.lp on the kernel's graph facts."""
    if not kernel.blocks:
        return RuleStructure(kernel.name, True, frozenset(), frozenset(), frozenset(),
                             frozenset(), frozenset())
    result = solve([shipped_rule(RULE_FILE)], graph_facts(build_cfg(kernel)))
    return RuleStructure(
        kernel.name, bool(result.relation("st_structured")),
        frozenset(h for (h,) in result.relation("st_loop")),
        frozenset(h for (h,) in result.relation("st_irreducible")),
        frozenset((u, v, k) for u, v, k in result.relation("st_unstructured")),
        frozenset(n for (n,) in result.relation("st_stuck")),
        frozenset(n for (n,) in result.relation("st_blocking")))


def compare(python: KernelStructure, rules: RuleStructure) -> list[str]:
    """Where the Python analysis and the rules disagree on a kernel (empty: they agree on
    the verdict, the loops, the irreducible cycles, every Cut and Backward Copy edge and
    whether Forward Copy is needed)."""
    found: list[str] = []
    py_edges = {(e.source, e.target, e.kind) for e in python.edges if e.kind != FORWARD_COPY}
    if python.structured != rules.structured:
        found.append(f"structured: python {python.structured}, rules {rules.structured}")
    if python.loops != len(rules.loops):
        found.append(f"loops: python {python.loops}, rules {len(rules.loops)}")
    if set(python.irreducible_loops) != rules.irreducible:
        found.append(f"irreducible: python {sorted(python.irreducible_loops)}, "
                     f"rules {sorted(rules.irreducible)}")
    for kind in (CUT, BACKWARD_COPY):
        mine = {e for e in py_edges if e[2] == kind}
        theirs = {e for e in rules.edges if e[2] == kind}
        if mine != theirs:
            found.append(f"{kind}: python only {sorted(mine - theirs)}, "
                         f"rules only {sorted(theirs - mine)}")
    if bool(python.counts()[FORWARD_COPY]) != rules.needs_forward_copy:
        found.append(f"forward copy needed: python {python.counts()[FORWARD_COPY]} edges, "
                     f"rules stuck at {sorted(rules.stuck)}")
    return found


__all__ = ["RULE_FILE", "RuleStructure", "compare", "solve_kernel"]
