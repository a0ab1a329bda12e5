"""Register allocation (issue 15; Sampaio 2013 ch. 4): liveness and interference rules,
linear scan, the four allocators, and the seed's worked examples as golden tests."""

from pathlib import Path

import pytest

from gpudiv import ir
from gpudiv.interp.musimd import LaunchConfig, run_kernel
from gpudiv.lang.load import load, parse_text
from gpudiv.lang.printing import print_program
from gpudiv.transforms import PassError, Pipeline, clone_kernel, get_pass
from gpudiv.transforms.base import Pass
from gpudiv.transforms.linear_scan import conflicts, linear_scan
from gpudiv.transforms.liveness import liveness
from gpudiv.transforms.regalloc import LOCAL_BASE, SHARED_BASE, rewrite, wrap32
from gpudiv.transforms.spill_rules import (
    BOTTOM,
    LOCAL,
    REMAT,
    SHARED,
    SHARED_AFFINE,
    SpillPlan,
    plan,
    rule_for,
    slot_state,
)
from gpudiv.verify.equivalence import compare_kernels
from gpudiv.verify.transform_check import transform

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "musimd"
FIG = SAMPLES / "avgSquare_fig4_2.musimd"
SLIDES = SAMPLES / "regalloc_slides.musimd"


def allocate(path: Path, allocator: str, registers: int, kernel: str | None = None):
    """The transformed program and the kernel's statistics."""
    program = load(path)
    result = Pipeline([get_pass("regalloc", allocator=allocator, registers=registers)])
    out = result.run(program)
    k = out.kernel(kernel) if kernel else out.kernels[0]
    return out, k, k.attrs["transform_stats"]


def test_liveness_rules_on_avgsquare_and_interference_is_respected():
    kernel = load(SAMPLES / "avgSquare.musimd").kernels[0]
    live = liveness(kernel)
    by_text = {i.text: i.id for i in kernel.instructions()}
    assert live.live_in[by_text["p = i < N"]] == {"N", "d", "i", "s"}
    assert live.live_out[by_text["r = s / d"]] == {"r"}
    assert live.live_in.get(by_text["d = 0"], set()) == set()
    assert ("N", "d") in live.interfere and ("d", "N") in live.interfere
    assert ("t", "i") not in live.interfere  # t dies where N is defined, before i
    for budget in (1, 2, 3, 8):
        assignment = linear_scan(kernel, live, budget)
        assert conflicts(assignment, live) == []
        assert assignment.used <= budget
    assert linear_scan(kernel, live, 8).spilled == []


