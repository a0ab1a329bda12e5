"""Every source operand of every PTX opcode the front end accepts reaches the result's class
(issue 17, item 1: the audit behind the texture-fetch bug).

For each opcode form below, one kernel per source operand position is generated: that
operand is thread-dependent (derived from `%tid.x`), every other operand is a uniform
kernel parameter. No analysis may call the destination uniform, except for the few
opcodes whose result is the same in every lane by their semantics (warp votes and
reductions, block reductions: `UNIFORM_RESULT`), which must stay uniform. Literal
operands are probed separately (`LITERAL_FORMS`), where the analyses fold them.
The tables cover every opcode root of `gpudiv.frontend.ptx`; a root added there without a
form here fails `test_every_opcode_root_has_a_form`.
"""

import re

import pytest

from gpudiv.analyses import affine, affine2, simple
from gpudiv.analyses.affine_reference import solve_reference
from gpudiv.api import analyze_text, check
from gpudiv.frontend import ptx as front
from gpudiv.load import parse_text

ANALYSES = {"simple": simple.analyze_kernel, "affine": affine.analyze_kernel,
            "affine2": affine2.analyze_kernel}

# Register kinds: declaration type, the uniform value (index 1), the thread-dependent
# value (index 2, from %tid.x) and the destination (index 3).
KINDS = {"r": "b32", "rd": "b64", "h": "b16", "f": "f32", "fd": "f64", "p": "pred",
         "q": "b128"}
PREFIX = {"r": "%r", "rd": "%rd", "h": "%h", "f": "%f", "fd": "%fd", "p": "%p", "q": "%q"}

# `{kind}` is a source operand of that register kind; `%r3`, `%rd3`, … are destinations.
FORMS = [
    # integer arithmetic
    "add.s32 %r3, {r}, {r};", "add.s64 %rd3, {rd}, {rd};", "add.u16 %h3, {h}, {h};",
    "add.sat.s32 %r3, {r}, {r};", "add.cc.u32 %r3, {r}, {r};",
    "sub.s32 %r3, {r}, {r};", "sub.s64 %rd3, {rd}, {rd};", "sub.cc.u32 %r3, {r}, {r};",
    "addc.u32 %r3, {r}, {r};", "subc.u32 %r3, {r}, {r};", "madc.lo.u32 %r3, {r}, {r}, {r};",
    "mul.lo.s32 %r3, {r}, {r};", "mul.hi.u32 %r3, {r}, {r};", "mul.wide.u32 %rd3, {r}, {r};",
    "mul.lo.s64 %rd3, {rd}, {rd};", "mul.wide.s16 %r3, {h}, {h};",
    "mad.lo.s32 %r3, {r}, {r}, {r};", "mad.hi.u32 %r3, {r}, {r}, {r};",
    "mad.wide.u32 %rd3, {r}, {r}, {rd};", "mad.lo.s64 %rd3, {rd}, {rd}, {rd};",
    "mul24.lo.s32 %r3, {r}, {r};", "mad24.lo.s32 %r3, {r}, {r}, {r};",
    "sad.u32 %r3, {r}, {r}, {r};",
    "div.s32 %r3, {r}, {r};", "div.u64 %rd3, {rd}, {rd};", "rem.u32 %r3, {r}, {r};",
    "abs.s32 %r3, {r};", "neg.s32 %r3, {r};", "neg.s64 %rd3, {rd};",
    "min.s32 %r3, {r}, {r};", "max.u64 %rd3, {rd}, {rd};", "min.relu.s32 %r3, {r}, {r};",
    "popc.b32 %r3, {r};", "popc.b64 %r3, {rd};", "clz.b32 %r3, {r};", "clz.b64 %r3, {rd};",
    "bfind.u32 %r3, {r};", "bfind.shiftamt.s64 %r3, {rd};", "fns.b32 %r3, {r}, {r}, {r};",
    "brev.b32 %r3, {r};", "brev.b64 %rd3, {rd};",
    "bfe.u32 %r3, {r}, {r}, {r};", "bfe.s64 %rd3, {rd}, {r}, {r};",
    "bfi.b32 %r3, {r}, {r}, {r}, {r};", "bfi.b64 %rd3, {rd}, {rd}, {r}, {r};",
    "bmsk.clamp.b32 %r3, {r}, {r};", "szext.wrap.s32 %r3, {r}, {r};",
    "prmt.b32 %r3, {r}, {r}, {r};", "prmt.b32.f4e %r3, {r}, {r}, {r};",
    "lop3.b32 %r3, {r}, {r}, {r}, 0x96;", "shf.l.wrap.b32 %r3, {r}, {r}, {r};",
    "shf.r.clamp.b32 %r3, {r}, {r}, {r};",
    "shl.b32 %r3, {r}, {r};", "shl.b64 %rd3, {rd}, {r};", "shl.b16 %h3, {h}, {r};",
    "shr.u32 %r3, {r}, {r};", "shr.s64 %rd3, {rd}, {r};",
    "and.b32 %r3, {r}, {r};", "or.b64 %rd3, {rd}, {rd};", "xor.b32 %r3, {r}, {r};",
    "not.b32 %r3, {r};", "cnot.b32 %r3, {r};", "and.pred %p3, {p}, {p};",
    "or.pred %p3, {p}, {p};", "xor.pred %p3, {p}, {p};", "not.pred %p3, {p};",
    "dp4a.u32.u32 %r3, {r}, {r}, {r};", "dp2a.lo.s32.s32 %r3, {r}, {r}, {r};",
    # floating point
    "add.f32 %f3, {f}, {f};", "add.rn.f64 %fd3, {fd}, {fd};", "sub.f32 %f3, {f}, {f};",
    "mul.rn.f32 %f3, {f}, {f};", "fma.rn.f32 %f3, {f}, {f}, {f};",
    "fma.rn.f64 %fd3, {fd}, {fd}, {fd};", "mad.rn.f32 %f3, {f}, {f}, {f};",
    "div.rn.f32 %f3, {f}, {f};", "div.approx.f32 %f3, {f}, {f};", "div.rn.f64 %fd3, {fd}, {fd};",
    "abs.f32 %f3, {f};", "neg.f64 %fd3, {fd};", "min.f32 %f3, {f}, {f};",
    "max.f64 %fd3, {fd}, {fd};", "copysign.f32 %f3, {f}, {f};",
    "rcp.rn.f32 %f3, {f};", "rcp.approx.ftz.f64 %fd3, {fd};", "sqrt.rn.f32 %f3, {f};",
    "sqrt.approx.f32 %f3, {f};", "rsqrt.approx.f32 %f3, {f};", "sin.approx.f32 %f3, {f};",
    "cos.approx.f32 %f3, {f};", "lg2.approx.f32 %f3, {f};", "ex2.approx.f32 %f3, {f};",
    "tanh.approx.f32 %f3, {f};", "testp.finite.f32 %p3, {f};",
    "add.rn.f16x2 %r3, {r}, {r};", "fma.rn.bf16x2 %r3, {r}, {r}, {r};",
    "add.f16 %h3, {h}, {h};",
    # comparisons and selects
    "setp.lt.s32 %p3, {r}, {r};", "setp.eq.u64 %p3, {rd}, {rd};",
    "setp.gt.f32 %p3, {f}, {f};", "setp.ne.and.s32 %p3, {r}, {r}, {p};",
    "setp.lt.u16 %p3, {h}, {h};", "setp.ge.f64 %p3, {fd}, {fd};",
    "set.lt.u32.s32 %r3, {r}, {r};", "set.gt.or.f32.f32 %f3, {f}, {f}, {p};",
    "selp.b32 %r3, {r}, {r}, {p};", "selp.f64 %fd3, {fd}, {fd}, {p};",
    "slct.s32.s32 %r3, {r}, {r}, {r};", "slct.f32.f32 %f3, {f}, {f}, {f};",
    # conversions and moves
    "cvt.u64.u32 %rd3, {r};", "cvt.u32.u64 %r3, {rd};", "cvt.s64.s32 %rd3, {r};",
    "cvt.u16.u32 %h3, {r};", "cvt.u32.u16 %r3, {h};", "cvt.sat.s32.s64 %r3, {rd};",
    "cvt.rn.f32.s32 %f3, {r};", "cvt.rzi.s32.f32 %r3, {f};", "cvt.rn.f32.f64 %f3, {fd};",
    "cvt.f64.f32 %fd3, {f};", "cvt.rn.f16x2.f32 %r3, {f}, {f};", "cvt.rn.bf16.f32 %h3, {f};",
    "cvt.rni.f32.f32 %f3, {f};",
    "mov.u32 %r3, {r};", "mov.b64 %rd3, {rd};", "mov.f32 %f3, {f};", "mov.pred %p3, {p};",
    "mov.b64 %rd3, {{{r}, {r}}};", "mov.b32 %r3, {{{h}, {h}}};",
    "mov.b64 {{%r3, %r0}}, {rd};", "mov.b64 {{%r0, %r3}}, {rd};",
    "mov.b32 {{%h3, %h0}}, {r};", "mov.b32 {{%h0, %h3}}, {r};",
    "mov.b128 %q3, {{{rd}, {rd}}};",
    "cvta.to.global.u64 %rd3, {rd};", "cvta.shared.u64 %rd3, {rd};",
    "isspacep.global %p3, {rd};", "mapa.u64 %rd3, {rd}, {r};", "getctarank.u64 %r3, {rd};",
    "alloca.u64 %rd3, {rd};", "createpolicy.fractional.L2::evict_last.b64 %rd3, 0f3F800000;",
    # video instructions
    "vadd.s32.u32.s32 %r3, {r}, {r};", "vsub.s32.s32.s32.sat %r3, {r}, {r};",
    "vabsdiff.u32.u32.u32 %r3, {r}, {r};", "vmin.s32.s32.s32 %r3, {r}, {r};",
    "vmax.u32.u32.u32 %r3, {r}, {r};", "vshl.u32.u32.u32.clamp %r3, {r}, {r};",
    "vshr.u32.u32.u32.wrap %r3, {r}, {r};", "vmad.s32.s32.s32 %r3, {r}, {r}, {r};",
    "vset.s32.s32.lt %r3, {r}, {r};", "vadd2.u32.u32.u32 %r3, {r}, {r}, {r};",
    "vsub2.s32.s32.s32 %r3, {r}, {r}, {r};", "vavrg2.u32.u32.u32 %r3, {r}, {r}, {r};",
    "vabsdiff2.u32.u32.u32 %r3, {r}, {r}, {r};", "vmin2.u32.u32.u32 %r3, {r}, {r}, {r};",
    "vmax2.s32.s32.s32 %r3, {r}, {r}, {r};", "vset2.u32.u32.ne %r3, {r}, {r}, {r};",
    "vadd4.u32.u32.u32 %r3, {r}, {r}, {r};", "vsub4.s32.s32.s32 %r3, {r}, {r}, {r};",
    "vavrg4.u32.u32.u32 %r3, {r}, {r}, {r};", "vabsdiff4.u32.u32.u32 %r3, {r}, {r}, {r};",
    "vmin4.s32.s32.s32 %r3, {r}, {r}, {r};", "vmax4.u32.u32.u32 %r3, {r}, {r}, {r};",
    "vset4.u32.u32.lt %r3, {r}, {r}, {r};",
    # memory
    "ld.global.u32 %r3, [{rd}];", "ld.global.v2.u32 {{%r3, %r0}}, [{rd}];",
    "ld.global.v2.u32 {{%r0, %r3}}, [{rd}+8];", "ld.shared.u64 %rd3, [{rd}];",
    "ld.const.f32 %f3, [{rd}];", "ld.u32 %r3, [{rd}];", "ldu.global.u32 %r3, [{rd}];",
    "ld.global.nc.v4.f32 {{%f0, %f0, %f3, %f0}}, [{rd}];", "ld.param.u32 %r3, [{rd}];",
    "tex.1d.v4.f32.s32 {{%f3, %f0, %f0, %f0}}, [{rd}, {{{r}}}];",
    "tex.2d.v4.s32.f32 {{%r3, %r0, %r0, %r0}}, [{rd}, {{{f}, {f}}}];",
    "tex.3d.v4.f32.f32 {{%f0, %f3, %f0, %f0}}, [{rd}, {{{f}, {f}, {f}, {f}}}];",
    "tex.level.2d.v4.f32.f32 {{%f3, %f0, %f0, %f0}}, [{rd}, {{{f}, {f}}}], {f};",
    "tex.grad.1d.v4.f32.f32 {{%f3, %f0, %f0, %f0}}, [{rd}, {{{f}}}], {{{f}}}, {{{f}}};",
    "tld4.g.2d.v4.f32.f32 {{%f0, %f0, %f0, %f3}}, [{rd}, {{{f}, {f}}}];",
    "suld.b.1d.b32.trap {{%r3}}, [{rd}, {{{r}}}];",
    "suld.b.2d.v2.b32.clamp {{%r0, %r3}}, [{rd}, {{{r}, {r}}}];",
    "txq.width.b32 %r3, [{rd}];", "suq.width.b32 %r3, [{rd}];",
    "atom.global.add.u32 %r3, [{rd}], {r};", "atom.shared.cas.b32 %r3, [{rd}], {r}, {r};",
    "atom.global.exch.b64 %rd3, [{rd}], {rd};",
    # warp exchanges and matrix operations (opaque)
    "shfl.sync.idx.b32 %r3, {r}, {r}, 31, -1;", "shfl.sync.down.b32 %r3|%p0, {r}, {r}, 31, {r};",
    "match.any.sync.b32 %r3, {r}, -1;", "elect.sync %r3|%p3, {r};",
]

# Forms whose result is the same in every active lane whatever the operands: warp votes,
# warp reductions and block-wide barrier reductions (gpudiv.frontend.ptx,
# UNIFORM_COLLECTIVE_ROOTS; the simple analysis' documented choice).
UNIFORM_RESULT = [
    "vote.sync.all.pred %p3, {p}, -1;", "vote.sync.any.pred %p3, {p}, -1;",
    "vote.sync.uni.pred %p3, {p}, -1;", "vote.sync.ballot.b32 %r3, {p}, -1;",
    "redux.sync.add.u32 %r3, {r}, -1;",
    "redux.sync.min.s32 %r3, {r}, -1;", "activemask.b32 %r3;",
    "bar.red.popc.u32 %r3, 0, {p};", "bar.red.and.pred %p3, 0, {p};",
    "barrier.red.or.pred %p3, 0, {p};",
]

# Forms with a literal operand, where the analyses fold or scale by the literal: the
# thread-dependent operand must still make the result non-uniform (shift amounts at and
# beyond the register width of a narrower type included).
LITERAL_FORMS = [
    "shl.b32 %r3, {r}, 5;", "shl.b32 %r3, {r}, 29;", "shl.b32 %r3, {r}, 31;",
    "shl.b64 %rd3, {rd}, 2;", "shl.b64 %rd3, {rd}, 31;", "shl.b64 %rd3, {rd}, 32;",
    "shl.b64 %rd3, {rd}, 40;", "shl.b64 %rd3, {rd}, 63;",
    "shr.u64 %rd3, {rd}, 40;", "shr.s32 %r3, {r}, 3;",
    "mul.lo.s64 %rd3, {rd}, 4294967296;", "mul.wide.u32 %rd3, {r}, 65536;",
    "mad.lo.s32 %r3, {r}, 3, 7;", "add.s64 %rd3, {rd}, 4294967296;",
    "sub.s32 %r3, 0, {r};", "and.b32 %r3, {r}, 255;", "or.b64 %rd3, {rd}, 1;",
    "setp.lt.u32 %p3, {r}, 32;", "setp.ne.s64 %p3, {rd}, 0;",
    "selp.b32 %r3, 1, 0, {p};", "bfe.u32 %r3, {r}, 8, 8;", "prmt.b32 %r3, {r}, 0, 0x3210;",
]

# Forms whose result is uniform whatever the thread-dependent operand: the literal fixes it.
PROVABLY_UNIFORM = [
    "shl.b32 %r3, {r}, 32;", "shl.b32 %r3, {r}, 40;", "and.b32 %r3, {r}, 0;",
    "mul.lo.s32 %r3, {r}, 0;", "mul.lo.s64 %rd3, {rd}, 0;",
]

# Which of the uniform forms each analysis sees as uniform (the others it may call
# divergent: imprecise, not unsound).
PROVABLY_UNIFORM_SEEN = {
    "shl.b32 %r3, {r}, 32;": ("affine", "affine2"),
    "shl.b32 %r3, {r}, 40;": ("affine", "affine2"),
    "mul.lo.s32 %r3, {r}, 0;": ("affine", "affine2"),
    "mul.lo.s64 %rd3, {rd}, 0;": ("affine", "affine2"),
}

# Opcode roots with no destination: nothing to classify.
NO_RESULT = (front.STORE_ROOTS | front.DROPPED_ROOTS | front.REDUCTION_ROOTS
             | frozenset({"bar", "barrier"}))
# Accepted roots whose forms are not generated here, and why.
NOT_GENERATED = {
    "stacksave": "no source operand",
    "istypep": "a texture/sampler/surface name, not a register, is its operand",
    "wmma": "opaque: every lowering of an opaque root is the same (shfl, match, elect cover it)",
    "mma": "opaque, as wmma", "wgmma": "opaque, as wmma", "ldmatrix": "opaque, as wmma",
    "movmatrix": "opaque, as wmma", "mbarrier": "opaque, as wmma", "tcgen05": "opaque, as wmma",
    "clusterlaunchcontrol": "opaque, as wmma", "tensormap": "opaque, as wmma",
    "multimem": "opaque, as wmma",
}

OPERAND = re.compile(r"\{(r|rd|h|f|fd|p|q)\}")
DEST = re.compile(r"%(?:r|rd|h|f|fd|p|q)3\b")

KERNEL = """
.version 8.7
.target sm_90
.address_size 64
.visible .entry k(.param .u32 k_r, .param .u64 k_rd, .param .u16 k_h, .param .f32 k_f,
                  .param .f64 k_fd)
{{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    .reg .b16 %h<4>;
    .reg .f32 %f<4>;
    .reg .f64 %fd<4>;
    .reg .pred %p<4>;
    .reg .b128 %q<4>;
    ld.param.u32 %r1, [k_r];
    ld.param.u64 %rd1, [k_rd];
    ld.param.u16 %h1, [k_h];
    ld.param.f32 %f1, [k_f];
    ld.param.f64 %fd1, [k_fd];
    setp.ne.s32 %p1, %r1, 0;
    mov.b128 %q1, {{%rd1, %rd1}};
    mov.u32 %r2, %tid.x;
    cvt.u64.u32 %rd2, %r2;
    cvt.u16.u32 %h2, %r2;
    cvt.rn.f32.u32 %f2, %r2;
    cvt.rn.f64.u32 %fd2, %r2;
    setp.lt.u32 %p2, %r2, 16;
    mov.b128 %q2, {{%rd2, %rd1}};
    {instruction}
    ret;
}}
"""


def instances(form: str) -> list[tuple[int, str]]:
    """The form with operand `position` thread-dependent and the others uniform, for every
    source operand position."""
    count = len(OPERAND.findall(form))
    out = []
    for position in range(count):
        seen = iter(range(count))

        def register(match: re.Match, position: int = position, seen=seen) -> str:
            index = next(seen)
            return PREFIX[match[1]] + ("2" if index == position else "1")

        out.append((position, OPERAND.sub(register, form).replace("{{", "{").replace("}}", "}")))
    return out


def destination_classes(instruction: str, analysis: str) -> dict[str, bool]:
    """SSA name → uniform, for every destination (`%x3`) of the instruction."""
    program = parse_text(KERNEL.format(instruction=instruction), "audit.ptx", "ptx")
    assert not program.errors, (instruction, [str(e) for e in program.errors])
    result = ANALYSES[analysis](program.kernels[0])
    dests = set(DEST.findall(instruction))
    found = {v.name: v.uniform for v in result.variables if v.source in dests}
    assert found, f"no destination of '{instruction}' was found"
    return found


def _root(form: str) -> str:
    return form.split(".", 1)[0].split(" ", 1)[0]


def _cases(forms: list[str]):
    for form in forms:
        for position, instruction in instances(form):
            for analysis in ANALYSES:
                yield pytest.param(instruction, analysis, id=f"{analysis}-{position}-{form}")


@pytest.mark.parametrize("instruction, analysis", list(_cases(FORMS + LITERAL_FORMS)))
def test_thread_dependent_operand_makes_the_result_non_uniform(instruction, analysis):
    classes = destination_classes(instruction, analysis)
    assert not any(classes.values()), (instruction, analysis, classes)


@pytest.mark.parametrize("instruction, analysis", list(_cases(UNIFORM_RESULT)))
def test_warp_and_block_collectives_stay_uniform(instruction, analysis):
    assert all(destination_classes(instruction, analysis).values()), instruction


@pytest.mark.parametrize("instruction, analysis", list(_cases(PROVABLY_UNIFORM)))
def test_literals_that_fix_the_result(instruction, analysis):
    form = next(f for f in PROVABLY_UNIFORM if instances(f)[0][1] == instruction)
    uniform = all(destination_classes(instruction, analysis).values())
    assert uniform == (analysis in PROVABLY_UNIFORM_SEEN.get(form, ())), instruction


def test_every_opcode_root_has_a_form():
    accepted = (front.ASSIGN_ROOTS | front.UNIFORM_COLLECTIVE_ROOTS | front.OPAQUE_ROOTS
                | front.LOAD_ROOTS | front.TEXTURE_ROOTS | front.ATOMIC_ROOTS)
    covered = {_root(f) for f in FORMS + UNIFORM_RESULT + LITERAL_FORMS}
    missing = accepted - covered - NOT_GENERATED.keys() - NO_RESULT
    assert not missing, sorted(missing)
    assert not (NOT_GENERATED.keys() & covered)


def test_every_form_is_parsed_as_the_opcode_it_names():
    """No form falls through to `unknown opcode` (which would make it opaque and so
    trivially divergent)."""
    for form in FORMS + UNIFORM_RESULT + LITERAL_FORMS + PROVABLY_UNIFORM:
        instruction = instances(form)[0][1] if OPERAND.search(form) else form
        program = parse_text(KERNEL.format(instruction=instruction), "audit.ptx", "ptx")
        assert not program.errors and not any(
            "unknown" in d.message for d in program.diagnostics), (form, program.diagnostics)


def test_simple_uniform_implies_affine_uniform_on_every_form():
    """Corollary 1: the affine analyses never call divergent what the simple one calls
    uniform."""
    for form in FORMS + UNIFORM_RESULT + LITERAL_FORMS + PROVABLY_UNIFORM:
        for _, instruction in instances(form) or [(0, form)]:
            simple_uniform = destination_classes(instruction, "simple")
            for analysis in ("affine", "affine2"):
                other = destination_classes(instruction, analysis)
                assert all(other[n] for n, u in simple_uniform.items() if u), instruction


SHL64 = """
.version 8.7
.target sm_80
.address_size 64
.visible .entry shl64(.param .u64 shl64_param_0)
{
    .reg .pred %p<2>;
    .reg .b32 %r<3>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [shl64_param_0];
    cvta.to.global.u64 %rd4, %rd1;
    mov.u32 %r1, %tid.x;
    cvt.u64.u32 %rd2, %r1;
    shl.b64 %rd3, %rd2, 40;
    setp.ne.s64 %p1, %rd3, 0;
    @%p1 bra DONE;
    mov.u64 %rd5, 1;
    shl.b64 %rd5, %rd5, 40;
    st.global.u64 [%rd4], %rd5;
DONE:
    ret;
}
"""


@pytest.mark.parametrize("analysis", ["affine", "affine2"])
def test_shl_b64_by_40_is_checked_by_the_oracle(analysis):
    """`tid << 40` on 64 bits is not 0 (it was taken as 0 modulo 2^32: 10 violations), and
    `1 << 40` is not the constant 0."""
    analysed = analyze_text(SHL64, "shl64.ptx", analysis, language="ptx")
    (kernel,) = analysed.kernels
    assert [b.divergent for b in kernel.branches] == [True]
    shifted = [v for v in kernel.variables if v.source == "%rd5" and v.kind == "assign"]
    assert shifted[-1].klass == "uniform" and shifted[-1].value is None
    (report,) = check(analysed)
    assert report.status == "checked" and report.violations == []


@pytest.mark.parametrize("degree", [1, 2])
def test_reference_solver_agrees_on_wide_shifts(degree):
    kernel = parse_text(SHL64, "shl64.ptx", "ptx").kernels[0]
    driver = affine2.analyze_kernel if degree == 2 else affine.analyze_kernel
    result = driver(kernel)
    got: dict[str, dict[int, int | None]] = {}
    for var, power, value in result.relations["affine_coef"]:
        got.setdefault(var, {})[power] = value
    for var, power in result.relations["affine_bot"]:
        got.setdefault(var, {})[power] = None
    solved = {v: tuple(c[p] for p in range(degree + 1)) for v, c in got.items()}
    assert solved == solve_reference(result.ssa, degree)
