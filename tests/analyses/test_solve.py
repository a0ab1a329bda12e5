"""The solve layer: atoms of the model come back as Python values, whatever their form."""

import pytest

from gpudiv.analyses.solve import TREES_FROM, RuleError, _value, solve

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


@pytest.mark.slow
def test_cached_rule_trees_leave_nothing_to_report_at_exit(tmp_path):
    """The syntax trees of shipped rule files are cached (from their `TREES_FROM`-th load
    in a process: many files, one job); a process that exits with them must not print
    clingo's errors about freeing them after its library is gone."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    samples = Path(__file__).parents[2] / "samples" / "cuda"
    files = [str(samples / f"{name}.{build}.ptx") for build in ("O3", "G")
             for name in ("vector_ops", "kfcm_pipeline", "spin_deadlock", "double_precision",
                          "texture_objects", "scan", "sorting", "reductions", "stencils")]
    assert len(files) > TREES_FROM
    done = subprocess.run([sys.executable, "-m", "gpudiv.cli", "analyze", "--jobs", "1",
                           *files, "--format", "json", "-o", os.devnull],
                          capture_output=True, text=True, timeout=60, check=False,
                          cwd=tmp_path)  # the installed package, not the source folder
    assert done.returncode == 0 and done.stderr == "", done.stderr[-2000:]


def test_shipped_rules_go_in_as_text_first_and_as_cached_trees_after(tmp_path):
    """A process that runs clingo a few times (one file) neither imports clingo.ast nor
    builds the trees; from the `TREES_FROM`-th load on the trees are parsed once and give
    the same answer."""
    import subprocess
    import sys

    code = ("import sys\nfrom gpudiv.analyses import solve\n"
            "rules, hide = [solve.shipped_rule('cfg.lp')], frozenset({('x', 1)})\n"
            "facts = 'branch(b0, p). edge(b0, b1). edge(b0, b2). edge(b1, b2). ipdom(b0, b2)."
            " ipdom(b1, b2).'\n"
            "first = [solve.solve(rules, facts, hide=hide) for _ in range(solve.TREES_FROM - 1)]\n"
            "text_only = 'clingo.ast' not in sys.modules\n"
            "later = solve.solve(rules, facts, hide=hide)\n"
            "print(text_only, solve._shipped_statements.cache_info().currsize,"
            " dict(first[0].atoms) == dict(later.atoms), len(later.symbol_ids) > 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True, cwd=tmp_path)  # the installed package
    assert done.stdout.split() == ["True", "1", "True", "True"], done.stdout + done.stderr
