"""Hostile inputs (issue 17, items 6, 7 and 9): one clear line and exit status 2, never a
traceback, an internal error (exit 3), a hang or unbounded memory."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pytest

from gpudiv.cli import main
from gpudiv.interp import musimd as musimd_interp
from gpudiv.interp.musimd import LaunchConfig, run_kernel
from gpudiv.interp.ptx import PtxExecutionError, PtxLaunch, run_ptx_kernel
from gpudiv.lang.load import LoadError, load

ROOT = Path(__file__).resolve().parents[1]
VECTOR_OPS = str(ROOT / "samples" / "cuda" / "vector_ops.O3.ptx")
HISTOGRAM = str(ROOT / "samples" / "cuda" / "atomics_histogram.O3.ptx")
SUM_TRIANGLE = str(ROOT / "samples" / "musimd" / "sumTriangle.musimd")
GATHER = str(ROOT / "samples" / "musimd" / "gather.musimd")
VEC_ADD_ARGS = ("--kernel", "vec_add", "--arg", "f32[4]:ones", "--arg", "f32[4]:ones",
                "--arg", "f32[4]:zeros", "--arg", "u32:4")
TRIANGLE_PARAMS = ("--param", "c=4", "--param", "m=0", "--param", "v=1")


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "internal error" not in err
    return code, out, err


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "error:" in lines[0]
    return lines[0]


# -- item 6: `gpudiv run` arguments ---------------------------------------------------------

@pytest.mark.parametrize("path, extra", [(VECTOR_OPS, VEC_ADD_ARGS),
                                         (SUM_TRIANGLE, TRIANGLE_PARAMS)])
def test_negative_max_steps_is_a_usage_error(capsys, path, extra):
    code, _, err = run_cli(capsys, "run", path, *extra, "--max-steps", "-1")
    assert code == 2
    assert "--max-steps must be at least 1 (got -1)" in one_error_line(err)


@pytest.mark.parametrize("target", ["file", "devnull", "below_file"])
def test_output_that_is_not_a_folder_is_refused_before_the_run(capsys, tmp_path, target):
    existing = tmp_path / "existing"
    existing.write_text("keep me\n")
    output = {"file": str(existing), "devnull": os.devnull,
              "below_file": str(existing / "sub")}[target]
    code, out, err = run_cli(capsys, "run", VECTOR_OPS, *VEC_ADD_ARGS, "-o", output)
    assert code == 2
    assert "cannot write the buffers here" in one_error_line(err)
    assert out == ""  # refused before running
    assert existing.read_text() == "keep me\n"


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into read-only folders")
def test_output_in_a_read_only_folder_is_refused(capsys, tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        code, _, err = run_cli(capsys, "run", VECTOR_OPS, *VEC_ADD_ARGS, "-o",
                               str(folder / "out"))
    finally:
        folder.chmod(stat.S_IRWXU)
    assert code == 2
    assert "is not writable" in one_error_line(err)


def test_output_write_failure_is_one_line(capsys, tmp_path, monkeypatch):
    """A write that fails after the checks (disk full, permissions) is still one line."""
    def refuse(*_args, **_kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(np, "save", refuse)
    code, _, err = run_cli(capsys, "run", VECTOR_OPS, *VEC_ADD_ARGS, "-o",
                           str(tmp_path / "out"))
    assert code == 2
    assert "cannot write the buffers: Permission denied" in one_error_line(err)


def test_output_folder_is_created(capsys, tmp_path):
    code, _, _ = run_cli(capsys, "run", VECTOR_OPS, *VEC_ADD_ARGS, "-o",
                         str(tmp_path / "a" / "b"))
    assert code == 0
    assert np.load(tmp_path / "a" / "b" / "vec_add_param_2.npy").tolist() == [2.0] * 4


def test_scalar_for_a_pointer_parameter_is_a_usage_error(capsys):
    """With no buffer at all, a number used as an address faulted inside the interpreter
    (IndexError on the empty allocation table); the CLI now refuses it by name."""
    code, _, err = run_cli(capsys, "run", HISTOGRAM, "--kernel", "histogram_global",
                           "--arg", "1", "--arg", "1", "--arg", "1", "--arg", "1")
    assert code == 2
    assert ("for parameter histogram_global_param_0: a number, but the kernel expects a "
            "buffer") in one_error_line(err)


def test_scalar_pointer_through_the_api_raises_a_fault():
    kernel = load(VECTOR_OPS).kernel("vec_add")
    with pytest.raises(PtxExecutionError, match="out-of-bounds global"):
        run_ptx_kernel(kernel, PtxLaunch(args={0: 5, 1: 5, 2: 5, 3: 4}))


@pytest.mark.parametrize("option, value, expected", [
    ("--grid", "99999999999", "grid x dimension 99999999999 is larger than CUDA's limit"),
    ("--grid", "1x70000", "grid y dimension 70000 is larger than CUDA's limit 65535"),
    ("--block", "1x1x65", "block z dimension 65 is larger than CUDA's limit 64"),
])
def test_launch_shapes_beyond_cuda_limits(capsys, option, value, expected):
    code, _, err = run_cli(capsys, "run", VECTOR_OPS, *VEC_ADD_ARGS, option, value)
    assert code == 2
    assert expected in one_error_line(err)


def test_musimd_threads_are_bounded_before_allocating(capsys):
    code, _, err = run_cli(capsys, "run", SUM_TRIANGLE, *TRIANGLE_PARAMS,
                           "--threads", "1000000000")
    assert code == 2
    line = one_error_line(err)
    assert "1000000000 threads of kernel sumTriangle need about" in line
    assert "use fewer threads" in line


def test_musimd_memory_bound_counts_registers(monkeypatch):
    """The bound scales with the kernel's registers, not only with the thread count."""
    kernel = load(SUM_TRIANGLE).kernel("sumTriangle")
    monkeypatch.setattr(musimd_interp, "MAX_LAUNCH_BYTES", 64 * 1024)
    run_kernel(kernel, LaunchConfig(threads=32, params={"c": 4}))
    with pytest.raises(ValueError, match="need about"):
        run_kernel(kernel, LaunchConfig(threads=1024, params={"c": 4}))


