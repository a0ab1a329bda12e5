"""Cycles: temporal divergence where lanes of different iterations meet (issue 19).

Lanes split by a divergent branch meet again at its immediate post-dominator. When that
block lies inside a cycle and some lanes go round the cycle once more before they reach
it, the lanes meeting there can be in different iterations: a value of the cycle read
there differs between them even though every lane computed it from uniform operands.
gpudiv places a rejoin copy (ρ) of such values at that block, gated by the branch.

The shapes follow the irreducible cases of LLVM's UniformityAnalysis tests (divergent
entry into a cycle, re-entrance through another header, nested cycles entered from
outside, joins inside a cycle), written here as μ-SIMD programs of our own and run under
reconvergence at immediate post-dominators, as GPU hardware and the PTX interpreter do.
"""

from pathlib import Path

import pytest

from gpudiv.api import analyze, analyze_text
from gpudiv.ir.cfg import build_cfg
from gpudiv.lang.musimd.parse import parse_musimd
from gpudiv.verify.oracle import check_kernel, random_launches

ROOT = Path(__file__).parents[2] / "samples"
SHAPES = ((4, 4), (7, 4), (32, 32), (45, 32))
ANALYSES = ("simple", "affine", "affine2")

# The shape: entries A and B chosen by a parameter, merged in C, a three-way
# switch at the bottom lowered as two branches (C: back to A; C2: back to B; else out).
SWITCH = """kernel irr(sel)
      t = tid % 4
      k = 0
      bz sel, B
A:    a = k * 3
      v = a + 1
      jump C
B:    b = k * 5
      v = b + 2
C:    r = v + k
      k = k + 1
      p = k < t
      q = k % 2
      g = p & q
      bnz g, A
C2:   h = p - g
      s = r * 7
      bnz h, B
OUT:  shared[tid] = r
      x = s + r
      shared[tid] = x
      stop
"""

# A reducible loop with two latches: lanes that take H's own back edge more often meet
# the others at C2 with a larger k.
TWO_LATCHES = """kernel red(n)
      t = tid % 4
      k = 0
H:    r = k * 3
      k = k + 1
      p = k < t
      bnz p, H
C2:   s = r * 7
      q = k < n
      bnz q, H
OUT:  shared[tid] = s
      stop
"""

# Divergent entry: lanes enter the irreducible cycle at A or at B depending on tid.
DIVERGENT_ENTRY = """kernel entry(n)
      c = tid & 1
      i = 0
      bz c, B
A:    i = i + 1
      x = i * 2
B:    y = i + n
      p = i < 3
      bnz p, A
      shared[tid] = y
      stop
"""

# Re-entrance through a different header: the cycle {A, B} is left from A to D and
# entered again at B, so the lanes meeting at A's post-dominator went round differently.
REENTRY = """kernel reentry(n)
      t = tid % 3
      k = 0
      bz n, B
A:    k = k + 1
      r = k * 5
      p = k < t
      bz p, D
      jump B
D:    s = r + 1
      shared[tid] = s
      q = k < 4
      bz q, OUT
B:    u = k + 2
      w = u < 6
      bnz w, A
OUT:  shared[tid] = k
      stop
"""

# An inner cycle nested in an irreducible one and entered from outside it.
NESTED = """kernel nested(n)
      t = tid % 3
      j = 0
      bz n, B
A:    j = j + 1
      i = 0
IN:   i = i + 1
      m = i * j
      p = i < t
      bnz p, IN
      z = m + 1
B:    y = j * 2
      q = j < 3
      bnz q, A
      shared[tid] = y
      shared[tid] = m
      stop
"""

# A join inside a cycle dominated by a divergent branch, with the loop exit uniform.
JOIN_IN_CYCLE = """kernel join(n)
      k = 0
H:    c = tid & 1
      bz c, E
      x = k + 1
      jump J
E:    x = k + 2
J:    y = x * 3
      k = k + 1
      p = k < n
      bnz p, H
      shared[tid] = y
      shared[tid] = k
      stop
"""

# A value that only ever holds the parameter n, carried through a loop whose exit and
# inner branch diverge: it stays uniform (precision, issue 19 item 4).
INVARIANT = """kernel carry(n)
      x = n
      i = 0
      t = tid % 4
LOOP: p = i < t
      bz p, EXIT
      q = tid & 1
      bz q, SKIP
      x = n
SKIP: i = i + 1
      jump LOOP
EXIT: shared[tid] = x
      stop
"""

