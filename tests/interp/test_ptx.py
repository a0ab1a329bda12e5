"""The PTX reference interpreter (gpudiv.interp.ptx): sample kernels against NumPy, the
oracle on every sample kernel, bad inputs, and the pieces (arithmetic, PDOM stack, memory).

Each reference test runs one CUDA sample kernel, both its `-O3` and its `-G` PTX, and
compares the output buffers with a NumPy computation of the same result (exactly where the
kernel's float operations can be replayed in the same order, else within a tolerance).
"""

from __future__ import annotations

import copy
import re
from fractions import Fraction
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from gpudiv import api, ir
from gpudiv.interp import packed_half
from gpudiv.interp.ptx import PtxExecutionError, PtxLaunch, run_ptx_kernel
from gpudiv.interp.ptx_calls import executable_form
from gpudiv.interp.ptx_memory import function_addresses
from gpudiv.interp.ptx_synthesis import function_params, pointer_params, synthesize_launches
from gpudiv.lang.load import load, parse_text
from gpudiv.lang.ptx.parse import parse_ptx
from gpudiv.verify.oracle import ptx_launches
from tests.fast_loop import debug_builds_slow

ROOT = Path(__file__).resolve().parents[2]
CUDA = ROOT / "samples" / "cuda"
SAMPLE_FILES = sorted([*ROOT.glob("samples/cuda/*.ptx"), *ROOT.glob("samples/ptx_legacy/*.ptx"),
                       *ROOT.glob("samples/reports/*.ptx")])
VARIANTS = ("O3", "G")
F32 = np.float32


@cache
def program(path: Path) -> ir.Program:
    return load(path)


def run(cu: str, variant: str, kernel: str, grid, block, *args, **launch):
    """Run a sample kernel; the final contents of each argument by position (scalars as
    given)."""
    k = program(CUDA / f"{cu}.{variant}.ptx").kernel(kernel)
    grid = tuple(grid) + (1,) * (3 - len(grid)) if isinstance(grid, tuple) else (grid, 1, 1)
    block = tuple(block) + (1,) * (3 - len(block)) if isinstance(block, tuple) else (block, 1, 1)
    result = run_ptx_kernel(k, PtxLaunch(grid, block, dict(enumerate(args)), **launch))
    return [result.buffers.get(name, arg) for name, arg in zip(k.params, args, strict=True)]


def rng(seed: int = 1) -> np.random.Generator:
    return np.random.default_rng(seed)


def cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def f32_sum(values) -> np.float32:
    """Left-to-right float32 sum."""
    total = F32(0)
    for v in values:
        total = F32(total + F32(v))
    return total


def fused_or_not(result, a, b, c):
    """Each element equals a·b + c rounded once (fma) or twice (mul then add)."""
    exact = (np.float64(a) * np.float64(b) + np.float64(c)).astype(F32)
    twice = (F32(a) * F32(b) + F32(c)).astype(F32)
    return bool(np.all((result == exact) | (result == twice)))


# ---------------------------------------------------------------------------------------
# Reference comparisons (≥ 12 kernels, each in both PTX variants)
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_vec_add_and_saxpy(variant):
    n = 1000
    r = rng()
    a, b = r.standard_normal(n).astype(F32), r.standard_normal(n).astype(F32)
    _, _, c, _ = run("vector_ops", variant, "vec_add", 4, 256, a, b, np.zeros(n + 24, F32), n)
    assert np.array_equal(c[:n], a + b) and not c[n:].any()
    y0 = r.standard_normal(n).astype(F32)
    _, _, _, y = run("vector_ops", variant, "saxpy", 4, 256, n, 1.5, a, y0.copy())
    assert fused_or_not(y, F32(1.5), a, y0)


@pytest.mark.parametrize("variant", VARIANTS)
def test_vec_clamp_masked_and_scale_if(variant):
    n = 300
    r = rng(2)
    v0 = r.uniform(-3, 3, n).astype(F32)
    mask = r.integers(0, 2, n).astype(np.int32)
    v, *_ = run("vector_ops", variant, "vec_clamp_masked", 3, 128, v0.copy(), mask, -1.0, 1.0,
                n)
    assert np.array_equal(v, np.where(mask != 0, np.clip(v0, -1, 1), v0))
    v, *_ = run("vector_ops", variant, "vec_scale_if", 3, 128, v0.copy(), 2.5, 1, n)
    assert np.array_equal(v, v0 * F32(2.5))
    v, *_ = run("vector_ops", variant, "vec_scale_if", 3, 128, v0.copy(), 2.5, 0, n)
    assert np.array_equal(v, v0)


@pytest.mark.parametrize("variant", VARIANTS)
def test_reduce_sum_tree_shared_memory_and_bar_sync(variant):
    n, block = 1000, 256
    x = rng(3).standard_normal(n).astype(F32)
    blocks = cdiv(n, block)
    _, sums, _ = run("reductions", variant, "reduce_sum_tree", blocks, block, x,
                     np.zeros(blocks, F32), n)
    padded = np.zeros(blocks * block, F32)
    padded[:n] = x
    expected = []
    for b in range(blocks):
        data = padded[b * block:(b + 1) * block].copy()
        s = block // 2
        while s > 0:
            data[:s] = data[:s] + data[s:2 * s]
            s //= 2
        expected.append(data[0])
    assert np.array_equal(sums, np.array(expected, F32))


@pytest.mark.parametrize("variant", VARIANTS)
def test_reduce_max_interleaved_and_dot_product(variant):
    n, block = 700, 256
    r = rng(4)
    vals = r.integers(-10**6, 10**6, n).astype(np.int32)
    blocks = cdiv(n, block)
    _, out, _ = run("reductions", variant, "reduce_max_interleaved", blocks, block, vals,
                    np.zeros(blocks, np.int32), n)
    assert list(out) == [vals[b * block:(b + 1) * block].max() for b in range(blocks)]
    a, b = r.standard_normal(n).astype(F32), r.standard_normal(n).astype(F32)
    _, _, result, _ = run("reductions", variant, "dot_product", 2, 256, a, b,
                          np.zeros(1, F32), n)
    assert np.isclose(result[0], np.dot(a.astype(np.float64), b), rtol=1e-4)


@pytest.mark.parametrize("variant", VARIANTS)
def test_block_votes_bar_red_popc_and_or(variant):
    """__syncthreads_count/_and/_or (bar.red): one value per block, all its warps voting."""
    n, block = 700, 256
    values = rng(14).integers(-3, 10, n).astype(np.int32)
    values[:block] = np.abs(values[:block]) + 1  # block 0: all positive, none negative
    blocks = cdiv(n, block)
    _, out, _ = run("reductions", variant, "block_vote_counts", blocks, block, values,
                    np.zeros(3 * blocks, np.int32), n)
    padded = np.zeros(blocks * block, np.int32)
    padded[:n] = values
    expected = []
    for b in range(blocks):
        v = padded[b * block:(b + 1) * block]
        positives, any_negative = int((v > 0).sum()), int((v < 0).any())
        expected += [-positives if any_negative else positives, int((v != 0).all()),
                     any_negative]
    assert list(out) == expected
    assert expected[:3] == [block, 1, 0] and expected[5] == 1  # both outcomes are covered


@pytest.mark.parametrize("variant", VARIANTS)
def test_half2_axpy_and_half_count_above(variant):
    """Packed half precision (fma/mul/add/sub.f16x2, cvt.rn.f16x2.f32) and scalar f16."""
    n = 300
    r = rng(15)
    x = r.uniform(-4, 4, (n, 2)).astype(np.float16)
    y0 = r.uniform(-4, 4, (n, 2)).astype(np.float16)
    a = 1.5
    _, y, _, _ = run("half_precision", variant, "half2_axpy", 3, 128, x.view(np.uint32).ravel(),
                     y0.view(np.uint32).ravel().copy(), a, n)
    wide = x.astype(np.float64)
    v = (np.float64(np.float16(a)) * wide + y0).astype(np.float16)  # one rounding (fma)
    v = (v * np.array([0.5, 2.0], np.float16)).astype(np.float16)
    v = (v - (x + x)).astype(np.float16)
    swap = v[:, 0].astype(np.float32) > v[:, 1].astype(np.float32)
    v[swap] = v[swap][:, ::-1]
    assert np.array_equal(y.view(np.float16).reshape(n, 2), v)
    values = r.uniform(-2, 2, 1000).astype(np.float16)
    for scale in (0.0, 1.5):
        *_, count = run("half_precision", variant, "half_count_above", 2, 64, values, 1000,
                        0.25, scale, np.zeros(1, np.uint32))
        scaled = (values * np.float16(scale)).astype(np.float16) if scale > 0 else values
        assert count[0] == int((scaled > np.float16(0.25)).sum())


