"""Launch shapes (issue 17, item 2): what `.reqntid` and `--block` make known, and that the
oracle checks those claims under exactly that shape."""

import json
from pathlib import Path

import pytest

import gpudiv
from gpudiv.analyses import get_analysis
from gpudiv.analyses.launch_shape import (
    BlockShape,
    as_shape,
    kernel_shape,
    parse_block,
    special_values,
)
from gpudiv.api import analyze, analyze_text, check
from gpudiv.cli import main
from gpudiv.interp.ptx import run_ptx_kernel
from gpudiv.lang.load import parse_text
from gpudiv.verify.oracle import check_kernel, ptx_launches

CUDA = Path(__file__).parents[2] / "samples" / "cuda"

# A branch on %tid.y, a loop bounded by %ntid.x, the lane index and a 3-D z test.
PTX = """
.version 7.0
.target sm_80
.address_size 64

.visible .entry shaped(.param .u64 out, .param .u32 n){HEADER}
{
    .reg .pred %p<4>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [n];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r2, %tid.y;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %laneid;
    mov.u32 %r5, %tid.z;
    mov.u32 %r10, 0;
    setp.ge.u32 %p1, %r2, %r1;
    @%p1 bra DONE;
    mov.u32 %r6, 0;
LOOP:
    add.s32 %r6, %r6, 1;
    add.s32 %r10, %r10, %r4;
    setp.lt.u32 %p2, %r6, %r3;
    @%p2 bra LOOP;
    setp.ne.u32 %p3, %r5, 0;
    @%p3 bra DONE;
    mov.u32 %r10, 7;
DONE:
    mov.u32 %r7, %tid.x;
    mad.lo.s32 %r8, %r2, %r3, %r7;
    mul.wide.u32 %rd3, %r8, 4;
    add.s64 %rd3, %rd2, %rd3;
    st.global.u32 [%rd3], %r10;
    ret;
}
"""


def ptx(header: str = "") -> str:
    return PTX.replace("{HEADER}", header)


def branch_classes(result) -> list[bool]:
    """Whether each branch is divergent, in program order."""
    return [b.divergent for b in result.branches]


def classes(result) -> dict[str, str]:
    return {v.name: v.klass for v in result.variables}


# ---- shapes -----------------------------------------------------------------------------

def test_parse_block_forms():
    assert parse_block("256") == BlockShape(256, 1, 1)
    assert parse_block("32x8") == BlockShape(32, 8, 1)
    assert parse_block("8,4,2") == BlockShape(8, 4, 2)
    assert str(parse_block("32x8")) == "32x8x1"
    assert as_shape((16, 16)) == BlockShape(16, 16, 1)
    assert as_shape(None) is None


@pytest.mark.parametrize("text", ["0", "32x", "x8", "abc", "1x2x3x4", "2048", "64x32", "-32"])
def test_parse_block_rejects_shapes_that_cannot_launch(text):
    with pytest.raises(ValueError, match="bad --block"):
        parse_block(text)


def test_what_each_shape_makes_known():
    names = {"%tid.x": "divergent", "%tid.y": "divergent", "%tid.z": "divergent",
             "%laneid": "divergent", "%ntid.x": "uniform", "%ntid.y": "uniform"}
    known = special_values(BlockShape(32, 8, 1), names)
    assert {n: (k.kind, k.value) for n, k in known.items()} == {
        "%ntid.x": ("constant", 32), "%ntid.y": ("constant", 8),
        "%tid.y": ("uniform", None), "%tid.z": ("constant", 0), "%laneid": ("lane", None)}
    # X = 16: two rows share a warp, so tid.y and the lane index say nothing.
    known = special_values(BlockShape(16, 16, 1), names)
    assert "%tid.y" not in known and "%laneid" not in known
    assert known["%tid.z"].value == 0
    # X·Y = 32: a warp is one z slice.
    known = special_values(BlockShape(16, 2, 4), names)
    assert known["%tid.z"].kind == "uniform" and "%tid.y" not in known
    # One-dimensional blocks of any width: tid.y = tid.z = 0 and laneid = tid.x % 32.
    known = special_values(BlockShape(48, 1, 1), names)
    assert known["%tid.y"].value == 0 and known["%laneid"].kind == "lane"
    assert special_values(None, names) == {}


# ---- front end ----------------------------------------------------------------------------

def test_reqntid_and_maxntid_are_read_from_the_header():
    kernel = parse_text(ptx("\n.reqntid 32, 8, 1\n.maxntid 256, 1, 1"), "k.ptx", "ptx"
                        ).kernel("shaped")
    assert kernel.attrs["reqntid"] == (32, 8, 1)
    assert kernel.attrs["maxntid"] == (256, 1, 1)
    assert kernel_shape(kernel, None) == (BlockShape(32, 8, 1), None)
    shape, warning = kernel_shape(kernel, BlockShape(16, 16, 1))
    assert shape == BlockShape(32, 8, 1) and ".reqntid requires 32x8x1" in warning


def test_maxntid_alone_fixes_nothing():
    kernel = parse_text(ptx("\n.maxntid 256, 1, 1"), "k.ptx", "ptx").kernel("shaped")
    assert kernel_shape(kernel, None) == (None, None)