PROGRAMS = {"switch": SWITCH, "two_latches": TWO_LATCHES, "divergent_entry": DIVERGENT_ENTRY,
            "reentry": REENTRY, "nested": NESTED, "join_in_cycle": JOIN_IN_CYCLE,
            "invariant": INVARIANT}


def kernel_result(text: str, analysis: str):
    """The analysis result of the only kernel of `text`."""
    result = analyze_text(text, "cycles.musimd", analysis)
    assert not result.errors, result.errors
    return result.kernels[0]


def classes(text: str, analysis: str) -> dict[str, str]:
    """SSA name → class."""
    return {v.name: v.klass for v in kernel_result(text, analysis).variables}


def rejoin_copies(text: str, analysis: str, source: str) -> dict[str, str]:
    """The rejoin copies of a source variable and their classes."""
    kernel = kernel_result(text, analysis)
    return {v.name: v.klass for v in kernel.variables
            if v.source == source and v.kind == "rejoin"}


@pytest.mark.parametrize("analysis", ANALYSES)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_every_claim_holds_on_the_interpreter(name, analysis):
    """The oracle checks every claim at every use, several launches and warp widths."""
    kernel = kernel_result(PROGRAMS[name], analysis)
    for seed in range(3):
        launches = random_launches(kernel.ssa.cfg.kernel, seed, SHAPES, "ipdom")
        report = check_kernel(kernel, launches)
        assert report.status == "checked", report.reason
        assert report.violations == [], report.violations[:2]


def test_rejoin_point_of_the_switch_is_the_second_switch_block():
    cfg = build_cfg(parse_musimd(SWITCH, "t.musimd").kernels[0])
    (loop,) = cfg.loops.values()
    assert sorted(loop.headers) == ["A", "B"]
    assert list(cfg.rejoins) == ["C2"]
    assert cfg.rejoins["C2"].branches == ["C"] and cfg.rejoins["C2"].loop == loop.name


def test_structured_loops_and_joins_inside_loops_have_no_rejoin_point():
    """A join inside the loop body, reached in the same iteration: nothing to copy."""
    for text in (JOIN_IN_CYCLE, (ROOT / "musimd" / "sumTriangle.musimd").read_text()):
        assert build_cfg(parse_musimd(text, "t.musimd").kernels[0]).rejoins == {}


@pytest.mark.parametrize("analysis", ANALYSES)
def test_switch_value_read_after_the_rejoin_is_divergent(analysis):
    """Fig. of issue 19: r defined in C and read in C2 is divergent there."""
    copies = rejoin_copies(SWITCH, analysis, "r")
    assert copies and set(copies.values()) == {"divergent"}
    kernel = kernel_result(SWITCH, analysis)
    branch_on_s = {b.label: b.divergent for b in kernel.branches}
    assert branch_on_s["bb1"] is False  # the entry choice on the parameter stays uniform


@pytest.mark.parametrize("analysis", ANALYSES)
def test_two_latch_loop_counter_is_divergent_at_the_second_latch(analysis):
    assert set(rejoin_copies(TWO_LATCHES, analysis, "k").values()) == {"divergent"}
    assert set(rejoin_copies(TWO_LATCHES, analysis, "r").values()) == {"divergent"}


@pytest.mark.parametrize("analysis", ANALYSES)
def test_uniform_loop_exit_after_a_join_keeps_the_counter_uniform(analysis):
    """The join inside the cycle makes x divergent, not the counter k (no rejoin)."""
    found = classes(JOIN_IN_CYCLE, analysis)
    assert found["x#3"] == "divergent"
    assert all(found[name] != "divergent" for name in found if name.startswith("k#"))


@pytest.mark.parametrize("analysis", ANALYSES)
def test_value_carrying_only_the_parameter_stays_uniform(analysis):
    found = classes(INVARIANT, analysis)
    assert {found[name] for name in found if name.startswith("x#")} == {"uniform"}
    branches = {b.label: b.divergent for b in kernel_result(INVARIANT, analysis).branches}
    assert branches == {"LOOP": True, "bb2": True}  # the gates that no longer apply to x


@pytest.mark.parametrize("analysis", ANALYSES)
def test_ptx_sample_of_the_switch(analysis):
    """The hand-written PTX of the issue's shape: %r5 read in C2 is divergent."""
    result = analyze(ROOT / "ptx" / "irreducible_switch.ptx", analysis=analysis)
    kernel = result.kernels[0]
    copies = {v.name: v.klass for v in kernel.variables
              if v.source == "%r5" and v.kind == "rejoin"}
    assert copies and set(copies.values()) == {"divergent"}
    uses = {v.name: v.klass for v in kernel.variables if v.source == "%r10"}
    assert set(uses.values()) == {"divergent"}
