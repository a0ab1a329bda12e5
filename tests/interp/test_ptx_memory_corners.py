"""Kernels real programs have that the PTX interpreter once could not run
(samples/cuda/memory_corners.cu): no parameters, shared arrays through generic and 32-bit
pointers, division by data that may be zero, buffers indexed by blockIdx."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import pytest

from gpudiv import api, ir
from gpudiv.interp.ptx import PtxExecutionError, PtxLaunch, run_ptx_growing, run_ptx_kernel
from gpudiv.lang.load import load
from gpudiv.lang.ptx.parse import parse_ptx

ROOT = Path(__file__).resolve().parents[2]
CUDA = ROOT / "samples" / "cuda"
VARIANTS = ("O3", "G")


@cache
def sample(variant: str) -> ir.Program:
    return load(CUDA / f"memory_corners.{variant}.ptx")


@pytest.mark.parametrize("variant", VARIANTS)
def test_kernels_without_parameters_write_device_arrays(variant):
    kernel = sample(variant).kernel("no_params_fill")
    assert kernel.params == []
    result = run_ptx_kernel(kernel, PtxLaunch((3, 1, 1), (64, 1, 1)))
    table = result.variables["g_table"].view(np.int32)
    i = np.arange(192)
    assert np.array_equal(table[:192], np.where(i % 2, 3 * i, -i))
    counted = run_ptx_kernel(sample(variant).kernel("no_params_count"),
                             PtxLaunch((2, 1, 1), (48, 1, 1)))
    assert list(counted.variables["g_hits"]) == [96]


@pytest.mark.parametrize("variant", VARIANTS)
def test_shared_arrays_through_generic_pointers(variant):
    kernel = sample(variant).kernel("shared_pointer_select")
    data = np.arange(64, dtype=np.int32) * 5
    result = run_ptx_kernel(kernel, PtxLaunch((1, 1, 1), (64, 1, 1),
                                              {0: data, 1: np.zeros(64, np.int32)}))
    t = np.arange(64)
    source = (t + 1) % 128
    written = data[np.minimum(source, 63)] * 2 + (t & 1)  # odd lanes read `odds`
    assert np.array_equal(result.buffers[kernel.params[1]], np.where(source < 64, written, 0))


@pytest.mark.parametrize("variant", VARIANTS)
def test_shared_array_at_an_offset_pointer(variant):
    kernel = sample(variant).kernel("shared_symbol_offset")
    data = np.arange(64, dtype=np.float32)
    result = run_ptx_kernel(kernel, PtxLaunch((1, 1, 1), (64, 1, 1),
                                              {0: data, 1: np.zeros(64, np.float32), 2: 3}))
    t = np.arange(64)
    shared = np.concatenate([data, np.zeros(192, np.float32)])  # shared memory starts at 0
    assert np.array_equal(result.buffers[kernel.params[1]], shared[3 + (t + 1) % 64 % 200])


@pytest.mark.parametrize("variant", VARIANTS)
def test_division_by_data_that_is_zero_in_some_lanes(variant):
    kernel = sample(variant).kernel("divide_by_data")
    a = np.arange(-16, 16, dtype=np.int32)
    b = np.arange(32, dtype=np.int32) % 4
    result = run_ptx_kernel(kernel, PtxLaunch((1, 1, 1), (32, 1, 1), {
        0: a, 1: b, 2: np.zeros(32, np.int32), 3: np.zeros(32, np.uint32), 4: 32}))
    q, r = (result.buffers[kernel.params[k]] for k in (2, 3))
    safe = np.where(b == 0, 1, b)
    assert np.array_equal(q, np.where(b == 0, -1, np.trunc(a / safe).astype(np.int32)))
    ua = a.view(np.uint32)
    assert np.array_equal(r, np.where(b == 0, ua, ua % safe.astype(np.uint32)))


SHARED_WRAP = """.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 k_p0)
{
	.reg .b32 %r<10>;
	.reg .b64 %rd<6>;
	.shared .align 4 .b8 buf[128];
	ld.param.u64 %rd1, [k_p0];
	mov.u32 %r2, %tid.x;
	mov.u32 %r4, buf;
	shl.b32 %r7, %r2, 2;
	add.s32 %r8, %r4, %r7;
	st.shared.u32 [%r8], %r2;
	add.s32 %r5, %r8, -4;
	ld.shared.u32 %r6, [%r5+8];
	mul.wide.u32 %rd2, %r2, 4;
	add.s64 %rd3, %rd1, %rd2;
	st.global.u32 [%rd3], %r6;
	ret;
}
"""


def test_a_32_bit_shared_address_wraps_with_its_displacement():
    """`buf - 4` in a 32-bit register, then `[r + 8]`: the address is buf + 4, not
    2^32 + 4 (the fault real nvcc output used to hit)."""
    kernel = parse_ptx(SHARED_WRAP, "t.ptx").kernels[0]
    result = run_ptx_kernel(kernel, PtxLaunch((1, 1, 1), (4, 1, 1), {0: np.zeros(4, np.int32)}))
    assert list(result.buffers["k_p0"]) == [1, 2, 3, 0]  # lane 3 reads buf[4], never written


@pytest.mark.parametrize("variant", VARIANTS)
def test_buffers_grow_for_kernels_that_index_by_block(variant):
    kernel = sample(variant).kernel("block_slices")
    small = PtxLaunch((2, 2, 1), (32, 1, 1), {0: np.zeros(1024, np.float32), 1: 2})
    with pytest.raises(PtxExecutionError) as caught:
        run_ptx_kernel(kernel, small)
    assert caught.value.outside
    result = run_ptx_growing(kernel, small, retries=3, factor=16)
    out = result.buffers[kernel.params[0]]
    assert out.size >= 65536 + 16384 + 64
    assert out[65536 + 16384 + 32 + 5] == 1.0 and out[65536 + 5] == 0.0
    with pytest.raises(PtxExecutionError, match=r"after growing every buffer 4×"):
        run_ptx_growing(kernel, small, retries=1, factor=4)


@pytest.mark.parametrize("variant", VARIANTS)
def test_check_executes_every_corner_kernel(variant):
    reports = api.check(api.analyze(CUDA / f"memory_corners.{variant}.ptx"))
    assert [r.name for r in reports] == ["no_params_fill", "no_params_count",
                                         "shared_pointer_select", "shared_symbol_offset",
                                         "divide_by_data", "block_slices"]
    for report in reports:
        assert report.status == "checked" and report.runs == 5, (report.name, report.reason)
        assert not report.reason and report.violations == []