def test_musimd_kernels_take_no_shape():
    kernel = parse_text("kernel k(a)\n x = tid + a\n stop\n", "k.musimd").kernel("k")
    assert kernel_shape(kernel, BlockShape(32, 8, 1)) == (None, None)


# ---- analyses -----------------------------------------------------------------------------

@pytest.mark.parametrize("analysis", ["simple", "affine", "affine2"])
def test_without_a_shape_tid_y_and_laneid_stay_divergent(analysis):
    result = analyze_text(ptx(), "k.ptx", analysis, "ptx").kernel("shaped")
    assert result.block is None
    # tid.y >= n and tid.z != 0 diverge; the loop on %ntid.x is uniform anyway.
    assert branch_classes(result) == [True, False, True]


@pytest.mark.parametrize("analysis", ["simple", "affine", "affine2"])
def test_block_32x8_makes_tid_y_branches_and_ntid_loops_uniform(analysis):
    result = analyze_text(ptx(), "k.ptx", analysis, "ptx", block="32x8").kernel("shaped")
    assert result.block == BlockShape(32, 8, 1)
    # tid.y >= n: uniform; i < ntid.x = 32: uniform; tid.z != 0 with Z = 1: constant.
    assert branch_classes(result) == [False, False, False]
    found = classes(result)
    assert found["%r2#1"] == "uniform"
    if analysis == "simple":  # (the simple analysis follows constants of μ-SIMD copies only)
        assert found["%r3#1"] == "uniform" and found["%r5#1"] == "uniform"
        assert found["%r4#1"] == "divergent"
    else:  # %laneid = %tid.x − 32·warp: 1·tid + ⊥
        assert result.variable("%r3#1").value == 32 and result.variable("%r5#1").value == 0
        assert found["%r4#1"] == "affine"
        assert result.variable("%r4#1").affine[1] == 1


@pytest.mark.parametrize("analysis", ["simple", "affine2"])
def test_block_16x16_keeps_tid_y_divergent(analysis):
    result = analyze_text(ptx(), "k.ptx", analysis, "ptx", block="16x16").kernel("shaped")
    assert branch_classes(result) == [True, False, False]
    assert classes(result)["%r4#1"] == "divergent"


def test_reqntid_applies_without_an_option():
    result = analyze_text(ptx("\n.reqntid 32, 8, 1"), "k.ptx", "affine", "ptx"
                          ).kernel("shaped")
    assert result.block == BlockShape(32, 8, 1)
    assert branch_classes(result) == [False, False, False]


def test_a_block_contradicting_reqntid_is_a_warning_and_reqntid_wins():
    analysed = analyze_text(ptx("\n.reqntid 32, 8, 1"), "k.ptx", "affine", "ptx",
                            block="16x16")
    assert analysed.kernel("shaped").block == BlockShape(32, 8, 1)
    assert any(".reqntid requires 32x8x1" in d.message for d in analysed.diagnostics)


def test_shape_is_an_option_of_the_driver_and_the_api():
    kernel = parse_text(ptx(), "k.ptx", "ptx").kernel("shaped")
    assert get_analysis("simple")(kernel, BlockShape(32, 4, 1)).block == BlockShape(32, 4, 1)
    with pytest.raises(ValueError):
        analyze_text(ptx(), "k.ptx", "simple", "ptx", block="4096")
    run, summary = gpudiv.analyze_corpus([str(CUDA / "launch_shapes.O3.ptx")], block="32x8")
    assert all(k.block is not None for f in run.files for k in f.kernels)


# ---- the oracle ---------------------------------------------------------------------------

@pytest.mark.parametrize("analysis", ["simple", "affine", "affine2"])
def test_oracle_checks_the_shape_claims_under_that_shape(analysis):
    analysed = analyze_text(ptx(), "k.ptx", analysis, "ptx", block="32x8")
    (report,) = check(analysed)
    assert report.status == "checked" and report.runs == 5
    assert report.violations == []
    launches = ptx_launches(analysed.kernel("shaped").ssa.cfg.kernel, 0, BlockShape(32, 8, 1))
    assert {launch.block for launch in launches} == {(32, 8, 1)}


def test_oracle_catches_the_claims_under_another_shape():
    """The claims are real: under 16x16 blocks tid.y differs within a warp, so the
    oracle (which must run the shape the analysis assumed) would see violations."""
    result = analyze_text(ptx(), "k.ptx", "affine2", "ptx", block="32x8").kernel("shaped")
    launches = ptx_launches(result.ssa.cfg.kernel, 0, BlockShape(16, 16, 1))
    report = check_kernel(result, launches, run=run_ptx_kernel)
    assert report.violations
    assert any(v.variable in ("%r2#1", "%tid.y", "%ntid.x") or v.claim == "uniform branch"
               for v in report.violations)


# ---- the sample and the command line ------------------------------------------------------

def divergent_branches(path: Path, block: str | None) -> int:
    return sum(b.divergent for k in analyze(path, "affine2", block).kernels for b in k.branches)


