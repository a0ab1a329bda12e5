"""`gpudiv solve` and `gpudiv rules`: users' rules, shown relations, errors at file:line:col."""

import json
from pathlib import Path

import pytest

from gpudiv.analyses.solve import RuleError
from gpudiv.cli import main
from gpudiv.report.experiment import parse_signature, read_user_rules, run_rules

ROOT = Path(__file__).parents[2]
GATHER = ROOT / "samples" / "musimd" / "gather.musimd"
MEMORY = ROOT / "samples" / "rules" / "memory_divergence.lp"


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def test_memory_divergence_sample_rule():
    run = run_rules(GATHER, [MEMORY])
    assert run.shown == [("divergent_load", 4), ("uniform_load", 4)]
    (kernel,) = run.kernels
    relations = {n: [str(s) for s in symbols] for (n, _), symbols in kernel.relations.items()}
    assert relations == {"divergent_load": ['divergent_load("x#1","shared","a#1",7)'],
                         "uniform_load": ['uniform_load("k#1","shared","n",4)']}
    assert run.columns[("divergent_load", 4)] == ["V", "Space", "A", "Line"]


def test_solve_table_json_and_lp(capsys):
    code, out, _ = run_cli(capsys, "solve", str(GATHER), "--rules", str(MEMORY))
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == f"{GATHER}: kernel gather"
    assert lines[1:4] == ["  divergent_load/4 (1)", "    V    Space   A    Line",
                          "    x#1  shared  a#1  7"]
    code, out, _ = run_cli(capsys, "solve", str(GATHER), "--rules", str(MEMORY),
                           "--format", "json")
    document = json.loads(out)
    assert document["kernels"][0]["relations"]["divergent_load/4"] == [
        ["x#1", "shared", "a#1", 7]]
    code, out, _ = run_cli(capsys, "solve", str(GATHER), "--rules", str(MEMORY),
                           "--format", "lp")
    assert out.splitlines()[1:] == ['divergent_load("x#1","shared","a#1",7).',
                                    'uniform_load("k#1","shared","n",4).']


def test_show_selects_relations_and_default_shows_the_shipped_ones(capsys):
    run = run_rules(GATHER, show=["divergent/1", "uniform_branch/1"])
    assert run.shown == [("divergent", 1), ("uniform_branch", 1)]
    assert {str(s) for s in run.kernels[0].relations[("divergent", 1)]} >= {'divergent("x#1")'}
    default = run_rules(GATHER)
    assert ("reason", 3) in default.shown and ("join", 2) in default.shown
    code, out, _ = run_cli(capsys, "solve", str(GATHER), "--show", "uniform/1", "join/2")
    assert code == 0 and "  join/2: (none)" in out and "uniform/1 (6)" in out


def test_without_default_rules_only_input_relations_are_there(tmp_path):
    mine = tmp_path / "loads.lp"
    mine.write_text("address(A) :- load(_, _, A).\n")
    run = run_rules(GATHER, [mine], default_rules=False)
    assert run.rule_files == [str(mine)]
    assert sorted(str(s) for s in run.kernels[0].relations[("address", 1)]) == [
        'address("a#1")', 'address("n")']


@pytest.mark.parametrize(("text", "message"), [
    ("bad(X :- load(X, _, _).\n", "{f}:1:7: error: syntax error, unexpected :-"),
    ("bad(X) :- load(V, _, _).\n", "{f}:1:5: error: unsafe variable 'X' in: "
                                   "bad(X):-load(V,_,_)."),
    ("ok(V) :- load(V, _, _).\nbad(V) :- laod(V, _, _).\n",
     "{f}:2:11: error: undefined predicate laod/3: no loaded rule derives it and it is not "
     "an input relation of rules/SCHEMA.md"),
    ("bad(V) :- load(V, _).\n", "{f}:1:11: error: undefined predicate load/2"),
])
def test_errors_in_user_rules_are_one_line_at_the_users_place(tmp_path, capsys, text, message):
    mine = tmp_path / "mine.lp"
    mine.write_text(text)
    code, out, err = run_cli(capsys, "solve", str(GATHER), "--rules", str(mine))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(message.format(f=mine))


