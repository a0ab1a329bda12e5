"""Calls run as calls on the PTX interpreter (issue 16, item 1; `gpudiv.interp.ptx_calls`):
recursion (samples/cuda/recursion.cu), frames of recursive activations, guarded calls,
and the same memory as inlining on every sample with calls."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import numpy as np
import pytest

from gpudiv.interp import ptx_machine
from gpudiv.interp.ptx import PtxExecutionError, PtxLaunch, run_ptx_growing, run_ptx_kernel
from gpudiv.lang.ptx.functions import FunctionReader
from gpudiv.verify.oracle import ptx_launches
from gpudiv.verify.randptx import random_ptx

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
RECURSION = {build: SAMPLES / "cuda" / f"recursion.{build}.ptx" for build in ("O3", "G")}

HEADER = ".version 7.0\n.target sm_80\n.address_size 64\n"
# The end of every kernel below: out[tid] = %v.
STORE_OUT = """    ld.param.u64 %o, [out];
    cvta.to.global.u64 %o, %o;
    mul.wide.u32 %a, %t, 4;
    add.s64 %o, %o, %a;
    st.global.u32 [%o], %v;
    ret;
}
"""

# A recursive function that keeps its argument in a `.local` variable addressed by its
# symbol across the recursive call: each activation needs a frame of its own.
SUM_DOWN = HEADER + """
.func (.param .b32 r) down(.param .b32 n)
{
    .local .align 4 .b8 slot[4];
    .reg .b32 %n, %m, %s;
    .reg .pred %p;
    ld.param.b32 %n, [n];
    st.local.u32 [slot], %n;
    setp.eq.s32 %p, %n, 0;
    @%p bra DONE;
    sub.s32 %m, %n, 1;
    {
    .param .b32 a;
    .param .b32 b;
    st.param.b32 [a], %m;
    call.uni (b), down, (a);
    ld.param.b32 %s, [b];
    }
    ld.local.u32 %n, [slot];
    add.s32 %n, %n, %s;
DONE:
    st.param.b32 [r], %n;
    ret;
}

