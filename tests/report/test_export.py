"""`gpudiv facts`: Soufflé, CSV, JSON lines and ASP exports, keyed columns, escaping, errors."""

import csv
import json
import re
from pathlib import Path

import clingo
import pytest

import gpudiv
from gpudiv.analyses.facts import RELATIONS
from gpudiv.analyses.schema import documented_relations
from gpudiv.analyses.solve import shipped_rule, solve
from gpudiv.cli import main
from gpudiv.report.export import Constant, ExportError, export, parse_atom, souffle_escape

SAMPLES = Path(__file__).parents[2] / "samples"
SUM_TRIANGLE = SAMPLES / "musimd" / "sumTriangle.musimd"
DERIVED_SIMPLE = {"control_dependent", "region", "join", "divergent", "uniform", "constant",
                  "divergent_branch", "uniform_branch", "divergent_loop_exit",
                  "divergent_abort_exit", "divergent_rejoin", "reason"}


def parse_decls(schema_dl: str) -> dict[str, list[tuple[str, str]]]:
    decls = {}
    for match in re.finditer(r"^\.decl (\w+)\(([^)]*)\)$", schema_dl, re.MULTILINE):
        decls[match[1]] = [tuple(c.strip().split(":")) for c in match[2].split(",")]
    inputs = re.findall(r"^\.input (\w+)$", schema_dl, re.MULTILINE)
    assert sorted(inputs) == sorted(decls)
    return decls


def test_souffle_export_of_one_kernel(tmp_path):
    result = export([SUM_TRIANGLE], tmp_path, "souffle", derived="simple")
    assert not result.keyed and result.kernels == [(str(SUM_TRIANGLE), "sumTriangle")]
    decls = parse_decls((tmp_path / "schema.dl").read_text())
    assert set(decls) == set(RELATIONS) | DERIVED_SIMPLE
    assert decls["def_line"] == [("V", "symbol"), ("N", "number")]
    assert decls["store"][0] == ("I", "number")
    for name, columns in decls.items():
        rows = (tmp_path / f"{name}.facts").read_text().splitlines()
        for row in rows:
            fields = row.split("\t")
            assert len(fields) == len(columns), (name, row)
            for value, (_, kind) in zip(fields, columns, strict=True):
                if kind == "number":
                    int(value)
    divergent = {r for r in (tmp_path / "divergent.facts").read_text().split()}
    assert {"d#4", "p#1", "tid"} <= divergent and "d#2" not in divergent
    assert (tmp_path / "uniform_hint.facts").read_text() == ""  # every relation has a file


def test_several_kernels_get_file_and_kernel_columns(tmp_path):
    files = [SUM_TRIANGLE, SAMPLES / "cuda" / "vector_ops.O3.ptx"]
    result = export(files, tmp_path, "souffle")
    assert result.keyed and len(result.kernels) == 5
    decls = parse_decls((tmp_path / "schema.dl").read_text())
    assert decls["edge"] == [("file", "symbol"), ("kernel", "symbol"), ("B1", "symbol"),
                             ("B2", "symbol")]
    rows = [r.split("\t") for r in (tmp_path / "branch.facts").read_text().splitlines()]
    assert {(r[0], r[1]) for r in rows} >= {(str(SUM_TRIANGLE), "sumTriangle"),
                                           (str(files[1]), "saxpy")}


def test_keyed_flag_for_one_kernel(tmp_path):
    assert export([SUM_TRIANGLE], tmp_path, "csv", keyed=True).keyed
    header = next(csv.reader((tmp_path / "edge.csv").open()))
    assert header == ["file", "kernel", "B1", "B2"]


