"""Stack-frame slots as variables (issue 17, item 4): constant-offset slots of `.local`
objects whose addresses do not escape are analysed like registers, soundly."""

from pathlib import Path

import pytest

from gpudiv.analyses.driver import prepare
from gpudiv.analyses.stack_slots import access_size, original, plan, promote
from gpudiv.api import analyze, analyze_text, check
from gpudiv.ir.cfg import build_cfg
from gpudiv.ir.ssa import build_ssa
from gpudiv.lang.load import parse_text

CUDA = Path(__file__).parents[2] / "samples" / "cuda"

HEADER = """
.version 7.0
.target sm_80
.address_size 64

.visible .entry k(.param .u64 out, .param .u32 n)
{
    .local .align 8 .b8 __local_depot0[32];
    .reg .b64 %SP;
    .reg .b64 %SPL;
    .reg .pred %p<8>;
    .reg .b16 %rs<4>;
    .reg .b32 %r<20>;
    .reg .b64 %rd<20>;
    mov.u64 %SPL, __local_depot0;
    cvta.local.u64 %SP, %SPL;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %tid.x;
"""
# The branch every test asks about: on %r9, loaded from the frame by the body.
FOOTER = """
    setp.gt.s32 %p7, %r9, 3;
    @%p7 bra DONE;
    mul.wide.u32 %rd9, %r2, 4;
    add.s64 %rd10, %rd1, %rd9;
    st.global.u32 [%rd10], %r9;
DONE:
    ret;
}
"""


def kernel_text(body: str) -> str:
    return HEADER + body + FOOTER


def last_branch(body: str, analysis: str = "affine2"):
    """The analysis of the kernel, and whether its last branch is divergent."""
    result = analyze_text(kernel_text(body), "k.ptx", analysis, "ptx")
    assert not result.errors, result.errors
    kernel = result.kernel("k")
    return kernel, kernel.branches[-1].divergent


def assert_checked(body: str, analysis: str = "affine2") -> None:
    """The oracle finds no violated claim (it runs the kernel as written)."""
    for report in check(analyze_text(kernel_text(body), "k.ptx", analysis, "ptx")):
        assert report.status == "checked", report.reason
        assert report.violations == [], report.violations[0]


def refused(body: str) -> dict[str, str]:
    kernel = parse_text(kernel_text(body), "k.ptx", "ptx").kernel("k")
    return plan(build_ssa(build_cfg(kernel))).refused


# A uniform value through a slot (what -G does with `int lo; f(&lo);`).
UNIFORM_THROUGH_SLOT = """
    add.u64 %rd2, %SP, 4;
    st.u32 [%rd2], %r1;
    ld.u32 %r9, [%SP+4];
"""


@pytest.mark.parametrize("analysis", ["simple", "affine", "affine2"])
def test_a_uniform_value_through_a_slot_stays_uniform(analysis):
    kernel, divergent = last_branch(UNIFORM_THROUGH_SLOT, analysis)
    assert not divergent
    assert kernel.ssa.cfg.kernel.attrs["stack_slots"] == ("__local_depot0[4:8]",)
    assert_checked(UNIFORM_THROUGH_SLOT, analysis)


def test_the_promoted_kernel_is_for_analysis_only():
    kernel = parse_text(kernel_text(UNIFORM_THROUGH_SLOT), "k.ptx", "ptx").kernel("k")
    ssa, _ = prepare(kernel)
    promoted = ssa.cfg.kernel
    assert promoted is not kernel and original(promoted) is kernel and original(kernel) is kernel
    assert promoted.instruction_count == kernel.instruction_count
    kinds = [i.kind for i in kernel.instructions()]
    assert "load" in kinds and "store" in kinds
    assert [i.kind for i in promoted.instructions()].count("store") == kinds.count("store") - 1