.visible .entry sums(.param .u64 out)
{
    .reg .b32 %t, %k, %v;
    .reg .b64 %o, %a;
    mov.u32 %t, %tid.x;
    rem.u32 %k, %t, 7;
    {
    .param .b32 a;
    .param .b32 b;
    st.param.b32 [a], %k;
    call.uni (b), down, (a);
    ld.param.b32 %v, [b];
    }
""" + STORE_OUT

# A call only some lanes make (a guarded call: the others keep their value).
GUARDED = HEADER + """
.func (.param .b32 r) twice(.param .b32 a)
{
    .reg .b32 %x;
    ld.param.b32 %x, [a];
    add.s32 %x, %x, %x;
    st.param.b32 [r], %x;
    ret;
}

.visible .entry guarded(.param .u64 out)
{
    .reg .b32 %t, %v;
    .reg .pred %p;
    .reg .b64 %o, %a;
    mov.u32 %t, %tid.x;
    mov.u32 %v, 100;
    setp.lt.u32 %p, %t, 5;
    {
    .param .b32 pa;
    .param .b32 pr;
    st.param.b32 [pa], %t;
    @%p call.uni (pr), twice, (pa);
    @%p ld.param.b32 %v, [pr];
    }
""" + STORE_OUT


def executable(text: str, kernel: str, path: str = "t.ptx"):
    kept = FunctionReader(text, path).executable(kernel)
    assert kept is not None
    return kept


def sample(build: str, kernel: str):
    return executable(RECURSION[build].read_text(), kernel, str(RECURSION[build]))


@pytest.mark.parametrize("build", ["O3", "G"])
def test_divergent_recursion_runs(build):
    """fib(tid % 12) per thread: each lane recurses to its own depth."""
    out = np.zeros(64, np.int32)
    result = run_ptx_kernel(sample(build, "fib_per_thread"),
                            PtxLaunch(block=(64, 1, 1), args={0: out}))
    fib = [0, 1]
    while len(fib) < 12:
        fib.append(fib[-1] + fib[-2])
    assert result.buffers["fib_per_thread_param_0"].tolist() == [fib[t % 12] for t in range(64)]
    assert result.counters.divergent_branches > 0


def frames(depth: int, parent: list[int] | None) -> int:
    """samples/cuda/recursion.cu's `frames`, in Python."""
    mine = [(parent[(i + depth) & 3] if parent else i) + depth for i in range(4)]
    if depth == 0:
        return mine[0] * 7 + mine[3]
    return frames(depth - 1, mine) + mine[1]


@pytest.mark.parametrize("build", ["O3", "G"])
@pytest.mark.parametrize("depth", [0, 3, 6])
def test_each_recursive_activation_has_its_own_frame(build, depth):
    """Every activation of `frames` passes the address of its own `.local` array on."""
    result = run_ptx_kernel(sample(build, "frames_uniform"),
                            PtxLaunch(args={0: np.zeros(32, np.int32), 1: depth}))
    assert result.buffers["frames_uniform_param_0"].tolist() == [frames(depth, None) + t
                                                                 for t in range(32)]


def test_without_frames_of_their_own_the_recursion_gives_another_answer(monkeypatch):
    """The test above would catch activations sharing one frame."""
    monkeypatch.setattr(ptx_machine, "frame_layouts", lambda *args: {})
    result = run_ptx_kernel(sample("O3", "frames_uniform"),
                            PtxLaunch(args={0: np.zeros(32, np.int32), 1: 3}))
    assert result.buffers["frames_uniform_param_0"][0] != frames(3, None)


@pytest.mark.parametrize("build", ["O3", "G"])
def test_recursion_through_a_pointer_into_the_kernels_frame(build):
    """gcd_steps counts its steps through a pointer to the kernel's own local variable."""
    rng = np.random.default_rng(3)
    a = rng.integers(1, 10_000, 32).astype(np.uint32)
    b = rng.integers(1, 10_000, 32).astype(np.uint32)
    g, steps = np.zeros(32, np.uint32), np.zeros(32, np.uint32)
    result = run_ptx_kernel(sample(build, "gcd_table"), PtxLaunch(args={0: a, 1: b, 2: g,
                                                                        3: steps}))

    def euclid(x: int, y: int, n: int = 0) -> tuple[int, int]:
        return (x, n) if y == 0 else euclid(y, x % y, n + 1)

    expected = [euclid(int(x), int(y)) for x, y in zip(a, b, strict=True)]
    assert result.buffers["gcd_table_param_2"].tolist() == [e[0] for e in expected]
    assert result.buffers["gcd_table_param_3"].tolist() == [e[1] for e in expected]
    assert all(e[0] == math.gcd(int(x), int(y)) for e, x, y in zip(expected, a, b, strict=True))


def test_a_local_variable_addressed_by_its_symbol_moves_with_the_frame():
    result = run_ptx_kernel(executable(SUM_DOWN, "sums"),
                            PtxLaunch(args={0: np.zeros(32, np.uint32)}))
    assert result.buffers["out"].tolist() == [(t % 7) * (t % 7 + 1) // 2
                                                       for t in range(32)]


def test_a_recursion_deeper_than_the_stack_overflows():
    launch = PtxLaunch(args={0: np.zeros(32, np.uint32)}, stack_size=16)
    with pytest.raises(PtxExecutionError, match="stack overflow: a recursive call of down "
                                                "needs a frame of 16 bytes beyond the 16 bytes"):
        run_ptx_kernel(executable(SUM_DOWN, "sums"), launch)
    with pytest.raises(ValueError, match="stack_size must not be negative"):
        run_ptx_kernel(executable(SUM_DOWN, "sums"), PtxLaunch(stack_size=-1))


def test_a_guarded_call_runs_in_the_lanes_whose_guard_holds():
    for kernel in (executable(GUARDED, "guarded"),
                   FunctionReader(GUARDED, "t.ptx").inlined("guarded")):
        result = run_ptx_kernel(kernel, PtxLaunch(args={0: np.zeros(32, np.uint32)}))
        assert result.buffers["out"].tolist() == [2 * t if t < 5 else 100
                                                              for t in range(32)]


@pytest.mark.parametrize("policy", ["frontier", "mimd", "aware"])
@pytest.mark.parametrize("build", ["O3", pytest.param("G", marks=pytest.mark.slow)])
def test_every_policy_runs_calls_as_calls(policy, build):
    """Groups of lanes and AWARE's splits carry the calls they are in: they meet only
    within the same."""
    for kernel, args in (("fib_per_thread", {0: np.zeros(64, np.int32)}),
                         ("frames_uniform", {0: np.zeros(64, np.int32), 1: 4})):
        runs = [run_ptx_kernel(sample(build, kernel), PtxLaunch(block=(64, 1, 1), args=args,
                                                                reconvergence=chosen))
                for chosen in ("ipdom", policy)]
        name = f"{kernel}_param_0"
        assert runs[0].buffers[name].tolist() == runs[1].buffers[name].tolist()


@pytest.mark.parametrize("policy", ["frontier", "aware"])
def test_lanes_meet_again_after_a_call_only_some_make(policy):
    """A guarded call: the lanes that skip it meet the callers after it (one
    reconvergence), as the inlined kernel's skip branch makes them. Under frontier the
    callers run the callee first (it sits between the call and the next instruction);
    under aware the lanes that skip it wait there for them."""
    counters = [run_ptx_kernel(kernel, PtxLaunch(args={0: np.zeros(32, np.uint32)},
                                                  reconvergence=policy)).counters
                for kernel in (executable(GUARDED, "guarded"),
                               FunctionReader(GUARDED, "t.ptx").inlined("guarded"))]
    assert counters[0].reconvergences == counters[1].reconvergences == 1


def test_inlining_cannot_run_the_recursion():
    inlined = FunctionReader(RECURSION["O3"].read_text(), "r.ptx").inlined("fib_per_thread")
    assert inlined.attrs["calls_not_inlined"] == ("_Z3fibi",)
    with pytest.raises(PtxExecutionError, match="cannot execute 'call.uni'"):
        run_ptx_kernel(inlined, PtxLaunch(args={0: np.zeros(32, np.int32)}))


def same_memory(text: str, path: str, launches: int, seed: int = 0,
                policy: str = "auto") -> list[str]:
    """Kernels of a PTX file whose calls run as calls leave other buffers (or stop
    otherwise) than the same kernels with their calls inlined, under the oracle's
    launches."""
    reader = FunctionReader(text, path)
    differ = []
    for name in reader.entries:
        inlined = reader.inlined(name)
        if not reader.callees(name) or inlined.attrs.get("calls_not_inlined"):
            continue  # no calls, or recursion: inlined, it cannot run
        kept = reader.executable(name)
        for launch in ptx_launches(inlined, seed)[:launches]:
            launch.reconvergence = policy
            outcomes = []
            for kernel in (inlined, kept):
                try:
                    buffers = run_ptx_growing(kernel, copy.deepcopy(launch)).buffers
                    outcomes.append({k: v.tobytes() for k, v in buffers.items()})
                except PtxExecutionError as error:
                    outcomes.append((error.line, error.message))
            if outcomes[0] != outcomes[1]:
                differ.append(f"{name} {launch.grid} {launch.block}")
    return differ


def test_calls_run_as_calls_leave_the_memory_inlining_leaves():
    path = SAMPLES / "cuda" / "many_calls.O3.ptx"
    assert same_memory(path.read_text(), str(path), 2) == []


@pytest.mark.slow
@pytest.mark.parametrize("path", sorted((SAMPLES / "cuda").glob("*.ptx"))
                         + sorted((SAMPLES / "cuda_large").glob("*.ptx")),
                         ids=lambda p: p.name)
def test_every_sample_with_calls_runs_the_same_as_calls(path):
    assert same_memory(path.read_text(), str(path), 3) == []


def random_with_calls(seed: int) -> str:
    return random_ptx(seed, 20, calls=True, unstructured=seed % 3 == 0)


@pytest.mark.parametrize("seed", [0, 3])
def test_random_programs_run_the_same_as_calls(seed):
    """Random kernels whose operations go through device functions (returns in divergent
    arms, nested calls, loops with divergent exits, local frames; every third one with
    unstructured control flow)."""
    assert same_memory(random_with_calls(seed), f"rand{seed}.ptx", 3, seed) == []


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4, 64))
def test_random_programs_run_the_same_as_calls_property(seed):
    assert same_memory(random_with_calls(seed), f"rand{seed}.ptx", 3, seed) == []


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["frontier", "mimd", "aware"])
@pytest.mark.parametrize("seed", range(20))
def test_random_programs_run_the_same_as_calls_under_every_policy(seed, policy):
    assert same_memory(random_with_calls(seed), f"rand{seed}.ptx", 2, seed, policy) == []


