"""clingo_lib: one clingo run through clingo's C library, the same answers as clingo's
Python package gives, without importing that package."""

import subprocess
import sys

import clingo
import pytest

from gpudiv.analyses.clingo_lib import ATOM_UNDEFINED, Control, parse_term, symbol_text
from gpudiv.analyses.facts import Constant, program_text
from gpudiv.analyses.solve import shipped_rule, solve


def run(program: str, arguments=()) -> tuple[list[int] | None, list[tuple[int, str]], tuple]:
    """The final model, the logged (code, message) pairs and the problem size."""
    logged: list[tuple[int, str]] = []
    with Control(arguments, lambda code, text: logged.append((code, text)), 20) as control:
        control.add(program)
        control.ground()
        return control.final_model(), logged, control.problem_size()


def package_answer(program: str, arguments=()) -> tuple[list[str], dict]:
    """The last model's shown symbols and the problem statistics from clingo's package."""
    control = clingo.Control(list(arguments))
    control.add("base", [], program)
    control.ground([("base", [])])
    shown: list[str] = []
    control.solve(on_model=lambda m: shown.__setitem__(slice(None), map(str, m.symbols(
        shown=True))))
    return shown, control.statistics["problem"]["lp"]


@pytest.mark.parametrize("program, arguments", [
    ("a(1..3). b(X+1) :- a(X). c(\"s\", f(1)). -d. #show b/1. #show c/2. #show d/0.", ()),
    ("1 { p(1..5) } 3. #maximize { X : p(X) }.", ()),       # the optimum is the last model
    ("{ q(1..4) }. :- q(1), q(2). #minimize { 1, X : q(X) }. r :- not q(3).",
     ("--opt-strategy=usc",)),
])
def test_final_model_and_sizes_match_clingos_package(program, arguments):
    symbols, _, (atoms, rules) = run(program, arguments)
    shown, statistics = package_answer(program, arguments)
    assert sorted(map(symbol_text, symbols)) == sorted(shown)
    assert (atoms, rules) == (int(statistics["atoms"]), int(statistics["rules"]))
    assert [str(s) for s in map(clingo.Symbol, symbols)] == list(map(symbol_text, symbols))


def test_optimisation_gives_the_optimum_not_the_first_model():
    symbols, _, _ = run("1 { p(1..5) } 3. #maximize { X : p(X) }.")
    assert sorted(map(symbol_text, symbols)) == ["p(3)", "p(4)", "p(5)"]


def test_no_model_is_none_and_errors_are_clingos():
    assert run("a. :- a.")[0] is None
    with pytest.raises(RuntimeError, match="parsing failed"):
        run("a(.")
    with pytest.raises(RuntimeError, match="grounding stopped"):
        run("a(X).")


def test_logged_codes_are_integers_before_and_after_clingos_package_attaches_its_logger():
    _, logged, _ = run("a :- b.")
    assert [code for code, _ in logged] == [ATOM_UNDEFINED] and "b" in logged[0][1]
    import clingo.core  # noqa: F401 - attaches clingo's own logger callback

    _, again, _ = run("a :- b.")
    assert again == logged and isinstance(again[0][0], int)


def test_terms_round_trip_through_text():
    for text in ['f(1,"a\\"b",g(c))', "-x", "(1,2)", "#inf", '"é"', "-42"]:
        assert symbol_text(parse_term(text)) == str(clingo.parse_term(text))
        assert parse_term(text) == clingo.parse_term(text)._rep


def test_an_analysis_does_not_import_clingos_python_package(tmp_path):
    code = ("import sys; from gpudiv.analyses.solve import solve, shipped_rule;"
            "r = solve([shipped_rule('cfg.lp')], 'edge(b0,b1). branch(b0,p).');"
            "print(sorted(k for k in sys.modules if k.split('.')[0] == 'clingo'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, check=True)
    assert done.stdout.split() == ["['clingo._clingo']"]


FACTS = [("a", 'q"uo\\te', -3, 7), ("a", "é←\n", 0, 2147483647), ("b",), ("c", Constant("big")),
         ("d", "big", Constant("x_y")), ("e", "%r1@2#1", -2147483648)]
RULES = "r(X, N) :- a(X, N, _). s :- b. t(C) :- c(C). u(S) :- d(S, _). #show r/2. #show s/0. " \
        "#show t/1. #show u/1. #show e/2."


def test_facts_through_the_backend_are_the_facts_of_the_program_text():
    through_text, _, _ = run(program_text(FACTS) + RULES)
    with Control([], lambda code, text: None, 20) as control:
        control.add(RULES)
        control.add_facts(FACTS)
        control.ground()
        through_backend = control.final_model()
    assert sorted(map(symbol_text, through_backend)) == sorted(map(symbol_text, through_text))
    assert len(through_text) == 6


def test_solve_gives_the_same_atoms_from_tuples_and_from_text():
    rules = [shipped_rule("cfg.lp")]
    facts = [("edge", "b0", "b1"), ("edge", "b0", "b2"), ("edge", "b1", "b3"),
             ("edge", "b2", "b3"), ("branch", "b0", 1), ("ipdom", "b0", "b3"),
             ("ipdom", "b1", "b3"), ("ipdom", "b2", "b3")]
    assert dict(solve(rules, facts).atoms) == dict(solve(rules, program_text(facts)).atoms)


def test_a_message_with_a_character_cut_in_two_is_no_panic(tmp_path):
    """clingo's lexer errors cut "é←" byte by byte; clingo's own logger callback would end
    the process on them ("PANIC: exception in nothrow scope"), ours is attached instead."""
    code = ("import clingo.core\nfrom gpudiv.analyses.clingo_lib import Control\n"
            "logged = []\ntry:\n    with Control([], lambda c, t: logged.append((c, t)), 20)"
            " as control:\n        control.add('a(\"é←\\n\").')\nexcept RuntimeError as e:\n"
            "    print(e)\nprint(len(logged), all(c == 1 for c, _ in logged))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["parsing failed", "7 True"], done.stdout