@pytest.mark.parametrize("variant", VARIANTS)
def test_bf162_relu_affine(variant):
    """fma.rn.relu.bf16x2 and mul.bf16x2 on struct-by-value pairs (.b8 array parameters)."""
    n = 100
    x = packed_half.f32_to_bf16(rng(16).uniform(-2, 2, 2 * n))
    w, b = packed_half.f32_to_bf16([1.5, -0.75]), packed_half.f32_to_bf16([0.25, 0.5])
    _, _, _, z, _, over, _ = run("half_precision", variant, "bf162_relu_affine", 1, 128,
                                 x.view(np.uint32), w.tobytes(), b.tobytes(),
                                 np.zeros(n, np.uint32), 0.5, np.zeros(1, np.int32), n)
    as_f32 = packed_half.bf16_to_f32
    # x·w + b is exact in float64 for these inputs (few significant bits), so one rounding
    # of it to bfloat16 (through float32, also exact here) is the correct fma result
    exact = as_f32(x).reshape(n, 2).astype(np.float64) * as_f32(w) + as_f32(b)
    v = as_f32(packed_half.f32_to_bf16(np.maximum(exact, 0).astype(np.float32)))
    v = as_f32(packed_half.f32_to_bf16(v * np.array([1.0, 0.5], np.float32)))
    assert np.array_equal(as_f32(z.view(np.uint16)).reshape(n, 2), v)
    assert over[0] == int((v.max(axis=1) > 0.5).sum()) > 0


def test_sibling_scopes_declaring_one_name_hold_two_variables():
    """nvcc -G declares `retval0` in every call sequence's scope, with the callee's return
    type; a narrower first declaration must not truncate a later, wider one."""
    body = """	{ .reg .b16 %t; mov.b16 %t, 7; cvt.u32.u16 %r3, %t; }
	{ .reg .b32 %t; mov.b32 %t, 100000; mov.b32 %r4, %t; }
	add.u32 %r5, %r3, %r4;
	mul.wide.u32 %rd2, %r2, 4;
	add.s64 %rd3, %rd1, %rd2;
	st.global.u32 [%rd3], %r5;"""
    kernel = kernel_of(body)
    names = {i.dest for i in kernel.instructions() if i.dest and i.dest.startswith("%t")}
    assert len(names) == 2
    result = run_ptx_kernel(kernel, PtxLaunch(args={0: np.zeros(32, np.int32), 1: 0}))
    assert list(result.buffers[kernel.params[0]]) == [100007] * 32


def test_bar_red_waits_for_every_warp_of_the_block():
    """A warp that leaves without the bar.red is an error, not a count of fewer threads."""
    body = """	setp.gt.u32 %p1, %r2, 31;
	@%p1 bra $DONE;
	bar.red.popc.u32 %r3, 0, %p1;
$DONE:"""
    error = error_of(body, block=(64, 1, 1))
    assert "barrier not reached by all warps" in str(error)


@pytest.mark.parametrize("spelling", ["bar.red", "barrier.red", "barrier.cta.red"])
def test_bar_red_negated_vote_and_predicate_result(spelling):
    body = f"""	setp.ge.u32 %p2, %r2, 10;
	{spelling}.popc.u32 %r3, 0, !%p2;
	{spelling}.and.pred %p3, 0, %p2;
	selp.u32 %r4, 100, 0, %p3;
	add.u32 %r5, %r3, %r4;
	mul.wide.u32 %rd2, %r2, 4;
	add.s64 %rd3, %rd1, %rd2;
	st.global.u32 [%rd3], %r5;"""
    kernel = kernel_of(body)
    out = np.zeros(64, np.int32)
    result = run_ptx_kernel(kernel, PtxLaunch(block=(64, 1, 1), args={0: out, 1: 0}))
    assert list(result.buffers[kernel.params[0]]) == [10] * 64  # 10 votes, not all of them


@pytest.mark.parametrize("variant", VARIANTS)
def test_warp_shuffles_ballot_and_aggregation(variant):
    n = 200
    r = rng(5)
    x = r.integers(-9, 10, n).astype(F32)  # integer-valued: float sums are exact
    _, out, _ = run("warp_primitives", variant, "warp_sum_shfl_down", 7, 32, x,
                    np.zeros(1, F32), n)
    assert out[0] == x.sum()
    ints = r.integers(-1000, 1000, n).astype(np.int32)
    _, out, _ = run("warp_primitives", variant, "warp_max_xor", 4, 64, ints,
                    np.zeros(n, np.int32), n)
    padded = np.full(256, -2147483647, np.int32)
    padded[:n] = ints
    assert np.array_equal(out, np.repeat(padded.reshape(-1, 32).max(axis=1), 32)[:n])
    _, counts, _ = run("warp_primitives", variant, "warp_ballot_count", 4, 64, x,
                       np.zeros(8, np.int32), n)
    positive = np.zeros(256, bool)
    positive[:n] = x > 0
    assert np.array_equal(counts[:cdiv(n, 32)], positive.reshape(-1, 32).sum(axis=1)[:7])
    _, out, count, _ = run("warp_primitives", variant, "warp_aggregated_append", 4, 64, ints,
                           np.zeros(n, np.int32), np.zeros(1, np.int32), n)
    assert count[0] == (ints > 0).sum()
    assert sorted(out[:count[0]]) == sorted(ints[ints > 0])
    _, sums, _ = run("warp_primitives", variant, "block_sum_two_level", 2, 128, x,
                     np.zeros(2, F32), n)
    assert list(sums) == [x[:128].sum(), x[128:].sum()]


