"""`gpudiv run FILE.ptx`: arguments are checked against the kernel's parameters (issue 18)."""

import json
from pathlib import Path

import pytest

from gpudiv.cli import main
from gpudiv.cli.run_ptx import fit

VEC = str(Path(__file__).parents[2] / "samples" / "cuda" / "vector_ops.O3.ptx")
BUFFERS = ["--arg", "f32[8]:ones", "--arg", "f32[8]:ones", "--arg", "f32[8]:zeros"]


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["run", VEC, "--kernel", "vec_add", "--block", "8", *args])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def test_missing_arguments_name_each_parameter_and_what_it_expects(capsys):
    code, _, err = run(capsys, "--arg", "f32[8]:ones")
    assert code == 2 and err.count("\n") == 1
    assert "no --arg for parameters vec_add_param_1, vec_add_param_2, vec_add_param_3" in err
    assert "4. vec_add_param_3: an integer (.u32)" in err
    assert "1. vec_add_param_0: a buffer" in err


def test_a_buffer_for_a_scalar_and_a_number_for_a_pointer_are_errors(capsys):
    code, _, err = run(capsys, *BUFFERS, "--arg", "f32[4]:ones")
    assert code == 2 and ("--arg 4 ('f32[4]:ones') for parameter vec_add_param_3: a buffer, "
                          "but the kernel expects an integer (.u32)") in err
    code, _, err = run(capsys, "--arg", "5", *BUFFERS[2:], "--arg", "u32:8")
    assert code == 2 and ("--arg 1 ('5') for parameter vec_add_param_0: a number, but the "
                          "kernel expects a buffer") in err


@pytest.mark.parametrize(("spec", "gets"), [("u32:-1", 4294967295), ("u8:300", 44)])
def test_values_that_do_not_fit_are_warned(capsys, spec, gets):
    code, _, err = run(capsys, *BUFFERS, "--arg", spec)
    assert f"warning: --arg 4 ('{spec}') for parameter vec_add_param_3:" in err
    assert f"the kernel gets {gets}" in err


def test_bad_specs_say_what_is_wrong(capsys, tmp_path):
    code, _, err = run(capsys, "--arg", "f32[-5]:ones", *BUFFERS[2:], "--arg", "u32:8")
    assert code == 2 and "the size in [...] must be one to three positive integers" in err
    garbage = tmp_path / "garbage.npy"
    garbage.write_text("not numpy")
    code, _, err = run(capsys, "--arg", f"@{garbage}", *BUFFERS[2:], "--arg", "u32:8")
    assert code == 2 and err.strip() == (f"{garbage}: error: not a NumPy .npy array of "
                                         f"numbers (--arg '@{garbage}')")
    assert "allow_pickle" not in err
    code, _, err = run(capsys, "--arg", "u8[4]:300", *BUFFERS[2:], "--arg", "u32:8")
    assert code == 2 and "300 does not fit in uint8" in err


def test_trace_is_printed_up_to_a_fault(capsys):
    code, out, err = run(capsys, *BUFFERS, "--arg", "u32:100", "--trace", "--block", "32")
    assert code == 2 and "out-of-bounds global load" in err
    assert out.splitlines()[-1].startswith("block (0, 0, 0) warp 0 line 51: ld.global.f32")


def test_fit():
    assert fit(5, "u8") == (5, None)
    assert fit(-1, "b32") == (-1, None)
    assert fit(-129, "s8")[0] == 127
    assert fit(1 << 64, "u64")[0] == 0
    assert fit(3, "f32") == (3, None)



RECURSION = str(Path(__file__).parents[2] / "samples" / "cuda" / "recursion.O3.ptx")
CALLS = str(Path(__file__).parents[2] / "samples" / "cuda" / "many_calls.O3.ptx")


