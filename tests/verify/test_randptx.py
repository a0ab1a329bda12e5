"""The random PTX generator: the front end and ptxas accept its kernels, and they keep the
control flow and the behaviour of the μ-SIMD programs they translate."""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter

import numpy as np
import pytest

from gpudiv import ir
from gpudiv.interp.musimd import LaunchConfig, run_kernel
from gpudiv.interp.ptx import PtxLaunch, run_ptx_kernel
from gpudiv.interp.ptx_calls import executable_form
from gpudiv.ir.cfg import build_cfg
from gpudiv.lang.load import parse_text
from gpudiv.lang.musimd.parse import parse_musimd
from gpudiv.verify.randprog import random_program
from gpudiv.verify.randptx import device_functions, musimd_to_ptx, random_ptx


def _ptx_kernel(text: str) -> ir.Kernel:
    """The single kernel of a PTX text; fails on any diagnostic."""
    program = parse_text(text, "random.ptx", "ptx")
    unexpected = [d for d in program.diagnostics if "recursive call to 'gd_mulr'" not in d.message]
    assert not unexpected, (unexpected[:3], text)
    assert len(program.kernels) == 1
    return program.kernels[0]


def _musimd_kernel(text: str) -> ir.Kernel:
    """The single kernel of a μ-SIMD text."""
    program = parse_musimd(text, "random.musimd")
    assert not program.errors, program.errors
    return program.kernels[0]


def _cycles(kernel: ir.Kernel) -> list[tuple[int, tuple[str, ...]]]:
    """Each cycle of the loop-nesting forest as (depth, its headers' μ-SIMD labels)."""
    cfg = build_cfg(kernel)
    return sorted((loop.depth, tuple(sorted(h.removeprefix("$L_") for h in loop.headers)))
                  for loop in cfg.loops.values())


@pytest.mark.parametrize("cycles", [pytest.param(True, marks=pytest.mark.slow), False],
                         ids=["cycles", "unstructured"])
def test_front_end_accepts_and_cycles_are_kept(cycles: bool) -> None:
    for seed in range(40):
        text = random_program(seed, 25, cycles=cycles, unstructured=True)
        musimd = _musimd_kernel(text)
        ptx = _ptx_kernel(musimd_to_ptx(musimd))
        assert ptx.name == "rand" and ptx.params == ["n", "k"]
        assert _cycles(ptx) == _cycles(musimd), text


class _Branches:
    """Observer recording each conditional branch outcome: (ordinal, lanes, jumping lanes);
    branches of inlined device functions are left out."""

    def __init__(self, kernel: ir.Kernel) -> None:
        branches = [n for n, i in enumerate(kernel.instructions())
                    if i.kind == ir.BRANCH and "function" not in i.attrs]
        self.ordinal = {pc: k for k, pc in enumerate(branches)}
        self.seen: Counter = Counter()

    def before(self, *args) -> None:
        """Nothing to record before an instruction."""

    def branch(self, warp, instruction, active, jumps) -> None:
        """Record one outcome."""
        if instruction not in self.ordinal:
            return
        lanes = tuple(int(t) for t in active)
        self.seen[(self.ordinal[instruction], lanes,
                   tuple(t for t, j in zip(lanes, jumps, strict=True) if j))] += 1


# The fast loop runs the first seeds of each kind, the full suite all of them.
@pytest.mark.parametrize(("seed", "calls"), [
    pytest.param(s, calls, marks=[pytest.mark.slow] if s >= first else [])
    for seeds, calls, first in ((range(30), False, 10), (range(0, 30, 3), True, 6),
                                (range(1, 30, 3), "recursive", 7))
    for s in seeds])
def test_same_branch_outcomes_as_the_musimd_program(seed: int, calls: bool | str) -> None:
    """One warp of 32 threads, same parameters: every conditional branch of the PTX kernel
    splits the lanes exactly as the μ-SIMD branch it translates, as often (`calls`: the
    device functions compute what the instructions they replace compute)."""
    text = random_program(seed, 25, cycles=True)
    musimd = _musimd_kernel(text)
    text = musimd_to_ptx(musimd, calls=calls)
    ptx = _ptx_kernel(text)
    if calls == "recursive":  # inlining stops at the recursion: it runs as calls
        ptx = executable_form(ptx, "rand.ptx", text)
    params = {"n": seed % 7 - 2, "k": seed % 5}
    expected, observed = _Branches(musimd), _Branches(ptx)
    run_kernel(musimd, LaunchConfig(32, 32, params, reconvergence="ipdom"), observer=expected)
    run_ptx_kernel(ptx, PtxLaunch(block=(32, 1, 1), args=dict(params)), observer=observed)
    assert observed.seen == expected.seen, text


def test_calls_go_through_every_device_function() -> None:
    """`calls=True` calls each device function (gd_max calls gd_min), in nvcc's -G call
    sequence, and the front end inlines them all."""
    ptx = musimd_to_ptx(_musimd_kernel(EVERY_CALLED), calls=True)
    for function in ("gd_min", "gd_max", "gd_mul", "gd_lt", "gd_tid"):
        assert f") {function}(" in ptx and f"call.uni (retval0), {function}," in ptx
    assert "cvta.local.u64 %SP, %SPL" in ptx and "shr.u32" in ptx
    kernel = _ptx_kernel(ptx)
    inlined = {i.attrs.get("function") for i in kernel.instructions()}
    assert {"gd_min", "gd_max", "gd_mul", "gd_lt", "gd_tid"} <= inlined
    assert musimd_to_ptx(_musimd_kernel(EVERY_CALLED)).count(".func") == 0


