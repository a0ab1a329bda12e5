"""The command line: output contracts, exit codes, one-line errors without tracebacks."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpudiv.cli import main

SAMPLES = Path(__file__).parents[2] / "samples" / "musimd"
SUM_TRIANGLE = str(SAMPLES / "sumTriangle.musimd")


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def test_analyze_text_report(capsys):
    code, out, _ = run_cli(capsys, "analyze", "--analysis", "simple", SUM_TRIANGLE)
    assert code == 0
    assert "kernel sumTriangle (24 instructions, 8 blocks, analysis simple)" in out
    assert "summary: 24 variables: 8 uniform (2 constant), 0 affine, 16 divergent; " \
           "3 branches, 2 divergent" in out
    assert any(line.split()[:4] == ["d#2", "d", "15", "uniform"] for line in out.splitlines())


def test_analyze_json_contract(capsys):
    code, out, _ = run_cli(capsys, "analyze", "--format", "json", "--analysis", "simple",
                           SUM_TRIANGLE)
    assert code == 0
    document = json.loads(out)
    assert document["tool"] == "gpudiv" and isinstance(document["version"], str)
    (entry,) = document["inputs"]
    assert entry["language"] == "musimd" and entry["errors"] == []
    (kernel,) = entry["kernels"]
    assert {"name", "instructions", "blocks", "variables", "branches", "summary",
            "timing_ms"} <= set(kernel)
    assert set(kernel["timing_ms"]) >= {"parse", "ground", "solve"}
    classes = {v["name"]: v["class"] for v in kernel["variables"]}
    assert classes["d#2"] == "uniform" and classes["d#4"] == "divergent"
    assert all(set(v) >= {"name", "source", "line", "class"} for v in kernel["variables"])
    assert [(b["line"], b["divergent"]) for b in kernel["branches"]] == [
        (9, True), (16, True), (18, False)]
    assert kernel["summary"] == {"variables": 24, "uniform": 8, "constant": 2, "affine": 0,
                                 "divergent": 16, "branches": 3, "divergent_branches": 2}
    reasons = {v["name"]: v.get("reason") for v in kernel["variables"]}
    assert reasons["d#4"] == {"rule": "loop_exit", "from": "LOOP"}


def test_syntax_error_is_one_line_exit_2_and_other_kernels_reported(tmp_path, capsys):
    source = tmp_path / "bad.musimd"
    source.write_text("kernel ok()\n stop\nkernel broken()\n x = = 1\n stop\n")
    code, out, err = run_cli(capsys, "analyze", "--format", "json", str(source))
    assert code == 2
    assert err.strip() == f"{source}:4:6: error: unexpected '='; expected one of '-', " \
                          "integer, name, shared/local, unary operator"
    document = json.loads(out)
    assert [k["name"] for k in document["inputs"][0]["kernels"]] == ["ok"]
    assert document["inputs"][0]["errors"][0]["line"] == 4


@pytest.mark.parametrize(("name", "text", "message"), [
    ("label.musimd", "kernel k()\n jump L\n", "2:2: error: undefined label 'L' in kernel k"),
    ("empty.musimd", "", "1:1: error: no kernel found"),
])
def test_bad_input_errors(tmp_path, capsys, name, text, message):
    source = tmp_path / name
    source.write_text(text)
    code, _, err = run_cli(capsys, "analyze", str(source))
    assert code == 2
    assert err.strip() == f"{source}:{message}"


def test_missing_file_and_unknown_extension(tmp_path, capsys):
    code, _, err = run_cli(capsys, "analyze", str(tmp_path / "nope.musimd"))
    assert (code, err.strip()) == (2, f"{tmp_path / 'nope.musimd'}: error: no such file")
    other = tmp_path / "x.txt"
    other.write_text("kernel k()\n stop\n")
    code, _, err = run_cli(capsys, "analyze", str(other))
    assert code == 2 and "unknown file type '.txt'" in err


def test_binary_file_is_refused(tmp_path, capsys):
    source = tmp_path / "b.musimd"
    source.write_bytes(b"\xff\xfe\x00kernel")
    code, _, err = run_cli(capsys, "analyze", str(source))
    assert code == 2 and "not UTF-8 text" in err


def test_run_with_trace_and_counters(capsys):
    code, out, _ = run_cli(capsys, "run", SUM_TRIANGLE, "--threads", "4", "--warp", "4",
                           "--param", "c=4", "--param", "m=0", "--param", "v=100",
                           "--trace")
    assert code == 0
    assert "warp instructions:  54" in out
    assert "divergent branches: 3" in out
    assert "✓" in out and "•" in out


def test_run_json(capsys):
    code, out, _ = run_cli(capsys, "run", SUM_TRIANGLE, "--threads", "4", "--warp", "4",
                           "--param", "c=4", "--param", "m=0", "--param", "v=100",
                           *[f"--shared={k}={k + 1}" for k in range(16)], "--format", "json")
    assert code == 0
    document = json.loads(out)
    assert [document["shared"][str(100 + t)] for t in range(4)] == [0, 6, 7, 24]
    assert document["registers"]["d"] == [1, 2, 3, 4]


def test_runtime_errors_exit_2(tmp_path, capsys):
    source = tmp_path / "div.musimd"
    source.write_text("kernel k(n)\n x = 1 / n\n stop\n")
    code, _, err = run_cli(capsys, "run", str(source), "--threads", "2", "--param", "n=0")
    assert code == 2
    assert err.count("\n") == 1 and "division by zero" in err and "kernel k, line 2" in err
    loop = tmp_path / "loop.musimd"
    loop.write_text("kernel k()\nL: jump L\n")
    code, _, err = run_cli(capsys, "run", str(loop), "--max-steps", "1000")
    assert code == 2 and "did not finish within 1000 warp steps" in err


def test_run_usage_errors(capsys):
    code, _, err = run_cli(capsys, "run", SUM_TRIANGLE, "--kernel", "nope")
    assert code == 2 and "no kernel 'nope' (kernels: sumTriangle)" in err
    code, _, err = run_cli(capsys, "run", SUM_TRIANGLE, "--param", "zz=1")
    assert code == 2 and "has no parameter 'zz'" in err
    code, _, err = run_cli(capsys, "run", SUM_TRIANGLE, "--param", "c")
    assert code == 2 and "bad --param 'c'" in err


def test_check_json_contract(capsys):
    code, out, _ = run_cli(capsys, "check", "--format", "json", SUM_TRIANGLE,
                           str(SAMPLES / "join_unstructured.musimd"))
    assert code == 0
    document = json.loads(out)
    assert document["violations"] == 0
    for entry in document["inputs"]:
        for kernel in entry["kernels"]:
            assert kernel["status"] == "checked" and kernel["runs"] == 10
            assert kernel["uses_checked"] > 0 and kernel["violations"] == []


def test_check_text(capsys):
    code, out, _ = run_cli(capsys, "check", SUM_TRIANGLE)
    assert code == 0
    assert "kernel sumTriangle: ok: 10 runs" in out


def test_check_searches_folders_like_analyze(capsys, tmp_path):
    folder = tmp_path / "kernels"
    folder.mkdir()
    for name in ("sumTriangle.musimd", "gather.musimd"):
        (folder / name).write_text((SAMPLES / name).read_text())
    assert main(["check", "--format", "json", str(folder)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert sorted(Path(i["path"]).name for i in document["inputs"]) == [
        "gather.musimd", "sumTriangle.musimd"]
    assert document["violations"] == 0
    (tmp_path / "empty").mkdir()
    assert main(["check", str(tmp_path / "empty")]) == 2
    assert "no .musimd/.ptx files" in capsys.readouterr().err


def test_help_lists_every_command_and_every_option_has_help():
    from gpudiv.cli.main import build_parser

    parser = build_parser()
    (sub,) = [a for a in parser._actions if a.dest == "command"]
    commands = set(sub.choices)
    assert {"analyze", "check", "run", "explain", "compare", "cfg", "solve", "rules",
            "facts"} <= commands
    description = parser.description
    assert all(name in description for name in commands)
    for name, command in sub.choices.items():
        for action in command._actions:
            if action.dest != "help":
                assert action.help, f"gpudiv {name} {action.option_strings or action.dest}"
    run_help = " ".join(sub.choices["run"].format_help().split())
    assert "gpudiv.cli.run_ptx" not in run_help
    assert "(default: 32)" in run_help and "(default: 1000000)" in run_help


def test_run_names_missing_parameters_and_bad_options(capsys):
    code, _, err = run_cli(capsys, "run", SUM_TRIANGLE, "--param", "c=4")
    assert code == 2
    assert err.strip() == (f"{SUM_TRIANGLE}:7:1: error: kernel sumTriangle: no value for "
                           "parameters m, v (give --param m=VALUE --param v=VALUE)")
    code, _, err = run_cli(capsys, "run", SUM_TRIANGLE, "--shared", "x=1")
    assert code == 2 and "bad --shared 'x=1' (expected ADDRESS=VALUE" in err
    code, _, err = run_cli(capsys, "run", SUM_TRIANGLE, "--seed", "-1")
    assert code == 2 and err.strip() == "error: --seed must be 0 or more (got -1)"
    code, _, err = run_cli(capsys, "check", SUM_TRIANGLE, "--seed", "-1")
    assert code == 2 and err.strip() == "error: --seed must be 0 or more (got -1)"
    code, _, err = run_cli(capsys, "run", str(SAMPLES))
    assert code == 2 and "is a directory" in err and "unknown file type" not in err


def test_run_takes_negative_values_after_options_and_warns_wide_ones(capsys):
    code, out, err = run_cli(capsys, "run", SUM_TRIANGLE, "--threads", "4", "--warp", "4",
                             "--param", "c=4", "--param", "m=0", "--param", "v=4294967396",
                             "--shared", "-1=5")
    assert code == 0
    assert err.strip() == (f"{SUM_TRIANGLE}: warning: --param v=4294967396 does not fit in "
                           "32 bits; the kernel gets 100")
    assert "[-1]=5" in out and "[101]=" in out


def test_run_trace_is_printed_up_to_a_fault(tmp_path, capsys):
    source = tmp_path / "div.musimd"
    source.write_text("kernel k(n)\n x = 1\n y = x / n\n stop\n")
    code, out, err = run_cli(capsys, "run", str(source), "--threads", "2", "--param", "n=0",
                             "--trace")
    assert code == 2 and "division by zero" in err
    rows = out.splitlines()
    assert rows[0].split()[:5] == ["step", "warp", "line", "label", "instruction"]
    assert [r.split()[2] for r in rows[1:]] == ["2", "3"]  # up to the faulting line


def test_check_gives_up_a_divergent_endless_loop_with_the_reason(tmp_path, capsys):
    source = tmp_path / "spin.musimd"
    source.write_text("kernel spin(a)\nL: p = tid < 1\n  bnz p, L\n  sync\n  stop\n")
    code, out, _ = run_cli(capsys, "check", str(source))
    assert code == 0
    assert "not-executed: 0 runs, 0 uses checked" in out
    # the machine sees its state repeat long before the 20,000-step budget is spent
    assert "infinite loop" in out and "state of the machine repeats" in out
    assert out.splitlines()[-1] == ("0 kernels checked, 1 not executed, 0 uses checked, "
                                    "0 violations")
    code, out, _ = run_cli(capsys, "check", str(source), "--max-steps", "100")
    assert "did not finish within 100 warp steps" in out


def test_counts_are_pluralised(capsys):
    code, out, _ = run_cli(capsys, "check", SUM_TRIANGLE)
    assert out.splitlines()[-1].startswith("1 kernel checked, 0 not executed, ")
    code, out, _ = run_cli(capsys, "compare", SUM_TRIANGLE)
    assert "total (1 kernel)" in out


def test_unreachable_code_is_warned_by_analyze(tmp_path, capsys):
    source = tmp_path / "u.musimd"
    source.write_text("kernel k(a)\n  stop\n  x = 1\n  stop\n")
    code, out, err = run_cli(capsys, "analyze", "--format", "json", str(source))
    assert code == 0
    assert err.strip() == (f"{source}:3:3: warning: kernel k: unreachable code: never "
                           "executed, left out of the analysis")
    (entry,) = json.loads(out)["inputs"]
    assert [w["line"] for w in entry["warnings"]] == [3]


def test_long_work_reports_its_stages():
    """What the progress display on a terminal shows: reading, each kernel prepared and
    solved, each kernel checked."""
    from gpudiv import api

    seen = []
    path = str(Path(__file__).parents[2] / "samples" / "cuda" / "locks_spin.O3.ptx")
    result = api.analyze(path, on_progress=lambda *event: seen.append(event))
    assert seen[0] == ("reading", 0, 0)
    assert [e for e in seen if e[0] == "preparing"] == [("preparing", i, 4) for i in (1, 2, 3, 4)]
    assert seen[-1] == ("solving", 4, 4)
    checked = []
    api.check(result, on_progress=lambda *event: checked.append(event), max_steps=100)
    assert checked == [("checking", i, 4) for i in range(4)]


def test_command_table_matches_what_the_modules_register():
    """`gpudiv --help` lists the subcommands from `COMMANDS` without importing them: the
    table names each subcommand's module and help line as the module registers it."""
    import argparse
    import importlib

    from gpudiv.cli import COMMANDS
    for module in {m for m, _ in COMMANDS.values()}:
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(module).register(sub)
        helps = {a.dest: a.help for a in sub._choices_actions}
        assert helps == {name: line for name, (m, line) in COMMANDS.items() if m == module}


