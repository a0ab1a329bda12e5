"""SCM and SSCM: the region step against the seed's worked examples (notes §6.5, §6.6,
§6.15) and the passes verified on the interpreter (Figs 4.4/4.6: 3 → 2 → 1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpudiv import ir
from gpudiv.lang.load import load
from gpudiv.verify.transform_check import transform
from tests.transforms.test_lcm import FIG_4_1, FIG_4_4, graph_facts, solve_lcm_facts

SSCM_RULES = ("safety.lp", "sscm.lp")
FIG_4_6 = Path(__file__).parents[1] / "data" / "motion" / "fig4_6.musimd"


def test_fig_4_4_scm_region_and_r_earliest():
    got = solve_lcm_facts(graph_facts(FIG_4_4, comps=[3, 7, 8], ends=[10]), SSCM_RULES)
    assert sorted(set(got["ndsafe"]) | set(got["xdsafe"])) == [3, 6, 7, 8]
    assert got["dsregion"] == [3, 6, 7, 8]
    assert got["rearliest"] == [3, 6]


def test_fig_4_6_sscm_speculates_at_the_divergent_branches():
    got = solve_lcm_facts(graph_facts(FIG_4_4, comps=[3, 7, 8], ends=[10], spec=[4, 6]),
                          SSCM_RULES)
    assert got["ndsafe"] == [1, 2, 3, 4, 6, 7, 8]
    assert got["xdsafe"] == [0, 1, 2, 4, 6]
    assert got["dsregion"] == [1, 2, 3, 4, 6, 7, 8]  # the seed's region, without 5
    # the relaxed closure at Div nodes (notes §3.9.3): the literal one gives {3, 6}
    assert got["rearliest"] == [1]


def test_fig_4_1_scm_and_sscm_hoist_to_node_1_after_lcm():
    # after LCM: computations at 3 (kept), 4 and 6 (inserted); 5 and 7 are up-safe
    for spec in ([], [1, 2]):
        got = solve_lcm_facts(graph_facts(FIG_4_1, comps=[3, 4, 6], ends=[7], spec=spec),
                              SSCM_RULES)
        assert got["dsregion"] == [1, 2, 3, 4, 6]
        assert got["rearliest"] == [1]


def test_vacuous_speculative_down_safety_inserts_nothing():
    # notes §6.15: Div node 1 with successors 2 (→ 1) and 3 (→ end), no computation
    # there; the only one is in the start node, which stays as it is
    edges = [(0, 1), (1, 2), (2, 1), (1, 3)]
    got = solve_lcm_facts(graph_facts(edges, comps=[0], ends=[3], spec=[1]), SSCM_RULES)
    assert 1 in got["ndsafe"]  # the literal greatest fixpoint is vacuously down-safe
    assert got["dsregion"] == [0] and got["rearliest"] == [0]  # nothing inserted in 1 or 2
    nothing = solve_lcm_facts(graph_facts(edges, comps=[], ends=[3], spec=[1]), SSCM_RULES)
    assert "dsregion" not in nothing and "rearliest" not in nothing


def computations(kernel: ir.Kernel) -> int:
    """Static computations of a + b."""
    return sum(1 for i in kernel.instructions() if i.kind == ir.ASSIGN and i.operator == "+"
               and i.args == (ir.Var("a"), ir.Var("b")))


@pytest.mark.parametrize(("name", "count"), [("lcm", 3), ("scm", 2), ("sscm", 1),
                                             ("sscm-simple", 1), ("sscm-affine", 1)])
def test_fig_4_4_and_4_6_occurrences_3_2_1_verified(name, count):
    out = transform(str(FIG_4_6), name, verify=True)
    (kernel,) = out.kernels
    assert kernel.status == "verified" and not kernel.oracle_violations
    assert computations(out.program.kernels[0]) == count


FIG_4_1_FILE = FIG_4_6.parent / "fig4_1.musimd"


@pytest.mark.parametrize(("name", "count"), [("lcm", 3), ("scm", 1), ("sscm", 1)])
def test_fig_4_1_lcm_adds_divergent_work_scm_and_sscm_compute_once(name, count):
    out = transform(str(FIG_4_1_FILE), name, verify=True)
    (kernel,) = out.kernels
    assert kernel.status == "verified" and not kernel.oracle_violations
    assert computations(out.program.kernels[0]) == count


def test_spre_speculates_at_uniform_branches_too():
    # Fig 4.4/4.6 with every branch speculative: node 1 (uniform) joins Div
    got = solve_lcm_facts(graph_facts(FIG_4_4, comps=[3, 7, 8], ends=[10],
                                      spec=[1, 4, 6]), SSCM_RULES)
    assert got["rearliest"] == [1]
    out = transform(str(FIG_4_6), "spre", verify=True)
    assert out.kernels[0].status == "verified"
    assert computations(out.program.kernels[0]) == 1


UNIFORM = FIG_4_6.parent / "uniform_speculation.musimd"


@pytest.mark.parametrize(("name", "count"), [("lcm", 2), ("scm", 2), ("sscm", 2),
                                             ("spre", 1)])
def test_only_spre_speculates_at_uniform_branches(name, count):
    out = transform(str(UNIFORM), name, verify=True)
    (kernel,) = out.kernels
    assert kernel.status == "verified" and not kernel.oracle_violations
    assert computations(out.program.kernels[0]) == count


FIG_4_11_FILE = FIG_4_6.parent / "loads" / "fig4_11.musimd"


def blocks_computing_i_plus_1(kernel: ir.Kernel) -> list[str]:
    """The blocks that compute i + 1 (the loop's increment, also an address in N5)."""
    return sorted(b.label for b in kernel.blocks for i in b.instructions
                  if i.kind == ir.ASSIGN and i.operator == "+"
                  and i.args == (ir.Var("i"), ir.Const(1)))


@pytest.mark.parametrize(("name", "where"), [("lcm", ["N3", "N5", "N6"]), ("sscm", ["N2"])])
def test_fig_4_11_lcm_moves_the_increment_into_the_divergent_arms(name, where):
    """Why LCM's computation issues rise on the code-motion benchmark (README): the
    increment i + 1 of N8 (reached after the warp reconverges) is partially redundant
    with N5's address i + 1, and LCM places it at the latest safe points, the arms N3, N5
    and N6 of the divergent branches (a divergent warp issues it up to three times, as in
    the seed's Fig 4.1); SSCM speculates at the divergent branch and computes it once, in
    N2."""
    before = load(str(FIG_4_11_FILE)).kernels[0]
    assert blocks_computing_i_plus_1(before) == ["N5", "N8"]
    out = transform(str(FIG_4_11_FILE), name, verify=True)
    assert out.kernels[0].status == "verified" and not out.kernels[0].oracle_violations
    assert blocks_computing_i_plus_1(out.program.kernels[0]) == where
