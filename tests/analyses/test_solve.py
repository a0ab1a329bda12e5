"""The solve layer: atoms of the model come back as Python values, whatever their form."""

import pytest

from gpudiv.analyses.solve import RuleError, _value, solve

ATOMS = r'''
a("x#1", 1, -5). a("quote\"and\\back", 2, bot). a("new\nline", 0, 2147483647).
b(f(1), "s,)"). b((1, "t"), c). c. d(a, b_c'). e(#inf, #sup). -g(1). g(2).
h("%r1#2", "$L__BB0_3", "(") .
'''


def test_atoms_convert_like_the_symbol_accessors():
    result = solve([], ATOMS)
    for symbol in result.symbols:
        expected = tuple(_value(a) for a in symbol.arguments)
        assert result.atoms[symbol.name].count(expected) >= 1, (str(symbol), expected)
    assert ("quote\"and\\back", 2, "bot") in result.atoms["a"]
    assert ("new\nline", 0, 2147483647) in result.atoms["a"]
    assert ("f(1)", "s,)") in result.atoms["b"] and ('(1,"t")', "c") in result.atoms["b"]
    assert result.atoms["c"] == [()] and result.atoms["d"] == [("a", "b_c'")]
    assert result.atoms["h"] == [("%r1#2", "$L__BB0_3", "(")]


def test_unsatisfiable_rules_are_an_error():
    with pytest.raises(RuleError, match="no answer set"):
        solve([], "a. :- a.")


def test_cached_rule_trees_leave_nothing_to_report_at_exit():
    """The syntax trees of shipped rule files are cached; a process that exits with them
    must not print clingo's errors about freeing them after its library is gone."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    sample = Path(__file__).parents[2] / "samples" / "cuda" / "vector_ops.O3.ptx"
    done = subprocess.run([sys.executable, "-m", "gpudiv.cli", "analyze", str(sample),
                           "--format", "json", "-o", os.devnull],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and done.stderr == "", done.stderr[-2000:]