def test_ptx_launch_memory_is_bounded_up_front(monkeypatch):
    from gpudiv.interp import ptx_memory

    kernel = load(VECTOR_OPS).kernel("vec_add")
    monkeypatch.setattr(ptx_memory, "MAX_LAUNCH_BYTES", 1 << 20)
    big = np.zeros(1 << 18, np.float32)  # 1 MiB
    with pytest.raises(PtxExecutionError, match="MiB of registers and memory"):
        run_ptx_kernel(kernel, PtxLaunch(args={0: big, 1: big, 2: big, 3: 4}))


# -- item 7: inputs that are not regular files --------------------------------------------

@pytest.fixture
def fifo(tmp_path) -> Path:
    path = tmp_path / "pipe.ptx"
    os.mkfifo(path)
    return path


def test_load_refuses_a_fifo(fifo):
    with pytest.raises(LoadError, match="not a regular file"):
        load(fifo)


@pytest.mark.parametrize("command", ["analyze", "run", "check", "cfg"])
def test_commands_refuse_a_fifo(capsys, fifo, command):
    code, _, err = run_cli(capsys, command, str(fifo))
    assert code == 2
    assert f"{fifo}: error: not a regular file" in err


# -- item 7: users' rule files get a time and memory budget ---------------------------------

EXPLODING = "big(X) :- X = 1..100000000.\n#show big/1.\n"
UNBOUNDED = "n(0).\nn(X + 1) :- n(X).\n#show n/1.\n"


@pytest.fixture
def exploding(tmp_path) -> Path:
    path = tmp_path / "exploding.lp"
    path.write_text(EXPLODING)
    return path


def test_exploding_rule_file_hits_the_memory_budget(capsys, exploding):
    code, _, err = run_cli(capsys, "solve", GATHER, "--rules", str(exploding),
                           "--solve-memory", "16")
    assert code == 2
    line = one_error_line(err)
    assert line.startswith(f"{exploding}: error: grounding and solving needed more than "
                           "16 MiB of memory")
    assert "--solve-memory" in line


@pytest.mark.parametrize("text", [EXPLODING, UNBOUNDED])
def test_runaway_rule_file_hits_the_time_budget(capsys, tmp_path, text):
    path = tmp_path / "runaway.lp"
    path.write_text(text)
    code, _, err = run_cli(capsys, "solve", GATHER, "--rules", str(path),
                           "--solve-timeout", "0.3", "--solve-memory", "0")
    assert code == 2
    assert one_error_line(err).startswith(
        f"{path}: error: grounding and solving did not finish within 0.3 s")


