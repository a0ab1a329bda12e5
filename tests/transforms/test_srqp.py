"""Scalar replacement of loads (SRQP, ESRQP, SSRQP_S, SSRQP): control dependence and the
CDRND against the seed's Fig 4.11 (notes §6.9), the passes on the rebuilt Figs 4.9,
4.11/4.13 and 4.12 verified on the interpreter, memory kills, and the divergence choice."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from gpudiv import ir
from gpudiv.analyses.solve import shipped_rule, solve
from gpudiv.lang.load import parse_text
from gpudiv.transforms.srqp import control_facts
from gpudiv.verify.transform_check import transform
from tests.ptxas_tool import PTXAS, ptxas_errors

MOTION = Path(__file__).parents[1] / "data" / "motion" / "loads"
# Fig 4.11 (notes §6.9): s = 0, nodes 1..9, e = 10; 9 -> 2 is the back edge
FIG_4_11 = [(0, 1), (1, 2), (2, 3), (2, 4), (4, 5), (4, 6), (5, 7), (6, 7), (7, 8), (3, 8),
            (8, 9), (8, 10), (9, 2)]


@cache
def run(name: str, pass_name: str, divergence: str | None = None, coalesce: bool = False):
    """One verified transform of a golden kernel, shared by the tests that read it
    (without copy coalescing unless asked: the seed's figures show the temporaries)."""
    options = {pass_name: {"coalesce": coalesce} | (
        {"divergence": divergence} if divergence else {})}
    out = transform(str(MOTION / f"{name}.musimd"), pass_name, verify=True, options=options)
    (report,) = out.kernels
    assert report.status == "verified", report.difference
    assert not report.oracle_violations
    return out.program.kernels[0]


def loads(kernel: ir.Kernel) -> dict[str, int]:
    """Loads per block."""
    return {b.label: n for b in kernel.blocks
            if (n := sum(1 for i in b.instructions if i.kind == ir.LOAD))}


def test_fig_4_11_control_dependence_and_cdrnd():
    text = control_facts(11, FIG_4_11, {10}, {2, 4}) + "branch(-1).\n#show cdrnd/1.\n"
    got = solve([shipped_rule("cfg.lp"), shipped_rule("cdrnd.lp")], text).atoms
    cd: dict[object, set[int]] = {}
    for x, a in got["cd"]:
        cd.setdefault(a, set()).add(x)
    assert cd == {"entry": {0, 1, 2, 8, 10}, 2: {3, 4, 7}, 4: {5, 6}, 8: {2, 8, 9}}
    assert sorted(b for (b,) in got["bcdrnd"] if b != "entry") == [0, 1, 2, 8, 9, 10]


@pytest.mark.parametrize("pass_name", ["srqp", "esrqp"])
def test_fig_4_9_preqp_inserts_into_node_2(pass_name):
    kernel = run("fig4_9", pass_name)
    assert loads(kernel) == {"N3": 1, "N2": 1}  # node 4's load reads the temporary


def test_fig_4_11_esrqp_inserts_nothing_into_divergent_sides():
    # the seed's SRQP inserts A[i+1] into 3 and 6; on the exit path A[i+1] is not
    # anticipated at 7 (8 loads A[i]), so our down-safety refuses it and SRQP, like
    # ESRQP, leaves the loop as it is (notes §6.9; docs/design.md "Code motion")
    for pass_name in ("srqp", "esrqp"):
        assert loads(run("fig4_11", pass_name)) == {"N5": 1, "N8": 1}


def test_fig_4_11f_insertion_sets_when_a_i_plus_1_is_anticipated_by_value():
    # Which reading of Fig 4.11 we implement: anticipability compares values (the
    # address after conversion), not "A[i] or A[i+1]" lexically as the seed's trace does.
    # With a load of A[i] after the loop, A[i+1] at node 7 is down-safe by value on the
    # exit path too, and SRQP makes exactly the seed's Fig 4.11f insertions: A[i] into
    # node 1, A[i+1] into nodes 3 and 6 (each with its address); ESRQP suppresses 3, 6
    # and so, as the seed says, changes nothing.
    kernel = run("fig4_11_exit_load", "srqp")
    assert loads(kernel) == {"N1": 1, "N5": 1, "N6": 1, "N3": 1}
    texts = {b.label: [i.text for i in b.instructions] for b in kernel.blocks}
    assert "sr_t1 = shared[i]" in texts["N1"]
    assert any(t.startswith("sr_a") and t.endswith("= i + 1") for t in texts["N3"])
    assert [t for t in texts["N8"] if "sr_t" in t][0].startswith("b = sr_t")
    assert loads(run("fig4_11_exit_load", "esrqp")) == {"N5": 1, "N8": 1, "E": 1}


@pytest.mark.parametrize("pass_name", ["ssrqp", "ssrqp-s"])
def test_fig_4_13_ssrqp_hoists_into_node_2_and_rotates(pass_name):
    kernel = run("fig4_11", pass_name)
    # A[i+1] hoisted from 5 into 2 (before the divergent branch), A[i] loaded once
    # before the loop at 1: one load per iteration instead of two
    assert loads(kernel) == {"N1": 1, "N2": 1}
    texts = [i.text for i in kernel.instructions()]
    assert any(t.startswith("sr_h") and "shared" in t for t in
               [i.text for i in kernel.blocks[1].instructions])
    # node 8 reads a temporary: SSRQP's rotating one; SSRQP_S also hoists A[i] above the
    # loop branch, compensated (Algorithm 2.1 line 7) at the end of node 1
    reads = "b = sr_t" if pass_name == "ssrqp" else "b = sr_h"
    assert sum(1 for t in texts if t.startswith(reads)) == 1


def test_fig_4_13c_after_copy_coalescing_rotates_the_loaded_registers_themselves():
    # the temporaries merge into the registers they are copied to: node 2 loads A[i+1]
    # into a, node 1 loads A[i] into b, and the rotating copy of Fig 4.13c is `b = a`
    kernel = run("fig4_11", "ssrqp", coalesce=True)
    texts = {b.label: [i.text for i in b.instructions] for b in kernel.blocks}
    assert "b = shared[i]" in texts["N1"]
    assert "a = shared[sr_a]" in texts["N2"]
    assert texts["N5"] == ["s = s + a", "jump N7"]
    assert "b = a" in texts["N8"] and not any("sr_t" in t or "sr_h" in t
                                              for ts in texts.values() for t in ts)


def test_fig_4_12_ssrqp_leaves_one_load_in_node_1():
    assert loads(run("fig4_12", "esrqp")) == {"N2": 1, "N5": 1}
    assert loads(run("fig4_12", "ssrqp")) == {"N1": 1}


def test_algorithm_2_1_compensation_inserts_into_the_predecessor_that_cannot_hoist():
    # compensation.musimd: the query from L meets N's entry with P2 hoisting above D3
    # and P1 redefining i; N is down-safe and P1 in the CDRND, so the load goes to the
    # end of P1 and before D3's branch (not before N's branch, as without line 7)
    kernel = run("compensation", "ssrqp")
    assert loads(kernel) == {"D3": 1, "P1": 1}
    assert [i.text for i in kernel.blocks[3].instructions] == ["i = i * 2",
                                                               "sr_h0 = shared[i]"]
    assert loads(run("compensation", "esrqp")) == {"L": 1, "R": 1}


def test_divergence_option_chooses_where_ssrqp_speculates():
    assert loads(run("divergence_choice", "ssrqp", "simple")) == {"bb1": 1}
    assert loads(run("divergence_choice", "ssrqp", "affine2")) == {"bb2": 1}


KILLED = """kernel killed(a, u)
      bz u, L
      c = shared[a]
      shared[a] = 5
      jump J
L:    c = 1
J:    sync
      d = shared[a]
      e = c + d
      shared[a] = e
"""


def test_a_store_to_the_same_space_kills_the_value():
    program = parse_text(KILLED, "killed.musimd", "musimd")
    for pass_name in ("srqp", "ssrqp-s"):
        out = transform(program, pass_name, verify=True)
        assert out.kernels[0].status == "verified"
        assert sum(1 for i in out.program.kernels[0].instructions()
                   if i.kind == ir.LOAD) == 2


# Lanes on the other side of a divergent branch write while a lane waits (SIMT runs the
# sides one after the other): the value loaded before the join, or hoisted above the
# branch, would miss that write. Both kernels change their memory if either is ignored.
OTHER_SIDE_WRITES_BEFORE_JOIN = """kernel race(p)
      q = tid % 2
      bz q, B
A:    a = shared[0]
      jump J
B:    shared[0] = 5
      a = 7
J:    sync
      c = shared[0]
      d = a + c
      o = tid + 64
      shared[o] = d
"""
OTHER_SIDE_WRITES_BEFORE_ORIGIN = """kernel race2(i)
      q = tid % 2
      bz q, A
B:    shared[i] = 5
      a = 7
      jump J
A:    a = shared[i]
J:    sync
      o = tid + 64
      shared[o] = a
"""


@pytest.mark.parametrize(("text", "count"), [(OTHER_SIDE_WRITES_BEFORE_JOIN, 2),
                                             (OTHER_SIDE_WRITES_BEFORE_ORIGIN, 1)])
def test_writes_of_the_other_side_of_a_divergent_branch_kill(text, count):
    program = parse_text(text, "race.musimd")
    for pass_name in ("srqp", "ssrqp-s"):
        out = transform(program, pass_name, verify=True)
        assert out.kernels[0].status == "verified", out.kernels[0].difference
        assert sum(1 for i in out.program.kernels[0].instructions()
                   if i.kind == ir.LOAD) == count


def test_ssrqp_on_nvcc_ptx_hoists_down_safe_loads_above_the_divergent_branch(tmp_path):
    # redundant_loads.cu loop_divergent: a[k + 1] under `if (t & 1)`, a[k] on every path;
    # nvcc unrolls by 4, so [%rd13+4] is loaded on one side and again after the join
    path = Path(__file__).parents[2] / "samples" / "cuda" / "redundant_loads.O3.ptx"
    kernel = "_Z14loop_divergentPKiiPi"
    out = transform(str(path), "ssrqp", kernel=kernel, verify=True)
    (report,) = out.kernels
    assert report.status == "verified" and not report.oracle_violations

    def plus4(k: ir.Kernel) -> int:
        return sum(1 for i in k.instructions() if i.kind == ir.LOAD
                   and i.args == (ir.Var("%rd13"),) and i.attrs.get("disp") == 4)
    before = next(k for k in transform(str(path), "identity").program.kernels
                  if k.name == kernel)
    after = next(k for k in out.program.kernels if k.name == kernel)
    assert (plus4(before), plus4(after)) == (2, 1)
    if PTXAS is not None:
        printed = tmp_path / "out.ptx"
        printed.write_text(out.text)
        assert ptxas_errors(printed) is None
