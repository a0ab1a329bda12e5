"""The PTX front end: every sample dialect parses and is analysed, the lowering decisions of
docs/ptx.md, golden divergence results read off the CUDA sources, diagnostics."""

import json
import random
import re
from functools import cache
from pathlib import Path

import pytest

from gpudiv import ir
from gpudiv.analyses.facts import atom_texts, kernel_facts
from gpudiv.analyses.simple import analyze_kernel
from gpudiv.ir.cfg import build_cfg
from gpudiv.ir.ssa import build_ssa
from gpudiv.lang.ptx import fast as ptx_fast
from gpudiv.lang.ptx import parse as ptx
from gpudiv.lang.ptx.parse import parse_ptx, parse_ptx_timed, special_class
from gpudiv.lang.ptx.synth import synthetic_ptx
from tests.fast_loop import debug_builds_slow

SAMPLES = Path(__file__).parents[3] / "samples"
PTX_FILES = sorted([*SAMPLES.glob("cuda/*.ptx"), *SAMPLES.glob("ptx_legacy/*.ptx")])


@cache
def parse_file(path: Path) -> ir.Program:
    """Parsed once per test run (the analyses do not change kernels)."""
    return parse_ptx(path.read_text(), str(path))


def parse_ok(text: str, path: str = "t.ptx") -> ir.Program:
    program = parse_ptx(text, path)
    assert program.errors == [], [str(d) for d in program.errors]
    return program


def kernel_of(text: str, name: str | None = None) -> ir.Kernel:
    program = parse_ok(text)
    return program.kernel(name) if name else program.kernels[0]


def branch_lines(kernel: ir.Kernel, cu_name: str | None = None) -> dict[int, list[bool]]:
    """CUDA source line → divergence of each conditional branch that carries it."""
    result = analyze_kernel(kernel)
    instrs = kernel.instructions()
    lines: dict[int, list[bool]] = {}
    for branch in result.branches:
        origin = instrs[branch.instruction].attrs.get("origin")
        if origin and (cu_name is None or origin[0].endswith(cu_name)):
            lines.setdefault(origin[1], []).append(branch.divergent)
    return lines


def setp_lines(kernel: ir.Kernel, cu_name: str) -> dict[int, list[bool]]:
    """CUDA source line → divergence of each `setp` result that carries it."""
    result = analyze_kernel(kernel)
    divergent = {v.name for v in result.variables if v.klass == "divergent"}
    lines: dict[int, list[bool]] = {}
    for n, instr in enumerate(kernel.instructions()):
        origin = instr.attrs.get("origin")
        if (origin and origin[0].endswith(cu_name) and str(instr.operator).startswith("setp")
                and result.ssa.defs[n]):
            lines.setdefault(origin[1], []).append(result.ssa.defs[n] in divergent)
    return lines


def var_class(kernel: ir.Kernel, source: str) -> list[str]:
    return [v.klass for v in analyze_kernel(kernel).by_source(source)]


def wrap(body: str, params: str = ".param .u32 n") -> str:
    return f""".version 8.0
.target sm_80
.address_size 64
.visible .entry k({params})
{{
	.reg .pred %p<8>;
	.reg .b32 %r<40>;
	.reg .b64 %rd<20>;
	.reg .f32 %f<10>;
{body}
}}
"""


# ---- the corpus -------------------------------------------------------------------------