def test_the_thread_index_through_a_slot_stays_divergent_and_affine():
    body = """
    st.u32 [%SP+0], %r2;
    ld.u32 %r9, [%SP+0];
"""
    kernel, divergent = last_branch(body)
    assert divergent
    loaded = kernel.variable("%r9#1")
    assert loaded.klass == "constaffine" and loaded.affine[1:] == (1, 0)
    assert_checked(body)


def test_a_slot_written_under_a_divergent_branch_is_divergent_after_the_join():
    body = """
    st.u32 [%SP+8], %r1;
    setp.lt.u32 %p1, %r2, 5;
    @%p1 bra SKIP;
    st.u32 [%SP+8], 7;
SKIP:
    ld.u32 %r9, [%SP+8];
"""
    _, divergent = last_branch(body)
    assert divergent
    assert_checked(body)


def test_a_guarded_store_is_a_select():
    divergent_guard = """
    st.u32 [%SP+8], %r1;
    setp.lt.u32 %p1, %r2, 5;
    @%p1 st.u32 [%SP+8], 7;
    ld.u32 %r9, [%SP+8];
"""
    uniform_guard = divergent_guard.replace("%r2, 5", "%r1, 5")
    assert last_branch(divergent_guard)[1]
    assert not last_branch(uniform_guard)[1]
    assert_checked(divergent_guard)
    assert_checked(uniform_guard)


def test_a_slot_carried_around_a_loop_with_a_divergent_exit():
    body = """
    st.u32 [%SP+0], 0;
    mov.u32 %r3, 0;
LOOP:
    ld.u32 %r4, [%SP+0];
    add.s32 %r5, %r4, 1;
    st.u32 [%SP+0], %r5;
    add.s32 %r3, %r3, 1;
    setp.lt.u32 %p1, %r3, %r2;
    @%p1 bra LOOP;
    ld.u32 %r9, [%SP+0];
"""
    kernel, divergent = last_branch(body)
    assert divergent  # lanes leave after tid.x trips: the counter differs after the loop
    assert kernel.variable("%r5#1").klass != "divergent"  # inside the loop it is uniform
    assert_checked(body)


@pytest.mark.parametrize("body, why", [
    # the address of a slot is stored to memory: it escapes
    ("""
    add.u64 %rd2, %SP, 8;
    st.global.u64 [%rd1], %rd2;
    st.u32 [%SP+8], %r1;
    ld.u32 %r9, [%SP+8];
""", "an address is used by `st.global.u64 [%rd1], %rd2;`"),
    # a store at a thread-dependent offset may write any slot
    ("""
    st.u32 [%SP+8], %r1;
    and.b32 %r3, %r2, 3;
    mul.wide.u32 %rd3, %r3, 4;
    add.s64 %rd4, %SP, %rd3;
    st.u32 [%rd4], %r2;
    ld.u32 %r9, [%SP+8];
""", "may write any of its slots"),
    # one register holds an address of the frame or of global memory
    ("""
    st.u32 [%SP+8], %r1;
    mov.u64 %rd5, %rd1;
    setp.lt.u32 %p1, %r2, 5;
    @%p1 bra SKIP;
    add.u64 %rd5, %SP, 8;
SKIP:
    st.u32 [%rd5], %r2;
    ld.u32 %r9, [%SP+8];
""", "through another pointer"),
    # an address truncated (arithmetic that is not followed)
    ("""
    add.u64 %rd2, %SP, 8;
    cvt.u32.u64 %r3, %rd2;
    st.u32 [%SP+8], %r1;
    ld.u32 %r9, [%SP+8];
""", "an address is used by `cvt.u32.u64"),
    # a thread-private store through an address that is not followed
    ("""
    st.u32 [%SP+8], %r1;
    cvta.to.local.u64 %rd6, %rd1;
    st.local.u32 [%rd6], %r2;
    ld.u32 %r9, [%SP+8];
""", "through an address not followed"),
])
def test_escaping_or_unknown_accesses_are_not_promoted(body, why):
    assert why in refused(body)["__local_depot0"]
    assert last_branch(body)[1]  # the load stays a source of divergence
    if "not followed" not in why:  # (that one stores out of bounds: nothing to run)
        assert_checked(body)


