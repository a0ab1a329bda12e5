"""rules/SCHEMA.md documents every relation code emits or rules show, with the same arity."""

from pathlib import Path

import pytest

import gpudiv
from gpudiv.analyses.facts import RELATIONS, kernel_facts
from gpudiv.analyses.schema import (
    documented_relations,
    parse_schema,
    schema_path,
    shipped_rule_files,
    shown_relations,
)
from gpudiv.analyses.solve import rules_dir
from gpudiv.ir.cfg import build_cfg
from gpudiv.ir.ssa import build_ssa

SAMPLES = Path(__file__).parents[2] / "samples"
SAMPLE_FILES = sorted([*SAMPLES.glob("musimd/*.musimd"), *SAMPLES.glob("cuda/*.O3.ptx"),
                       *SAMPLES.glob("reports/*.ptx")])


def documented() -> dict[str, int]:
    return {name: r.arity for name, r in documented_relations().items()}


def test_schema_tables_are_parsed():
    relations = parse_schema((Path(rules_dir()) / "SCHEMA.md").read_text())
    assert relations["edge"].columns == ("B1", "B2")
    assert relations["load"].column_types() == ("symbol", "symbol", "symbol")
    assert relations["def_line"].column_types() == ("symbol", "number")
    assert relations["reason"].section == "rules/divergence.lp"
    assert schema_path().is_file()


def test_every_input_relation_is_documented_with_its_arity():
    table = documented()
    for name, arity in RELATIONS.items():
        assert name in table, f"facts.RELATIONS has '{name}', rules/SCHEMA.md does not"
        assert table[name] == arity, f"{name}: arity {arity} in code, {table[name]} in SCHEMA.md"


@pytest.mark.parametrize("path", SAMPLE_FILES, ids=lambda p: p.name)
def test_emitted_facts_are_declared_and_documented(path):
    table = documented()
    for kernel in gpudiv.load(path).kernels:
        for fact in kernel_facts(build_ssa(build_cfg(kernel))):
            name = fact[0]
            assert name in RELATIONS, f"kernel_facts emits '{name}', not in facts.RELATIONS"
            assert name in table, f"kernel_facts emits '{name}', not in rules/SCHEMA.md"


@pytest.mark.parametrize("rule_file", sorted(Path(rules_dir()).glob("*.lp")), ids=lambda p: p.name)
def test_every_shown_relation_of_every_shipped_rule_file_is_documented(rule_file):
    table = documented()
    shown = shown_relations(rule_file.read_text())
    for name, arity in shown:
        assert name in table, f"{rule_file.name} shows {name}/{arity}, undocumented"
        assert table[name] == arity, (f"{rule_file.name} shows {name}/{arity}; "
                                      f"SCHEMA.md says arity {table[name]}")


def test_shown_relations_parser_ignores_comments_and_hidden():
    text = "% #show nope/1.\n#show a/1.\n#show -b/2.\n#show c / 3 . % trailing\n"
    assert shown_relations(text) == [("a", 1), ("c", 3)]


def test_rule_files_list_what_they_derive():
    files = {f.name: f for f in shipped_rule_files()}
    assert {"cfg.lp", "divergence.lp"} <= set(files)
    divergence = files["divergence.lp"]
    assert divergence.summary.startswith("the simple divergence analysis")
    derived = {(n, a): m for n, a, m in divergence.shows}
    assert ("divergent", 1) in derived and derived[("divergent", 1)].startswith("SSA variable V")
    assert all(meaning for f in files.values() for _, _, meaning in f.shows)