def test_derived_relation_without_its_rules_names_the_shipped_file(tmp_path, capsys):
    mine = tmp_path / "mine.lp"
    mine.write_text("hot(V) :- load(V, _, _), divergent(V).\n")
    code, _, err = run_cli(capsys, "solve", str(GATHER), "--rules", str(mine),
                           "--no-default-rules")
    assert code == 2
    assert err.strip() == (f"{mine}:1:26: error: undefined predicate divergent/1: no loaded "
                           "rule derives it and it is not an input relation of "
                           "rules/SCHEMA.md; shipped rules/divergence.lp derives it "
                           "(--no-default-rules left it out)")


@pytest.mark.parametrize(("args", "message"), [
    (["--rules", "nope.lp"], "nope.lp: error: no such rule file"),
    (["--show", "foo/2"], "error: --show foo/2: no loaded rule derives it"),
    (["--show", "foo"], "error: --show 'foo': expected NAME/ARITY"),
    (["--no-default-rules"], "error: no rules to solve with"),
    (["--kernel", "nope"], "error: no kernel 'nope' (kernels: gather)"),
    (["--format", "xml"], "gpudiv solve: error: argument --format: invalid choice: 'xml'"),
])
def test_solve_usage_errors(capsys, args, message):
    try:
        code, _, err = run_cli(capsys, "solve", str(GATHER), *args)
    except SystemExit as stop:
        code, err = stop.code, capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err


def test_rule_file_reading_helpers(tmp_path):
    assert parse_signature(" divergent / 1 ") == ("divergent", 1)
    with pytest.raises(RuleError):
        parse_signature("Divergent/1")
    rules = read_user_rules(MEMORY)
    assert rules.shows == [("divergent_load", 4), ("uniform_load", 4)]
    assert rules.defines == rules.shows
    folder = tmp_path / "dir.lp"
    folder.mkdir()
    with pytest.raises(RuleError, match="is a directory"):
        read_user_rules(folder)


def test_rules_command_lists_shipped_files(capsys):
    code, out, _ = run_cli(capsys, "rules")
    assert code == 0
    assert "divergence.lp: the simple divergence analysis" in out
    assert "  divergent/1 " in out and "  join/2 " in out
    code, out, _ = run_cli(capsys, "rules", "--format", "json")
    files = {f["file"]: f for f in json.loads(out)}
    assert {"relation": "reason/3"} .items() <= files["divergence.lp"]["derives"][-1].items()


def test_rule_messages_say_what_and_where(tmp_path, capsys):
    include = tmp_path / "inc.lp"
    include.write_text('#include "missing.lp".\n')
    code, _, err = run_cli(capsys, "solve", str(GATHER), "--rules", str(include))
    assert code == 2 and err.strip() == (f"{include}:1:1: error: file could not be opened: "
                                         "missing.lp")
    code, _, err = run_cli(capsys, "compare", str(GATHER), "--rules", str(include))
    assert code == 2 and err.startswith(f"{include}:1:1: error: file could not be opened: "
                                        "missing.lp (kernel gather, variant affine2+inc.lp)")
    external = tmp_path / "ext.lp"
    external.write_text("#external e.\n#show e/0.\n")
    code, out, err = run_cli(capsys, "solve", str(GATHER), "--rules", str(external))
    assert code == 0 and err == "" and "e/0: (none)" in out
    shows = tmp_path / "show.lp"
    shows.write_text("% nothing derives it\n#show zz/1.\n")
    code, _, err = run_cli(capsys, "solve", str(GATHER), "--rules", str(shows))
    assert code == 2 and err.startswith(f"{shows}:2:1: error: #show zz/1: no loaded rule")
    unsat = tmp_path / "unsat.lp"
    unsat.write_text(":- divergent(V).\n")
    code, _, err = run_cli(capsys, "solve", str(GATHER), "--rules", str(unsat))
    assert code == 2 and err.strip() == (f"{GATHER}:3:1: error: kernel gather: the rules have "
                                         "no answer set for these facts (an integrity "
                                         "constraint fails)")
