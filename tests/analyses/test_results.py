"""Warnings of analysed kernels (gpudiv.analyses.results)."""

import pytest

from gpudiv import api


@pytest.mark.parametrize("analysis", ["simple", "affine", "affine2"])
def test_unreachable_code_is_warned_at_its_line(analysis):
    source = "kernel k(a)\n  x = a\n  stop\n  x = 1\n  stop\nL: y = 2\n  stop\n"
    result = api.analyze_text(source, "u.musimd", analysis)
    warnings = [(d.line, d.message) for d in result.diagnostics if d.severity == "warning"]
    assert warnings == [
        (4, "kernel k: unreachable code: never executed, left out of the analysis"),
        (6, "kernel k: unreachable code (block L): never executed, left out of the analysis"),
    ]
    assert [v.name for v in result.kernels[0].variables] == ["a", "x#1"]


def test_reachable_code_gives_no_warning():
    result = api.analyze_text("kernel k(a)\n  x = a\n  stop\n", "r.musimd")
    assert result.diagnostics == []


def test_grouped_reasons_sorts_each_variables_reasons_and_keeps_one_list_per_variable():
    from gpudiv.analyses.results import first_reason, grouped_reasons

    rows = [("v", "operand", "b"), ("w", "special", "tid.x"), ("v", "operand", "a"),
            ("v", "control", "B1")]
    grouped = grouped_reasons(rows)
    assert grouped == {"v": [("control", "B1"), ("operand", "a"), ("operand", "b")],
                       "w": [("special", "tid.x")]}
    assert first_reason(grouped, "v") == ("control", "B1")
    assert first_reason(grouped, "u") is None


DIVERGENT_CHAIN = """kernel k(a)
  t = tid
  u = t + a
  v = u * 2
  c = v < 8
  bz c, L
  w = 1
L: stop
"""


@pytest.mark.parametrize("analysis", ["simple", "affine", "affine2"])
def test_a_results_memoised_reasons_are_its_reason_relation_grouped(analysis):
    import pickle

    from gpudiv.analyses.results import grouped_reasons

    kernel = api.analyze_text(DIVERGENT_CHAIN, "c.musimd", analysis).kernels[0]
    expected = grouped_reasons(kernel.relations["reason"])
    assert {"u#1", "v#1", "c#1"} <= set(expected)
    assert kernel.reasons() == expected
    shown = {var.name: var.reason for var in kernel.variables if var.reason is not None}
    assert shown == {var: listed[0] for var, listed in expected.items() if var in shown}
    copy = pickle.loads(pickle.dumps(kernel))
    assert copy._grouped_reasons is None  # the memo does not travel
    assert copy.reasons() == expected
