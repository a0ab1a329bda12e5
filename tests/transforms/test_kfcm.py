"""KFCM and KF_trad on the seed's worked examples (Fukuhara 2023 ch. 5; shared/notes
§6.12-6.14), predicate values and results, and the fusions that must not happen."""

from pathlib import Path

import pytest

from gpudiv.ir import host as h
from gpudiv.lang.host.parse import load_host
from gpudiv.transforms.kfcm import kf_trad, kfcm, predicates

HOST = Path(__file__).parents[2] / "samples" / "host"


def node_at(prog: h.HostProgram, line: int) -> int:
    """The node of the statement on a line."""
    (n,) = [n for n, node in prog.nodes.items() if node.loc.line == line
            and not isinstance(node.stmt, h.Nop)]
    return n


def seed_nodes(prog: h.HostProgram) -> dict[int, int]:
    """Fig 5.3's node numbers (shared/notes §6.12) → node ids of samples/host/fig5_3.host,
    on the graph with critical edges split: 5 is the empty else arm, S the node on 10→12."""
    lines = {1: 10, 2: 11, 3: 12, 4: 13, 6: 15, 7: 16, 8: 17, 9: 18, 10: 19, 11: 20}
    seed = {s: node_at(prog, line) for s, line in lines.items()}
    seed[12] = prog.end
    (seed[5],) = [m for m in prog.succ[seed[3]] if isinstance(prog.nodes[m].stmt, h.Nop)]
    (seed["S"],) = [m for m in prog.succ[seed[10]] if isinstance(prog.nodes[m].stmt, h.Nop)]
    return seed


def as_seed(nodes, seed: dict) -> set:
    """Node ids as the seed's numbers (nodes outside Fig 5.3 as themselves)."""
    back = {v: k for k, v in seed.items()}
    return {back.get(n, f"n{n}") for n in nodes}


@pytest.fixture(scope="module")
def fig5_3():
    prog = load_host(HOST / "fig5_3.host")
    k2_preds = predicates(prog, node_at(prog, 15), "bkf")
    k3_preds = predicates(prog, node_at(prog, 18), "fkf")
    return prog, seed_nodes(prog), k2_preds, k3_preds


def test_fig5_3_transp_of_k1(fig5_3):
    from gpudiv.transforms.kfcm import aliases, kills
    prog, seed, _, _ = fig5_3
    k1 = seed[4]
    transparent = {s for s, n in seed.items() if not kills(prog, k1, n, aliases(prog))}
    assert transparent == {3, 4, 5, 7, 8, 10, "S"}  # the seed's {3,4,5,7,8,10,12} less e


def test_fig5_5_fig5_10a_bkf_values_for_k2(fig5_3):
    prog, seed, p, _ = fig5_3
    on = {name: as_seed(p.get(name, set()), seed) for name in
          ("ndsafe", "xdsafe", "ndnearliest", "xdnearliest", "ndelayed", "xdelayed",
           "nlatest", "xlatest")}
    assert on["ndsafe"] == {5, 6}
    assert on["xdsafe"] == {4, 5}
    assert p["xfusible"] == {(seed[4], seed[4])}  # XFusible(4, K2, K1)
    assert on["ndnearliest"] == {5}
    assert on["xdnearliest"] == {4}
    assert on["ndelayed"] == {5}
    assert on["xdelayed"] == {4, 5}
    assert on["nlatest"] == set()
    assert on["xlatest"] == {4, 5}


def test_fig5_3b_fkf_values_for_k3_on_the_split_graph(fig5_3):
    prog, seed, _, p = fig5_3
    assert as_seed(p["nsinkable"], seed) == {10, 11, "S"}
    assert as_seed(p["xsinkable"], seed) == {9, 10, "S"}
    assert p["nfusable"] == {(seed[11], seed[11])}  # NFusable(11, K3, K4)
    assert as_seed(p["ninsert"], seed) == {11}
    # unsplit, the seed says XInsert(10); split, K3's copy goes on the edge 10 → 12
    assert as_seed(p["xinsert"], seed) == {"S"}


def test_fig5_3_kfcm_result():
    prog = load_host(HOST / "fig5_3.host")
    result = kfcm(prog)
    fusions = [(s.phase, s.kernel, s.fused_with) for s in result.steps]
    assert fusions[0] == ("bkf", "K2", "K1")  # Fig 5.10a: Fused1_2 at node 4
    assert len(result.steps[0].compensation) == 1  # K2 alone on the else arm
    assert len(prog.launches()) == 3


def test_fig5_1_both_fuse_consecutive_launches():
    for run in (kfcm, kf_trad):
        prog = load_host(HOST / "fig5_1.host")
        result = run(prog)
        assert [prog.nodes[n].stmt.kernel for n in prog.launches()] == result.fused
        assert len(result.fused) == 1


def test_fig5_2_branch_fusion_kfcm_only():
    prog = load_host(HOST / "fig5_2.host")
    result = kfcm(prog)
    (step,) = result.steps
    assert (step.phase, step.kernel, step.fused_with) == ("bkf", "Kernel2", "Kernel1")
    assert len(step.compensation) == 1
    kernels = sorted(prog.nodes[n].stmt.kernel for n in prog.launches())
    assert kernels == ["Fused_Kernel1_Kernel2", "Kernel2"]
    trad = kf_trad(load_host(HOST / "fig5_2.host"))
    assert trad.steps == [] and trad.fused == []


def test_fig5_14_second_order_effect():
    prog = load_host(HOST / "fig5_14.host")
    before = predicates(load_host(HOST / "fig5_14.host"), node_at(prog, 12), "bkf")
    assert before.get("xfusible", set()) == set()  # BKF alone fuses nothing
    result = kfcm(prog)
    assert [(s.phase, s.fused_name) for s in result.steps] == [("fkf", None),
                                                               ("bkf", "Fused_K1_K2")]
    (n,) = prog.launches()
    assert prog.nodes[n].stmt.kernel == "Fused_K1_K2"
    assert str(prog.nodes[prog.succ[n][0]].stmt) == "a = 7"  # fused before `a = 7`


@pytest.mark.parametrize("name, reason", [
    ("neg_host_copy", "memcpy touches buffer 'd_out1'"),
    ("neg_neighbour", "blocks would communicate through 'd_mid'"),
    ("neg_shapes", "different launch shapes <<<2, 32>>> and <<<4, 16>>>"),
])
def test_negative_examples_do_not_fuse(name, reason):
    prog = load_host(HOST / f"{name}.host")
    result = kfcm(prog)
    assert result.fused == [] and len(prog.launches()) == 2
    said = [r.reason for r in result.refusals] + [b for _, _, bs in result.unfused for b in bs]
    assert any(reason in text for text in said), said