def test_help_imports_no_analysis_machinery(tmp_path):
    """Start-up of `gpudiv --help` (issue 16): no clingo, networkx, numpy, Lark or rich."""
    code = ("import sys\nfrom gpudiv.cli import main\ntry:\n    main(['--help'])\n"
            "except SystemExit:\n    pass\nheavy = ('clingo', 'networkx', 'numpy', 'lark', "
            "'rich', 'gpudiv.api', 'gpudiv.analyses.driver')\n"
            "print(sorted(m for m in heavy if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True, cwd=tmp_path)
    assert "usage: gpudiv" in done.stdout and "analyze" in done.stdout
    assert done.stdout.strip().endswith("[]"), done.stdout[-300:]


def test_analysing_a_small_ptx_file_imports_only_what_it_needs(tmp_path):
    """Start-up of `gpudiv analyze --analysis simple FILE --format json` on nvcc output
    (issue 16): the fast path reads the whole file, so neither Lark nor the PTX grammar's
    parser loads; the deadlock analysis, forked children, the corpus cache and the other
    analyses load only when used; its classes are records, so `dataclasses` (with
    `inspect`) does not load either, and its paths are strings, so neither does `pathlib`
    (with `urllib.parse` and `ipaddress`); `contextlib` is not used; stack-slot promotion
    and inlined-body reuse load only for a kernel with `.local` objects or calls, the
    socket module only when a daemon's socket is there. Modules loaded before gpudiv (an
    editable install's finder imports pathlib) do not count. A small report is written
    without `json` (`gpudiv.report.jsontext`)."""
    sample = Path(__file__).parents[2] / "samples" / "cuda" / "texture_objects.O3.ptx"
    code = ("import sys\nbefore = set(sys.modules)\nfrom gpudiv.cli.main import main\n"
            f"status = main(['analyze', '--analysis', 'simple', {str(sample)!r}, '--format', "
            "'json', '-o', 'out.json'])\n"
            "unwanted = ('lark', 'gpudiv.lang.ptx.syntax', 'gpudiv.lang.grammars', "
            "'gpudiv.analyses.deadlock', 'gpudiv.analyses.forked', 'gpudiv.analyses.isolation', "
            "'gpudiv.analyses.affine2', 'gpudiv.report.corpus_cache', 'gpudiv.lang.marks', "
            "'importlib.resources', 'pickle', 'shutil', 'clingo.ast', 'networkx', 'numpy', "
            "'rich', 'clingo', 'clingo.control', 'typing', 'orjson', 'dataclasses', "
            "'inspect', 'pathlib', 'urllib.parse', 'ipaddress', 'contextlib', '_socket', "
            "'gpudiv.analyses.stack_slots', 'gpudiv.lang.ptx.inline_reuse', 'json')\n"
            "print(status, sorted(m for m in unwanted if m in sys.modules and m not in before))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True, cwd=tmp_path)
    assert done.stdout.split() == ["0", "[]"], done.stdout[-300:] + done.stderr[-300:]
    assert json.loads((tmp_path / "out.json").read_text())["inputs"][0]["kernels"]


def test_a_warm_analysis_compiles_no_regular_expression_of_gpudiv(tmp_path):
    """Start-up (issue 16): compiling a pattern costs 0.1–0.8 ms. Once a first process has
    filled the cache folder, an analysis of a small PTX file compiles none of gpudiv's
    patterns: those every run uses come from the cache, the others compile when used."""
    sample = Path(__file__).parents[2] / "samples" / "cuda" / "kfcm_pipeline.O3.ptx"
    code = ("import os, sys, traceback\nimport re._compiler as compiler\nimport gpudiv\n"
            "package = os.path.dirname(gpudiv.__file__) + os.sep\nfrom_gpudiv = []\n"
            "original = compiler.compile\n"
            "def counted(pattern, flags=0):\n"
            "    callers = [f.filename for f in traceback.extract_stack()[:-1]\n"
            "               if os.sep + 're' + os.sep not in f.filename]\n"
            "    if callers[-1].startswith(package):  # compiled by gpudiv's code\n"
            "        from_gpudiv.append(pattern)\n"
            "    return original(pattern, flags)\n"
            "compiler.compile = counted\nfrom gpudiv.cli.main import main\n"
            f"status = main(['analyze', '--analysis', 'simple', {str(sample)!r}, '--format', "
            "'json', '-o', 'out.json'])\nprint(status, from_gpudiv)")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=60, check=True, cwd=tmp_path, env=env)
    assert first.stdout.split()[0] == "0" and "(" in first.stdout  # the cache was empty
    warm = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True, cwd=tmp_path, env=env)
    assert warm.stdout.split() == ["0", "[]"], warm.stdout[-500:] + warm.stderr[-300:]