def test_fig_4_2_vs_fig_4_4_avgsquare_two_lanes_three_registers():
    _, linear, s_lin = allocate(FIG, "linear", 3)
    _, affine, s_aff = allocate(FIG, "affine", 3)
    # Fig 4.2: linear scan spills s, d and N, three local slots per lane
    assert set(s_lin["spilled_names"]) == {"s", "d", "N"} == set(s_aff["spilled_names"])
    assert (s_lin["local_slots_per_thread"], s_lin["shared_slots_per_warp"]) == (3, 0)
    # Fig 4.4: s stays local, d is shared by rule (ii), N by rule (iv) as N - tid
    assert (s_aff["spills_local"], s_aff["spills_shared"], s_aff["spills_shared_affine"]) \
        == (1, 1, 1)
    assert (s_aff["local_slots_per_thread"], s_aff["shared_slots_per_warp"]) == (1, 2)
    text = print_program(load(FIG).__class__(FIG.name, "musimd", [affine]))
    assert "x1 = x0 - tid" in text and "x0 = tid + x2" in text  # store N - tid, rebuild N
    # two lanes, one warp: v[tid] = average of column tid of the c x c matrix at m
    c, m, v = 2, 10, 30
    memory = {0: c, 1: m, 2: v, 10: 4, 11: 7, 12: 6, 13: 9}
    for kernel in (load(FIG).kernels[0], linear, affine):
        run = run_kernel(kernel, LaunchConfig(threads=2, warp_width=2, shared=dict(memory)))
        assert (run.shared[30], run.shared[31]) == ((4 + 6) // 2, (7 + 9) // 2)
    assert run.local[0] == {LOCAL_BASE: 4 + 6}  # affine: only s in local memory
    # shared[0] = d (2 trips), shared[1] = t0 = N - tid = c*c (Fig 4.4: st.shared t0 [1])
    assert (run.shared[SHARED_BASE], run.shared[SHARED_BASE + 1]) == (c, c * c)
    # two warps of two lanes (tid 0..3 < c = 4): each warp has its own area of 2 words
    memory[0] = 4
    run = run_kernel(affine, LaunchConfig(threads=4, warp_width=2, shared=dict(memory)))
    assert [run.shared[SHARED_BASE + k] for k in range(4)] == [4, 16, 4, 16]


@pytest.mark.slow
def test_fig_4_2_and_4_4_verify_on_several_shapes_with_several_warps():
    for allocator in ("linear", "divergence", "remat", "affine"):
        (k,) = transform(FIG, "regalloc", verify=True,
                         options={"regalloc": {"allocator": allocator, "registers": 3}}).kernels
        assert k.status == "verified" and k.runs >= 3 and not k.oracle_violations, k.difference
        spills = k.dynamic["spills"]["after"]
        if allocator == "affine":
            assert spills["shared_stores"] > 0 and spills["local_stores"] > 0


def test_slides_rematerialisation_removes_the_store_and_recomputes_n():
    _, kernel, stats = allocate(SLIDES, "remat", 2, "remat_constant")
    assert stats["spilled_names"] == ["s", "N"] and stats["spills_remat"] == 1
    texts = [i.text for i in kernel.instructions()]
    assert "x0 = 2 * tid" in texts and "x0 = x0 + 3" in texts
    assert "r0 = r0 + 3" not in texts  # the definition of N is gone
    assert stats["local_stores"] == 2 and stats["local_slots_per_thread"] == 1  # s=0, s+=y
    _, kernel, stats = allocate(SLIDES, "affine", 2, "remat_affine")
    assert stats["spills_shared_affine"] == 1  # N = 2*tid + t0: (2, ⊥), rule (iv)
    texts = [i.text for i in kernel.instructions()]
    assert "x1 = 2 * tid" in texts and "x1 = x0 - x1" in texts  # st.shared t0
    for allocator in ("remat", "affine"):
        out, _, _ = allocate(SLIDES, allocator, 2)
        reread = parse_text(print_program(out), "slides.musimd")
        for before, after, done in zip(load(SLIDES).kernels, reread.kernels, out.kernels,
                                       strict=True):
            outcome = compare_kernels(before, after, "musimd", 0, scratch=done.attrs["scratch"])
            assert outcome.status == "verified"



def test_sumtriangle_d_is_never_shared_and_sharing_it_would_be_wrong():
    program = load(SAMPLES / "sumTriangle.musimd")
    kernel = program.kernels[0]
    result = Pass.analysis(kernel, "affine2")
    assert result.variable("d#2").uniform  # uniform inside the loop...
    assert not result.variable("d#4").uniform  # ...divergent after it
    assert slot_state(result, "d") == BOTTOM
    live = liveness(kernel)
    assignment = linear_scan(kernel, live, 3)
    assert "d" in assignment.spilled
    plans = {p.name: p for p in plan("affine", assignment.spilled, result)}
    assert plans["d"].rule == LOCAL
    # sharing d's slot anyway (a per-SSA-version choice would) breaks the kernel
    forced = [SpillPlan(n, SHARED if n == "d" else LOCAL) for n in assignment.spilled]
    wrong = rewrite(clone_kernel(kernel), assignment, forced, "forced", 3)
    reread = parse_text(print_program(program.__class__(program.path, "musimd", [wrong])),
                        "wrong.musimd")
    assert compare_kernels(kernel, reread.kernels[0], "musimd", 0,
                           scratch=wrong.attrs["scratch"]).status == "differs"


def test_rules_of_fig_4_3_by_state():
    every = frozenset({"constant", SHARED, REMAT, SHARED_AFFINE})
    assert rule_for((0, 0, 7), every) == ("constant", 0, 7)
    assert rule_for((0, 0, None), every) == (SHARED, 0, 0)
    assert rule_for((0, 2, 3), every) == (REMAT, 2, 3)
    assert rule_for((0, 2, None), every) == (SHARED_AFFINE, 2, 0)
    assert rule_for((0, None, 0), every)[0] == LOCAL  # unknown coefficient: no rule
    assert rule_for((None, None, None), every)[0] == LOCAL
    assert rule_for((0, 2, 3), frozenset({SHARED}))[0] == LOCAL
    assert wrap32(2**32 + 5) == 5 and wrap32(2**31) == -2**31


def test_divergence_allocator_follows_the_simple_analysis():
    # the simple analysis cannot see that avgSquare's loop is uniform: d after the loop
    # is divergent for it, so d stays local; the affine allocator shares it
    _, _, stats = allocate(FIG, "divergence", 3)
    assert stats["spills_shared"] == 0 and stats["spills_local"] == 3
    _, _, stats = allocate(SAMPLES / "loops_nested.musimd", "divergence", 3)
    assert stats["spills_shared"] == 1 and stats["base_registers"] == 1


def test_assigned_parameter_and_bad_options():
    source = "kernel k(a)\n  a = a + 1\n  b = a * 2\n  shared[tid] = b\n  stop\n"
    program = parse_text(source, "k.musimd")
    out = Pipeline([get_pass("regalloc", allocator="linear", registers=1)]).run(program)
    reread = parse_text(print_program(out), "k.musimd")
    assert compare_kernels(program.kernels[0], reread.kernels[0], "musimd").status == \
        "verified"
    with pytest.raises(PassError, match="unknown allocator 'best'"):
        Pipeline([get_pass("regalloc", allocator="best")]).run(program)
    with pytest.raises(PassError, match="at least 1"):
        Pipeline([get_pass("regalloc", registers=0)]).run(program)
    assert all(i.kind != ir.OPAQUE for i in out.kernels[0].instructions())


def test_base_register_is_set_up_outside_a_loop_at_the_entry():
    source = ("kernel k(n)\nL:    i = shared[0]\n      i = i + 1\n      u = n * 2\n"
              "      w = u + i\n      x = w * u\n      barrier\n      shared[0] = i\n"
              "      shared[i] = x\n      p = i < n\n      bnz p, L\n"
              "      shared[tid] = u\n      stop\n")
    program = parse_text(source, "k.musimd")
    out = Pipeline([get_pass("regalloc", allocator="divergence", registers=1)]).run(program)
    (kernel,) = out.kernels
    assert kernel.attrs["transform_stats"]["spills_shared"] == 2
    assert [i.text for i in kernel.blocks[0].instructions] == ["sb = warpid * 2",
                                                               "sb = sb + 268435456"]
    assert kernel.blocks[1].label == "L"
    reread = parse_text(print_program(out), "k.musimd")
    assert compare_kernels(program.kernels[0], reread.kernels[0], "musimd", 0,
                           scratch=kernel.attrs["scratch"]).status == "verified"
