"""PTX 2.x function prototypes without ';' and labelled call prototypes (issue 17, item 5).

nvopencc 4.0 (CUDA 3.x) wrote `.visible .func (.param .s32 __cudaretf_f) f (.param .s32
__cudaparmf1_f)` at the top of a file with no ';', followed by another prototype or by the
.file table; ptxas accepts it, gpudiv used to stop with "unexpected '.file'". Inside a body
it wrote `label: .callprototype (...) _ (...);` before an indirect `call.uni`.
"""

from pathlib import Path

import pytest

from gpudiv.api import analyze, check
from gpudiv.cli import main
from gpudiv.lang.ptx.parse import parse_ptx

ROOT = Path(__file__).parents[3]
FIXTURE = ROOT / "samples" / "ptx_legacy" / "nvopencc40_ptx22_sm20.ptx"

HEAD = """\t.version 2.2
\t.target sm_20
"""
KERNEL = """
\t.entry k (.param .u64 __cudaparm_k_out)
\t{
\t.reg .u32 %r<4>;
\t.reg .u64 %rd<3>;
\t.param .s32 __cudaparma1_f;
\t.param .s32 __cudareta_f;
\tmov.u32 \t%r1, %tid.x;
\tst.param.s32 \t[__cudaparma1_f], %r1;
\tcall.uni (__cudareta_f), f, (__cudaparma1_f);
\tld.param.s32 \t%r2, [__cudareta_f];
\tld.param.u64 \t%rd1, [__cudaparm_k_out];
\tst.global.s32 \t[%rd1+0], %r2;
\texit;
\t}
"""
PROTOTYPE = ("\t.visible .func (.param .s32 __cudaretf_f) f "
             "(.param .s32 __cudaparmf1_f)\n")
DEFINITION = PROTOTYPE + """\t{
\t.reg .u32 %r<3>;
\tld.param.s32 \t%r1, [__cudaparmf1_f];
\tadd.s32 \t%r2, %r1, 1;
\tst.param.s32 \t[__cudaretf_f], %r2;
\tret;
\t}
"""

# What follows a prototype without ';' in the files nvopencc 4.0 wrote, and at the end.
FOLLOWERS = {
    "file table": '\t.file\t1\t"<command-line>"\n\t.file\t2\t"t.cu"\n' + KERNEL + DEFINITION,
    "another prototype": ("\t.visible .func (.param .s32 __cudaretf_g) g "
                          "(.param .s32 __cudaparmf1_g)\n" + KERNEL + DEFINITION),
    "the kernel": KERNEL + DEFINITION,
    "the definition": DEFINITION + KERNEL,
    "a module variable": "\t.global .u32 counter;\n" + KERNEL + DEFINITION,
    "a comment": "\n\t// comment\n\t/* block */\n" + KERNEL + DEFINITION,
}


def parsed(text: str, fast: bool = True):
    program = parse_ptx(text, "t.ptx", fast=fast)
    assert not program.errors, [str(e) for e in program.errors]
    return program


@pytest.mark.parametrize("follower", FOLLOWERS)
def test_prototype_without_semicolon(follower):
    text = HEAD + PROTOTYPE + FOLLOWERS[follower]
    program = parsed(text)
    assert [k.name for k in program.kernels] == ["k"]
    assert program.kernels == parsed(text, fast=False).kernels
    # the call is inlined: the body of f is there, not an opaque call
    kernel = program.kernels[0]
    assert any(i.operator and i.operator.startswith("add.s32") for i in kernel.instructions())
    assert not any(i.kind == "opaque" for i in kernel.instructions())


def test_prototype_without_semicolon_at_the_end_of_the_file():
    program = parsed(HEAD + KERNEL.replace("call.uni (__cudareta_f), f, (__cudaparma1_f);",
                                           "") + PROTOTYPE)
    assert [k.name for k in program.kernels] == ["k"]


def test_a_call_to_a_prototype_without_a_body_stays_opaque():
    program = parsed(HEAD + PROTOTYPE + KERNEL)
    (kernel,) = program.kernels
    assert [i.kind for i in kernel.instructions() if i.operator == "call"] == ["opaque"]


def test_an_unterminated_instruction_is_still_an_error():
    text = HEAD + PROTOTYPE + "\tadd.s32 %r1, %r2, 1;\n" + KERNEL + DEFINITION
    program = parse_ptx(text, "t.ptx")
    (error,) = program.errors
    assert str(error).startswith("t.ptx:4:2: error:") and "unexpected 'add.s32'" in str(error)


def test_legacy_fixture_parses_and_is_analysed():
    program = parsed(FIXTURE.read_text())
    assert program.kernels == parsed(FIXTURE.read_text(), fast=False).kernels
    analysed = analyze(FIXTURE, "affine2")
    kernels = {k.name: k for k in analysed.kernels}
    assert list(kernels) == ["square_clamped", "apply_fp"]
    branches = {k: {b.origin[1]: b.divergent for b in r.branches} for k, r in kernels.items()}
    assert branches == {"square_clamped": {9: True, 11: False}, "apply_fp": {17: False}}
    assert not [d for d in analysed.diagnostics if d.severity == "error"]


def test_legacy_fixture_checked_by_the_oracle():
    reports = {r.name: r for r in check(analyze(FIXTURE, "affine2"))}
    assert reports["square_clamped"].status == "checked"
    assert reports["square_clamped"].violations == []
    # the pointer is a kernel parameter: the launches pass `square`, the one function of
    # the file that fits the call's prototype, and the kernel runs with its calls as calls
    assert reports["apply_fp"].status == "checked"
    assert reports["apply_fp"].violations == [] and reports["apply_fp"].calls == "call"


def test_labelled_call_prototype_before_call_uni_is_a_table_not_a_block():
    (kernel,) = [k for k in parsed(FIXTURE.read_text()).kernels if k.name == "apply_fp"]
    assert all("callprototype" not in b.label for b in kernel.blocks)
    (call,) = [i for i in kernel.instructions() if i.operator == "call"]
    assert call.kind == "opaque"


@pytest.mark.parametrize("prototype", [
    "$LDWcallprototype_0: .callprototype (.param .s32 _) _ (.param .s32 _);",
    "$LDWcallprototype_0:\n\t.callprototype (.param .s32 _) _ (.param .s32 _);",
    "$LDWcallprototype_0 : .callprototype _ (.param .s32 _, .param .u64 _);",
    "$LDWcallprototype_0: .callprototype ()_ (.param .align 8 .b8 _[16]);",
])
def test_call_prototype_shapes_read_alike_by_both_parsers(prototype):
    text = (HEAD + "\t.entry k (.param .u64 k_fp)\n\t{\n\t.reg .u64 %rd<2>;\n"
            "\tld.param.u64 \t%rd1, [k_fp];\n\t" + prototype + "\n"
            "\tcall.uni %rd1, (k_fp), $LDWcallprototype_0;\n\texit;\n\t}\n")
    fast, lark = parsed(text), parsed(text, fast=False)
    assert fast.kernels == lark.kernels


def test_cli_exit_status_on_the_fixture(capsys):
    assert main(["analyze", "--brief", str(FIXTURE)]) != 2
    out = capsys.readouterr()
    assert "error" not in out.out + out.err
