"""The canonicalization passes `inline` and `guard-to-select`: a PTX program read as
written (`canonical=False`) becomes the program `load` reads."""

from pathlib import Path

import pytest

from gpudiv import ir
from gpudiv.cli import main
from gpudiv.lang.compare import first_difference
from gpudiv.lang.load import load, parse_text
from gpudiv.lang.printing import print_program
from gpudiv.transforms import PassError, Pipeline

ROOT = Path(__file__).resolve().parents[2] / "samples"
SMALL = ["cuda/device_functions.G.ptx", "cuda/control_flow.O3.ptx"]
# The PTX samples with calls (where `inline` has work; the IR of every sample was compared
# once when the steps became passes, and the results snapshot covers all of them).
WITH_CALLS = sorted(p for p in [*ROOT.glob("cuda/*.ptx"), *ROOT.glob("ptx/*.ptx"),
                                *ROOT.glob("ptx_legacy/*.ptx")] if "\tcall" in p.read_text())


def canonicalized(path: Path) -> tuple[ir.Program, ir.Program, ir.Program]:
    raw = load(path, canonical=False)
    return raw, Pipeline.parse("inline,guard-to-select").run(raw), load(path)


@pytest.mark.parametrize("name", SMALL)
def test_inline_then_guard_to_select_gives_what_load_reads(name):
    raw, done, canonical = canonicalized(ROOT / name)
    assert first_difference(canonical, done) is None
    assert print_program(raw) == print_program(canonical)  # PTX says the same either way


@pytest.mark.slow
@pytest.mark.parametrize("path", WITH_CALLS, ids=lambda p: p.name)
def test_canonicalization_passes_on_the_ptx_samples_with_calls(path):
    _, done, canonical = canonicalized(path)
    assert first_difference(canonical, done) is None


def test_raw_ptx_keeps_calls_and_guards():
    raw = load(ROOT / "cuda/device_functions.G.ptx", canonical=False)
    instructions = [i for k in raw.kernels for i in k.instructions()]
    assert any(i.kind == ir.OPAQUE and i.operator == "call" for i in instructions)
    assert not any(i.attrs.get("function") for i in instructions)

GUARDED = """.version 7.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 out)
{
	.reg .pred %p<2>;
	.reg .b32 %r<4>;
	.reg .b64 %rd<3>;
	ld.param.u64 %rd1, [out];
	mov.u32 %r1, %tid.x;
	mov.u32 %r2, 7;
	setp.lt.u32 %p1, %r1, 5;
	@%p1 add.s32 %r2, %r1, 1;
	@!%p1 mov.u32 %r3, 9;
	cvta.to.global.u64 %rd2, %rd1;
	st.global.u32 [%rd2], %r2;
	ret;
}
"""


def test_guarded_definitions_stay_guarded_until_guard_to_select():
    raw = parse_text(GUARDED, "g.ptx", "ptx", canonical=False)
    (kernel,) = raw.kernels
    defs = [i for i in kernel.instructions() if i.guard is not None and i.dest]
    assert [i.dest for i in defs] == ["%r2", "%r3"]
    done = Pipeline.parse("guard-to-select").run(raw)
    selects = [i for i in done.kernels[0].instructions() if i.attrs.get("guarded_select")]
    assert [(i.operator, i.dest, len(i.args)) for i in selects] == [
        ("select", "%r2", 3), ("select.not", "%r3", 2)]  # %r3 has no old value to keep
    assert first_difference(parse_text(GUARDED, "g.ptx", "ptx"), done) is None
    assert print_program(done) == print_program(raw)  # still written as guarded PTX


def test_canonical_programs_are_left_as_they_are():
    program = load(ROOT / "cuda/control_flow.O3.ptx")
    assert first_difference(program, Pipeline.parse("inline,guard-to-select").run(program)) \
        is None


def test_inline_after_another_rewrite_fails_clearly():
    raw = load(ROOT / "cuda/device_functions.G.ptx", canonical=False)
    with pytest.raises(PassError, match="inline its calls first"):
        Pipeline.parse("split-critical-edges,canonicalize,dedicated-exits,inline").run(raw)


def test_cli_raw_then_canonicalization_passes_verify(capsys):
    code = main(["transform", str(ROOT / "ptx_legacy/nvvm_ptx31_sm20.ptx"), "--raw", "--pass",
                 "inline,guard-to-select", "--verify"])
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if ": kernel " in line]
    assert code == 0 and lines and all(": verified" in line for line in lines), out
