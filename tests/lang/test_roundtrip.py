"""Printers: parse → print → parse is the identity on every sample; printed PTX is
accepted by ptxas; analysis classes survive the round trip."""

import shutil
from pathlib import Path

import pytest

from gpudiv import ir
from gpudiv.api import analyze
from gpudiv.lang.compare import first_difference
from gpudiv.lang.load import load, parse_text
from gpudiv.lang.musimd.printer import instruction_text as musimd_text
from gpudiv.lang.printing import PrintError, print_program
from gpudiv.transforms.builder import Rewriter
from tests.fast_loop import debug_builds_slow
from tests.ptxas_tool import ptxas_errors

ROOT = Path(__file__).resolve().parents[2] / "samples"
SAMPLES = sorted([*ROOT.glob("musimd/*.musimd"), *ROOT.glob("cuda/*.ptx"),
                  *ROOT.glob("ptx/*.ptx"), *ROOT.glob("ptx_legacy/*.ptx")])
PTXAS_SAMPLES = sorted([*ROOT.glob("cuda/*.ptx"), *ROOT.glob("ptx/*.ptx")])


def reread(program: ir.Program) -> ir.Program:
    text = print_program(program)
    again = parse_text(text, program.path, program.language)
    assert again.errors == [], text
    return again


@pytest.mark.parametrize("path", debug_builds_slow(SAMPLES), ids=lambda p: p.name)
def test_parse_print_parse_is_the_identity(path):
    program = load(path)
    again = reread(program)
    assert first_difference(program, again) is None
    assert print_program(again) == print_program(program), "printing is stable"


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")
@pytest.mark.parametrize("path", debug_builds_slow(PTXAS_SAMPLES), ids=lambda p: p.name)
def test_ptxas_accepts_printed_ptx(path, tmp_path):
    out = tmp_path / "out.ptx"
    text = print_program(load(path))
    out.write_text(text)
    assert ptxas_errors(out) is None, ptxas_errors(out)


def classes(program: ir.Program) -> dict:
    result = analyze(program)
    return {k.name: ([(v.name, v.klass) for v in k.variables],
                     [(b.label, b.divergent) for b in k.branches]) for k in result.kernels}


@pytest.mark.parametrize("name", ["musimd/sumTriangle.musimd", "cuda/control_flow.O3.ptx",
                                  "cuda/warp_primitives.G.ptx"])
def test_analysis_classes_survive_the_round_trip(name):
    program = load(ROOT / name)
    assert classes(reread(program)) == classes(program)


@pytest.mark.slow
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_analysis_classes_survive_the_round_trip_everywhere(path):
    program = load(path)
    assert classes(reread(program)) == classes(program)


def test_rewritten_jump_and_branch_print_from_the_ir():
    program = load(ROOT / "cuda/control_flow.O3.ptx")
    kernel = program.kernels[0]
    branch = next(i for i in kernel.instructions() if i.kind == ir.BRANCH)
    fall_label = next(b.label for b in kernel.blocks if b.user_label)
    branch.target = fall_label  # a rewrite: the printer must write the IR, not the source
    again = reread(program)
    moved = [i for i in again.kernels[0].instructions() if i.kind == ir.BRANCH]
    assert moved[0].target == fall_label


def test_a_rewritten_inlined_call_is_written_inline(tmp_path):
    program = load(ROOT / "cuda/device_functions.G.ptx")
    kernel = next(k for k in program.kernels
                  if any(i.attrs.get("function") for i in k.instructions()))
    calls_before = print_program(program).count("\tcall")
    inlined = next(i for i in kernel.instructions()
                   if i.attrs.get("function") and i.kind == ir.ASSIGN and i.dest
                   and i.guard is None and i.operator != "copy")
    Rewriter(kernel).insert_after(inlined, ir.Instruction(
        ir.ASSIGN, inlined.loc, dest=inlined.dest, args=(ir.Var(inlined.dest),),
        operator="copy"))
    text = print_program(program)
    assert text.count("\tcall") == calls_before - 1  # that one call is written inline
    again = parse_text(text, program.path, "ptx")
    assert again.errors == []
    rewritten = next(k for k in again.kernels if k.name == kernel.name)
    assert not any(i.attrs.get("function") for i in rewritten.instructions()
                   if i.attrs.get("origin") == inlined.attrs.get("origin"))
    if shutil.which("ptxas"):
        (tmp_path / "out.ptx").write_text(text)
        assert ptxas_errors(tmp_path / "out.ptx") is None


