"""Texture and surface instructions of the PTX interpreter (gpudiv.interp.ptx_texture):
the kernels of samples/cuda/textures.cu against NumPy, texture references, the documented
modes, faults, and `gpudiv check` executing every texture kernel."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import pytest

from gpudiv import api, ir
from gpudiv.interp import ptx_texture
from gpudiv.interp.ptx import PtxExecutionError, PtxLaunch, run_ptx_kernel
from gpudiv.interp.ptx_synthesis import (
    pointer_params,
    synthesize_launches,
    texture_params,
    texture_refs,
)
from gpudiv.interp.ptx_texture import Texture
from gpudiv.lang.load import load
from gpudiv.lang.ptx.parse import parse_ptx

ROOT = Path(__file__).resolve().parents[2]
CUDA = ROOT / "samples" / "cuda"
VARIANTS = ("O3", "G")
F32 = np.float32


@cache
def sample(variant: str) -> ir.Program:
    return load(CUDA / f"textures.{variant}.ptx")


def run(variant: str, kernel: str, grid, block, *args) -> list:
    """Final contents of each argument by position (surfaces and buffers; scalars as given)."""
    k = sample(variant).kernel(kernel)
    result = run_ptx_kernel(k, PtxLaunch(grid, block, dict(enumerate(args))))
    return [result.buffers.get(name, arg) for name, arg in zip(k.params, args, strict=True)]


def rng() -> np.random.Generator:
    return np.random.default_rng(3)


@pytest.mark.parametrize("variant", VARIANTS)
def test_tex1dfetch_scales_the_texels_and_reads_zero_out_of_range(variant):
    texels = rng().uniform(-2, 2, 40).astype(F32)
    n = 70  # past the 40 texels: integer coordinates out of range read 0
    _, out, _, _ = run(variant, "tex1d_fetch_scale", (3, 1, 1), (32, 1, 1), Texture(texels),
                       np.full(96, 9, F32), n, 1.5)
    expected = np.concatenate([F32(1.5) * texels, np.zeros(30, F32), np.full(26, 9, F32)])
    assert np.array_equal(out, expected)


@pytest.mark.parametrize("variant", VARIANTS)
def test_fetched_texels_decide_a_branch(variant):
    texels = rng().uniform(-2, 2, 64).astype(F32)
    _, count, _, _ = run(variant, "tex_threshold_count", (2, 1, 1), (32, 1, 1),
                         Texture(texels), np.zeros(1, np.int32), 50, 0.25)
    assert count[0] == int(np.count_nonzero(texels[:50] > F32(0.25)))


@pytest.mark.parametrize("variant", VARIANTS)
def test_block_uniform_fetch(variant):
    texels = np.array([0.75, 0.25, 2.0], F32)
    _, out = run(variant, "tex_block_uniform", (3, 1, 1), (8, 1, 1), Texture(texels),
                 np.zeros(24, F32))
    assert np.array_equal(out, np.repeat([0.75, -0.25, 2.0], 8).astype(F32))


@pytest.mark.parametrize("variant", VARIANTS)
def test_tex2d_point_filtering_at_texel_centres(variant):
    texels = rng().uniform(0, 1, (6, 10)).astype(F32)  # rows (y), columns (x)
    _, out, _, _ = run(variant, "tex2d_sample", (2, 2, 1), (8, 4, 1), Texture(texels),
                       np.zeros(60, F32), 10, 6)
    assert np.array_equal(out.reshape(6, 10), texels)


@pytest.mark.parametrize("variant", VARIANTS)
def test_tex2dgather_sums_the_footprint_clamped(variant):
    texels = rng().integers(0, 9, (5, 7)).astype(F32)
    _, out, _, _ = run(variant, "tex_gather_sum", (1, 2, 1), (8, 4, 1), Texture(texels),
                       np.zeros(35, F32), 7, 5)
    h, w = texels.shape
    expected = np.zeros((h, w), F32)
    for y in range(h):
        for x in range(w):  # footprint at (x + 1 − ½, y + 1 − ½): x0 = x, y0 = y
            x1, y1 = min(x + 1, w - 1), min(y + 1, h - 1)
            expected[y, x] = texels[y1, x] + texels[y1, x1] + texels[y, x1] + texels[y, x]
    assert np.array_equal(out.reshape(h, w), expected)


@pytest.mark.parametrize("variant", VARIANTS)
def test_surface_read_scale_write(variant):
    source = rng().uniform(-1, 1, (4, 9)).astype(F32)
    src, dst, _, _, _ = run(variant, "surf_scale", (2, 1, 1), (8, 4, 1),
                            Texture(source, surface=True),
                            Texture(np.zeros((4, 9), F32), surface=True), 9, 4, 3.0)
    assert np.array_equal(src, source)
    assert np.array_equal(dst, F32(3.0) * source)


@pytest.mark.parametrize("variant", VARIANTS)
def test_surface_1d_update_in_place(variant):
    values = np.arange(40, dtype=np.int32)
    (surface, _) = run(variant, "surf1d_update", (2, 1, 1), (32, 1, 1),
                       Texture(values, surface=True), 40)
    assert np.array_equal(surface, np.where(values & 1, 2 * values, values) + 1)


def test_surface_out_of_range_traps_with_one_line():
    values = np.zeros(16, np.int32)
    k = sample("O3").kernel("surf1d_update")
    with pytest.raises(PtxExecutionError) as caught:
        run_ptx_kernel(k, PtxLaunch((1, 1, 1), (32, 1, 1),
                                    {0: Texture(values, surface=True), 1: 20}))
    message = str(caught.value)
    assert "\n" not in message and "out-of-range surface access" in message
    assert "lanes 16-19" in message and caught.value.outside


WRAP = """.version 8.0
.target sm_80
.address_size 64
.global .texref tref;
.global .surfref sref;
.visible .entry k(.param .u64 k_out, .param .u64 k_tex)
{{
	.reg .pred %p<4>;
	.reg .b32 %r<20>;
	.reg .f32 %f<20>;
	.reg .b64 %rd<10>;
	ld.param.u64 %rd1, [k_out];
	ld.param.u64 %rd5, [k_tex];
	mov.u32 %r2, %tid.x;
	mul.wide.u32 %rd2, %r2, 4;
	add.s64 %rd3, %rd1, %rd2;
{body}
	ret;
}}
"""


def kernel_of(body: str) -> ir.Kernel:
    program = parse_ptx(WRAP.format(body=body), "t.ptx")
    assert not program.errors, [str(d) for d in program.errors]
    return program.kernels[0]


def test_texture_and_surface_references_by_name():
    body = """	tex.1d.v4.f32.s32 {%f1, %f2, %f3, %f4}, [tref, {%r2}];
	shl.b32 %r3, %r2, 2;
	suld.b.1d.b32.trap {%r4}, [sref, {%r3}];
	add.s32 %r5, %r4, 100;
	sust.b.1d.b32.trap [sref, {%r3}], {%r5};
	st.global.f32 [%rd3], %f1;
	st.global.f32 [%rd3+64], %f4;"""
    kernel = kernel_of(body)
    texels = np.arange(8, dtype=F32) / 4
    surface = np.arange(16, dtype=np.int32)
    result = run_ptx_kernel(kernel, PtxLaunch(
        (1, 1, 1), (16, 1, 1), {0: np.zeros(32, F32)},
        textures={"tref": texels, "sref": Texture(surface, surface=True)}))
    out = result.buffers["k_out"]
    assert np.array_equal(out[:16], np.concatenate([texels, np.zeros(8, F32)]))
    # a one-channel texture reads alpha 1; out of range every channel reads 0
    assert np.array_equal(out[16:], np.repeat([1, 0], 8).astype(F32))
    assert np.array_equal(result.buffers["sref"], surface + 100)
    assert np.array_equal(surface, np.arange(16))  # the caller's array is not written
    assert set(texture_refs(kernel)) == {"tref", "sref"}


def test_channels_float_coordinates_clamp_and_nan():
    body = """	cvt.rn.f32.u32 %f1, %r2;
	add.f32 %f1, %f1, -2.0;
	setp.eq.u32 %p1, %r2, 5;
	@%p1 div.rn.f32 %f1, 0f7FC00000, 0f3F800000;
	tex.1d.v4.f32.f32 {%f2, %f3, %f4, %f5}, [%rd5, {%f1}];
	st.global.f32 [%rd3], %f2;
	st.global.f32 [%rd3+64], %f3;"""
    texels = np.stack([np.arange(4, dtype=F32), 10 + np.arange(4, dtype=F32)], axis=-1)
    result = run_ptx_kernel(kernel_of(body), PtxLaunch(
        (1, 1, 1), (16, 1, 1), {0: np.zeros(32, F32), 1: Texture(texels)}))
    out = result.buffers["k_out"]
    x = np.clip(np.floor(np.arange(16) - 2.0), 0, 3).astype(int)
    x[5] = 0  # a NaN coordinate reads texel 0
    assert np.array_equal(out[:16], texels[x, 0])
    assert np.array_equal(out[16:], texels[x, 1])


def test_surface_clamp_and_zero_modes_and_misalignment():
    body = """	shl.b32 %r3, %r2, 2;
	suld.b.1d.b32.{mode} {{%r4}}, [%rd5, {{%r3}}];
	st.global.u32 [%rd3], %r4;"""
    surface = 1 + np.arange(4, dtype=np.uint32)
    for mode, expected in (("clamp", [1, 2, 3, 4, 4, 4, 4, 4]),
                           ("zero", [1, 2, 3, 4, 0, 0, 0, 0])):
        result = run_ptx_kernel(kernel_of(body.format(mode=mode)), PtxLaunch(
            (1, 1, 1), (8, 1, 1), {0: np.zeros(8, np.uint32), 1: Texture(surface, True)}))
        assert list(result.buffers["k_out"]) == expected
    misaligned = body.format(mode="clamp").replace("shl.b32 %r3, %r2, 2", "add.u32 %r3, %r2, 1")
    with pytest.raises(PtxExecutionError, match="misaligned surface access"):
        run_ptx_kernel(kernel_of(misaligned), PtxLaunch(
            (1, 1, 1), (8, 1, 1), {0: np.zeros(8, np.uint32), 1: Texture(surface, True)}))


def test_a_handle_that_names_nothing_and_an_unbound_reference():
    body = """	tex.1d.v4.f32.s32 {%f1, %f2, %f3, %f4}, [%rd5, {%r2}];
	st.global.f32 [%rd3], %f1;"""
    with pytest.raises(PtxExecutionError, match="names no bound texture or surface"):
        run_ptx_kernel(kernel_of(body), PtxLaunch((1, 1, 1), (4, 1, 1),
                                                  {0: np.zeros(4, F32), 1: 12345}))
    unbound = body.replace("%rd5", "tref")
    with pytest.raises(PtxExecutionError, match="no array bound to texture or surface 'tref'"):
        run_ptx_kernel(kernel_of(unbound), PtxLaunch((1, 1, 1), (4, 1, 1),
                                                     {0: np.zeros(4, F32)}))


def test_handles_are_not_pointers_and_get_synthesised_textures():
    kernel = sample("G").kernel("surf_scale")
    assert list(texture_params(kernel)) == kernel.params[:2]
    assert pointer_params(kernel) == []
    for launch in synthesize_launches(kernel, 0):
        src, dst = (launch.args[p] for p in kernel.params[:2])
        assert isinstance(src, Texture) and src.surface and src.array.ndim == 2
    kernel = sample("O3").kernel("tex2d_sample")
    assert list(texture_params(kernel)) == kernel.params[:1]
    assert pointer_params(kernel) == kernel.params[1:2]
    assert ptx_texture.handle_index(ptx_texture.handle(3), 4) == 3
    assert ptx_texture.handle_index(ptx_texture.handle(3) + 1, 4) is None


@pytest.mark.parametrize("variant", VARIANTS)
def test_check_executes_every_texture_kernel(variant):
    reports = api.check(api.analyze(CUDA / f"textures.{variant}.ptx", "simple"))
    assert len(reports) == 7
    for report in reports:
        assert report.status == "checked" and report.runs == 5, (report.name, report.reason)
        assert report.violations == [], [str(v) for v in report.violations]


@pytest.mark.parametrize("variant", ["O3", pytest.param("G", marks=pytest.mark.slow)])
def test_default_analysis_is_sound_on_texture_kernels(variant):
    reports = api.check(api.analyze(CUDA / f"textures.{variant}.ptx"))
    assert all(r.status == "checked" for r in reports)
    assert [str(v) for r in reports for v in r.violations] == []


def test_txq_and_suq_report_the_bound_array():
    body = """	txq.width.b32 %r3, [%rd5];
	txq.height.b32 %r4, [%rd5];
	suq.depth.b32 %r5, [%rd5];
	txq.filter_mode.b32 %r6, [tref];
	st.global.u32 [%rd1], %r3;
	st.global.u32 [%rd1+4], %r4;
	st.global.u32 [%rd1+8], %r5;
	st.global.u32 [%rd1+12], %r6;"""
    result = run_ptx_kernel(kernel_of(body), PtxLaunch(
        (1, 1, 1), (1, 1, 1), {0: np.full(4, 7, np.uint32), 1: Texture(np.zeros((3, 5), F32))},
        textures={"tref": np.zeros(4, F32)}))
    assert list(result.buffers["k_out"]) == [5, 3, 0, 0]