POINTERS = {build: SAMPLES / "cuda" / f"function_pointers.{build}.ptx" for build in ("O3", "G")}


def unary(which: int, x: int) -> int:
    """samples/cuda/function_pointers.cu's table: square, negate, twice."""
    return [x * x, -x, x if x > 100 else 2 * x][which]


def pointers(build: str, kernel: str):
    return executable(POINTERS[build].read_text(), kernel, str(POINTERS[build]))


@pytest.mark.parametrize("build", ["O3", "G"])
@pytest.mark.parametrize("policy", ["ipdom", "frontier", "mimd", "aware"])
def test_each_lane_calls_the_function_its_pointer_names(build, policy):
    data = np.arange(-40, 150, 3, dtype=np.int32)[:64]
    result = run_ptx_kernel(pointers(build, "apply_per_lane"),
                            PtxLaunch(block=(64, 1, 1), reconvergence=policy,
                                      args={0: data, 1: np.zeros(64, np.int32), 2: 60}))
    out = result.buffers["apply_per_lane_param_1"].tolist()
    assert out == [unary(i % 3, int(x)) for i, x in enumerate(data[:60])] + [0] * 4
    if policy != "mimd":  # mimd runs one thread at a time: nothing diverges
        assert result.counters.divergent_branches >= 2  # the bounds check and the call