def test_a_register_of_a_call_read_outside_it_writes_that_call_inline(tmp_path):
    program = load(ROOT / "cuda/device_functions.G.ptx")
    kernel = next(k for k in program.kernels
                  if any(i.attrs.get("function") for i in k.instructions()))
    inner = next(i for i in kernel.instructions() if i.attrs.get("function")
                 and i.kind == ir.ASSIGN and i.dest and "@" in i.dest and "+" not in i.dest)
    rewriter = Rewriter(kernel)
    last = kernel.blocks[-1].instructions[-1]
    copy = rewriter.fresh_register("%moved", kernel.registers[inner.dest])
    rewriter.insert_before(last, ir.Instruction(ir.ASSIGN, last.loc, dest=copy,
                                                args=(ir.Var(inner.dest),), operator="copy"))
    text = print_program(program)
    assert f"{inner.dest.replace('@', '$')}," in text  # the call's code is there to read
    assert parse_text(text, program.path, "ptx").errors == []
    if shutil.which("ptxas"):
        (tmp_path / "out.ptx").write_text(text)
        assert ptxas_errors(tmp_path / "out.ptx") is None


def test_an_inline_call_that_cannot_be_written_says_why():
    program = load(ROOT / "cuda/device_functions.G.ptx")
    kernel = next(k for k in program.kernels
                  if any(i.attrs.get("function") for i in k.instructions()))
    inlined = next(i for i in kernel.instructions()
                   if i.attrs.get("function") and i.kind == ir.ASSIGN and i.dest)
    inlined.kind = ir.OPAQUE  # an operation without a PTX spelling
    with pytest.raises(PrintError, match="cannot print rewritten instruction"):
        print_program(program)


def test_musimd_printer_refuses_what_musimd_cannot_say():
    guarded = ir.Instruction(ir.STORE, ir.Loc(1), args=(ir.Const(0), ir.Const(1)),
                             space="shared", guard=ir.Guard(ir.Var("p")))
    with pytest.raises(PrintError, match="guarded"):
        musimd_text(guarded)


def test_musimd_negation_of_a_literal_is_not_a_literal():
    program = parse_text("kernel k(a)\n  x = - 5\n  y = a - -3\n  stop\n", "k.musimd")
    again = reread(program)
    assert first_difference(program, again) is None
    assert again.kernels[0].instructions()[0].operator == "neg"


BRANCH_TABLE = """.version 7.0
.target sm_80
.address_size 64

.visible .entry pick(.param .u64 out)
{
	.reg .b32 %r<3>;
	.reg .b64 %rd<3>;
	mov.u32 %r1, %tid.x;
	rem.u32 %r2, %r1, 3;
	ts: .branchtargets A, B, C;
	brx.idx %r2, ts;
A:
	ret;
B:
	ret;
C:
	ld.param.u64 %rd1, [out];
	st.global.u32 [%rd1], %r1;
	ret;
}
"""


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")
def test_branch_target_tables_are_printed(tmp_path):
    """A `brx.idx` names its table: the table is written back with the body (as are the
    `.callprototype`s of calls through function pointers, function_pointers.cu)."""
    from gpudiv.lang.load import parse_text

    text = print_program(parse_text(BRANCH_TABLE, "t.ptx", "ptx"))
    assert "ts: .branchtargets A, B, C;" in text
    out = tmp_path / "out.ptx"
    out.write_text(text)
    assert ptxas_errors(out) is None, ptxas_errors(out)
