"""The `--calls` option of `analyze` and `check` and `compare --calls` (call summaries:
gpudiv/cli/common.py, analyze.py, check.py, compare.py; issue 16, item 1)."""

import json
from pathlib import Path

import pytest

from tests.cli.test_main import run_cli

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
MANY_CALLS = str(SAMPLES / "cuda" / "many_calls.G.ptx")


def test_analyze_with_summaries_reports_kernels_then_functions_per_context(capsys):
    code, out, _ = run_cli(capsys, "analyze", "--analysis", "simple", "--calls", "summary",
                           MANY_CALLS)
    assert code == 0
    assert ": kernel calls_uniform (" in out
    assert ": function _Z3mixii(divergent: param_0) (" in out
    assert "  called from calls_mixed line " in out
    assert "in function _Z11gcd_boundedii(divergent: param_0)" in out


def test_analyze_json_has_the_calling_context_of_each_function(capsys):
    code, out, _ = run_cli(capsys, "analyze", "--analysis", "simple", "--calls", "summary",
                           "--format", "json", MANY_CALLS)
    kernels = json.loads(out)["inputs"][0]["kernels"]
    assert code == 0 and [k["name"] for k in kernels[:3]] == [
        "calls_uniform", "calls_divergent", "calls_mixed"]
    assert all("calling_context" not in k for k in kernels[:3])
    tr = [k for k in kernels if k.get("calling_context", {}).get("function") == "_Z3trii"]
    assert {k["calling_context"]["context"] for k in tr} == {
        "uniform inputs", "divergent: param_0"}
    sites = [s for k in tr for s in k["calling_context"]["call_sites"]]
    assert {s["caller"] for s in sites} == {"calls_uniform", "calls_divergent", "calls_mixed"}


def test_summaries_work_with_the_default_affine_analysis(capsys):
    """affine2 with summaries: affine values in the kernels (the oracle checks the claims
    of every analysis: tests/verify/test_call_projection.py)."""
    code, out, _ = run_cli(capsys, "analyze", "--calls", "summary", "--format", "json",
                           MANY_CALLS)
    kernels = json.loads(out)["inputs"][0]["kernels"]
    assert code == 0 and {k["analysis"] for k in kernels} == {"affine2"}
    divergent = next(k for k in kernels if k["name"] == "calls_divergent")
    assert any(v["class"] == "affine" for v in divergent["variables"])


def test_check_with_summaries_runs_the_inlined_kernels(capsys):
    path = str(SAMPLES / "cuda" / "device_functions.G.ptx")
    code, out, _ = run_cli(capsys, "check", "--calls", "summary", path)
    assert code == 0
    assert "kernel pow_per_element: ok: 5 runs" in out
    assert out.rstrip().endswith("0 violations")


@pytest.mark.slow
def test_compare_calls_finds_nothing_lost_on_many_calls(capsys):
    """many_calls.G (17 call sites, literal, affine and divergent arguments): every
    variable and branch of every inlined kernel has the class inlining gives it, with
    the simple analysis and with affine2."""
    for analysis in ("simple", "affine2"):
        code, out, _ = run_cli(capsys, "compare", "--calls", "--analysis", analysis,
                               MANY_CALLS)
        assert code == 0
        assert out.splitlines()[-1] == (
            "total: 1577 variables: 1577 same, 0 less precise, 0 more precise, 0 not "
            "variables with summaries; 77 branches: 0 divergent only with summaries, 0 "
            "only when inlined")


def test_compare_calls_lists_every_difference_with_why(capsys):
    """stack_slots.G passes the address of a local array to a helper: the kernel's frame
    stays memory with summaries, which costs one branch of chunk_sum."""
    path = str(SAMPLES / "cuda" / "stack_slots.G.ptx")
    code, out, _ = run_cli(capsys, "compare", "--calls", "--analysis", "simple", path)
    assert code == 0
    assert "kernel chunk_sum: 75 variables inlined: " in out
    assert "2 branches: 1 divergent only with summaries, 0 only when inlined" in out
    assert "the stack frame of chunk_sum (__local_depot4) stays memory: its address is " \
        "passed to a call" in out
    code, out, _ = run_cli(capsys, "compare", "--calls", "--analysis", "simple", "--format",
                           "json", path)
    kernels = {k["name"]: k for k in json.loads(out)["kernels"]}
    assert kernels["chunk_sum"]["branch_losses"] and not kernels["chunk_sum"]["gains"]
    assert all(d["why"] for k in kernels.values() for d in k["losses"])