def test_csv_and_json_lines(tmp_path):
    export([SUM_TRIANGLE], tmp_path / "c", "csv", derived="simple")
    export([SUM_TRIANGLE], tmp_path / "j", "json", derived="simple")
    with (tmp_path / "c" / "def_line.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert rows[0].keys() == {"V", "N"} and {"V": "c", "N": "7"} in rows
    lines = (tmp_path / "j" / "def_line.jsonl").read_text().splitlines()
    objects = [json.loads(line) for line in lines]
    assert {"V": "c", "N": 7} in objects and len(objects) == len(rows)
    reasons = [json.loads(line) for line in (tmp_path / "j" / "reason.jsonl").open()]
    assert {"V": "d#4", "Why": "loop_exit", "From": "LOOP"} in reasons


def test_lp_export_solves_to_the_analysis_result(tmp_path):
    export([SUM_TRIANGLE], tmp_path, "lp")
    facts = (tmp_path / "facts.lp").read_text()
    solved = solve([shipped_rule("cfg.lp"), shipped_rule("divergence.lp")], facts)
    analysed = gpudiv.analyze(SUM_TRIANGLE).kernel("sumTriangle")
    expected = {v.name for v in analysed.variables if v.klass == "divergent"}
    assert expected <= solved.unary("divergent")


def test_lp_export_keeps_constants_and_quotes(tmp_path):
    export([SUM_TRIANGLE], tmp_path, "lp", derived="simple")
    atoms = [clingo.parse_term(line[:-1]) for line in
             (tmp_path / "facts.lp").read_text().splitlines() if not line.startswith("%")]
    reason = next(a for a in atoms if a.name == "reason" and a.arguments[0].string == "d#4")
    assert str(reason) == 'reason("d#4",loop_exit,"LOOP")'


def test_symbols_are_escaped_for_souffle(tmp_path):
    assert souffle_escape("a\tb\nc\\d\re") == "a\\tb\\nc\\\\d\\re"
    odd = tmp_path / "odd\tname.musimd"
    odd.write_text("kernel k()\n stop\n")
    export([odd, SUM_TRIANGLE], tmp_path / "out", "souffle")
    for row in (tmp_path / "out" / "block.facts").read_text().splitlines():
        assert len(row.split("\t")) == 3
    assert "odd\\tname.musimd" in (tmp_path / "out" / "block.facts").read_text()


@pytest.mark.slow
def test_number_columns_hold_numbers_on_every_sample(tmp_path):
    samples = sorted([*SAMPLES.glob("musimd/*.musimd"), *SAMPLES.glob("cuda/*.O3.ptx")])
    export(samples, tmp_path, "json", derived="simple")
    for name, relation in documented_relations().items():
        path = tmp_path / f"{name}.jsonl"
        if not path.exists():
            continue
        numbers = [c for c, t in zip(relation.columns, relation.column_types(),
                                     strict=True) if t == "number"]
        for line in path.read_text().splitlines():
            row = json.loads(line)
            assert all(isinstance(row[c], int) for c in numbers), (name, row)


def test_unwritable_output_and_unknown_format(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ExportError, match="cannot write the output directory"):
        export([SUM_TRIANGLE], blocker / "sub", "csv")
    with pytest.raises(ExportError, match="unknown export format 'xml'"):
        export([SUM_TRIANGLE], tmp_path / "x", "xml")


def run_cli(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def test_facts_command(tmp_path, capsys):
    code, out, _ = run_cli(capsys, "facts", str(SAMPLES / "musimd"), "-o", str(tmp_path),
                           "--format", "lp", "--derived", "simple")
    assert code == 0
    assert re.match(rf"{re.escape(str(tmp_path))}: 1 file, \d+ relations, \d+ facts of "
                    r"\d+ kernels \(with file and kernel columns\)", out)
    assert 'divergent("' in (tmp_path / "facts.lp").read_text()


@pytest.mark.parametrize(("args", "message"), [
    (["--format", "xml"], "gpudiv facts: error: argument --format: invalid choice: 'xml'"),
    (["-o", "{blocker}/sub"], "cannot write the output directory: Not a directory"),
    (["--derived", "nope"], "argument --derived: invalid choice: 'nope'"),
])
def test_facts_bad_input_is_one_line(tmp_path, capsys, args, message):
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    args = [a.replace("{blocker}", str(blocker)) for a in args]
    if "-o" not in args:
        args += ["-o", str(tmp_path / "out")]
    try:
        code, _, err = run_cli(capsys, "facts", str(SUM_TRIANGLE), *args)
    except SystemExit as stop:
        code, err = stop.code, capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err


def test_facts_of_an_empty_folder(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    code, _, err = run_cli(capsys, "facts", str(tmp_path / "empty"), "-o", str(tmp_path / "o"))
    assert code == 2 and err.strip().endswith("error: no .musimd/.ptx files in this folder")


def test_atoms_are_read_without_clingo_for_flat_terms():
    assert parse_atom('f("a\\"b",-3,big,"x\\\\y","c,d")') == (
        "f", ('a"b', -3, "big", "x\\y", "c,d"))
    name, values = parse_atom("f(g(1),2)")
    assert (name, values) == ("f", ("g(1)", 2)) and isinstance(values[0], Constant)
    assert parse_atom("flag") == ("flag", ())


def test_a_kernel_whose_rejoin_search_stopped_is_a_located_error(tmp_path, monkeypatch,
                                                                   capsys):
    """`gpudiv facts` on a kernel past the rejoin search's limit (a do-while loop of 40
    `continue`s, limit lowered to 100 blocks): one located line, exit 2, no facts that
    would miss rejoin copies."""
    from gpudiv.ir import cfg as cfg_module

    monkeypatch.setattr(cfg_module, "MAX_REJOIN_WALK", 100)
    lines = ["kernel k(a)", "  t = tid", "  i = 0", "H: i = i + 1"]
    for j in range(40):
        lines += [f"  c{j} = t == {j}", f"  bnz c{j}, L"]
    path = tmp_path / "continues.musimd"
    path.write_text("\n".join([*lines, "L: e = i < a", "  bnz e, H", "  stop"]) + "\n")
    assert main(["facts", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{path}:1:1: error: kernel k: too large to analyse") and \
        "rejoin points" in err and "Traceback" not in err
    assert main(["solve", str(path), "--rules", str(SAMPLES / "rules" /
                                                     "memory_divergence.lp")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{path}:1:1: error: kernel k: too large to analyse")