def test_an_address_tested_against_null_does_not_escape():
    body = """
    add.u64 %rd2, %SP, 8;
    setp.eq.u64 %p2, %rd2, 0;
    st.u32 [%rd2], %r1;
    ld.u32 %r9, [%SP+8];
"""
    assert refused(body) == {}
    assert not last_branch(body)[1]
    assert_checked(body)


def test_a_slot_holding_the_address_of_another_slot():
    """-G code keeps `this` and reference arguments in the frame: the pointer stored at
    SP+16 is followed once that slot is promoted, and SP+8 is promoted in a second round."""
    body = """
    add.u64 %rd2, %SP, 8;
    st.u64 [%SP+16], %rd2;
    ld.u64 %rd3, [%SP+16];
    st.u32 [%rd3], %r1;
    ld.u64 %rd4, [%SP+16];
    ld.u32 %r9, [%rd4];
"""
    assert "an address is used by `st.u64 [%SP+16], %rd2;`" in refused(body)["__local_depot0"]
    kernel, divergent = last_branch(body)
    assert not divergent
    assert kernel.ssa.cfg.kernel.attrs["stack_slots"] == (
        "__local_depot0[16:24]", "__local_depot0[8:12]")
    assert_checked(body)


def test_a_slot_address_stored_where_it_is_not_followed_is_not_trusted():
    body = """
    add.u64 %rd2, %SP, 8;
    st.u64 [%SP+16], %rd2;
    st.global.u64 [%rd1], %rd2;
    st.u32 [%SP+8], %r1;
    ld.u32 %r9, [%SP+8];
"""
    kernel, divergent = last_branch(body)
    assert divergent and "stack_slots" not in kernel.ssa.cfg.kernel.attrs
    assert_checked(body)


def test_a_pointer_to_thread_private_memory_through_a_promoted_slot_stays_private():
    """The address of `a` (not promoted: it escapes through cvt) is kept in a frame slot
    that is promoted; the load through the pointer read back reads thread-private memory
    (a[0] = tid.x) and must stay divergent although the pointer is now uniform."""
    text = kernel_text("""
    mov.u64 %rd5, a;
    cvta.local.u64 %rd5, %rd5;
    st.u32 [%rd5], %r2;
    cvt.u32.u64 %r3, %rd5;
    st.u64 [%SP+16], %rd5;
    ld.u64 %rd6, [%SP+16];
    ld.u32 %r9, [%rd6];
""").replace(".local .align 8 .b8 __local_depot0[32];",
             ".local .align 8 .b8 __local_depot0[32];\n    .local .align 4 .b8 a[8];")
    analysed = analyze_text(text, "k.ptx", "affine2", "ptx")
    result = analysed.kernel("k")
    assert "__local_depot0[16:24]" in result.ssa.cfg.kernel.attrs["stack_slots"]
    assert result.variable("%rd6#1").klass == "uniform"  # the pointer: one address
    assert result.variable("%r9#1").klass == "divergent"  # what it points to: per lane
    assert result.branches[-1].divergent
    (report,) = check(analysed)
    assert report.status == "checked" and report.violations == []


def test_two_objects_mixed_refuse_only_those_two():
    text = kernel_text("""
    st.u32 [%SP+8], %r1;
    mov.u64 %rd5, a;
    setp.lt.u32 %p1, %r2, 5;
    @%p1 bra SKIP;
    mov.u64 %rd5, b;
SKIP:
    st.local.u32 [%rd5], %r2;
    ld.u32 %r9, [%SP+8];
""").replace(".local .align 8 .b8 __local_depot0[32];",
             ".local .align 8 .b8 __local_depot0[32];\n    .local .align 4 .b8 a[8];"
             "\n    .local .align 4 .b8 b[8];")
    kernel = parse_text(text, "k.ptx", "ptx").kernel("k")
    assert set(plan(build_ssa(build_cfg(kernel))).refused) == {"a", "b"}
    result = analyze_text(text, "k.ptx", "affine2", "ptx").kernel("k")
    assert not result.branches[-1].divergent


