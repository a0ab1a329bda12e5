"""`gpudiv run FILE.ptx`: arguments are checked against the kernel's parameters (issue 18)."""

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