@pytest.mark.parametrize("path", debug_builds_slow(PTX_FILES),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_sample_parses_and_every_kernel_is_analysed(path):
    program = parse_file(path)
    assert program.language == "ptx"
    assert program.errors == [], [str(d) for d in program.errors]
    assert program.kernels
    entries = re.findall(r"^[ \t]*(?:\.visible[ \t]+|\.weak[ \t]+)?\.entry\b", path.read_text(),
                         re.M)
    assert len(program.kernels) == len(entries)
    for kernel in program.kernels:
        for instr in kernel.instructions():
            assert instr.loc.line > 0 and instr.text
        result = analyze_kernel(kernel)
        assert result.instructions == kernel.instruction_count


def test_corpus_is_not_empty():
    assert len(list(SAMPLES.glob("cuda/*.ptx"))) >= 30
    assert len(list(SAMPLES.glob("ptx_legacy/*.ptx"))) >= 3


def _expectation_cases():
    expectations = json.loads((SAMPLES / "cuda" / "expectations.json").read_text())
    for file_name, kernels in expectations.items():
        for variant in ("O3", "G"):
            name = file_name.replace(".O3.", f".{variant}.")
            for kernel_name, expected in kernels.items():
                yield pytest.param(name, file_name.split(".")[0] + ".cu", kernel_name,
                                   expected, id=f"{name}-{kernel_name}")


@pytest.mark.parametrize("ptx_name, cu_name, kernel_name, expected", list(_expectation_cases()))
def test_golden_expectations_from_cuda_source(ptx_name, cu_name, kernel_name, expected):
    kernel = parse_file(SAMPLES / "cuda" / ptx_name).kernel(kernel_name)
    branches = branch_lines(kernel, cu_name)
    setps = setp_lines(kernel, cu_name)
    for line in expected["divergent_source_lines"]:
        seen = branches.get(line) or setps.get(line)
        assert seen and any(seen), f"line {line} should be divergent: {seen}"
    for line in expected["uniform_source_lines"]:
        seen = branches.get(line) or setps.get(line)
        assert seen and not any(seen), f"line {line} should be uniform: {seen}"


# ---- golden checks read off the CUDA sources --------------------------------------------

def test_thread_bound_branch_is_divergent_and_points_at_the_cu_line():
    kernel = parse_file(SAMPLES / "cuda" / "vector_ops.O3.ptx").kernel("vec_add")
    result = analyze_kernel(kernel)
    instrs = kernel.instructions()
    (branch,) = result.branches
    origin = instrs[branch.instruction].attrs["origin"]
    assert branch.divergent
    assert origin[0].endswith("vector_ops.cu") and origin[1] == 9
    cu_line = (SAMPLES / "cuda" / "vector_ops.cu").read_text().splitlines()[origin[1] - 1]
    assert "if (i < n)" in cu_line
    assert instrs[branch.instruction].text.startswith("@%p1 bra")


@pytest.mark.parametrize("variant", ["O3", "G"])
def test_grid_stride_loop_exit_is_divergent(variant):
    kernel = parse_file(SAMPLES / "cuda" / f"grid_stride.{variant}.ptx").kernel("gs_fill")
    assert any(branch_lines(kernel, "grid_stride.cu")[9])
    assert analyze_kernel(kernel).relations.get("divergent_loop_exit")


@pytest.mark.parametrize("variant", ["O3", "G"])
def test_loop_over_uniform_tile_count_is_uniform(variant):
    kernel = parse_file(SAMPLES / "cuda" / f"matmul_tiled.{variant}.ptx").kernel("matmul_tiled")
    lines = branch_lines(kernel, "matmul_tiled.cu")
    assert lines[16] and not any(lines[16])
    assert any(lines.get(27, [])), "the threadIdx-dependent store guard stays divergent"


def test_tid_y_and_tid_z_are_divergent():
    kernel = parse_file(SAMPLES / "cuda" / "indexing_2d_3d.O3.ptx").kernel("volume_scale_3d")
    assert kernel.specials["%tid.y"] == kernel.specials["%tid.z"] == "divergent"
    assert kernel.specials["%ctaid.y"] == "uniform"
    only_y = kernel_of(wrap("""
	mov.u32 %r1, %tid.y;
	setp.lt.u32 %p1, %r1, 4;
	@%p1 bra DONE;
	mov.u32 %r2, 1;
DONE:
	ret;"""))
    assert branch_lines(only_y) == {} and analyze_kernel(only_y).branches[0].divergent


def test_special_register_classes():
    for name in ("%tid.x", "%tid.y", "%tid.z", "%laneid", "%clock", "%clock64",
                 "%globaltimer", "%lanemask_lt", "%pm0", "%made_up.x"):
        assert special_class(name) == "divergent", name
    for name in ("%ntid.x", "%ctaid.z", "%nctaid.y", "%gridid", "%warpid", "%nwarpid",
                 "%smid", "%nsmid", "%envreg7", "%dynamic_smem_size", "%cluster_ctarank"):
        assert special_class(name) == "uniform", name


def test_bra_uni_carries_uniform_hint():
    program = parse_file(SAMPLES / "ptx_legacy" / "nvopencc_ptx14_sm13.ptx")
    jumps = [i for i in program.kernel("row_sum_varlen").instructions()
             if i.attrs["opcode"] == "bra.uni"]
    assert jumps and all(i.kind == ir.JUMP and i.attrs["uniform_hint"] for i in jumps)
    kernel = kernel_of(wrap("""
	mov.u32 %r1, %tid.x;
	setp.eq.u32 %p1, %r1, 0;
	@%p1 bra.uni L;
	mov.u32 %r2, 1;
L:
	ret;"""))
    branch = next(i for i in kernel.instructions() if i.kind == ir.BRANCH)
    assert branch.operator == "bnz" and branch.attrs["uniform_hint"] is True
    facts = atom_texts(kernel_facts(build_ssa(build_cfg(kernel))))
    assert any(f.startswith("uniform_hint(") for f in facts)
    assert analyze_kernel(kernel).branches[0].divergent  # the hint is not believed


def test_origin_of_inlined_loc_and_old_three_number_loc():
    program = parse_file(SAMPLES / "ptx_legacy" / "nvopencc_ptx14_sm13.ptx")
    branch = next(i for i in program.kernel("vec_add_guarded").instructions()
                  if i.kind == ir.BRANCH)
    assert branch.attrs["origin"] == ("legacy14_kernels.cu", 5, 0)
    kernel = parse_file(SAMPLES / "cuda" / "grid_stride.O3.ptx").kernel("gs_count_equal")
    inlined = [i for i in kernel.instructions() if i.attrs.get("inlined_at")]
    assert inlined
    assert inlined[0].attrs["origin"][0].endswith("device_atomic_functions.hpp")
    assert inlined[0].attrs["inlined_at"][0][0].endswith("grid_stride.cu")
    assert inlined[0].attrs["inlined_at"][0][1] == 32


# ---- lowering decisions ------------------------------------------------------------------

def test_guarded_definition_is_a_select_of_the_old_value():
    kernel = kernel_of(wrap("""
	mov.u32 %r1, 7;
	mov.u32 %r2, %tid.x;
	setp.lt.u32 %p1, %r2, 4;
	@%p1 mov.u32 %r1, 9;
	@!%p1 add.s32 %r3, %r2, 1;
	st.global.u32 [%rd1], %r1;
	ret;"""))
    instrs = kernel.instructions()
    temp, select = instrs[3], instrs[4]
    assert temp.dest.startswith("%r1@g") and temp.operator == "mov.u32"
    assert (select.dest, select.operator) == ("%r1", "select")
    assert select.args == (ir.Var("%p1"), ir.Var(temp.dest), ir.Var("%r1"))
    assert select.text == "@%p1 mov.u32 %r1, 9;"
    negated = instrs[6]
    assert negated.operator == "select.not"
    assert len(negated.args) == 2, "only definition of %r3: no undefined old value is read"
    # the constant 9 is selected by a divergent guard: %r1 is divergent after the select
    assert var_class(kernel, "%r1")[-1] == "divergent"


def test_guarded_store_barrier_and_atomic_keep_their_guard():
    kernel = kernel_of(wrap("""
	mov.u32 %r1, %tid.x;
	setp.eq.u32 %p1, %r1, 0;
	@%p1 st.global.u32 [%rd1], %r1;
	@%p1 bar.sync 0;
	@!%p1 red.global.add.u32 [%rd1], 1;
	@%p1 atom.global.add.u32 %r2, [%rd1], 1;
	ret;"""))
    kinds = [(i.kind, i.guard) for i in kernel.instructions()]
    guard = ir.Guard(ir.Var("%p1"))
    assert (ir.STORE, guard) in kinds and (ir.BARRIER, guard) in kinds
    assert (ir.ATOMIC, ir.Guard(ir.Var("%p1"), negated=True)) in kinds
    store = next(i for i in kernel.instructions() if i.kind == ir.STORE)
    assert "%p1" in store.used_vars, "the guard is a read the def-use chains see"
    atomic = next(i for i in kernel.instructions() if i.kind == ir.ATOMIC and i.dest)
    assert atomic.dest.startswith("%r2@g")


def test_guarded_ret_and_exit_branch_to_stop_blocks():
    kernel = kernel_of(wrap("""
	mov.u32 %r1, %tid.x;
	setp.eq.u32 %p1, %r1, 0;
	@%p1 ret;
	@!%p1 exit;
	ret;"""))
    branches = [i for i in kernel.instructions() if i.kind == ir.BRANCH]
    assert [(b.operator, b.target) for b in branches] == [("bnz", "$exit.1"), ("bz", "$exit.2")]
    for label in ("$exit.1", "$exit.2"):
        block = kernel.block(label)
        assert [i.kind for i in block.instructions] == [ir.STOP] and not block.user_label
    analyze_kernel(kernel)


def test_two_destinations_and_vectors_give_one_instruction_each():
    kernel = kernel_of(wrap("""
	setp.lt.s32 %p1|%p2, %r1, %r2;
	add.cc.u32 %r3, %r1, 1;
	addc.u32 %r4, %r2, 0;
	ld.global.v4.f32 {%f1, _, %f2, %f3}, [%rd1+16];
	st.global.v2.f32 [%rd2], {%f1, %f2};
	mov.b64 {%r5, %r6}, %rd3;
	ret;"""))
    instrs = kernel.instructions()
    assert [i.dest for i in instrs[:2]] == ["%p1", "%p2"]
    assert instrs[0].operator == "setp.lt.s32" and instrs[0].attrs["opcode"] == "setp.lt.s32"
    assert [i.dest for i in instrs[2:4]] == ["%r3", "%%cc"]
    assert ir.Var("%%cc") in instrs[4].args
    loads = [i for i in instrs if i.kind == ir.LOAD]
    assert [i.dest for i in loads] == ["%f1", "%f2", "%f3"]
    assert all(i.args == (ir.Var("%rd1"),) and i.space == "global" for i in loads)
    stores = [i for i in instrs if i.kind == ir.STORE]
    assert [i.args for i in stores] == [(ir.Var("%rd2"), ir.Var("%f1")),
                                        (ir.Var("%rd2"), ir.Var("%f2"))]
    assert [i.dest for i in instrs if i.attrs["opcode"] == "mov.b64"] == ["%r5", "%r6"]


def test_memory_spaces_and_sources():
    kernel = kernel_of(wrap("""
	.local .align 4 .b8 __local_depot0[16];
	.shared .align 4 .b8 sh[64];
	ld.param.u32 %r1, [n];
	ld.shared.u32 %r2, [sh+4];
	ld.local.u32 %r3, [__local_depot0];
	ld.u32 %r4, [%rd1];
	mov.u64 %rd2, __local_depot0;
	cvta.local.u64 %rd3, %rd2;
	add.u64 %rd4, %rd3, 8;
	ld.u32 %r5, [%rd4];
	tex.1d.v4.s32.s32 {%r6, %r7, %r8, %r9}, [tex0, {%r1}];
	atom.global.add.u32 %r10, [%rd1], 1;
	ret;"""))
    loads = {i.dest: i for i in kernel.instructions() if i.kind in (ir.LOAD, ir.ATOMIC)}
    assert (loads["%r1"].space, loads["%r1"].args) == ("param", (ir.Var("n"),))
    assert (loads["%r2"].space, loads["%r2"].args) == ("shared", (ir.Const(0),))
    assert loads["%r2"].attrs["symbol"] == "sh" and loads["%r2"].attrs["offset"] == 4
    assert loads["%r3"].space == "local"
    assert loads["%r4"].space == "generic"
    assert loads["%r5"].space == "local" and loads["%r5"].attrs["generic"] is True
    assert loads["%r6"].space == "texture" and loads["%r6"].args == (ir.Var("%r1"),)
    assert loads["%r10"].kind == ir.ATOMIC and loads["%r10"].space == "global"
    result = analyze_kernel(kernel)
    classes = {v.source: v.klass for v in result.variables}
    assert classes["%r1"] == "uniform" and classes["%r2"] == "uniform"
    assert classes["%r3"] == classes["%r5"] == classes["%r10"] == "divergent"


def test_warp_collectives():
    kernel = kernel_of(wrap("""
	mov.u32 %r1, %tid.x;
	setp.lt.u32 %p1, %r1, 4;
	vote.sync.ballot.b32 %r2, %p1, -1;
	vote.all.pred %p2, %p1;
	activemask.b32 %r3;
	shfl.sync.down.b32 %r4|%p3, %r1, 1, 31, -1;
	ret;"""))
    instrs = {i.dest: i for i in kernel.instructions()}
    assert instrs["%r2"].kind == ir.ASSIGN and instrs["%r2"].args == ()
    assert instrs["%r3"].kind == ir.ASSIGN and instrs["%r3"].args == ()
    assert instrs["%r4"].kind == instrs["%p3"].kind == ir.OPAQUE
    classes = {v.source: v.klass for v in analyze_kernel(kernel).variables}
    assert classes["%r2"] == classes["%p2"] == classes["%r3"] == "uniform"
    assert classes["%r4"] == classes["%p3"] == "divergent"


def test_unknown_opcode_warns_once_and_is_opaque():
    program = parse_ptx(wrap("""
	frobnicate.b32 %r1, %r2;
	frobnicate.b32 %r3, %r2;
	zap.sync %r4;
	membar.gl;
	ret;"""), "t.ptx")
    assert program.errors == []
    (warning,) = [d for d in program.diagnostics if d.severity == "warning"]
    assert "unknown opcodes" in warning.message and "frobnicate.b32, zap.sync" in warning.message
    kernel = program.kernels[0]
    opaque = [i for i in kernel.instructions() if i.kind == ir.OPAQUE]
    assert [i.dest for i in opaque] == ["%r1", "%r3", "%r4"]
    membar = [i for i in kernel.instructions() if i.attrs["opcode"] == "membar.gl"]
    assert [i.kind for i in membar] == [ir.FENCE], "kept (printable), no effect on values"
    facts = atom_texts(kernel_facts(build_ssa(build_cfg(kernel))))
    assert 'source("%r1#1","opaque")' in facts


def test_brx_idx_branches_to_every_target():
    kernel = kernel_of(wrap("""
	mov.u32 %r1, %tid.x;
	ts: .branchtargets A, B, C;
	brx.idx %r1, ts;
A:
	ret;
B:
	ret;
C:
	ret;"""))
    control = [(i.kind, i.target) for i in kernel.instructions() if i.target]
    assert control == [(ir.BRANCH, "A"), (ir.BRANCH, "B"), (ir.JUMP, "C")]
    assert all(b.divergent for b in analyze_kernel(kernel).branches)


# ---- calls -------------------------------------------------------------------------------

def test_func_bodies_are_inlined_per_call_site():
    program = parse_file(SAMPLES / "cuda" / "device_functions.O3.ptx")
    uniform = branch_lines(program.kernel("pow_uniform_exponent"), "device_functions.cu")
    divergent = branch_lines(program.kernel("pow_per_element"), "device_functions.cu")
    assert uniform[16] and not any(uniform[16])  # ipow's loop with a parameter exponent
    assert any(divergent[16])  # the same loop with a per-element exponent
    nested = program.kernel("shift_clamped")  # gather_clamped calls clamp_index
    functions = {i.attrs.get("function") for i in nested.instructions()}
    assert {"_Z14gather_clampedPKfii", "_Z11clamp_indexii"} <= functions
    assert any(branch_lines(nested, "device_functions.cu")[7])
    inlined = next(i for i in nested.instructions()
                   if i.attrs.get("function") == "_Z11clamp_indexii")
    assert inlined.attrs["inlined_at"][0][0].endswith("device_functions.cu")
    labels = [b.label for b in nested.blocks]
    assert len(labels) == len(set(labels))


CALLS = """
.version 3.1
.target sm_20
.address_size 64
.func (.reg .u32 %rv) add_regs (.reg .u32 %ra, .reg .u32 %rb)
{
	add.u32 %rv, %ra, %rb;
	ret;
}
.func (.param .align 8 .b8 pair_retval[8]) make_pair (.param .b32 mp_a, .param .b32 mp_b)
{
	.reg .b32 %r<3>;
	ld.param.b32 %r1, [mp_a];
	ld.param.b32 %r2, [mp_b];
	st.param.b32 [pair_retval+0], %r1;
	st.param.b32 [pair_retval+4], %r2;
	ret;
}
.func (.param .b32 r) forever (.param .b32 x)
{
	.reg .b32 %r<3>;
	ld.param.b32 %r1, [x];
	{
	.param .b32 param0;
	st.param.b32 [param0+0], %r1;
	.param .b32 retval0;
	call.uni (retval0), forever, (param0);
	ld.param.b32 %r2, [retval0+0];
	}
	st.param.b32 [r+0], %r2;
	ret;
}
.extern .func (.param .b32 r) external (.param .b32 x);
.visible .entry calls(.param .u32 u)
{
	.reg .b32 %r<20>;
	.reg .pred %p<2>;
	ld.param.u32 %r1, [u];
	mov.u32 %r2, %tid.x;
	call.uni (%r3), add_regs, (%r1, 5);
	{
	.param .b32 param0;
	st.param.b32 [param0+0], %r1;
	.param .b32 param1;
	st.param.b32 [param1+0], %r2;
	.param .align 8 .b8 retval0[8];
	call.uni (retval0), make_pair, (param0, param1);
	ld.param.b32 %r4, [retval0+0];
	ld.param.b32 %r5, [retval0+4];
	}
	{
	.param .b32 param0;
	st.param.b32 [param0+0], %r1;
	.param .b32 retval0;
	call.uni (retval0), forever, (param0);
	ld.param.b32 %r6, [retval0+0];
	call.uni (retval0), external, (param0);
	ld.param.b32 %r7, [retval0+0];
	}
	setp.eq.u32 %p1, %r2, 0;
	@%p1 call.uni (%r8), add_regs, (%r1, %r1);
	mov.u32 %r9, %r8;
	ret;
}
"""


def test_call_binding_through_param_slots_and_registers():
    program = parse_ptx(CALLS, "calls.ptx")
    assert program.errors == []
    warnings = " ".join(d.message for d in program.diagnostics if d.severity == "warning")
    assert "recursive call to 'forever'" in warnings
    assert "without a body" in warnings and "external" in warnings
    kernel = program.kernel("calls")
    classes = {v.source: v.klass for v in analyze_kernel(kernel).variables}
    assert classes["%r3"] == "uniform"  # add_regs(u, 5)
    assert classes["%r4"] == "uniform"  # first field of make_pair(u, tid)
    assert classes["%r5"] == "divergent"  # second field
    assert classes["%r6"] == classes["%r7"] == "divergent"  # recursion, no body: opaque
    skip = next(i for i in kernel.instructions() if i.kind == ir.BRANCH)
    assert skip.operator == "bz" and skip.target.startswith("$skip@")
    assert var_class(kernel, "%r8")[0] == "uniform"  # inside the call: add_regs(u, u)
    assert classes["%r9"] == "divergent"  # after it: defined only where the guard held


OLD_ABI = """
	.version 2.3
	.target sm_20
	.func (.param .s32 __cudaretf__Z4halfi) _Z4halfi (.param .s32 __cudaparmf1__Z4halfi)
	{
	.reg .u32 %r<4>;
	ld.param.s32 	%r1, [__cudaparmf1__Z4halfi];
	shr.s32 	%r2, %r1, 1;
	st.param.s32 	[__cudaretf__Z4halfi], %r2;
	ret;
	$LDWend__Z4halfi:
	}
	.entry _Z4testPi (
		.param .u64 __cudaparm__Z4testPi_out)
	{
	.reg .u32 %r<6>;
	.reg .u64 %rd<4>;
	cvt.u32.u16 	%r1, %tid.x;
	st.param.s32 	[__cudaparmf1__Z4halfi], %r1;
	call.uni (__cudaretf__Z4halfi), _Z4halfi, (__cudaparmf1__Z4halfi);
	ld.param.s32 	%r2, [__cudaretf__Z4halfi];
	mov.u32 %r3, 8;
	st.param.s32 	[__cudaparmf1__Z4halfi], %r3;
	call.uni (__cudaretf__Z4halfi), _Z4halfi, (__cudaparmf1__Z4halfi);
	ld.param.s32 	%r4, [__cudaretf__Z4halfi];
	exit;
	}
"""


def test_old_abi_passes_the_callee_parameter_names():
    kernel = kernel_of(OLD_ABI)
    classes = {v.source: v.klass for v in analyze_kernel(kernel).variables}
    assert classes["%r2"] == "divergent"  # half(tid)
    assert classes["%r4"] in ("uniform", "constant")  # half(8)


# ---- scopes, grammar coverage --------------------------------------------------------------

def test_nested_scope_shadowing_renames_the_inner_register():
    kernel = kernel_of(wrap("""
	mov.u32 %r1, %tid.x;
	{
	.reg .b32 %r1;
	mov.u32 %r1, 5;
	mov.u32 %r2, %r1;
	}
	mov.u32 %r3, %r1;
	ret;"""))
    instrs = kernel.instructions()
    assert instrs[1].dest == "%r1$s1" and instrs[2].args == (ir.Var("%r1$s1"),)
    assert instrs[3].args == (ir.Var("%r1"),)
    classes = {v.source: v.klass for v in analyze_kernel(kernel).variables}
    assert classes["%r2"] == "constant" or classes["%r2"] == "uniform"
    assert classes["%r3"] == "divergent"


COVERAGE = r"""
// line comment
/* block
   comment */
.version 8.5
.target sm_90a, debug, texmode_independent, map_f64_to_f32
.address_size 64
.file 1 "/src/k.cu", 1700000000, 1234
.file	2	"/src/h.cuh"
.extern .shared .align 16 .b8 smem[];
.visible .global .align 4 .u32 gcount;
.global .align 4 .b8 table[8] = {1, 2, 3, 4, 0x05, -1, 0, 0};
.const .align 8 .f64 cst[2] = {0d3FF0000000000000, 1.5};
.global .u64 ptrs[2] = {generic(gcount), table+4};
.global .align 4 .u32 grid[2][2] = {{1, 2}, {3, 4}};
.global .texref tex0;
.global .samplerref samp0 = { addr_mode_0 = clamp_to_edge, filter_mode = nearest };
.global .surfref surf0;
.tex .u32 oldtex;
.section .debug_str
{
.b8 123, 125, 0
$L__info_string0:
.b8 95,0
}
.weak .func (.param .b32 r) weakfn (.param .b32 a) { ret; }
.func noparams { ret; }
.func emptyparams () { ret; }
.func (.param .b32 func_retval0) proto_target (.param .b32 p)
{ st.param.b32 [func_retval0], 0; ret; }
.visible .entry cover(
	.param .u64 .ptr .global .align 16 cover_param_0,
	.param .u32 cover_param_1,
	.param .align 8 .b8 cover_param_2[16]
)
.maxntid 256, 1, 1
.reqntid 256
.minnctapersm 2
.maxnreg 64
{
	.reg .pred %p<4>;
	.reg .b32 %r<40>;
	.reg .f32 %f<8>;
	.reg .b64 %rd<10>;
	.reg .b32 temp_param_reg;
	.reg .pred $p, q;
	.local .align 4 .b8 __local_depot0[16];
	.shared .align 4 .b32 sh[32];
	.pragma "nounroll";
	.loc 1 10 3
	ld.param.u64 %rd1, [cover_param_0];
	ld.param.u32 %r1, [cover_param_1];
	ld.param.v2.u32 {%r2, %r3}, [cover_param_2+8];
	mov.u32 %r4, %tid.x;
	mov.f32 %f1, 0f3F800000;
	mov.f32 %f2, 0F3F800000;
	mov.f64 %rd5, 0d3FF0000000000000;
	mov.b32 %r10, 0x7fffffff;
	mov.b32 %r11, -42;
	mov.u64 %rd6, gcount+4;
	setp.lt.and.s32 %p3, %r4, %r1, !%p1;
	.loc 2 5 7, function_name $L__info_string0, inlined_at 1 12 5
	@%p1 add.s32 %r15, %r4, 1;
	@!%p1 mov.u32 %r16, %r4;
	@$p mov.u32 temp_param_reg, 3;
	@q mov.u32 %r17, 1;
	ld.global.nc.f32 %f5, [%rd1+-4];
	ld.global.f32 %f6, [%rd1-8];
	ld.shared::cta.u32 %r18, [sh];
	ld.const.u32 %r19, [table];
	ld.local.u32 %r20, [__local_depot0+4];
	ldu.global.u32 %r21, [%rd1];
	ld.volatile.global.u32 %r22, [%rd1];
	ld.global.u32 %r23, [0x1000];
	st.local.v2.u32 [__local_depot0], {%r1, %r2};
	tex.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [tex0, samp0, {%f5, %f6}];
	suld.b.2d.b32.trap {%r25}, [surf0, {%r1, %r2}];
	sust.b.2d.b32.trap [surf0, {%r1, %r2}], {%r25};
	cp.async.ca.shared.global [sh], [%rd1], 16;
	cp.async.commit_group;
	cp.async.wait_group 0;
	bar.arrive 1, 64;
	/* inline comment */ add.s32 %r26, %r1, 2; // trailing comment
	{ // callseq 0, 0
	.reg .b32 temp_param_reg;
	.param .b32 param0;
	st.param.b32 [param0+0], %r1;
	.param .b32 retval0;
	call.uni (retval0),
	proto_target,
	(
	param0
	);
	ld.param.b32 %r27, [retval0+0];
	}
	call noparams;
	call.uni emptyparams, ();
	prototype_0 : .callprototype (.param .b32 _) _ (.param .b32 _);
	{
	.param .b32 param0;
	.param .b32 retval0;
	call (retval0), %rd1, (param0), prototype_0;
	}
	@%p1 bra $L__BB0_2;
	bra.uni $L__BB0_1;
$L__BB0_1:
$alias:
	@%p3 bra.uni $L__BB0_2;
$L__BB0_2:
	ret;
}
"""


def test_grammar_coverage_of_every_syntax_form():
    program = parse_ok(COVERAGE, "cover.ptx")
    (kernel,) = program.kernels
    assert kernel.name == "cover"
    assert kernel.params == ["cover_param_0", "cover_param_1", "cover_param_2"]
    by_text = {i.text: i for i in kernel.instructions()}
    assert by_text["mov.f32 %f1, 0f3F800000;"].args == (ir.Const(0x3F800000),)
    assert by_text["mov.b32 %r10, 0x7fffffff;"].args == (ir.Const(0x7FFFFFFF),)
    assert by_text["mov.b32 %r11, -42;"].args == (ir.Const(-42),)
    assert by_text["ld.global.nc.f32 %f5, [%rd1+-4];"].args == (ir.Var("%rd1"),)
    assert by_text["ld.global.u32 %r23, [0x1000];"].args == (ir.Const(0x1000),)
    assert by_text["add.s32 %r26, %r1, 2;"].loc.column > 20
    mov_symbol = by_text["mov.u64 %rd6, gcount+4;"]
    # A symbol's address is uniform but not a known number: a uniform special, never 0.
    assert mov_symbol.args == (ir.Special("gcount"),)
    assert mov_symbol.attrs["symbols"] == ("gcount",)
    assert mov_symbol.attrs["arg_symbols"] == (("gcount", 4),)
    setp = by_text["setp.lt.and.s32 %p3, %r4, %r1, !%p1;"]
    assert setp.args == (ir.Var("%r4"), ir.Var("%r1"), ir.Var("%p1"))
    assert setp.attrs["origin"] == ("/src/k.cu", 10, 3)
    guarded = next(i for i in kernel.instructions() if i.guard == ir.Guard(ir.Var("$p")))
    assert guarded.attrs["origin"] == ("/src/h.cuh", 5, 7)
    assert guarded.attrs["inlined_at"] == (("/src/k.cu", 12, 5),)
    call_text = "call.uni (retval0), proto_target, ( param0 );"
    assert any(i.text == call_text for i in kernel.instructions())
    assert kernel.specials == {"%tid.x": "divergent", "gcount": "uniform"}
    opaque = [i for i in kernel.instructions() if i.kind == ir.OPAQUE]
    assert [i.operator for i in opaque] == ["call"]  # the indirect call
    analyze_kernel(kernel)


def test_legacy_dialect_forms():
    program = parse_file(SAMPLES / "ptx_legacy" / "nvopencc_ptx14_sm13.ptx")
    kernel = program.kernel("vec_add_guarded")
    assert kernel.params[0] == "__cudaparm_vec_add_guarded_a"
    first = kernel.instructions()[0]
    assert first.text == "cvt.u32.u16 %r1, %tid.x;" and first.args == (ir.Special("%tid.x"),)
    assert kernel.blocks[0].label == "$LDWbegin_vec_add_guarded"
    llvm = parse_file(SAMPLES / "ptx_legacy" / "llvm_nvptx_ptx70_sm70.ptx")
    lines = branch_lines(llvm.kernel("mirror_copy"), "llvm_kernels.cu")
    assert any(lines[12]) and any(lines[4])  # inlined mirror_index(i - shift)
    tile = branch_lines(llvm.kernel("tile_sum"), "llvm_kernels.cu")
    assert tile[20] and not any(tile[20])


# ---- diagnostics ----------------------------------------------------------------------------

BROKEN = """.version 7.0
.target sm_70
.address_size 64
.visible .entry good1(.param .u32 n)
{
	mov.u32 %r1, %tid.x;
	ret;
}
.visible .entry broken(.param .u32 n)
{
	mov.u32 %r1, %tid.x
	add.s32 %r2, %r1, 1;
	ret;
}
.visible .entry nolabel()
{
	bra $L__missing;
	ret;
}
.visible .entry duplabel()
{
L1:
	ret;
L1:
	ret;
}
.visible .entry good2()
{
	ret;
}
"""


def test_syntax_error_has_line_and_column_and_other_kernels_survive():
    program = parse_ptx(BROKEN, "bad.ptx")
    assert [k.name for k in program.kernels] == ["good1", "good2"]
    messages = [str(d) for d in program.errors]
    assert messages[0].startswith("bad.ptx:12:2: error: unexpected 'add.s32'; expected one of")
    assert "';'" in messages[0]
    assert "bad.ptx:17:2: error: undefined label '$L__missing' in kernel nolabel" in messages
    assert "bad.ptx:24:1: error: label 'L1' already defined at line 22" in messages


def test_missing_closing_brace_loses_only_that_kernel():
    text = BROKEN.replace("L1:\n\tret;\nL1:\n\tret;\n}", "\tret;\n")
    program = parse_ptx(text, "bad.ptx")
    assert [k.name for k in program.kernels] == ["good1", "good2"]
    assert any("unexpected end of input" in d.message for d in program.errors)


@pytest.mark.parametrize("text", [
    "", "garbage", ".entry", ".entry k() {", "}}}", "{{{", "\x00", '"open', "/* open",
    ".version 7.0\n.entry k() { @ }", ".entry k() { mov.u32 %r1, ; }",
    ".entry k() { bra; }", ".entry k() { brx.idx %r1, nowhere; L: ret; }",
    ".entry k() { call; }", ".entry k() { ld.param.u32 %r1; ret; }",
])
def test_bad_input_never_raises(text):
    program = parse_ptx(text, "bad.ptx")
    assert program.kernels == [] or program.errors == []
    for diagnostic in program.diagnostics:
        assert str(diagnostic).startswith("bad.ptx:")


def test_empty_kernel_body_is_analysable():
    kernel = kernel_of(".version 7.0\n.target sm_70\n.entry k() { }\n")
    assert [i.kind for i in kernel.instructions()] == [ir.STOP]
    analyze_kernel(kernel)


def test_what_the_interpreter_reads_is_kept_in_attrs():
    """docs/ptx.md "What the interpreter reads": displacements, vector elements, carry-outs,
    symbol operands, negated predicates, collective operands, declared types, layouts."""
    kernel = kernel_of(wrap("""	.shared .align 8 .b8 buf[128];
	ld.global.v2.u32 {%r1, _, %r3}, [%rd1+16];
	st.shared.v2.f32 [buf+8], {%f1, %f2};
	add.cc.u32 %r4, %r1, %r3;
	addc.u32 %r5, 0, 0;
	setp.lt.and.s32 %p1|%p2, %r1, 5, !%p3;
	vote.sync.ballot.b32 %r6, !%p1, -1;
	mov.u32 %r7, buf+4;
	atom.shared.add.u32 %r8, [buf+12], 1;"""))
    by = {}
    for instr in kernel.instructions():
        by.setdefault(instr.attrs["opcode"], []).append(instr)
    loads = by["ld.global.v2.u32"]
    assert [(i.dest, i.attrs["element"], i.attrs["disp"]) for i in loads] == [
        ("%r1", 0, 16), ("%r3", 2, 24)]
    stores = by["st.shared.v2.f32"]
    assert [(i.attrs["symbol"], i.attrs["disp"], i.attrs["element"]) for i in stores] == [
        ("buf", 8, 0), ("buf", 12, 1)]
    carry = by["add.cc.u32"]
    assert [(i.dest, i.attrs.get("carry", False)) for i in carry] == [
        ("%r4", False), ("%%cc", True)]
    setp = by["setp.lt.and.s32"]
    assert [i.attrs.get("element") for i in setp] == [0, 1]
    assert all(i.attrs["negated"] == (2,) for i in setp)
    (vote,) = by["vote.sync.ballot.b32"]
    assert vote.args == () and vote.implicit == (ir.Var("%p1"), ir.Const(-1))
    assert vote.attrs["negated"] == (0,)
    (mov,) = by["mov.u32"]
    assert mov.args == (ir.Special("buf"),) and mov.attrs["arg_symbols"] == (("buf", 4),)
    (atom,) = by["atom.shared.add.u32"]
    assert (atom.attrs["symbol"], atom.attrs["disp"]) == ("buf", 12)
    assert kernel.attrs["reg_types"]["%r1"] == "b32" and kernel.attrs["reg_types"]["%p1"] == "pred"
    assert kernel.attrs["params"] == (("n", "u32", 4, 4),)
    assert kernel.attrs["symbols"]["buf"] == ("shared", "b8", 8, 128, ())


# ---- the fast path (gpudiv.lang.ptx.fast) against Lark alone ----------------------------

# The large programs of samples/cuda_large take a second each with Lark alone: full suite only.
ALL_PTX = debug_builds_slow(sorted(SAMPLES.rglob("*.ptx")), lambda p: p.parent.name == "cuda_large")


def parsed_forms(text: str, fast: bool) -> tuple:
    """What parsing alone gives (before lowering): functions with their bodies, module
    symbols, the .file table and the diagnostics."""
    reader = ptx._Reader(text, "t.ptx")
    reader.parse(fast)
    return (reader.order, reader.functions, reader.symbols, reader.symbol_details,
            reader.files, [str(d) for d in reader.program.diagnostics])


def fast_bodies(text: str) -> tuple[int, int]:
    """(function chunks, how many of them the fast path reads by itself)."""
    total = read = 0
    for start, end in ptx._chunks(text):
        source = text[start:end]
        brace = ptx_fast.find_body(source)
        if brace is not None:
            total += 1
            reader = ptx_fast.BodyReader(ptx.fast_patterns(), source, 1, 1)
            read += reader.read(brace) is not None
    return total, read


def assert_same_program(text: str) -> None:
    """The fast path and Lark alone give identical parsed forms and identical IR."""
    assert parsed_forms(text, True) == parsed_forms(text, False)
    fast, lark = parse_ptx(text, "t.ptx"), parse_ptx(text, "t.ptx", fast=False)
    assert [str(d) for d in fast.diagnostics] == [str(d) for d in lark.diagnostics]
    # Kernels compare everything: names, parameters, specials, attributes, blocks and every
    # instruction's kind, operands, location, text and attributes.
    assert fast.kernels == lark.kernels


@pytest.mark.parametrize("path", ALL_PTX, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fast_path_and_lark_build_identical_ir_on_every_sample(path):
    text = path.read_text()
    assert_same_program(text)
    total, read = fast_bodies(text)
    # Every committed sample is read by the fast path (a new sample that is not says which
    # statement shape the fast path should learn; results stay right either way).
    assert read == total > 0


@pytest.mark.parametrize("shape", ["many", "one"])
def test_fast_path_and_lark_agree_on_generated_ptx(shape):
    text = synthetic_ptx(2500, seed=7, kernels=shape)
    assert_same_program(text)
    assert parse_ok(text).kernels


FUZZ_HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n.global .u32 g;\n"
FUZZ_BODY_LINES = [
    line.strip() for line in COVERAGE.split("{\n\t.reg .pred %p<4>;", 1)[1].splitlines()
    if line.strip() and "callprototype" not in line and "prototype_0" not in line
]
TOKENS = ["%r1", "%tid.x", "%r1.x", "%rd2", "a", "a.b", "$L1", "_", "f.b:c", "sym", "1", "-2",
          "0x1F", "0b101", "017", "5U", "0f3F800000", "0d3FF0000000000000", "1.5", "-1.5e3",
          "2e5", "1."]
MUTATIONS = [",", ";", "{", "}", "[", "]", "(", ")", "|", "!", "+", "-", ":", ".", "@", "%",
             "_", " ", "\n", "0", "7", "0f", "0x", "e", "U", "$", "=", "<", ">", '"', "/* c */",
             "// c\n", "/*", "@%p1 ", "@!q ", ".loc 1 2 3 ", ".reg .b32 %q;", ".align 4",
             ", inlined_at 1 2 3", "[]", "{}", "()"]


def random_operand(rng: random.Random, depth: int = 0) -> str:
    """A well-formed operand: a token, `base±INT`, a vector, address, list, pair or `!x`."""
    roll = rng.random()
    if depth > 2 or roll < 0.5:
        return rng.choice(TOKENS)
    inner = ", ".join(random_operand(rng, depth + 1) for _ in range(rng.randint(1, 3)))
    return rng.choice([f"{{{inner}}}", f"[{inner}]", f"({inner})", "{}", "()",
                       f"!{random_operand(rng, depth + 1)}",
                       f"{random_operand(rng, depth + 1)}|{random_operand(rng, depth + 1)}",
                       f"{rng.choice(TOKENS[:10])} {rng.choice('+-')} {rng.choice(TOKENS[10:15])}"])


def random_statement(rng: random.Random) -> str:
    """A statement of the coverage kernel or a random instruction, mutated 0–2 times."""
    if rng.random() < 0.5:
        text = rng.choice(FUZZ_BODY_LINES)
    else:
        guard = rng.choice(["", "@%p1 ", "@!%p2 ", "@q "])
        operands = ", ".join(random_operand(rng) for _ in range(rng.randint(0, 4)))
        text = f"{guard}mad.lo.s32 {operands};"
    for _ in range(rng.choice((0, 0, 1, 1, 2))):
        pos = rng.randrange(len(text) + 1)
        roll = rng.random()
        if roll < 0.3:
            text = text[:pos] + text[pos + 1:]
        elif roll < 0.4:
            text = text[:pos] + text[pos:pos + 1] + text[pos:]
        else:
            text = text[:pos] + rng.choice(MUTATIONS) + text[pos:]
    return text


@pytest.mark.slow
def test_fast_path_matches_lark_on_mutated_and_random_statements():
    """Thousands of statements, many of them malformed: whatever the fast path accepts it
    reads exactly as Lark does, and what it does not accept gets Lark's own error."""
    rng = random.Random(1403)
    accepted = errors = 0
    for _ in range(1000):
        body = "\n".join(random_statement(rng) for _ in range(rng.randint(1, 2)))
        text = FUZZ_HEAD + wrap(body).split("\n", 3)[3]
        if rng.random() < 0.1:  # sometimes break the header instead
            pos = rng.randrange(len(FUZZ_HEAD), len(FUZZ_HEAD) + 40)
            text = text[:pos] + rng.choice(MUTATIONS) + text[pos:]
        forms = parsed_forms(text, True)
        assert forms == parsed_forms(text, False), text
        accepted += fast_bodies(text)[1]
        errors += bool(forms[-1])
    # Both outcomes are well represented: the fast path read many bodies by itself, and
    # many mutants are syntax errors.
    assert accepted > 300 and errors > 300, (accepted, errors)


def test_errors_keep_file_line_column_and_expected_tokens():
    text = wrap("\tmov.u32 %r1, %r2\n\tadd.s32 %r3, %r1, 1;\n\tld.global.u32 %r4, [%rd1+];")
    program = parse_ptx(text, "e.ptx")
    messages = [str(d) for d in program.errors]
    assert messages[0].startswith("e.ptx:11:2: error: unexpected 'add.s32'; expected one of")
    assert messages == [str(d) for d in parse_ptx(text, "e.ptx", fast=False).errors]


def test_unterminated_block_comment_loses_only_its_piece():
    """The chunk scan skips an unterminated `/*` (Lark reports it) and goes on, in one
    linear pass however many there are."""
    kernels = wrap("\tret;").replace("k(", "first(") + wrap("\tret;").split("\n", 3)[3]
    broken = kernels.replace("\tret;", "\tret; /* open", 1)
    program = parse_ptx(broken, "c.ptx")
    assert [k.name for k in program.kernels] == ["k"]
    assert [str(d) for d in program.errors] == ["c.ptx:10:7: error: unexpected character '/'"]
    many = parse_ptx(".version 7.0\n" + "/* " * 20000, "c.ptx")
    assert [str(d) for d in many.errors] == ["c.ptx:2:1: error: unexpected character '/'"]


def test_deeply_nested_operands_fall_back_and_never_raise():
    text = wrap("\tmov.b32 %r1, " + "{" * 3000 + "%r2" + "}" * 3000 + ";")
    program = parse_ptx(text, "d.ptx")
    assert program.errors and program.kernels == []


def test_parse_ptx_timed_reports_parse_and_lowering():
    program, timings = parse_ptx_timed(wrap("\tret;"), "t.ptx")
    assert [k.name for k in program.kernels] == ["k"]
    assert set(timings) == {"parse", "lower"} and all(t >= 0 for t in timings.values())


def test_generated_ptx_is_deterministic_and_of_the_asked_size():
    many = synthetic_ptx(3000, seed=3)
    assert many == synthetic_ptx(3000, seed=3) != synthetic_ptx(3000, seed=4)
    assert many.count("\n") >= 3000
    assert len(parse_ok(many).kernels) > 5
    (one,) = parse_ok(synthetic_ptx(3000, seed=3, kernels="one")).kernels
    assert one.instruction_count > 1500


def test_unclosed_parameter_list_names_only_the_brace():
    program = parse_ptx(".version 7.0\n.target sm_80\n.visible .entry k(\n{\n ret;\n}\n", "b.ptx")
    (error,) = program.errors
    assert (error.line, error.column) == (4, 1)
    assert error.message.startswith("unexpected '{';") and "\n" not in error.message


def test_impossible_directives_and_wide_literals_are_warned_at_their_place():
    from gpudiv.lang.ptx.parse import parse_ptx

    text = (".version 99.0\n.target sm_999, debug\n.address_size 128\n\n"
            ".visible .entry k(.param .u32 n)\n{\n\t.reg .b64 %rd<3>;\n"
            "\tmov.u64 %rd1, 123456789012345678901234; // 99999999999999999999999\n"
            "\tret;\n}\n")
    program = parse_ptx(text, "w.ptx")
    assert [(d.severity, d.line, d.column) for d in program.diagnostics] == [
        ("warning", 1, 10), ("warning", 2, 9), ("warning", 3, 15), ("warning", 8, 16)]
    messages = [d.message for d in program.diagnostics]
    assert messages[0].startswith(".version 99.0: not a PTX ISA version")
    assert messages[1].startswith(".target sm_999: not a GPU architecture")
    assert messages[2].startswith(".address_size 128: addresses are 32 or 64 bits")
    assert "123456789012345678901234 does not fit in 64 bits" in messages[3]
    assert len(program.kernels) == 1
    ok = parse_ptx(".version 8.5\n.target sm_90a\n.address_size 64\n"
                   ".visible .entry k()\n{\n\tmov.u64 %rd1, 0xffffffffffffffff;\n\tret;\n}\n")
    assert not [d for d in ok.diagnostics if d.severity == "warning" and "fit" in d.message]
    assert not [d for d in ok.diagnostics if d.message.startswith((".version", ".target"))]