def test_overlapping_slots_are_not_promoted():
    body = """
    cvt.u64.u32 %rd3, %r1;
    st.u64 [%SP+0], %rd3;
    ld.u32 %r9, [%SP+4];
"""
    kernel, divergent = last_branch(body)
    assert divergent
    assert "stack_slots" not in kernel.ssa.cfg.kernel.attrs
    assert_checked(body)


def test_a_read_at_a_variable_offset_only_stays_divergent_itself():
    body = """
    st.u32 [%SP+8], %r1;
    and.b32 %r3, %r2, 3;
    mul.wide.u32 %rd3, %r3, 4;
    add.s64 %rd4, %SP, %rd3;
    ld.u32 %r4, [%rd4];
    ld.u32 %r9, [%SP+8];
"""
    kernel, divergent = last_branch(body)
    assert not divergent
    assert kernel.variable("%r4#1").klass == "divergent"
    assert_checked(body)


def test_a_narrow_slot_is_not_a_copy_for_the_affine_analysis():
    """tid + 65530 truncated to 16 bits wraps differently in different lanes."""
    body = """
    add.s32 %r3, %r2, 65530;
    cvt.u16.u32 %rs1, %r3;
    st.u16 [%SP+2], %rs1;
    ld.u16 %r9, [%SP+2];
"""
    kernel, divergent = last_branch(body)
    assert divergent and kernel.variable("%r9#1").klass == "divergent"
    assert_checked(body)


def test_a_local_symbol_addressed_directly():
    text = kernel_text("""
    st.local.u32 [buf+4], %r1;
    ld.local.u32 %r9, [buf+4];
""").replace(".local .align 8 .b8 __local_depot0[32];",
             ".local .align 8 .b8 __local_depot0[32];\n    .local .align 4 .b8 buf[16];")
    result = analyze_text(text, "k.ptx", "affine2", "ptx").kernel("k")
    assert not result.branches[-1].divergent
    assert result.ssa.cfg.kernel.attrs["stack_slots"] == ("buf[4:8]",)


def test_access_sizes():
    assert access_size("ld.local.u32") == 4
    assert access_size("st.v2.f32") == 8
    assert access_size("ld.u8") == 1
    assert access_size("ld.local") is None


def test_kernels_without_local_objects_are_unchanged():
    kernel = parse_text(kernel_text("    mov.u32 %r9, %r1;\n"), "k.ptx", "ptx").kernel("k")
    kernel.attrs["symbols"] = {}
    assert promote(build_ssa(build_cfg(kernel))) is None


# ---- the sample ---------------------------------------------------------------------------

def branch_classes(path: Path, kernel: str) -> list[bool]:
    return [b.divergent for b in analyze(path).kernel(kernel).branches]


def test_sample_debug_build_keeps_uniform_values_in_slots_uniform():
    debug = CUDA / "stack_slots.G.ptx"
    # chunk_sum: `hi - lo > 64` (lo, hi come back through pointers) is uniform.
    assert branch_classes(debug, "chunk_sum").count(False) >= 1
    # range_loop: the loop over a struct's fields and the test on c[2] are uniform.
    assert not any(branch_classes(debug, "range_loop"))
    # written by some lanes only, at a thread-dependent offset, or after a divergent loop.
    assert branch_classes(debug, "partial_write")[-1]
    assert branch_classes(debug, "scattered_write")[-1]
    assert branch_classes(debug, "counted_loop")[-1]


def test_sample_debug_build_is_checked_without_violations():
    for report in check(analyze(CUDA / "stack_slots.G.ptx")):
        assert report.runs >= 4 and report.violations == []