def run_buffers(capsys, tmp_path: Path, path: str, kernel: str, *args: str
                ) -> tuple[int, dict, list[str]]:
    """Exit status, the buffers written with -o (JSON) and the error lines of a run."""
    out_dir = tmp_path / "out"
    code = main(["run", path, "--kernel", kernel, "-o", str(out_dir), "--output-format",
                 "json", *args])
    _, err = capsys.readouterr()
    assert "Traceback" not in err
    buffers = {p.stem: json.loads(p.read_text()) for p in sorted(out_dir.glob("*.json"))}
    return code, buffers, [line for line in err.splitlines() if ": warning: " not in line]


def run_recursion(capsys, tmp_path: Path, *args: str) -> tuple[int, dict, list[str]]:
    return run_buffers(capsys, tmp_path, RECURSION, "fib_per_thread", "--arg",
                       "s32[32]:zeros", *args)


def test_a_recursive_kernel_runs_with_its_calls_run_as_calls(capsys, tmp_path):
    code, buffers, errors = run_recursion(capsys, tmp_path)
    assert code == 0 and errors == []
    assert buffers["fib_per_thread_param_0"][:12] == [0, 1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89]


def test_inlined_the_recursion_cannot_run(capsys, tmp_path):
    code, _, errors = run_recursion(capsys, tmp_path, "--calls", "inline")
    assert code == 2 and len(errors) == 1
    assert "cannot execute 'call.uni': the callee is not inlined" in errors[0]


@pytest.mark.parametrize("policy", ["mimd", "aware"])
def test_calls_as_calls_run_under_every_policy(capsys, tmp_path, policy):
    code, buffers, errors = run_recursion(capsys, tmp_path, "--reconvergence", policy)
    assert code == 0 and errors == [] and buffers["fib_per_thread_param_0"][11] == 89


def test_stack_size_must_not_be_negative(capsys, tmp_path):
    code, _, errors = run_recursion(capsys, tmp_path, "--stack-size", "-4")
    assert code == 2 and errors == [f"{RECURSION}: error: --stack-size must be 0 or more"]


@pytest.mark.parametrize(("kernel", "args"), [
    ("calls_uniform", ["s32[64]:zeros", "u32:64", "u32:3", "u32:5"]),
    ("calls_divergent", ["s32[64]:range", "s32[64]:zeros", "u32:64", "u32:2"])])
def test_calls_run_as_calls_give_the_buffers_inlining_gives(capsys, tmp_path, kernel, args):
    runs = [run_buffers(capsys, tmp_path / mode, CALLS, kernel, "--calls", mode, "--block",
                        "64", *(a for arg in args for a in ("--arg", arg)))
            for mode in ("inline", "call")]
    assert runs[0][0] == runs[1][0] == 0
    assert runs[0][1] == runs[1][1] and any(any(b) for b in runs[0][1].values())


LEGACY = str(Path(__file__).parents[2] / "samples" / "ptx_legacy" / "nvopencc40_ptx22_sm20.ptx")


def run_apply_fp(capsys, tmp_path: Path, function: str, *args: str
                 ) -> tuple[int, dict, list[str]]:
    return run_buffers(capsys, tmp_path, LEGACY, "apply_fp", "--block", "32", "--arg",
                       function, "--arg", "out=s32[32]:zeros", "--arg", "s32:7", *args)


def test_a_function_pointer_argument_names_a_function_of_the_file(capsys, tmp_path):
    code, buffers, errors = run_apply_fp(capsys, tmp_path, "&_Z6squarei")
    assert code == 0 and errors == []
    assert buffers["out"] == [49] * 32


@pytest.mark.parametrize(("function", "args", "message"), [
    ("&nope", [], "no function 'nope' in this file's functions (_Z6squarei, _Z8clamp_toii)"),
    ("&_Z6squarei", ["--calls", "inline"],
     "a function pointer, but kernel apply_fp runs with its calls inlined (run it with "
     "--calls call)"),
])
def test_a_function_pointer_argument_that_cannot_be_passed_is_one_line(
        capsys, tmp_path, function, args, message):
    code, _, errors = run_apply_fp(capsys, tmp_path, function, *args)
    assert code == 2 and len(errors) == 1
    assert errors[0].endswith(message)
