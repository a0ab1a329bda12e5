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