@pytest.mark.parametrize("variant", ["O3", pytest.param("G", marks=pytest.mark.slow)])
def test_matmul_tiled_naive_and_matvec(variant):
    n = 40
    r = rng(6)
    a = r.standard_normal((n, n)).astype(F32)
    b = r.standard_normal((n, n)).astype(F32)
    expected = a.astype(np.float64) @ b
    _, _, c, _ = run("matmul_tiled", variant, "matmul_tiled", (3, 3), (16, 16), a, b,
                     np.zeros((n, n), F32), n)
    assert np.allclose(c, expected, rtol=1e-4, atol=1e-4)
    m, k, cols = 9, 7, 11
    a2, b2 = a[:m, :k].copy(), b[:k, :cols].copy()
    _, _, c, *_ = run("matmul_tiled", variant, "matmul_naive", (2, 2), (8, 8), a2, b2,
                      np.zeros((m, cols), F32), m, cols, k)
    assert np.allclose(c, a2.astype(np.float64) @ b2, rtol=1e-4, atol=1e-5)
    x = r.standard_normal(k).astype(F32)
    _, _, y, *_ = run("matmul_tiled", variant, "matvec_rows", 1, 32, a2, x, np.zeros(m, F32),
                      m, k)
    assert np.allclose(y, a2.astype(np.float64) @ x, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("variant", VARIANTS)
def test_transposes_3d_volume_and_row_sums(variant):
    width, height = 45, 37
    img = rng(7).integers(-50, 50, (height, width)).astype(F32)
    _, out, *_ = run("indexing_2d_3d", variant, "transpose_tiled", (2, 2), (32, 8), img,
                     np.zeros((width, height), F32), width, height)
    assert np.array_equal(out, img.T)
    _, out, *_ = run("indexing_2d_3d", variant, "transpose_naive", (6, 5), (8, 8), img,
                     np.zeros((width, height), F32), width, height)
    assert np.array_equal(out, img.T)
    vol0 = rng(8).standard_normal((5, 6, 7)).astype(F32)
    vol, *_ = run("indexing_2d_3d", variant, "volume_scale_3d", (2, 2, 3), (4, 4, 2),
                  vol0.copy(), 1.5, 7, 6, 5)
    assert np.array_equal(vol, vol0 * F32(1.5))
    _, sums, *_ = run("indexing_2d_3d", variant, "image_row_sums", (1, 10), (4, 4), img,
                      np.zeros(height, F32), width, height)
    assert np.array_equal(sums, img.sum(axis=1))


@pytest.mark.parametrize("variant", VARIANTS)
def test_stencils(variant):
    n = 600
    x = rng(9).standard_normal(n).astype(F32)
    _, out, _ = run("stencils", variant, "stencil_1d", cdiv(n, 256), 256, x,
                    np.zeros(n, F32), n)
    padded = np.concatenate([np.zeros(3, F32), x, np.zeros(3, F32)])
    expected = [f32_sum(padded[i:i + 7]) for i in range(n)]
    assert np.array_equal(out, np.array(expected, F32))
    nx, ny = 19, 13
    u = rng(10).standard_normal((ny, nx)).astype(F32)
    _, unew, *_ = run("stencils", variant, "jacobi_2d", (3, 2), (8, 8), u,
                      np.zeros((ny, nx), F32), nx, ny)
    expected = u.copy()
    inner = F32(0.25) * (((u[1:-1, :-2] + u[1:-1, 2:]) + u[:-2, 1:-1]) + u[2:, 1:-1])
    expected[1:-1, 1:-1] = inner
    assert np.array_equal(unew, expected)
    data0 = rng(11).standard_normal(512).astype(F32)
    data, _ = run("stencils", variant, "smooth_iterated", 2, 256, data0.copy(), 3)
    a = data0.reshape(2, 256).copy()
    for _ in range(3):
        b = a.copy()
        b[:, 1:-1] = ((a[:, :-2] + a[:, 1:-1]) + a[:, 2:]) * F32(1.0 / 3.0)
        a = b
    assert np.array_equal(data, a.reshape(-1))


@pytest.mark.parametrize("variant", VARIANTS)
def test_histograms_and_atomics(variant):
    r = rng(12)
    n = 1000
    data = r.integers(0, 256, n).astype(np.uint8)
    _, _, bins = run("atomics_histogram", variant, "histogram_shared", 2, 128, data, n,
                     np.zeros(64, np.uint32))
    assert np.array_equal(bins, np.bincount(data % 64, minlength=64))
    vals = r.integers(-5, 40, n).astype(np.int32)
    _, _, _, bins = run("atomics_histogram", variant, "histogram_global", 4, 256, vals, n, 32,
                        np.zeros(32, np.int32))
    assert np.array_equal(bins, np.bincount(vals[(vals >= 0) & (vals < 32)], minlength=32))
    _, _, lo, hi = run("atomics_histogram", variant, "minmax_atomic", 4, 256, vals, n,
                       np.array([2**31 - 1], np.int32), np.array([-2**31], np.int32))
    assert (lo[0], hi[0]) == (vals.min(), vals.max())
    items = np.arange(100, 150, dtype=np.int32)
    _, _, ring, head, _, last = run("atomics_histogram", variant, "ring_push", 1, 64, items,
                                    50, np.zeros(16, np.int32), np.zeros(1, np.uint32), 16,
                                    np.zeros(1, np.int32))
    assert head[0] == 50 % 16 and last[0] == 149
    assert list(ring) == [items[k + 48] if k < 2 else items[k + 32] for k in range(16)]
    floats = r.standard_normal(300).astype(F32)
    _, _, result = run("atomics_histogram", variant, "max_float_cas", 3, 128, floats, 300,
                       np.array([-100.0], F32))
    assert result[0] == floats.max()


@pytest.mark.parametrize("variant", VARIANTS)
def test_lock_protected_updates(variant):
    lock, counter, last = run("locks_spin", variant, "lock_block_counter", 5, 64,
                              np.zeros(1, np.int32), np.zeros(1, np.int32),
                              np.zeros(1, np.int32))
    assert (lock[0], counter[0], last[0]) == (0, 5, 4)
    r = rng(13)
    n, nb = 200, 5
    keys = r.integers(0, 100, n).astype(np.int32)
    vals = r.integers(-5, 5, n).astype(F32)
    *_, locks, sums, counts, _ = run("locks_spin", variant, "bucket_lock_accumulate", 2, 128,
                                     keys, vals, n, np.zeros(nb, np.int32),
                                     np.zeros(nb, F32), np.zeros(nb, np.int32), nb)
    assert not locks.any()
    assert np.array_equal(counts, np.bincount(keys % nb, minlength=nb))
    assert np.array_equal(sums, np.bincount(keys % nb, weights=vals, minlength=nb))
    partials = r.integers(0, 9, 6).astype(F32)
    _, copied, ticket, total = run("locks_spin", variant, "last_block_sum", 6, 32, partials,
                                   np.zeros(6, F32), np.zeros(1, np.uint32), np.zeros(1, F32))
    assert np.array_equal(copied, partials) and ticket[0] == 6 and total[0] == partials.sum()
    flag, payload, out = run("locks_spin", variant, "flag_handoff", 3, 32,
                             np.zeros(1, np.int32), np.zeros(1, np.int32),
                             np.zeros(3, np.int32))
    assert flag[0] == 1 and payload[0] == 42 and list(out) == [0, 42, 42]


@pytest.mark.parametrize("variant", VARIANTS)
def test_scans(variant):
    r = rng(14)
    n, block = 300, 128
    ints = r.integers(-100, 100, n).astype(np.int32)
    _, out, _ = run("scan", variant, "scan_hillis_steele", cdiv(n, block), block, ints,
                    np.zeros(n, np.int32), n)
    expected = np.concatenate([np.cumsum(ints[k:k + block]) for k in range(0, n, block)])
    assert np.array_equal(out, expected)
    m = 128  # 2 * blockDim elements per block
    floats = r.integers(0, 10, 250).astype(F32)
    _, out, totals, _ = run("scan", variant, "scan_blelloch", 2, 64, floats,
                            np.zeros(250, F32), np.zeros(2, F32), 250)
    chunks = [floats[k:k + m] for k in range(0, 250, m)]
    assert np.array_equal(out, np.concatenate([np.cumsum(c) - c for c in chunks]))
    assert list(totals) == [c.sum() for c in chunks]
    data0 = r.integers(0, 10, n).astype(F32)
    offsets = np.array([0, 100, 200], F32)
    data, *_ = run("scan", variant, "scan_add_offsets", 3, block, data0.copy(), offsets, n)
    assert np.array_equal(data, data0 + np.repeat(offsets, block)[:n])
    _, out, _ = run("scan", variant, "scan_warp_shfl", 5, 64, ints, np.zeros(n, np.int32), n)
    padded = np.zeros(320, np.int32)
    padded[:n] = ints
    assert np.array_equal(out, np.cumsum(padded.reshape(-1, 32), axis=1).reshape(-1)[:n])


@pytest.mark.parametrize("variant", VARIANTS)
def test_control_flow(variant):
    r = rng(15)
    n = 150
    ops = r.integers(0, 6, n).astype(np.int32)
    a = r.integers(-9, 9, n).astype(F32)
    b = r.integers(-3, 3, n).astype(F32)
    *_, c, _ = run("control_flow", variant, "switch_per_element", 3, 64, ops, a, b,
                   np.zeros(n, F32), n)
    with np.errstate(all="ignore"):
        quotient = np.where(b != 0, a / np.where(b != 0, b, 1), 0)
    expected = np.select([ops == 0, ops == 1, ops == 2, ops == 3],
                         [a + b, a - b, a * b, quotient], 0).astype(F32)
    assert np.array_equal(c, expected)
    for mode, want in enumerate((a, -a, a * a, np.abs(a), np.zeros(n, F32))):
        _, _, c, _ = run("control_flow", variant, "switch_uniform_mode", 3, 64, mode, a,
                         np.ones(n, F32), n)
        assert np.array_equal(c, want)
    rows, cols = 20, 9
    m = r.uniform(0, 1, (rows, cols)).astype(F32)
    m[r.integers(0, rows, 12), r.integers(0, cols, 12)] = -1
    *_, first = run("control_flow", variant, "find_first_negative", 1, 32, m, rows, cols,
                    np.zeros(rows, np.int32))
    assert list(first) == [int(np.argmax(row < 0)) if (row < 0).any() else -1 for row in m]
    inp = r.integers(0, 5, (2, 10)).astype(F32)
    _, out, _ = run("control_flow", variant, "triangular_prefix", 2, 16, inp,
                    np.zeros(32, F32), 10)
    expected = [inp[blk, :min(t + 1, 10)].sum() for blk in range(2) for t in range(16)]
    assert np.array_equal(out, np.array(expected, F32))
    start = r.integers(1, 60, n).astype(np.uint32)
    _, steps, *_ = run("control_flow", variant, "collatz_steps", 3, 64, start,
                       np.zeros(n, np.uint32), n, 200)
    assert list(steps) == [collatz(int(s), 200) for s in start]
    data0 = r.integers(-8, 8, 200).astype(F32)
    data, *_ = run("control_flow", variant, "block_uniform_dispatch", (4, 2), 64,
                   data0.copy(), 200, 2)
    expected = data0.copy()
    for block_x in range(4):  # blocks (x, 0) run before (x, 1), which reads their output
        part = slice(block_x * 64, min(block_x * 64 + 64, 200))
        v = data0[part]
        if block_x & 1:
            for _ in range(2 + 3):  # reps + blockIdx.y rounds, for y = 0 then y = 1
                v = v * F32(0.5) + F32(1.0)
        expected[part] = v  # even blocks negate twice
    assert np.array_equal(data, expected)


def collatz(x: int, cap: int) -> int:
    k = 0
    while x > 1 and k < cap:
        x = 3 * x + 1 if x & 1 else x >> 1
        k += 1
    return k


@pytest.mark.parametrize("variant", VARIANTS)
def test_device_functions_calls(variant):
    n = 100
    r = rng(16)
    x = r.standard_normal(n).astype(F32)
    _, out, *_ = run("device_functions", variant, "shift_clamped", 2, 64, x,
                     np.zeros(n, F32), n, 7)
    assert np.array_equal(out, x[np.clip(np.arange(n) + 7, 0, n - 1)])
    v, *_ = run("device_functions", variant, "pow_uniform_exponent", 2, 64, x.copy(), 5, n)
    assert np.array_equal(v, ipow(x, np.full(n, 5)))
    e = r.integers(-1, 9, n).astype(np.int32)
    v, *_ = run("device_functions", variant, "pow_per_element", 2, 64, x.copy(), e, n)
    assert np.array_equal(v, ipow(x, e))
    ints = r.integers(-50, 50, n).astype(np.int32)
    _, out, _ = run("device_functions", variant, "lane_parity", 2, 64, ints,
                    np.zeros(n, np.int32), n)
    assert np.array_equal(out, np.where(np.arange(n) % 2 == 0, ints, -ints))


def ipow(base: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    """The sample's repeated squaring in float32."""
    out = []
    for b, e in zip(base, exponent, strict=True):
        r, b, e = F32(1.0), F32(b), int(e)
        while e > 0:
            if e & 1:
                r = F32(r * b)
            b = F32(b * b)
            e >>= 1
        out.append(r)
    return np.array(out, F32)


@pytest.mark.parametrize("variant", VARIANTS)
def test_local_arrays(variant):
    r = rng(17)
    per_thread = 5
    data = r.integers(0, 1000, 64 * per_thread).astype(np.uint32)
    _, _, bins = run("local_arrays", variant, "local_histogram", 1, 64, data, per_thread,
                     np.zeros(16, np.uint32))
    assert np.array_equal(bins, np.bincount(data & 15, minlength=16))
    n = 50
    x = r.standard_normal(n).astype(F32)
    _, out, _ = run("local_arrays", variant, "median9", 1, 64, x, np.zeros(n, F32), n)
    expected = np.zeros(n, F32)
    expected[4:n - 4] = [np.median(x[i - 4:i + 5]) for i in range(4, n - 4)]
    assert np.array_equal(out, expected)
    idx = r.integers(0, 1000, n).astype(np.int32)
    seed = r.integers(-1000, 1000, n).astype(np.int32)
    *_, out, _ = run("local_arrays", variant, "local_lut", 1, 64, idx, seed,
                     np.zeros(n, np.int32), n)
    expected = []
    for s, i in zip(seed.tolist(), idx.tolist(), strict=True):
        lut = []
        for _ in range(32):
            s = ((s * 1103515245 + 12345 + 2**31) % 2**32) - 2**31
            lut.append(s)
        expected.append(lut[i & 31])
    assert list(out) == expected


def test_sorting_bitonic_and_odd_even():
    keys0 = rng(18).integers(-10**5, 10**5, 1024).astype(np.int32)
    (keys,) = run("sorting", "O3", "bitonic_sort_block", 1, 1024, keys0.copy())
    assert np.array_equal(keys, np.sort(keys0))
    for variant in VARIANTS:
        vals0 = rng(19).standard_normal(128).astype(F32)
        (vals,) = run("sorting", variant, "odd_even_sort_block", 2, 64, vals0.copy())
        assert np.array_equal(vals, np.concatenate([np.sort(vals0[:64]), np.sort(vals0[64:])]))


@pytest.mark.parametrize("variant", VARIANTS)
def test_double_precision_and_grid_stride(variant):
    n = 300
    r = rng(20)
    x, y0 = r.standard_normal(n), r.standard_normal(n)
    *_, y = run("double_precision", variant, "daxpy_gs", 2, 64, n, 0.75, x, y0.copy())
    fused = np.array([float(Fraction(0.75) * Fraction(a) + Fraction(b))
                      for a, b in zip(x.tolist(), y0.tolist(), strict=True)])
    assert np.all((y == 0.75 * x + y0) | (y == fused))
    v = r.uniform(0, 100, 64)
    _, out, *_ = run("double_precision", variant, "newton_sqrt", 1, 64, v, np.zeros(64), 64,
                     60)
    assert np.allclose(out, np.sqrt(np.maximum(v, 0)), rtol=1e-12)
    out, *_ = run("grid_stride", variant, "gs_fill", 2, 64, np.zeros(500, F32), 2.5, 500)
    assert np.all(out == 2.5)
    xs, ys0 = r.standard_normal(500).astype(F32), r.standard_normal(500).astype(F32)
    *_, ys = run("grid_stride", variant, "gs_saxpy", 2, 64, 500, 1.25, xs, ys0.copy())
    assert fused_or_not(ys, F32(1.25), xs, ys0)
    data = r.integers(0, 5, 500).astype(np.int32)
    *_, count = run("grid_stride", variant, "gs_count_equal", 2, 64, data, 500, 3,
                    np.zeros(1, np.uint32))
    assert count[0] == (data == 3).sum()


def test_legacy_dialects_32_bit_addresses():
    path = ROOT / "samples" / "ptx_legacy" / "nvopencc_ptx14_sm13.ptx"
    kernel = program(path).kernel("vec_add_guarded")
    a, b = np.arange(50, dtype=F32), np.ones(50, F32)
    result = run_ptx_kernel(kernel, PtxLaunch((2, 1, 1), (32, 1, 1), {0: a, 1: b,
                                                                       2: np.zeros(50, F32),
                                                                       3: 50}))
    assert np.array_equal(result.buffers[kernel.params[2]], a + b)


# ---------------------------------------------------------------------------------------
# The oracle on every sample kernel; the executable ones are pinned
# ---------------------------------------------------------------------------------------

# Kernels of samples/ that `gpudiv check` cannot execute, with the reason: the spin lock
# written to deadlock under ipdom reconvergence (it runs under --reconvergence mimd). A
# kernel that stops being executable fails test_oracle_on_samples.
NOT_EXECUTABLE: dict[tuple[str, str], str] = {
    ("spin_deadlock.O3.ptx", "naive_lock_sum"): "SIMT deadlock in kernel naive_lock_sum",
    ("spin_deadlock.G.ptx", "naive_lock_sum"): "SIMT deadlock in kernel naive_lock_sum",
} | {
    # SIMT-induced deadlocks (samples/cuda/deadlock_locks.cu, `gpudiv deadlock`): lanes of
    # one warp wait at a reconvergence point for lanes that spin on a lock or flag only
    # the waiting lanes would release.
    (f"deadlock_locks.{build}.ptx", kernel): f"SIMT deadlock in kernel {kernel}"
    for build in VARIANTS
    for kernel in ("spin_lock_fig1", "ready_flags", "two_locks")
}
# T9 (samples/cuda/deadlock_cases.cu): a barrier on each side of a divergent branch.
NOT_EXECUTABLE |= {(f"deadlock_cases.{build}.ptx", "divergent_barrier"): "barrier in divergent"
                   for build in VARIANTS}


# The fast loop leaves out the kernels written to hang too, and the samples whose claims
# tests of their own check there (tests/verify/test_call_runs.py, tests/analyses/test_exits.py).
FULL_SUITE_ONLY = ("deadlock_", "spin_", "recursion.", "exits_in_loops.", "sorting.")


@pytest.mark.parametrize("path", debug_builds_slow(
    SAMPLE_FILES, lambda p: p.name.startswith(FULL_SUITE_ONLY)), ids=lambda p: p.name)
def test_oracle_on_samples(path):
    analysed = api.analyze(path)
    reports = api.check(analysed)
    assert reports
    for report in reports:
        key = (path.name, report.name)
        if key in NOT_EXECUTABLE:
            assert report.status == "not-executed" and NOT_EXECUTABLE[key] in report.reason
            continue
        assert report.status == "checked", (key, report.reason)
        assert report.runs >= 1 and report.uses_checked > 0
        assert report.violations == [], [str(v) for v in report.violations[:5]]
        if report.name not in NEVER_RELEASED:  # deadlock detection fires on locks only
            assert "SIMT deadlock" not in report.reason, (key, report.reason)
            assert "infinite loop" not in report.reason, (key, report.reason)


# Spin locks whose lock word some synthesised buffers fill with a non-zero value: those
# runs loop forever (on any GPU) and are stopped as infinite loops.
NEVER_RELEASED = {"lock_block_counter", "bucket_lock_accumulate", "safe_lock_sum"}


def _outputs(kernel: ir.Kernel, launch: PtxLaunch) -> dict[int, np.ndarray] | None:
    """The final contents of every buffer argument, or None when the run stops."""
    try:
        result = run_ptx_kernel(kernel, copy.deepcopy(launch))
    except PtxExecutionError:
        return None
    return {i: np.asarray(result.buffers[name])
            for i, name in enumerate(kernel.params) if name in result.buffers}


def _same_outputs(mine: dict[int, np.ndarray], theirs: dict[int, np.ndarray]) -> bool:
    """Integer buffers bit for bit; float buffers up to the last bits, since -O3 contracts
    a·b + c into one fma where -G rounds the product and the sum separately."""
    if mine.keys() != theirs.keys():
        return False
    for key, a in mine.items():
        b = theirs[key]
        if np.issubdtype(a.dtype, np.floating):
            if not np.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True):
                return False
        elif a.tobytes() != b.tobytes():
            return False
    return True


@pytest.mark.slow  # both builds of every source: the full suite only
@pytest.mark.parametrize("source", sorted(CUDA.glob("*.cu")),
                         ids=lambda p: p.stem)
def test_o3_and_g_builds_of_a_source_give_the_same_outputs(source):
    """Two compilations of one CUDA source (optimised, and -G with its call sequences,
    stack frames and local copies) run on the same inputs must leave the same values in
    every buffer, or both stop (a spin lock out of steps, a launch shape the kernel does
    not support)."""
    optimised_path, debug_path = (CUDA / f"{source.stem}.{b}.ptx" for b in ("O3", "G"))
    debug = program(debug_path)
    for kernel in program(optimised_path).kernels:
        compared = 0
        # recursive kernels run with their calls as calls (`api.kernel_to_run`)
        mine_run = api.kernel_to_run(optimised_path, kernel)
        theirs_run = api.kernel_to_run(debug_path, debug.kernel(kernel.name))
        # a SIMT deadlock under ipdom finishes under mimd, divergent barriers under aware
        for policy in ("ipdom", "mimd", "aware"):
            for launch in ptx_launches(kernel, 7):
                launch.reconvergence = policy
                mine = _outputs(mine_run, launch)
                theirs = _outputs(theirs_run, launch)
                assert (mine is None) == (theirs is None), (kernel.name, launch.grid,
                                                            launch.block, policy)
                if mine is not None:
                    assert _same_outputs(mine, theirs), (kernel.name, launch.grid, launch.block)
                    compared += 1
            if compared:
                break
        assert compared, kernel.name


def test_the_executable_sample_kernels_are_all_there():
    """Every `__global__` of a CUDA sample is a kernel of both its PTX builds, and the 8
    legacy-dialect kernels are there: all of them are executed by test_oracle_on_samples
    but for those in NOT_EXECUTABLE (a kernel lost by the front end would shrink a count)."""
    for source in sorted(CUDA.glob("*.cu")):
        written = len(re.findall(r"^\s*(?:extern \"C\"\s+)?__global__", source.read_text(), re.M))
        for build in ("O3", "G"):
            ptx = source.with_suffix(f".{build}.ptx")
            assert len(program(ptx).kernels) == written, ptx.name
    legacy = sum(len(program(p).kernels) for p in ROOT.glob("samples/ptx_legacy/*.ptx"))
    assert legacy == 8


def test_every_pointer_parameter_of_the_samples_is_found():
    kernel = program(CUDA / "indexing_2d_3d.G.ptx").kernel("volume_scale_3d")
    assert pointer_params(kernel) == [kernel.params[0]]
    kernel = program(CUDA / "atomics_histogram.G.ptx").kernel("minmax_atomic")
    assert pointer_params(kernel) == [kernel.params[0], kernel.params[2], kernel.params[3]]
    kernel = program(CUDA / "grid_stride.G.ptx").kernel("gs_saxpy")  # `long long n` is not
    assert pointer_params(kernel) == kernel.params[2:]


TWO_FUNCTIONS = """
.version 7.0
.target sm_80
.address_size 64
.func (.param .b32 r) twice(.param .b32 x)
{
    .reg .b32 %v;
    ld.param.b32 %v, [x];
    add.s32 %v, %v, %v;
    st.param.b32 [r], %v;
    ret;
}
.func (.param .b32 r) plus_one(.param .b32 x)
{
    .reg .b32 %v;
    ld.param.b32 %v, [x];
    add.s32 %v, %v, 1;
    st.param.b32 [r], %v;
    ret;
}
.func (.param .b32 r) sum(.param .b32 x, .param .b32 y)
{
    .reg .b32 %v<3>;
    ld.param.b32 %v1, [x];
    ld.param.b32 %v2, [y];
    add.s32 %v1, %v1, %v2;
    st.param.b32 [r], %v1;
    ret;
}
.visible .entry apply(.param .u64 f, .param .u64 out)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [f];
    ld.param.u64 %rd2, [out];
    cvta.to.global.u64 %rd2, %rd2;
    mov.u32 %r1, %tid.x;
    {
    .param .b32 a;
    .param .b32 b;
    st.param.b32 [a], %r1;
    proto: .callprototype (.param .b32 _) _ (.param .b32 _);
    call (b), %rd1, (a), proto;
    ld.param.b32 %r2, [b];
    }
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r2;
    ret;
}
"""


def test_a_function_pointer_parameter_gets_each_function_of_its_prototype_in_turn():
    kernel = parse_text(TWO_FUNCTIONS, "two.ptx", "ptx").kernel("apply")
    kept = executable_form(kernel, "two.ptx")
    addresses = function_addresses(kept)
    assert function_params(kernel) == {"f": [addresses["twice"], addresses["plus_one"]]}
    passed = [launch.args["f"] for launch in synthesize_launches(kernel, 0)]
    assert passed == [addresses[f] for f in ("twice", "plus_one") * 3][:len(passed)]
    assert "out" in pointer_params(kernel)


def test_the_legacy_function_pointer_kernel_runs_under_check():
    """nvopencc's `apply_fp(int (*f)(int), int *out, int k)`: the launches pass the one
    function of the file whose prototype fits (`square`, not two-argument `clamp_to`)."""
    path = ROOT / "samples" / "ptx_legacy" / "nvopencc40_ptx22_sm20.ptx"
    kernel = program(path).kernel("apply_fp")
    square = function_addresses(executable_form(kernel, str(path)))["_Z6squarei"]
    assert function_params(kernel) == {"__cudaparm_apply_fp_f": [square]}
    assert function_params(program(CUDA / "vector_ops.O3.ptx").kernel("vec_add")) == {}


def test_check_shapes_include_partial_warps_and_2d_blocks():
    kernel = program(CUDA / "vector_ops.O3.ptx").kernel("vec_add")
    launches = synthesize_launches(kernel, 0)
    assert any(launch.threads % 32 for launch in launches)
    assert any(launch.block[1] > 1 for launch in launches)
    assert any(launch.grid[0] > 1 for launch in launches)


# ---------------------------------------------------------------------------------------
# Bad input: one-line errors naming kernel, PTX line, block, warp and lanes
# ---------------------------------------------------------------------------------------

WRAP = """.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 k_p0, .param .u32 k_p1)
{{
	.reg .pred %p<8>;
	.reg .b32 %r<40>;
	.reg .b64 %rd<20>;
	.reg .f32 %f<10>;
	ld.param.u64 %rd1, [k_p0];
	ld.param.u32 %r1, [k_p1];
	mov.u32 %r2, %tid.x;
{body}
	ret;
}}
"""


def kernel_of(body: str) -> ir.Kernel:
    program_ = parse_ptx(WRAP.format(body=body), "t.ptx")
    assert not program_.errors, [str(d) for d in program_.errors]
    return program_.kernels[0]


def error_of(body: str, buffer=None, scalar: int = 0, **launch) -> PtxExecutionError:
    launch.setdefault("grid", (1, 1, 1))
    launch.setdefault("block", (32, 1, 1))
    args = {0: np.zeros(16, np.int32) if buffer is None else buffer, 1: scalar}
    with pytest.raises(PtxExecutionError) as caught:
        run_ptx_kernel(kernel_of(body), PtxLaunch(args=args, **launch))
    message = str(caught.value)
    assert "\n" not in message and message.startswith("kernel k, PTX line ")
    return caught.value


def test_out_of_bounds_global_load_names_lanes():
    error = error_of("""	mul.wide.u32 %rd2, %r2, 4;
	add.s64 %rd3, %rd1, %rd2;
	ld.global.u32 %r3, [%rd3];""", grid=(2, 1, 1))
    assert "out-of-bounds global load of 4 bytes" in str(error)
    assert "block (0, 0, 0), warp 0, lanes 16-31" in str(error)
    assert error.line == 15  # the ld.global line of the file


def test_misaligned_and_shared_out_of_bounds():
    error = error_of("""	add.s64 %rd3, %rd1, 2;
	ld.global.u32 %r3, [%rd3];""")
    assert "misaligned global load of 4 bytes" in str(error)
    error = error_of("""	.shared .align 4 .b8 buf[64];
	mov.u32 %r4, buf;
	shl.b32 %r5, %r2, 2;
	add.u32 %r6, %r4, %r5;
	st.shared.u32 [%r6], %r2;""")
    assert "out-of-bounds shared store" in str(error) and "lanes 16-31" in str(error)


def test_integer_division_by_zero_gives_all_ones_and_the_dividend():
    """No trap: the quotient is all ones, the remainder the dividend (a = q·b + r)."""
    body = """	rem.u32 %r5, %r2, 3;
	div.s32 %r3, -7, %r5;
	rem.s32 %r4, -7, %r5;
	div.u32 %r6, %r2, %r5;
	rem.u32 %r7, %r2, %r5;
	mul.wide.u32 %rd2, %r2, 4;
	add.s64 %rd3, %rd1, %rd2;
	st.global.u32 [%rd3], %r3;
	st.global.u32 [%rd3+128], %r4;
	st.global.u32 [%rd3+256], %r6;
	st.global.u32 [%rd3+384], %r7;"""
    out = np.zeros(128, np.int32)
    result = run_ptx_kernel(kernel_of(body), PtxLaunch(args={0: out, 1: 0}))
    got = result.buffers["k_p0"].reshape(4, 32)
    lanes = np.arange(32)
    b = lanes % 3
    safe = np.where(b == 0, 1, b)
    assert np.array_equal(got[0], np.where(b == 0, -1, -(7 // safe)))
    assert np.array_equal(got[1], np.where(b == 0, -7, -(7 % safe)))
    assert np.array_equal(got[2].view(np.uint32),
                          np.where(b == 0, 0xFFFFFFFF, lanes // safe).astype(np.uint32))
    assert np.array_equal(got[3], np.where(b == 0, lanes, lanes % safe))


def test_step_budget_and_barrier_errors():
    error = error_of("""$L1:
	bra.uni $L1;""", max_steps=500)
    assert "did not finish within 500 warp steps" in str(error)
    error = error_of("""	setp.lt.u32 %p1, %r2, 32;
	@%p1 bra $DONE;
	bar.sync 0;
$DONE:""", block=(64, 1, 1))
    assert "barrier not reached by all warps" in str(error)
    error = error_of("""	setp.lt.u32 %p1, %r2, 5;
	@%p1 bra $DONE;
	bar.sync 0;
$DONE:""")
    assert "barrier in divergent code" in str(error)


def test_unsupported_instruction_stops_only_when_executed():
    body = """	setp.eq.s32 %p1, %r1, 1;
	@!%p1 bra $SKIP;
	tex.1d.v4.f32.s32 {%f1, %f2, %f3, %f4}, [tex0, {%r2}];
$SKIP:"""
    run_ptx_kernel(kernel_of(body), PtxLaunch(args={1: 0}))
    error = error_of(body, scalar=1)
    assert "no array bound to texture or surface 'tex0'" in str(error)


def test_check_lists_a_kernel_it_cannot_execute_with_the_reason():
    text = WRAP.format(body="	trap;")
    reports = api.check(api.analyze_text(text, "t.ptx", language="ptx"))
    assert [(r.status, "trap" in r.reason) for r in reports] == [("not-executed", True)]


def test_cli_check_require_all_fails_on_a_kernel_it_cannot_execute(capsys, tmp_path):
    trapping = tmp_path / "trap.ptx"
    trapping.write_text(WRAP.format(body="	trap;"))
    code, out, _ = cli(capsys, "check", str(trapping))
    assert code == 0 and "1 not executed" in out.strip().splitlines()[-1]
    code, out, _ = cli(capsys, "check", "--require-all", str(trapping))
    assert code == 1 and "1 not executed" in out.strip().splitlines()[-1]
    code, _, _ = cli(capsys, "check", "--require-all", str(CUDA / "vector_ops.O3.ptx"))
    assert code == 0


# ---------------------------------------------------------------------------------------
# Pieces: arithmetic to the bit, PDOM reconvergence, collectives, memory, counters
# ---------------------------------------------------------------------------------------


def run_body(body: str, threads: int = 32, out_words: int = 64, scalar: int = 0):
    """Run a body that stores results to k_p0; the buffer afterwards."""
    buffer = np.zeros(out_words, np.uint32)
    result = run_ptx_kernel(kernel_of(body), PtxLaunch(block=(threads, 1, 1),
                                                       args={0: buffer, 1: scalar}))
    return result.buffers["k_p0"], result


def test_integer_arithmetic_wraps_and_converts_to_the_bit():
    out, _ = run_body("""	mov.u32 %r3, 2147483647;
	add.s32 %r4, %r3, 1;
	st.global.u32 [%rd1], %r4;
	mul.hi.s32 %r5, %r3, -4;
	st.global.u32 [%rd1+4], %r5;
	mov.u32 %r6, -7;
	shr.s32 %r7, %r6, 1;
	st.global.u32 [%rd1+8], %r7;
	shr.u32 %r8, %r6, 40;
	st.global.u32 [%rd1+12], %r8;
	rem.s32 %r9, %r6, 3;
	st.global.u32 [%rd1+16], %r9;
	div.s32 %r10, %r6, 2;
	st.global.u32 [%rd1+20], %r10;
	cvt.s8.s32 %r11, %r3;
	st.global.u32 [%rd1+24], %r11;
	cvt.sat.u8.s32 %r12, %r6;
	st.global.u32 [%rd1+28], %r12;
	bfe.s32 %r13, 0x00F0, 4, 4;
	st.global.u32 [%rd1+32], %r13;
	prmt.b32 %r14, 0x33221100, 0x77665544, 0x4321;
	st.global.u32 [%rd1+36], %r14;
	popc.b32 %r15, %r6;
	clz.b32 %r16, 255;
	brev.b32 %r17, 1;
	st.global.u32 [%rd1+40], %r15;
	st.global.u32 [%rd1+44], %r16;
	st.global.u32 [%rd1+48], %r17;
	lop3.b32 %r18, 12, 10, 6, 0x96;
	st.global.u32 [%rd1+52], %r18;
	mul.wide.s32 %rd4, %r6, 3;
	st.global.u64 [%rd1+56], %rd4;""")
    words = [int(v) for v in out]
    assert words[0] == 0x80000000
    assert words[1] == ((2147483647 * -4) >> 32) & 0xFFFFFFFF
    assert words[2:6] == [(-4) & 0xFFFFFFFF, 0, (-1) & 0xFFFFFFFF, (-3) & 0xFFFFFFFF]
    assert words[6] == 0xFFFFFFFF and words[7] == 0  # cvt.s8 of 0x7fffffff: -1; sat: 0
    assert words[8] == 0xFFFFFFFF  # the field 1111 sign-extended
    assert words[9] == 0x44332211
    assert words[10:13] == [30, 24, 0x80000000]  # popc(-7), clz(255), brev(1)
    assert words[13] == 12 ^ 10 ^ 6
    assert words[14] + (words[15] << 32) == (-21) & (2**64 - 1)


def test_float_arithmetic_is_float32_and_fma_rounds_once():
    out, _ = run_body("""	mov.f32 %f1, 0f3F800001;
	mov.f32 %f2, 0f3F7FFFFE;
	mul.f32 %f3, %f1, %f2;
	fma.rn.f32 %f4, %f1, %f2, 0fBF800000;
	st.global.f32 [%rd1], %f3;
	st.global.f32 [%rd1+4], %f4;
	cvt.rni.s32.f32 %r3, 0f40200000;
	st.global.u32 [%rd1+8], %r3;
	cvt.rzi.s32.f32 %r4, 0fC0600000;
	st.global.u32 [%rd1+12], %r4;
	cvt.rzi.s32.f32 %r5, 0f7F800000;
	st.global.u32 [%rd1+16], %r5;
	setp.nan.f32 %p1, 0f7FC00000, %f1;
	selp.u32 %r6, 1, 0, %p1;
	st.global.u32 [%rd1+20], %r6;""")
    a, b = F32(np.uint32(0x3F800001).view(F32)), F32(np.uint32(0x3F7FFFFE).view(F32))
    assert out[:1].view(F32)[0] == a * b
    exact = float(np.float64(a) * np.float64(b) - 1.0)
    assert out[1:2].view(F32)[0] == F32(exact) and exact != float(F32(a * b) - F32(1))
    assert [int(v) for v in out[2:6].view(np.int32)] == [2, -3, 2**31 - 1, 1]


def test_divergent_branches_reconverge_at_the_immediate_post_dominator():
    out, result = run_body("""	and.b32 %r3, %r2, 1;
	setp.eq.s32 %p1, %r3, 0;
	@%p1 bra $EVEN;
	mov.u32 %r4, 100;
	bra.uni $JOIN;
$EVEN:
	mov.u32 %r4, 200;
$JOIN:
	activemask.b32 %r5;
	mul.wide.u32 %rd2, %r2, 4;
	add.s64 %rd3, %rd1, %rd2;
	add.u32 %r6, %r4, %r5;
	st.global.u32 [%rd3], %r6;""")
    expected = [(200 if t % 2 == 0 else 100) + 0xFFFFFFFF for t in range(32)]
    assert [int(v) for v in out[:32]] == [v & 0xFFFFFFFF for v in expected]
    assert result.counters.divergent_branches == 1
    assert 0 < result.counters.simd_efficiency < 1


def test_vote_shfl_and_atomics_in_lane_order():
    out, _ = run_body("""	setp.lt.u32 %p1, %r2, 5;
	vote.sync.ballot.b32 %r3, %p1, -1;
	vote.sync.all.pred %p2, %p1, -1;
	selp.u32 %r4, 1, 0, %p2;
	shfl.sync.down.b32 %r5|%p3, %r2, 3, 31, -1;
	selp.u32 %r6, 1, 0, %p3;
	atom.global.add.u32 %r7, [%rd1+128], 1;
	mul.wide.u32 %rd2, %r2, 4;
	add.s64 %rd3, %rd1, %rd2;
	st.global.u32 [%rd3], %r5;
	st.global.u32 [%rd3+132], %r7;
	st.global.u32 [%rd3+264], %r6;
	st.global.u32 [%rd1+400], %r3;
	st.global.u32 [%rd1+404], %r4;""", out_words=128)
    words = [int(v) for v in out]
    assert words[:32] == [t + 3 if t + 3 < 32 else t for t in range(32)]
    assert words[32] == 32  # the counter after 32 increments
    assert words[33:65] == list(range(32))  # each lane got the count before it, lane order
    assert words[66:98] == [int(t + 3 < 32) for t in range(32)]  # shfl's predicate
    assert words[100:102] == [0x1F, 0]  # ballot of lanes 0-4; not all lanes vote true


def test_counters_and_lane_instruction_rate_on_vec_add():
    kernel = program(CUDA / "vector_ops.O3.ptx").kernel("vec_add")
    n = 100
    a = np.ones(n, F32)
    result = run_ptx_kernel(kernel, PtxLaunch((1, 1, 1), (128, 1, 1),
                                              {0: a, 1: a, 2: np.zeros(n, F32), 3: n}))
    counters = result.counters
    assert counters.divergent_branches == 1  # only warp 3 splits at i < n
    assert counters.lane_instructions < counters.warp_instructions * 32


def test_launch_errors_are_value_errors():
    kernel = program(CUDA / "vector_ops.O3.ptx").kernel("vec_add")
    with pytest.raises(ValueError, match="at most 1024 threads"):
        run_ptx_kernel(kernel, PtxLaunch(block=(64, 32, 1)))
    with pytest.raises(ValueError, match="no parameter 'nope'"):
        run_ptx_kernel(kernel, PtxLaunch(args={"nope": 1}))


def test_siblings_of_one_ptx_instruction_read_their_sources_first():
    body = """	ld.global.v2.u64 {%rd1, %rd2}, [%rd1];
	ld.param.u64 %rd5, [k_p0];
	st.global.u64 [%rd5+16], %rd2;
	st.global.u64 [%rd5+24], %rd1;"""
    result = run_ptx_kernel(kernel_of(body), PtxLaunch(block=(1, 1, 1), args={
        0: np.array([5, 7, 0, 0], np.int64)}))
    assert list(result.buffers["k_p0"]) == [5, 7, 7, 5]


def test_tex_fetches_from_a_bound_array():
    body = """	.reg .f32 %g<8>;
	cvt.rn.f32.u32 %f1, %r2;
	tex.2d.v4.f32.f32 {%g1, %g2, %g3, %g4}, [tex0, {%f1, 1.0}];
	mul.wide.u32 %rd2, %r2, 4;
	add.s64 %rd3, %rd1, %rd2;
	st.global.f32 [%rd3], %g1;
	st.global.f32 [%rd3+64], %g2;"""
    texels = np.arange(2 * 8 * 2, dtype=F32).reshape(2, 8, 2)  # rows, columns, channels
    result = run_ptx_kernel(kernel_of(body), PtxLaunch(
        block=(16, 1, 1), args={0: np.zeros(32, F32)}, textures={"tex0": texels}))
    out = result.buffers["k_p0"]
    assert list(out[:16]) == [texels[1, min(x, 7), 0] for x in range(16)]
    assert list(out[16:]) == [texels[1, min(x, 7), 1] for x in range(16)]


# ---------------------------------------------------------------------------------------
# The command line: `gpudiv run FILE.ptx`, `gpudiv check FILE.ptx`
# ---------------------------------------------------------------------------------------


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    from gpudiv.cli import main
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_run_writes_buffers_and_counters(capsys, tmp_path):
    code, out, err = cli(capsys, "run", str(CUDA / "vector_ops.O3.ptx"), "--kernel", "vec_add",
                         "--grid", "4", "--block", "256", "--arg", "a=f32[1000]:range",
                         "--arg", "f32[1000]:2", "--arg", "c=f32[1000]:zeros",
                         "--arg", "u32:1000", "-o", str(tmp_path))
    assert code == 0, err
    assert "divergent branches: 1" in out and "SIMD efficiency:" in out
    c = np.load(tmp_path / "c.npy")
    assert np.array_equal(c, np.arange(1000, dtype=F32) + 2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npy", "c.npy",
                                                          "vec_add_param_1.npy"]
    code, out, _ = cli(capsys, "run", str(CUDA / "vector_ops.O3.ptx"), "--kernel", "vec_add",
                       "--block", "8x4", "--arg", "f32[32]:1", "--arg", "f32[32]:1",
                       "--arg", "f32[32]:0", "--arg", "32", "--format", "json",
                       "-o", str(tmp_path / "j"), "--output-format", "json")
    assert code == 0 and '"warp_instructions"' in out
    assert (tmp_path / "j" / "vec_add_param_2.json").read_text().startswith("[2.0, 2.0")


def test_cli_run_errors_are_one_line_with_exit_2(capsys):
    path = str(CUDA / "vector_ops.O3.ptx")
    code, _, err = cli(capsys, "run", path, "--kernel", "vec_add", "--grid", "4", "--block",
                       "256", "--arg", "f32[100]:1", "--arg", "f32[100]:1",
                       "--arg", "f32[100]:0", "--arg", "u32:1000")
    assert code == 2 and err.count("\n") == 1
    assert "out-of-bounds global load" in err and "block (0, 0, 0), warp 3" in err
    code, _, err = cli(capsys, "run", path, "--kernel", "vec_add", "--arg", "q32[4]:zeros")
    assert code == 2 and "unknown type 'q32'" in err
    code, _, err = cli(capsys, "run", path, "--kernel", "vec_add", "--grid", "0")
    assert code == 2 and "bad --grid '0'" in err
    code, _, err = cli(capsys, "run", path, "--kernel", "vec_add", "--block", "2048")
    assert code == 2 and "at most 1024 threads" in err


def test_cli_check_ptx_counts_kernels(capsys):
    code, out, _ = cli(capsys, "check", str(CUDA / "scan.O3.ptx"))
    assert code == 0
    assert out.strip().splitlines()[-1].startswith("4 kernels checked, 0 not executed,")
    assert out.strip().endswith(" 0 violations")


# ---------------------------------------------------------------------------------------
# Arithmetic against Python integers and exact rationals, 32 lanes per instruction
# ---------------------------------------------------------------------------------------

BINARY = """.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 k_p0)
{{
	.reg .b32 %r<4>;
	.reg .b64 %rd<8>;
	.reg .{reg} %x<4>;
	.reg .b32 %s<2>;
	ld.param.u64 %rd1, [k_p0];
	mov.u32 %r1, %tid.x;
	mul.wide.u32 %rd2, %r1, 8;
	add.s64 %rd3, %rd1, %rd2;
	ld.global.{type} %x1, [%rd3];
	ld.global.{btype} {b}, [%rd3+256];
	{op} %x3, %x1, {b};
	st.global.{type} [%rd3+512], %x3;
	ret;
}}
"""


def _edge_values(width: int, signed: bool, r: np.random.Generator) -> list[int]:
    low, high = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
    edges = [0, 1, 2, low, high, low + 1, high - 1] + ([-1, -2] if signed else [])
    randoms = [int(v) for v in r.integers(low, high, 32 - len(edges), endpoint=True,
                                          dtype=np.int64 if width < 64 or signed else np.uint64)]
    return edges + randoms


def _reference(op: str, a: int, b: int, width: int, signed: bool) -> int:
    mask = (1 << width) - 1

    def s(v: int) -> int:
        v &= mask
        return v - (1 << width) if signed and v >> (width - 1) else v

    def trunc_div(x: int, y: int) -> int:
        q = abs(x) // abs(y)
        return q if (x < 0) == (y < 0) else -q

    count = b & 0xFFFFFFFF  # shift counts are .u32
    a, b = s(a), s(b)
    results = {
        "add": a + b, "sub": a - b, "mul.lo": a * b, "mul.hi": (a * b) >> width,
        "div": trunc_div(a, b) if b else 0, "rem": (a - b * trunc_div(a, b)) if b else 0,
        "min": min(a, b), "max": max(a, b), "and": a & b, "or": a | b, "xor": a ^ b,
        "shl": (a << count) if count < width else 0,
        "shr": (a >> min(count, width - 1)) if signed else (
            (a & mask) >> count if count < width else 0),
    }
    return results[op] & mask


@pytest.mark.parametrize("type_", ["s32", "u32", "s64", "u64", "s16", "u16"])
def test_integer_instructions_match_python_integers(type_):
    width, signed = int(type_[1:]), type_[0] == "s"
    r = rng(width + signed)
    reg = "b64" if width == 64 else "b32" if width == 32 else "b16"
    for op in ("add", "sub", "mul.lo", "mul.hi", "div", "rem", "min", "max", "and", "or",
               "xor", "shl", "shr"):
        if width == 16 and op in ("mul.hi",):
            continue
        shift = op in ("shl", "shr")
        a_values = _edge_values(width, signed, r)
        b_values = ([int(v) for v in r.integers(0, 2 * width, 32)] if shift
                    else _edge_values(width, signed, r)[::-1])
        if op in ("div", "rem"):
            b_values = [v or 3 for v in b_values]
        bits = "b" if op in ("and", "or", "xor", "shl") else type_[0]
        opcode = f"{op}.{bits}{width}" if op not in ("mul.lo", "mul.hi") else f"{op}.{type_}"
        if op == "shr":
            opcode = f"shr.{type_}"
        text = BINARY.format(reg=reg, type=type_, btype="u32" if shift else type_,
                             b="%s1" if shift else "%x2", op=opcode)
        kernel = parse_ptx(text, "t.ptx").kernels[0]
        words = np.zeros(3 * 32, np.uint64)
        mask = (1 << width) - 1
        words[:32] = [v & mask for v in a_values]
        words[32:64] = [v & (mask if not shift else 0xFFFFFFFF) for v in b_values]
        result = run_ptx_kernel(kernel, PtxLaunch(args={0: words}))
        got = [int(v) & mask for v in result.buffers["k_p0"][64:]]
        want = [_reference(op, a, b, width, signed) for a, b in zip(a_values, b_values,
                                                                   strict=True)]
        assert got == want, (opcode, [(a, b, g, w) for a, b, g, w in
                                      zip(a_values, b_values, got, want, strict=True)
                                      if g != w][:3])


def test_float32_instructions_round_like_exact_rationals():
    r = rng(99)
    a = np.concatenate([r.standard_normal(24), [0.0, -0.0, 1e-40, 3e38, 1.0, 2.0, 0.5, 7.0]])
    b = np.concatenate([r.standard_normal(24) * 1e3, [1.0, 3.0, 3.0, 3e38, 3.0, 0.0, 1e-30,
                                                      -7.0]])
    a, b = a.astype(F32), b.astype(F32)

    def run_op(op: str) -> np.ndarray:
        text = BINARY.format(reg="f32", type="f32", btype="f32", b="%x2", op=op)
        if op.startswith("fma"):
            text = text.replace("%x3, %x1, %x2;", "%x3, %x1, %x2, %x1;")
        words = np.zeros(3 * 64, F32)
        words[0:64:2], words[64:128:2] = a, b
        result = run_ptx_kernel(parse_ptx(text, "t.ptx").kernels[0], PtxLaunch(args={0: words}))
        return result.buffers["k_p0"][128::2]

    with np.errstate(all="ignore"):
        assert np.array_equal(run_op("add.rn.f32"), a + b)
        assert np.array_equal(run_op("mul.rn.f32"), a * b)
        assert np.array_equal(run_op("div.rn.f32"), a / b, equal_nan=True)
    fused = run_op("fma.rn.f32")
    finite = np.isfinite(fused)
    want = [_round_f32(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(x)))
            for x, y, f in zip(a, b, finite, strict=True) if f]
    assert np.array_equal(fused[finite], np.array(want, F32))
    assert (~finite).sum() == 1  # 3e38 · 3e38 overflows


def _round_f32(value: Fraction) -> np.float32:
    """A rational rounded once to float32 (nearest, ties to even)."""
    if value == 0:
        return F32(0)
    candidate = F32(float(value))  # within one float32 ulp
    below = np.nextafter(candidate, F32(-np.inf))
    above = np.nextafter(candidate, F32(np.inf))
    return min((below, candidate, above),
               key=lambda c: (abs(Fraction(float(c)) - value), int(np.float32(c).view(
                   np.uint32)) & 1))


def test_cvt_rounding_saturation_and_extension():
    out, _ = run_body("""	cvt.rni.s32.f32 %r3, 0f40200000;
	st.global.u32 [%rd1], %r3;
	cvt.rni.s32.f32 %r3, 0fC0600000;
	st.global.u32 [%rd1+4], %r3;
	cvt.rmi.s32.f32 %r3, 0fBFC00000;
	st.global.u32 [%rd1+8], %r3;
	cvt.rpi.s32.f32 %r3, 0f3FC00000;
	st.global.u32 [%rd1+12], %r3;
	cvt.rzi.s32.f32 %r3, 0f7FC00000;
	st.global.u32 [%rd1+16], %r3;
	cvt.rzi.u32.f32 %r3, 0fBF800000;
	st.global.u32 [%rd1+20], %r3;
	cvt.rzi.s32.f32 %r3, 0fCF800000;
	st.global.u32 [%rd1+24], %r3;
	cvt.u8.s32 %r3, 300;
	st.global.u32 [%rd1+28], %r3;
	cvt.sat.s8.s32 %r3, -300;
	st.global.u32 [%rd1+32], %r3;
	cvt.s64.s32 %rd4, -5;
	st.global.u64 [%rd1+40], %rd4;
	cvt.u64.u32 %rd4, -5;
	st.global.u64 [%rd1+48], %rd4;
	cvt.rn.f32.s32 %f1, 16777217;
	st.global.f32 [%rd1+56], %f1;
	cvt.rn.f32.f64 %f2, 0d3FF0000000000001;
	st.global.f32 [%rd1+60], %f2;""")
    words = [int(v) for v in out[:15].view(np.int32)]
    assert words[:9] == [2, -4, -2, 2, 0, 0, -2**31, 300 & 0xFF, -128]
    assert list(out[10:14].view(np.int64)) == [-5, 2**32 - 5]
    assert out[14:16].view(F32).tolist() == [16777216.0, 1.0]


def test_carry_chains_add_and_subtract_wide_numbers():
    out, _ = run_body("""	add.cc.u32 %r3, -1, 1;
	addc.cc.u32 %r4, 5, 0;
	addc.u32 %r5, 0, 0;
	sub.cc.u32 %r6, 0, 1;
	subc.u32 %r7, 10, 0;
	st.global.u32 [%rd1], %r3;
	st.global.u32 [%rd1+4], %r4;
	st.global.u32 [%rd1+8], %r5;
	st.global.u32 [%rd1+12], %r6;
	st.global.u32 [%rd1+16], %r7;
	mad.lo.cc.u32 %r8, 65536, 65536, 7;
	madc.hi.u32 %r9, 65536, 65536, 0;
	st.global.u32 [%rd1+20], %r8;
	st.global.u32 [%rd1+24], %r9;""")
    # 0xffffffff + 1 = 0 carry 1; 5 + 0 + 1 = 6 carry 0; 0 - 1 borrows; 10 - 0 - 1 = 9
    assert [int(v) for v in out[:7]] == [0, 6, 0, 0xFFFFFFFF, 9, 7, 1]