@pytest.mark.parametrize("build", ["O3", "G"])
def test_a_pointer_chosen_per_element_and_one_chosen_by_a_parameter(build):
    data = np.arange(-16, 16, dtype=np.int32)
    result = run_ptx_kernel(pointers(build, "pick_by_sign"),
                            PtxLaunch(args={0: data, 1: np.zeros(32, np.int32), 2: 32}))
    assert result.buffers["pick_by_sign_param_1"].tolist() == [abs(int(x)) if x < 0
                                                               else int(x) ** 2 for x in data]
    for which in range(3):
        result = run_ptx_kernel(pointers(build, "apply_uniform"),
                                PtxLaunch(args={0: data, 1: np.zeros(32, np.int32), 2: 32,
                                                3: which}))
        assert result.buffers["apply_uniform_param_1"].tolist() == [unary(which, int(x))
                                                                    for x in data]


def test_a_call_through_an_address_of_no_function_stops_the_run():
    """The legacy sample's pointer is a kernel parameter: here, a number."""
    path = SAMPLES / "ptx_legacy" / "nvopencc40_ptx22_sm20.ptx"
    kernel = executable(path.read_text(), "apply_fp", str(path))
    with pytest.raises(PtxExecutionError, match="call through address 0x5, which is no "
                                                "function of this file taking these arguments"):
        run_ptx_kernel(kernel, PtxLaunch(args={0: 5, 1: np.zeros(32, np.int32), 2: 3}))


def test_inlining_leaves_calls_through_pointers_to_the_run():
    inlined = FunctionReader(POINTERS["O3"].read_text(), "f.ptx").inlined("apply_per_lane")
    assert inlined.attrs["calls_not_inlined"] == ("indirect call through %rd7",)


def nested_chain(depth: int) -> str:
    """A kernel calling f1, which calls f2, … down to f{depth}: each adds one."""
    functions = []
    for k in range(depth, 0, -1):
        inner = (f"""    {{
    .param .b32 a;
    .param .b32 b;
    st.param.b32 [a], %x;
    call.uni (b), f{k + 1}, (a);
    ld.param.b32 %x, [b];
    }}
""" if k < depth else "")
        functions.append(f""".func (.param .b32 r) f{k}(.param .b32 v)
{{
    .reg .b32 %x;
    ld.param.b32 %x, [v];
{inner}    add.s32 %x, %x, 1;
    st.param.b32 [r], %x;
    ret;
}}
""")
    return HEADER + "".join(functions) + """
.visible .entry chain(.param .u64 out)
{
    .reg .b32 %t, %v;
    .reg .b64 %o, %a;
    mov.u32 %t, %tid.x;
    {
    .param .b32 a;
    .param .b32 b;
    st.param.b32 [a], %t;
    call.uni (b), f1, (a);
    ld.param.b32 %v, [b];
    }
""" + STORE_OUT


def test_calls_nested_deeper_than_inlining_goes_run_as_calls(tmp_path):
    from gpudiv import api
    from gpudiv.lang.load import load

    path = tmp_path / "chain.ptx"
    path.write_text(nested_chain(12))
    inlined = load(path).kernel("chain")
    assert inlined.attrs["calls_not_inlined"]  # inlining stops at depth 8
    result = run_ptx_kernel(api.kernel_to_run(path, inlined),
                            PtxLaunch(args={0: np.zeros(32, np.uint32)}))
    assert result.buffers["out"].tolist() == [t + 12 for t in range(32)]
