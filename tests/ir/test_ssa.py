"""Gated SSA: φ placement, μ/γ/η kinds, LCSSA, source mapping."""

from gpudiv.ir.cfg import build_cfg
from gpudiv.ir.ssa import build_ssa
from gpudiv.lang.musimd.parse import parse_musimd


def ssa_of(text: str):
    program = parse_musimd(text, "t.musimd")
    assert not program.errors
    return build_ssa(build_cfg(program.kernels[0]))


LOOP = """kernel k(n)
  i = 0
H: p = i < n
  bz p, X
  i = i + 1
  jump H
X: sync
  shared[0] = i
  stop
"""


def test_loop_gets_mu_and_eta():
    ssa = ssa_of(LOOP)
    kinds = {v.name: (v.kind, v.phi_kind, v.loop) for v in ssa.variables.values()
             if v.source == "i"}
    assert kinds == {"i#1": ("assign", None, None), "i#2": ("phi", "mu", "H"),
                     "i#3": ("assign", None, None), "i#4": ("eta", "eta", "H")}
    assert ssa.variables["i#2"].incoming == [("bb1", "i#1"), ("bb2", "i#3")]
    assert ssa.variables["i#4"].operands == ["i#2"]
    # the store after the loop reads the η, never the μ
    store = len(ssa.uses) - 2
    assert ssa.uses[store] == [None, "i#4"]


def test_every_variable_maps_to_source_and_line():
    ssa = ssa_of(LOOP)
    assert ssa.variables["i#1"].loc.line == 2
    assert ssa.variables["i#2"].loc.line == 3   # φ: line of its block's label
    assert ssa.variables["i#4"].loc.line == 7
    assert all(v.source for v in ssa.variables.values())


def test_gamma_at_join_and_pruning():
    ssa = ssa_of("kernel k()\n bz tid, E\n x = 1\n y = 5\n jump J\nE: x = 2\n"
                 "J: sync\n shared[0] = x\n stop\n")
    phis = [v for v in ssa.variables.values() if v.kind == "phi"]
    assert [(v.source, v.phi_kind) for v in phis] == [("x", "gamma")]  # y is dead at J


def test_undefined_reads_get_an_undef_version():
    ssa = ssa_of("kernel k()\n shared[0] = x\n stop\n")
    assert ssa.uses[0] == [None, "x#undef"]
    assert [name for name, _ in ssa.undefined] == ["x"]


def test_branch_conditions():
    ssa = ssa_of(LOOP)
    (branch,) = ssa.branches
    assert (branch.block, branch.condition, branch.loc.line) == ("H", "p#1", 4)