@pytest.mark.parametrize("variant", ["O3", "G"])
def test_sample_gains_with_a_warp_aligned_block(variant):
    path = CUDA / f"launch_shapes.{variant}.ptx"
    before, after = divergent_branches(path, None), divergent_branches(path, "32x8")
    assert after < before
    assert divergent_branches(path, "16x16") > after


def test_sample_reqntid_kernel_is_uniform_on_its_rows():
    result = analyze(CUDA / "launch_shapes.O3.ptx").kernel("triangle_rows_reqntid")
    assert result.block == BlockShape(32, 8, 1)
    plain = analyze(CUDA / "launch_shapes.O3.ptx").kernel("triangle_rows")
    assert sum(b.divergent for b in result.branches) < sum(b.divergent for b in plain.branches)


def test_cli_block_option(capsys, tmp_path):
    path = tmp_path / "k.ptx"
    path.write_text(ptx())
    assert main(["check", "--block", "32x8", str(path)]) == 0
    assert "0 violations" in capsys.readouterr().out
    assert main(["analyze", "--brief", "--block", "32x8", str(path)]) == 0
    assert "divergent branch" not in capsys.readouterr().out
    assert main(["compare", "--analysis", "simple", "--block", "32x8", str(path)]) == 0
    out = capsys.readouterr().out
    assert "simple@32x8x1" in out
    assert main(["analyze", "--format", "json", "--block", "32x8", str(path)]) == 0
    (kernel,) = json.loads(capsys.readouterr().out)["inputs"][0]["kernels"]
    assert kernel["block"] == [32, 8, 1]
    assert main(["analyze", "--format", "json", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["inputs"][0]["kernels"][0]["block"] is None
    for command in ("analyze", "check", "compare"):
        assert main([command, "--block", "32x", str(path)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "bad --block '32x'" in err


# ---- the warp index and the lane from %tid.x ----------------------------------------------

WARP_PTX = """
.version 7.0
.target sm_80
.address_size 64

.visible .entry warps(.param .u64 out)
{
    .reg .pred %p<4>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    shr.u32 %r2, %r1, 5;
    and.b32 %r3, %r1, 31;
    div.u32 %r4, %r1, 64;
    rem.u32 %r5, %r1, 64;
    shr.u32 %r6, %r1, 4;
    and.b32 %r7, %r1, 15;
    setp.eq.s32 %p1, %r2, 0;
    @%p1 bra DONE;
    add.s32 %r8, %r4, %r5;
    add.s32 %r8, %r8, %r6;
    add.s32 %r8, %r8, %r7;
    add.s32 %r8, %r8, %r3;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r8;
DONE:
    ret;
}
"""


@pytest.mark.parametrize("block", ["256", "32x8", "64x2x2"])
def test_warp_index_is_uniform_and_lane_is_affine_with_warp_aligned_blocks(block):
    analysed = analyze_text(WARP_PTX, "w.ptx", "affine2", "ptx", block=block)
    result = analysed.kernel("warps")
    found = classes(result)
    assert found["%r2#1"] == "uniform" and found["%r4#1"] == "uniform"  # tid.x / 32, / 64
    assert found["%r3#1"] == "affine" and found["%r5#1"] == "affine"  # tid.x % 32, % 64
    assert found["%r6#1"] == "divergent" and found["%r7#1"] == "divergent"  # / 16, % 16
    assert branch_classes(result) == [False]
    assert classes(analyze_text(WARP_PTX, "w.ptx", "simple", "ptx", block=block
                                ).kernel("warps"))["%r2#1"] == "uniform"
    (report,) = check(analysed)
    assert report.runs == 5 and report.violations == []


@pytest.mark.parametrize("block", [None, "48x2", "16x16"])
def test_warp_index_stays_divergent_without_a_warp_aligned_block(block):
    result = analyze_text(WARP_PTX, "w.ptx", "affine2", "ptx", block=block).kernel("warps")
    found = classes(result)
    assert found["%r2#1"] == "divergent" and found["%r3#1"] == "divergent"
    assert branch_classes(result) == [True]
    (report,) = check(analyze_text(WARP_PTX, "w.ptx", "affine2", "ptx", block=block))
    assert report.violations == []


def test_affine_reference_agrees_with_the_rules_under_a_shape():
    from gpudiv.analyses.affine_reference import solve_reference
    for text, name in ((WARP_PTX, "warps"), (ptx(), "shaped")):
        for block in ("256", "32x8", "16x16"):
            result = analyze_text(text, "k.ptx", "affine2", "ptx", block=block).kernel(name)
            reference = solve_reference(result.ssa, 2, shape=result.block)
            for var in result.variables:
                assert reference[var.name] == tuple(reversed(var.affine)), var.name


def test_block_sum_sample_warp_test_is_uniform_with_a_block_shape():
    path = CUDA / "warp_primitives.O3.ptx"
    plain = analyze(path).kernel("block_sum_two_level")
    shaped = analyze(path, block="256").kernel("block_sum_two_level")
    lines = {b.line: b.divergent for b in shaped.branches}
    assert sum(b.divergent for b in shaped.branches) < sum(b.divergent for b in plain.branches)
    assert False in lines.values()
