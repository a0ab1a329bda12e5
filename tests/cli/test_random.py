"""`gpudiv random`: the property tests' programs on the command line, ready for `check`."""

import json

import pytest

from gpudiv.cli import main
from gpudiv.verify.randprog import random_program
from gpudiv.verify.randptx import random_ptx
from tests.cli.test_main import run_cli


def test_prints_the_program_of_a_seed(capsys):
    code, out, _ = run_cli(capsys, "random", "--seed", "17", "--cycles", "--statements", "12")
    assert code == 0
    assert out == random_program(17, 12, cycles=True, name="rand_17")
    code, out, _ = run_cli(capsys, "random", "--seed", "-3", "--ptx")
    assert code == 0 and out == random_ptx(-3, cycles=False, name="rand_m3")
    code, out, _ = run_cli(capsys, "random", "--seed", "4", "--ptx", "--calls")
    assert code == 0 and out == random_ptx(4, cycles=False, name="rand_4", calls=True)
    assert "call.uni" in out


@pytest.mark.parametrize(("language", "extra"), [("musimd", []), ("ptx", ["--ptx"]),
                                               pytest.param("ptx", ["--ptx", "--calls"],
                                                            marks=pytest.mark.slow),
                                               pytest.param("ptx", ["--ptx", "--calls",
                                                                    "--recursive"],
                                                            marks=pytest.mark.slow)])
def test_written_programs_check_without_violation(capsys, tmp_path, language, extra):
    code, out, _ = run_cli(capsys, "random", "--seed", "5", "--count", "3", "--cycles",
                           "-o", str(tmp_path / "out"), *extra)
    assert code == 0 and out == f"3 programs written to {tmp_path / 'out'}\n"
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == [f"rand_{seed}.{language}" for seed in (5, 6, 7)]
    code, out, _ = run_cli(capsys, "check", "--format", "json", str(tmp_path / "out"))
    document = json.loads(out)
    assert code == 0 and document["violations"] == 0 and len(document["inputs"]) == 3


@pytest.mark.parametrize("args, message", [
    (["--count", "0"], "gpudiv random: error: --count must be at least 1"),
    (["--count", "2"], "gpudiv random: error: --count needs -o DIR"),
    (["--statements", "0"], "gpudiv random: error: --statements must be at least 1"),
    (["--calls"], "gpudiv random: error: --calls needs --ptx (μ-SIMD has no calls)"),
    (["--ptx", "--recursive"], "gpudiv random: error: --recursive needs --calls"),
])
def test_bad_arguments_are_one_line_errors(capsys, args, message):
    code, out, err = run_cli(capsys, "random", *args)
    assert code == 2 and out == "" and err == message + "\n"


def test_unwritable_folder_is_a_one_line_error(capsys, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, _, err = run_cli(capsys, "random", "-o", str(blocker / "sub"))
    assert code == 2 and err.startswith(f"{blocker / 'sub'}: error: cannot create folder")
    assert len(err.splitlines()) == 1


def test_cycles_and_unstructured_exclude_each_other(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["random", "--cycles", "--unstructured"])
    assert exit_.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err