def test_compare_rule_variant_has_the_budget(capsys, exploding):
    code, _, err = run_cli(capsys, "compare", GATHER, "--rules", str(exploding),
                           "--solve-timeout", "0.3")
    assert code == 2
    assert f"{exploding}: error: grounding and solving did not finish within 0.3 s" in err


def test_default_budget_applies_to_users_rules_in_the_api(monkeypatch, exploding):
    from gpudiv.analyses import solve as solve_module
    from gpudiv.report.experiment import run_rules

    monkeypatch.setattr(solve_module, "DEFAULT_BUDGET", solve_module.Budget(0.3, 16))
    with pytest.raises(solve_module.RuleError, match="exploding.lp: error: grounding"):
        run_rules(GATHER, [exploding])


def test_budgeted_run_gives_the_same_answer():
    from gpudiv.analyses.solve import UNLIMITED
    from gpudiv.report.experiment import run_rules

    rules = [ROOT / "samples" / "rules" / "memory_divergence.lp"]
    limited = run_rules(GATHER, rules)
    free = run_rules(GATHER, rules, budget=UNLIMITED)
    assert [k.relations for k in limited.kernels] == [k.relations for k in free.kernels]
    assert sum(len(v) for v in limited.kernels[0].relations.values()) == 2


@pytest.mark.parametrize("name, expected", [
    ("mine.txt", "not a rule file (expected a clingo program named *.lp)"),
    ("pipe.lp", "not a regular file"),
])
def test_rule_files_must_be_regular_lp_files(capsys, tmp_path, name, expected):
    path = tmp_path / name
    if name.startswith("pipe"):
        os.mkfifo(path)
    else:
        path.write_text("a.\n")
    for command in ("solve", "compare"):
        code, _, err = run_cli(capsys, command, GATHER, "--rules", str(path))
        assert code == 2
        assert f"{path}: error: {expected}" in one_error_line(err)


def test_non_ascii_outside_strings_is_one_line_not_a_clingo_panic(capsys, tmp_path):
    """clingo's message about a stray non-ASCII byte is not UTF-8, and its Python binding
    aborted the process ("PANIC: exception in nothrow scope")."""
    path = tmp_path / "accents.lp"
    path.write_text("% commentaire: déjà vu\nsafe(\"ünïcode\").\nflag(X) :- lödd(X).\n")
    code, _, err = run_cli(capsys, "solve", GATHER, "--rules", str(path))
    assert code == 2
    assert one_error_line(err) == (f"{path}:3:13: error: unexpected character 'ö' (clingo "
                                   "accepts non-ASCII characters only in strings and "
                                   "comments)")


def test_non_ascii_in_strings_and_comments_is_fine(capsys, tmp_path):
    path = tmp_path / "accents.lp"
    path.write_text("%* bloc %* imbriqué *% é *%\nname(\"é\\\"ü\"). % fin\n#show name/1.\n")
    code, out, _ = run_cli(capsys, "solve", GATHER, "--rules", str(path))
    assert code == 0
    assert 'é\\"ü' in out or 'é"ü' in out


# -- item 9: --no-scripts --------------------------------------------------------------------

SCRIPT = "a(1).\n#script (python)\nimport os\nos.system('true')\n#end.\n#show a/1.\n"


@pytest.mark.parametrize("command", ["solve", "compare"])
def test_no_scripts_refuses_script_blocks(capsys, tmp_path, command):
    path = tmp_path / "script.lp"
    path.write_text(SCRIPT)
    code, _, err = run_cli(capsys, command, GATHER, "--rules", str(path), "--no-scripts")
    assert code == 2
    assert one_error_line(err) == (f"{path}:2:1: error: #script blocks run arbitrary code "
                                   "and --no-scripts forbids them")


def test_no_scripts_follows_includes(capsys, tmp_path):
    (tmp_path / "inner.lp").write_text(SCRIPT)
    outer = tmp_path / "outer.lp"
    outer.write_text('#include "inner.lp".\n')
    code, _, err = run_cli(capsys, "solve", GATHER, "--rules", str(outer), "--no-scripts")
    assert code == 2
    assert f"{tmp_path / 'inner.lp'}:2:1: error: #script blocks" in one_error_line(err)


def test_no_scripts_accepts_the_word_in_comments_and_strings(capsys, tmp_path):
    path = tmp_path / "plain.lp"
    path.write_text('% no #script here\nnote("#script").\n#show note/1.\n')
    code, _, _ = run_cli(capsys, "solve", GATHER, "--rules", str(path), "--no-scripts")
    assert code == 0