@pytest.mark.slow
def test_the_large_program_loses_nothing_with_summaries(capsys):
    """particle_library (33 device functions, 310 call sites in -G): with literal and
    affine arguments in the contexts and the second pass over the kernels, every
    variable and branch of both builds has the class inlining gives it, under simple and
    affine2."""
    paths = [str(SAMPLES / "cuda_large" / f"particle_library.{b}.ptx") for b in ("G", "O3")]
    for analysis in ("simple", "affine2"):
        code, out, _ = run_cli(capsys, "compare", "--calls", "--analysis", analysis, *paths)
        total = out.splitlines()[-1]
        assert code == 0 and ", 0 less precise, 0 more precise, 0 not variables" in total
        assert total.endswith(": 0 divergent only with summaries, 0 only when inlined")


def test_compare_calls_takes_no_other_variants(capsys):
    code, _, err = run_cli(capsys, "compare", "--calls", "--analysis", "simple", "--analysis",
                           "affine", MANY_CALLS)
    assert code == 2 and err.startswith("error: --calls compares call summaries")


def test_a_musimd_file_has_no_calls_and_is_analysed_as_usual(capsys):
    path = str(SAMPLES / "musimd" / "sumTriangle.musimd")
    plain = run_cli(capsys, "analyze", "--analysis", "simple", path)
    summarised = run_cli(capsys, "analyze", "--analysis", "simple", "--calls", "summary", path)
    assert summarised == plain


RECURSIVE = """.version 7.0
.target sm_80
.address_size 64
.func (.param .b32 func_retval0) f(.param .b32 f_param_0)
{
    .reg .b32 %r<4>;
    .reg .pred %p<2>;
    ld.param.u32 %r1, [f_param_0];
    setp.eq.s32 %p1, %r1, 0;
    @%p1 bra $L_done;
    sub.s32 %r2, %r1, 1;
    {
    .param .b32 param0;
    st.param.b32 [param0], %r2;
    .param .b32 retval0;
    call.uni (retval0), f, (param0);
    ld.param.b32 %r3, [retval0];
    }
    st.param.b32 [func_retval0], %r3;
    ret;
$L_done:
    st.param.b32 [func_retval0], %r1;
    ret;
}
.visible .entry k(.param .u32 k_param_0)
{
    .reg .b32 %r<5>;
    ld.param.u32 %r1, [k_param_0];
    {
    .param .b32 param0;
    st.param.b32 [param0], %r1;
    .param .b32 retval0;
    call.uni (retval0), f, (param0);
    ld.param.b32 %r3, [retval0];
    }
    ret;
}
"""


def test_a_recursive_call_stays_opaque_with_a_warning(tmp_path, capsys):
    path = tmp_path / "rec.ptx"
    path.write_text(RECURSIVE)
    code, _, err = run_cli(capsys, "analyze", "--calls", "summary", "--brief", str(path))
    assert code == 0
    assert f"{path}:4:1: warning: function f: call to 'f' at line 16 is treated as " \
        "opaque: it is recursive" in err


def test_a_function_with_an_error_is_one_line_and_its_callers_go_on(tmp_path, capsys):
    """A bad label in the callee: its error, the call left opaque (warned), exit 2 for
    analyze, check and compare, never a traceback."""
    path = tmp_path / "bad.ptx"
    path.write_text(RECURSIVE.replace("bra $L_done;", "bra $L_nowhere;"))
    for command in (["analyze", "--brief"], ["check"], ["compare"]):
        code, _, err = run_cli(capsys, *command, "--calls", *(
            ["summary"] if command[0] != "compare" else []), str(path))
        assert code == 2, command
        assert f"{path}:10:5: error: undefined label '$L_nowhere' in function f" in err
    assert "its calls cannot be inlined" in err  # compare: the kernel cannot be checked