def test_recursive_calls_multiply_by_recursion() -> None:
    """`calls="recursive"`: `*` calls gd_mulr, which calls itself; inlining leaves that
    call opaque, so such a kernel runs as calls, and gd_mulr computes `mul.lo.s32`."""
    ptx = musimd_to_ptx(_musimd_kernel(EVERY_CALLED), calls="recursive")
    assert "call.uni (retval0), gd_mulr, (param0, param1)" in ptx and "gd_mul(" not in ptx
    assert _ptx_kernel(ptx).attrs["calls_not_inlined"] == ("gd_mulr",)
    kernel = executable_form(_ptx_kernel(MULTIPLY), "multiply.ptx", MULTIPLY)
    for n, k in ((3, 5), (-7, 13), (2**20 + 3, -9), (0, 0), (-1, -2**31)):
        run = run_ptx_kernel(kernel, PtxLaunch(block=(32, 1, 1),
                                               args={0: np.zeros(32, np.int32), 1: n, 2: k}))
        assert run.buffers["multiply_param_0"].tolist() == \
            [((t + n) * k + 2**31) % 2**32 - 2**31 for t in range(32)]


# out[tid] = gd_mulr(tid + n, k), with gd_mulr as random programs get it.
MULTIPLY = "\n".join([".version 7.0", ".target sm_80", ".address_size 64", "",
                      *device_functions({"gd_mulr"}), """
.visible .entry multiply(.param .u64 multiply_param_0, .param .s32 multiply_param_1,
                         .param .s32 multiply_param_2)
{
    .reg .b32 %r<5>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [multiply_param_0];
    cvta.to.global.u64 %rd2, %rd1;
    ld.param.u32 %r1, [multiply_param_1];
    ld.param.u32 %r2, [multiply_param_2];
    mov.u32 %r3, %tid.x;
    add.s32 %r1, %r1, %r3;
    {
    .param .b32 param0;
    st.param.b32 [param0], %r1;
    .param .b32 param1;
    st.param.b32 [param1], %r2;
    .param .b32 retval0;
    call.uni (retval0), gd_mulr, (param0, param1);
    ld.param.b32 %r4, [retval0];
    }
    mul.wide.u32 %rd3, %r3, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r4;
    ret;
}
"""])


EVERY_CALLED = """kernel called(n, k)
      a = tid + n
      b = a min k
      c = a max k
      d = a * k
      e = a < k
      shared[0] = b
      shared[1] = c
      shared[2] = d
      shared[3] = e
      stop
"""


def test_deterministic_and_named() -> None:
    assert random_ptx(3, 20) == random_ptx(3, 20)
    assert random_ptx(3, 20) != random_ptx(4, 20)
    assert ".visible .entry foo(.param .s32 n, .param .s32 k)" in random_ptx(3, name="foo")


EVERY_CONSTRUCT = """kernel all(n, k)
      a = tid + n
      b = a / 3
      c = a % -2
      d = 7 << laneid
      e = d >> 2
      f = a min warpid
      g = ntid max 1
      h = - a
      i = ! b
      j = ~ c
      s = a & 15
      shared[s] = j
      shared[-1] = 4
      local[3] = h
      x = shared[5]
      y = local[s]
      z = atominc shared[s]
      w = atomadd shared[2], x
      barrier
      p = a < k
      bz p, L
      sync
L:    q = a != 0
      bnz q, M
      jump M
M:    stop
"""


def test_every_musimd_construct_translates() -> None:
    ptx = musimd_to_ptx(_musimd_kernel(EVERY_CONSTRUCT))
    for opcode in ("div.s32", "rem.s32", "shl.b32", "shr.s32", "min.s32", "max.s32",
                   "neg.s32", "not.b32", "st.shared.u32", "st.local.u32", "ld.shared.u32",
                   "ld.local.u32", "atom.shared.add.u32", "bar.sync 0", "setp.lt.s32",
                   "bra.uni", "ret", "%laneid", "%warpid", "%ntid.x", "%tid.x"):
        assert opcode in ptx, opcode
    _ptx_kernel(ptx)


PTXAS = shutil.which("ptxas")


@pytest.mark.skipif(PTXAS is None, reason="ptxas is not installed")
@pytest.mark.parametrize(("seed", "calls"), [(None, False), (0, False), (1, False),
                                             (2, False), (17, False), (40, False),
                                             (None, True), (3, True)])
def test_ptxas_accepts(tmp_path, seed: int | None, calls: bool) -> None:
    """ptxas -arch=sm_80 accepts random kernels and every construct, without a warning."""
    path = tmp_path / "random.ptx"
    path.write_text(random_ptx(seed, 30, calls=calls) if seed is not None
                    else musimd_to_ptx(_musimd_kernel(EVERY_CONSTRUCT), calls=calls))
    done = subprocess.run([PTXAS, "-arch=sm_80", str(path), "-o", str(tmp_path / "r.cubin")],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr
