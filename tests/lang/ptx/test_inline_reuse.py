"""Inlined bodies copied from their first lowering in a calling state give exactly the
kernels that lowering every call site gives (gpudiv.lang.ptx.inline_reuse)."""

from pathlib import Path

import pytest

from gpudiv.lang.load import load
from gpudiv.lang.ptx import inline_reuse
from gpudiv.lang.ptx.inline_reuse import _replay
from gpudiv.lang.ptx.lower import _KernelLowering
from gpudiv.lang.ptx.parse import parse_ptx

SAMPLES = Path(__file__).resolve().parents[3] / "samples"
# The sample files that call a function (in the others no body is inlined).
PTX_FILES = sorted(p for p in SAMPLES.rglob("*.ptx") if "call" in p.read_text())


# Calls repeated in different states: a struct argument with 4 or 8 bytes written, a
# guarded call, nesting, recursion, an exit and a trap inside a function, a loop.
CALLS = """
.version 7.0
.target sm_80
.address_size 64
.func (.param .b32 r) leaf (.param .b32 x)
{
	.reg .b32 %r<4>;
	.reg .pred %p<2>;
	ld.param.b32 %r1, [x];
$L_loop:
	add.s32 %r1, %r1, -1;
	setp.gt.s32 %p1, %r1, 3;
	@%p1 bra $L_loop;
	st.param.b32 [r+0], %r1;
	ret;
}
.func (.param .b32 r) pair (.param .align 8 .b8 s[8])
{
	.reg .b32 %r<4>;
	ld.param.b32 %r1, [s+0];
	ld.param.b32 %r2, [s+4];
	add.s32 %r3, %r1, %r2;
	{
	.param .b32 param0;
	st.param.b32 [param0+0], %r3;
	.param .b32 retval0;
	call.uni (retval0), leaf, (param0);
	ld.param.b32 %r3, [retval0+0];
	}
	st.param.b32 [r+0], %r3;
	ret;
}
.func (.param .b32 r) stopper (.param .b32 x)
{
	.reg .b32 %r<2>;
	.reg .pred %p<2>;
	ld.param.b32 %r1, [x];
	setp.eq.s32 %p1, %r1, 7;
	@%p1 exit;
	setp.eq.s32 %p1, %r1, 9;
	@%p1 trap;
	st.param.b32 [r+0], %r1;
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
.visible .entry calls(.param .u32 u)
{
	.reg .b32 %r<20>;
	.reg .pred %p<2>;
	ld.param.u32 %r1, [u];
	mov.u32 %r2, %tid.x;
	setp.eq.u32 %p1, %r2, 0;
	{
	.param .align 8 .b8 param0[8];
	st.param.b32 [param0+0], %r1;
	st.param.b32 [param0+4], %r2;
	.param .b32 retval0;
	call.uni (retval0), pair, (param0);
	ld.param.b32 %r3, [retval0+0];
	call.uni (retval0), pair, (param0);
	ld.param.b32 %r4, [retval0+0];
	}
	{
	.param .align 8 .b8 param0[8];
	st.param.b32 [param0+0], %r3;
	.param .b32 retval0;
	call.uni (retval0), pair, (param0);
	ld.param.b32 %r5, [retval0+0];
	@%p1 call.uni (retval0), pair, (param0);
	ld.param.b32 %r6, [retval0+0];
	}
	{
	.param .b32 param0;
	st.param.b32 [param0+0], %r6;
	.param .b32 retval0;
	call.uni (retval0), stopper, (param0);
	call.uni (retval0), stopper, (param0);
	call.uni (retval0), forever, (param0);
	call.uni (retval0), forever, (param0);
	call.uni (retval0), leaf, (param0);
	ld.param.b32 %r7, [retval0+0];
	}
	ret;
}
"""


def lowered(path: Path | str, reuse: bool, monkeypatch, text: str | None = None) -> tuple:
    """The file's kernels, diagnostics, and each kernel's ordered tables."""
    with monkeypatch.context() as patch:
        patch.setattr(_KernelLowering, "reuse_bodies", reuse)
        program = load(path) if text is None else parse_ptx(text, str(path))
    orders = [(list(k.attrs.get("reg_types", {})), list(k.registers),
               list(k.attrs.get("call_instances", {})),
               list(k.attrs.get("ptx_source", {}).get("inlined_forms", {})))
              for k in program.kernels]
    return program.kernels, [str(d) for d in program.diagnostics], orders


# The large program (2 s of the fast loop) runs in the full suite only.
@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.slow)
                                  if p.parent.name == "cuda_large" else p for p in PTX_FILES],
                         ids=lambda p: str(p.relative_to(SAMPLES)))
def test_copied_bodies_lower_to_the_same_kernels(path, monkeypatch):
    fresh = lowered(path, False, monkeypatch)
    copied = lowered(path, True, monkeypatch)
    assert copied[1] == fresh[1]
    assert len(copied[0]) == len(fresh[0])
    for mine, theirs in zip(copied[0], fresh[0], strict=True):
        assert mine.blocks == theirs.blocks, mine.name
        assert mine == theirs, mine.name
    assert copied[2] == fresh[2]


def copy_log(monkeypatch) -> list[tuple[str, bool]]:
    """(callee, whether its body was copied) of each inlined call lowered from now on."""
    log: list[tuple[str, bool]] = []
    copied: set[str] = set()  # the frame suffixes of the copies

    def replay(lowering, template, inner):
        copied.add(inner.suffix)
        _replay(lowering, template, inner)

    monkeypatch.setattr(inline_reuse, "_replay", replay)
    original = inline_reuse.lower_inlined_body

    def logged(lowering, callee, inner):
        original(lowering, callee, inner)
        log.append((callee.name, inner.suffix in copied))

    monkeypatch.setattr(inline_reuse, "lower_inlined_body", logged)
    return log


def test_calls_in_several_states_lower_to_the_same_kernel(monkeypatch):
    fresh = lowered("calls.ptx", False, monkeypatch, CALLS)
    copies = copy_log(monkeypatch)
    copied = lowered("calls.ptx", True, monkeypatch, CALLS)
    assert copied == fresh
    assert fresh[0] and any("recursive call to 'forever'" in d for d in fresh[1])
    # pair: copied once with 8 bytes written, once with 4 (another state) and its
    # guarded call; leaf's body inside pair's copies is copied with them; stopper
    # has exits: lowered at both sites
    assert copies.count(("pair", True)) == 2 and copies.count(("pair", False)) == 2
    assert copies.count(("stopper", False)) == 2 and ("forever", True) in copies
    # leaf, a function that calls none, is one state whoever calls it: the kernel's own
    # call copies the body lowered inside pair's first copy
    assert copies.count(("leaf", False)) == 1 and copies[-1] == ("leaf", True)


def chain_ptx(depth: int, entry_calls: list[int]) -> str:
    """Functions c0 … c{depth} where each calls the next, and a kernel calling c{i} for
    each i of `entry_calls`."""
    def call(target: str) -> str:
        return ("\t{\n\t.param .b32 param0;\n\tst.param.b32 [param0+0], %r1;\n"
                f"\t.param .b32 retval0;\n\tcall.uni (retval0), {target}, (param0);\n"
                "\tld.param.b32 %r1, [retval0+0];\n\t}\n")
    functions = []
    for i in range(depth + 1):
        body = call(f"c{i + 1}") if i < depth else "\tadd.s32 %r1, %r1, 3;\n"
        functions.append(f".func (.param .b32 r) c{i} (.param .b32 x)\n{{\n"
                         "\t.reg .b32 %r<3>;\n\tld.param.b32 %r1, [x];\n"
                         f"{body}\tst.param.b32 [r+0], %r1;\n\tret;\n}}\n")
    kernel = ("\t.reg .b32 %r<3>;\n\tmov.u32 %r1, %tid.x;\n"
              + "".join(call(f"c{i}") for i in entry_calls) + "\tret;\n")
    return (".version 7.0\n.target sm_80\n.address_size 64\n" + "".join(functions)
            + f".visible .entry chain()\n{{\n{kernel}}}\n")


@pytest.mark.parametrize(("entry_calls", "copying"), [([0, 4, 8, 0], True),
                                                     ([9, 0, 9, 2, 2], True),
                                                     ([5, 1, 5], True), ([4, 3], False)])
def test_the_depth_limit_keeps_calls_at_other_depths_apart(monkeypatch, entry_calls, copying):
    """A chain deeper than MAX_INLINE_DEPTH is cut where the limit falls, which depends
    on the depth of the call site: bodies called at several depths are copied only
    where lowering them gives the same items. From c4, c10 calls c11 7 calls deep; from
    c3, 8 deep, where the call is cut: c10's body is lowered at both."""
    text = chain_ptx(11, entry_calls)
    fresh = lowered("chain.ptx", False, monkeypatch, text)
    copies = copy_log(monkeypatch)
    copied = lowered("chain.ptx", True, monkeypatch, text)
    assert copied == fresh
    assert any("nested deeper than" in d for d in fresh[1])
    assert any(made for _, made in copies) == copying


def test_copies_are_made_where_calls_repeat(monkeypatch):
    copies = copy_log(monkeypatch)
    load(SAMPLES / "cuda_large" / "particle_library.G.ptx")
    copied = sum(made for _, made in copies)
    assert len(copies) > 300 and copied > 200  # most call sites are copies (248 of 356)
