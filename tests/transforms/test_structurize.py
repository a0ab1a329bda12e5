"""The `structurize` pass: Fig 1 of Wu et al. (2011) by Forward Copy (B3 once, B4 once,
B5 three times), a multi-exit loop by Cut (+5 instructions, as in Table 2), a side entry
by Backward Copy, structured
kernels untouched, the growth cap, PTX output accepted by ptxas, and a property over
random unstructured programs: structurize, then structured and equal on the interpreter."""

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gpudiv.analyses.structure import BACKWARD_COPY, analyze_kernel
from gpudiv.cli import main
from gpudiv.lang.load import load, parse_text
from gpudiv.transforms import PassError, Pipeline, get_pass
from gpudiv.verify.equivalence import compare_kernels
from gpudiv.verify.randprog import random_program
from gpudiv.verify.transform_check import VERIFIED, transform
from tests.ptxas_tool import ptxas_errors

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
FIG1 = SAMPLES / "musimd" / "wu_fig1_short_circuit.musimd"
SCALE = settings.default.max_examples / 100
PROPERTY = settings(max_examples=max(int(40 * SCALE), 3), deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


def test_fig1_forward_copy_duplicates_b3_once_b4_once_b5_three_times():
    result = transform(FIG1, "structurize", verify=True)
    (kernel,) = result.kernels
    assert kernel.status == VERIFIED
    stats = kernel.static
    assert stats["copies"] == {"B3": 1, "B4": 1, "B5": 3}
    assert stats["forward_copy"] == 2 and stats["cut"] == 0 and stats["backward_copy"] == 0
    assert stats["instructions_after"] > stats["instructions_before"]
    assert stats["static_expansion_percent"] == pytest.approx(
        100 * (stats["instructions_after"] - stats["instructions_before"])
        / stats["instructions_before"], abs=0.01)
    reread = parse_text(result.text, "fig1.musimd")
    assert analyze_kernel(reread.kernels[0]).structured


def test_cut_of_a_two_exit_loop_adds_five_instructions():
    result = transform(SAMPLES / "musimd" / "break_and_stop.musimd", "structurize",
                       verify=True)
    (kernel,) = result.kernels
    assert kernel.status == VERIFIED
    assert kernel.static["cut"] == 1 and kernel.static["forward_copy"] == 0
    assert kernel.static["instructions_after"] - kernel.static["instructions_before"] == 5
    assert analyze_kernel(parse_text(result.text, "b.musimd").kernels[0]).structured


def test_structured_kernels_are_untouched():
    result = transform(SAMPLES / "musimd" / "loops_nested.musimd", "structurize")
    (kernel,) = result.kernels
    assert kernel.static["forward_copy"] == kernel.static["cut"] == 0
    assert kernel.static["instructions_after"] == kernel.static["instructions_before"]
    assert result.text == transform(SAMPLES / "musimd" / "loops_nested.musimd",
                                    "identity").text


def test_growth_cap_fails_clearly():
    program = load(FIG1)
    with pytest.raises(PassError, match="cap"):
        Pipeline([get_pass("structurize", max_growth=0.0)]).run(program)


def test_side_entry_is_removed_by_backward_copy():
    path = SAMPLES / "musimd" / "irreducible_switch.musimd"
    assert analyze_kernel(load(path).kernels[0]).counts()[BACKWARD_COPY] == 1
    result = transform(path, "structurize", verify=True)
    (kernel,) = result.kernels
    assert kernel.status == VERIFIED and kernel.static["backward_copy"] >= 1
    reread = parse_text(result.text, "irr.musimd").kernels[0]
    assert analyze_kernel(reread).structured and not analyze_kernel(reread).irreducible_loops


def test_cli_json_has_the_table_2_columns(capsys):
    assert main(["transform", str(FIG1), "--pass", "structurize", "--format", "json"]) == 0
    (kernel,) = json.loads(capsys.readouterr().out)["files"][0]["kernels"]
    assert {"branches", "cut", "forward_copy", "backward_copy", "instructions_before",
            "instructions_after", "static_expansion_percent"} <= set(kernel["static"])


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")
def test_structurized_ptx_is_accepted_by_ptxas(tmp_path):
    source = SAMPLES / "cuda" / "exits_in_loops.O3.ptx"
    result = transform(source, "structurize", verify=True)
    assert all(k.status == VERIFIED for k in result.kernels)
    assert sum(k.static["cut"] for k in result.kernels) > 0
    out = tmp_path / "s.ptx"
    out.write_text(result.text)
    assert ptxas_errors(out) is None, ptxas_errors(out)
    assert all(analyze_kernel(k).structured for k in load(out).kernels)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "kernel"), [("atomics_histogram.G.ptx", "max_float_cas"),
                                              ("double_precision.G.ptx", "newton_sqrt")])
def test_cut_of_a_loop_inside_an_inlined_call(tmp_path, name, kernel):
    result = transform(SAMPLES / "cuda" / name, "structurize", verify=True, kernel=kernel)
    (done,) = [k for k in result.kernels if k.name == kernel]
    assert done.status == VERIFIED and done.static["cut"] == 1
    out = tmp_path / "s.ptx"
    out.write_text(result.text)
    (again,) = [k for k in load(out).kernels if k.name == kernel]
    assert analyze_kernel(again).structured
    assert not any(i.attrs.get("function") for i in again.instructions())  # written inline
    if shutil.which("ptxas"):
        assert ptxas_errors(out) is None, ptxas_errors(out)


@settings(PROPERTY)
@given(seed=st.integers(0, 2**31 - 1), statements=st.integers(3, 25))
def test_random_unstructured_programs_become_structured_and_equal(seed, statements):
    program = parse_text(random_program(seed, statements, unstructured=True), "r.musimd")
    assert program.errors == []
    kernel = program.kernels[0]
    try:
        result = Pipeline([get_pass("structurize")]).run(program)
    except PassError as error:
        assume("cap" not in str(error))
        raise
    (after,) = result.kernels
    assert analyze_kernel(after).structured
    assert compare_kernels(kernel, after, "musimd", seed).status in (VERIFIED, "not-executed")
