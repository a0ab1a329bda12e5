"""`transform --explain` / `gpudiv.explain_motion`: per expression the insertion and
replacement points of a code-motion pass and the predicate values behind them, on the
golden kernels (Figs 4.1, 4.6, the compensation of Algorithm 2.1), CLI and Python."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import gpudiv
from gpudiv.cli import main

MOTION = Path(__file__).parents[1] / "data" / "motion"


@cache
def explained(name: str, pass_name: str):
    """The one kernel's explanation of a golden file."""
    (one,) = gpudiv.explain_motion(MOTION / name, pass_name)
    return one


def points(record, kind: str) -> dict[tuple[str, str], dict[str, bool]]:
    """(block, place) → predicate values of a record's insertions or replacements."""
    return {(p.block, p.place): p.predicates for p in getattr(record, kind)}


def test_fig_4_1_lcm_inserts_at_the_latest_live_exits_of_4_and_6():
    (record,) = explained("fig4_1.musimd", "lcm").expressions
    assert (record.step, record.expression) == ("lcm", "a + b")
    inserts = points(record, "insertions")
    assert {("N4", "exit"), ("N6", "exit")} <= set(inserts)
    for key in (("N4", "exit"), ("N6", "exit")):
        assert inserts[key] == {
            "xdsafe": True, "xusafe": False, "xearliest": False, "xdelayed": True,
            "xlatest": True, "xlive": True}
    replaced = points(record, "replacements")
    assert set(replaced) == {("N3", "entry"), ("N7", "entry")}
    assert replaced[("N7", "entry")] == {"ncomp": True, "ninsert": False, "nlatest": False}


def test_fig_4_6_sscm_region_has_one_r_earliest_point_above_the_divergent_branches():
    one = explained("fig4_6.musimd", "sscm")
    assert (one.divergence, one.speculate) == ("affine2", ["N4", "N6"])
    (record,) = [r for r in one.expressions if r.step == "region"]
    assert list(points(record, "insertions")) == [("N1", "entry")]
    assert points(record, "insertions")[("N1", "entry")]["rearliest"]
    replaced = points(record, "replacements")
    assert set(replaced) == {("N3", "entry"), ("N7", "entry"), ("N8", "entry")}
    assert all(v["relcomp"] and v["dsregion"] and not v["upsafe"] for v in replaced.values())
    scm = explained("fig4_6.musimd", "scm")
    (region,) = [r for r in scm.expressions if r.step == "region"]
    assert len(region.insertions) == 2 and scm.speculate == []  # 3 -> 2, no speculation


def test_ssrqp_explains_the_hoist_and_the_compensation():
    one = explained("loads/compensation.musimd", "ssrqp")
    records = [r for r in one.expressions if r.step == "speculation"]
    assert {r.replacements[0].block for r in records} == {"L", "R"}
    inserts = points(records[0], "insertions")
    assert inserts[("D3", "before-branch")]["divbranch"]
    assert inserts[("P1", "end")] == {"can_hoist": False, "cdrnd": True,
                                      "successor_antin": True}


def test_cli_text_and_json(capsys):
    path = str(MOTION / "loads" / "fig4_11.musimd")
    assert main(["transform", path, "--pass", "ssrqp", "--explain"]) == 0
    out = capsys.readouterr().out
    assert "speculates at N2, N4" in out
    assert "insert  N2 (before-branch) `bz p, N3`: divbranch=T" in out
    assert "insert  N1 (end) `i = 0`: avout=F successor_avin=T" in out
    assert main(["transform", path, "--pass", "esrqp", "--explain", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["pass"] == "esrqp"
    assert data["files"][0]["kernels"][0]["expressions"] == []  # ESRQP leaves Fig 4.11


def test_explain_of_a_pass_that_is_not_code_motion_is_one_error_line(capsys):
    path = str(MOTION / "fig4_1.musimd")
    assert main(["transform", path, "--pass", "identity", "--explain"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a code-motion pass" in err[0]
