"""Every source operand of every PTX opcode the front end accepts reaches the result's class
(issue 17, item 1: the audit behind the texture-fetch bug).

For each opcode form below, one kernel per source operand position is generated: that
operand is thread-dependent (derived from `%tid.x`), every other operand is a uniform
kernel parameter. No analysis may call the destination uniform, except for the few
opcodes whose result is the same in every lane by their semantics (warp votes and
reductions, block reductions: `UNIFORM_RESULT`), which must stay uniform. Literal
operands are probed separately (`LITERAL_FORMS`), where the analyses fold them.
The tables cover every opcode root of `gpudiv.lang.ptx.parse`; a root added there without a
form here fails `test_every_opcode_root_has_a_form`.
"""

import re
from functools import cache

import pytest

from gpudiv.analyses import affine, affine2
from gpudiv.analyses.affine_reference import solve_reference
from gpudiv.analyses.solve import shipped_rule
from gpudiv.api import analyze, analyze_text, check
from gpudiv.ir.operators import normalise_ptx
from gpudiv.lang.load import parse_text
from gpudiv.lang.ptx import parse as front

# Degree 1 shares affine.lp with affine2: the full suite runs it, the fast loop does not.
AFFINE = pytest.param("affine", marks=pytest.mark.slow)
ANALYSES = ("simple", AFFINE, "affine2")

# Register kinds (b32, b64, b16, f32, f64, pred, b128): in the kernel, index 1 holds a
# uniform value (a parameter), index 2 a thread-dependent one (from %tid.x), index 3 is
# the destination.
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

# A guard is a source operand too: the destination keeps its old (uniform) value in the
# lanes where the guard is false. Each form sets the destination first.
GUARDED_FORMS = [
    "mov.u32 %r3, %r1;\n    @{p} add.s32 %r3, {r}, {r};",
    "mov.u32 %r3, %r1;\n    @!{p} mad.lo.s32 %r3, {r}, {r}, {r};",
    "mov.u64 %rd3, %rd1;\n    @{p} shl.b64 %rd3, {rd}, 2;",
    "mov.u32 %r3, %r1;\n    @{p} mov.u32 %r3, {r};",
    "mov.u32 %r3, %r1;\n    @{p} cvt.u32.u64 %r3, {rd};",
    "mov.f32 %f3, %f1;\n    @{p} fma.rn.f32 %f3, {f}, {f}, {f};",
    "mov.pred %p3, %p1;\n    @{p} setp.lt.s32 %p3, {r}, {r};",
    "mov.u32 %r3, %r1;\n    @{p} selp.b32 %r3, {r}, {r}, {p};",
    "mov.u32 %r3, %r1;\n    @{p} ld.global.u32 %r3, [{rd}];",
    "mov.u32 %r3, %r1;\n    @!{p} ld.param.u32 %r3, [k_r];",
    "mov.f32 %f3, %f1;\n    @{p} tex.1d.v4.f32.s32 {{%f3, %f0, %f0, %f0}}, [{rd}, {{{r}}}];",
    "mov.u32 %r3, %r1;\n    @{p} vote.sync.ballot.b32 %r3, %p1, -1;",
]

# Forms whose result is the same in every active lane whatever the operands: warp votes,
# warp reductions and block-wide barrier reductions (gpudiv.lang.ptx.parse,
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

# Zero extension of a thread-dependent value that may wrap below 0, then the other lane's
# value subtracted: the 64-bit difference is not the same in every lane.
WIDENING_FORMS = [
    "add.s32 %r0, %r2, -16;\n    cvt.u64.u32 %rd0, %r0;\n    cvt.u64.u32 %rd3, %r2;"
    "\n    sub.s64 %rd3, %rd0, %rd3;",
    "add.s32 %r0, %r2, -16;\n    mul.wide.u32 %rd0, %r0, 4;\n    mul.wide.u32 %rd3, %r2, 4;"
    "\n    sub.s64 %rd3, %rd0, %rd3;",
    "add.s32 %r0, %r2, -16;\n    mad.wide.u32 %rd0, %r0, 4, %rd1;"
    "\n    mad.wide.u32 %rd3, %r2, 4, %rd1;\n    sub.s64 %rd3, %rd0, %rd3;",
    "sub.s32 %r0, %r2, %r1;\n    cvt.u64.u32 %rd0, %r0;\n    cvt.u64.u32 %rd3, %r2;"
    "\n    sub.s64 %rd3, %rd0, %rd3;",
    "add.s16 %h0, %h2, -3;\n    cvt.u32.u16 %r0, %h0;\n    cvt.u32.u16 %r3, %h2;"
    "\n    sub.s32 %r3, %r0, %r3;",
]
# The same with values that stay in range in every lane: the difference is uniform.
WIDENING_IN_RANGE = [
    "add.s32 %r0, %r2, 16;\n    cvt.u64.u32 %rd0, %r0;\n    cvt.u64.u32 %rd3, %r2;"
    "\n    sub.s64 %rd3, %rd0, %rd3;",
    "add.s32 %r0, %r2, 16;\n    mul.wide.u32 %rd0, %r0, 4;\n    mul.wide.u32 %rd3, %r2, 4;"
    "\n    sub.s64 %rd3, %rd0, %rd3;",
    "sub.s32 %r0, 2000, %r2;\n    cvt.u64.u32 %rd0, %r0;\n    cvt.u64.u32 %rd3, %r2;"
    "\n    add.s64 %rd3, %rd0, %rd3;",
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

HEADER = """
.version 8.7
.target sm_90
.address_size 64
"""

KERNEL = """
.visible .entry {name}(.param .u32 k_r, .param .u64 k_rd, .param .u16 k_h, .param .f32 k_f,
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


def instances(form: str) -> list[str]:
    """The form with one source operand thread-dependent (`%x2`) and the others uniform
    (`%x1`), for every source operand position in turn; a form without one as it is."""
    count = len(OPERAND.findall(form))
    out = []
    for position in range(count):
        seen = iter(range(count))

        def register(match: re.Match, position: int = position, seen=seen) -> str:
            return PREFIX[match[1]] + ("2" if next(seen) == position else "1")

        out.append(OPERAND.sub(register, form))
    return [text.replace("{{", "{").replace("}}", "}") for text in out or [form]]


ALL_FORMS = (FORMS + LITERAL_FORMS + GUARDED_FORMS + UNIFORM_RESULT + PROVABLY_UNIFORM
             + WIDENING_FORMS + WIDENING_IN_RANGE)


@cache
def analysed_module(analysis: str) -> tuple[list[str], list]:
    """Every instance of every form as one kernel, all in one module (so that the driver
    solves them in a few clingo runs), and their results."""
    texts = list(dict.fromkeys(t for form in ALL_FORMS for t in instances(form)))
    module = HEADER + "".join(KERNEL.format(name=f"k{i}", instruction=text)
                              for i, text in enumerate(texts))
    program = parse_text(module, "audit.ptx", "ptx")
    assert not program.errors, [str(e) for e in program.errors[:5]]
    assert not any("unknown" in d.message for d in program.diagnostics), program.diagnostics
    return texts, analyze(program, analysis).kernels


@cache
def all_classes(analysis: str) -> dict[str, dict[str, bool]]:
    """Instruction text → {SSA name: uniform} for the destinations (`%x3`) that the last
    line of the text defines, for every instance of every form."""
    out = {}
    for text, result in zip(*analysed_module(analysis), strict=True):
        dests = set(DEST.findall(text))
        last = max(v.line for v in result.variables if v.source in dests)
        out[text] = {v.name: v.uniform for v in result.variables
                     if v.source in dests and v.line == last}
        assert out[text], f"no destination of '{text}' was found"
    return out


def _root(form: str) -> str:
    return form.split(".", 1)[0].split(" ", 1)[0]


@pytest.mark.parametrize("analysis", ANALYSES)
def test_thread_dependent_operand_makes_the_result_non_uniform(analysis):
    classes = all_classes(analysis)
    wrong = [text for form in FORMS + LITERAL_FORMS + GUARDED_FORMS
             for text in instances(form) if OPERAND.search(form) and any(classes[text].values())]
    assert wrong == [], wrong


@pytest.mark.parametrize("analysis", ANALYSES)
def test_warp_and_block_collectives_stay_uniform(analysis):
    classes = all_classes(analysis)
    wrong = [text for form in UNIFORM_RESULT for text in instances(form)
             if not all(classes[text].values())]
    assert wrong == [], wrong


@pytest.mark.parametrize("analysis", ANALYSES)
def test_zero_extension_below_zero_is_not_affine(analysis):
    """`cvt.u64.u32(tid − 16) − cvt.u64.u32(tid)` is 2^32 − 16 in lanes 0–15 and −16 in
    the others (it was taken as −16: uniform)."""
    classes = all_classes(analysis)
    assert [text for text in WIDENING_FORMS if any(classes[text].values())] == []


@pytest.mark.parametrize("analysis", [AFFINE, "affine2"])
def test_zero_extension_in_range_stays_affine(analysis):
    classes = all_classes(analysis)
    assert [text for text in WIDENING_IN_RANGE if not all(classes[text].values())] == []


# One form per cause of a ⊥ coefficient (rules/affine_explain.lp): the fast loop explains
# these; the full suite explains every form.
ONE_FORM_PER_CAUSE = (
    "addc.u32 %r3, %r2, %r1;",  # source (and operand, input, memory, nonlinear)
    "setp.lt.s32 %p3, %r2, %r1;",  # difference
    "cvt.u32.u16 %r3, %h2;",  # wrap
    "vote.sync.all.pred %p3, %p2, -1;",  # operator
    "ld.global.u32 %r3, [%rd2];",  # address
    "shl.b32 %r3, %r2, 31;",  # overflow
)


@pytest.mark.parametrize("every_form", [pytest.param(True, marks=pytest.mark.slow), False])
def test_every_bottom_coefficient_of_every_form_is_explained(every_form):
    """rules/affine_explain.lp gives every ⊥ coefficient a cause (`wrap` for widening)."""
    texts, _ = analysed_module("affine2")
    if not every_form:
        assert set(ONE_FORM_PER_CAUSE) <= set(texts)
        texts = list(ONE_FORM_PER_CAUSE)
    module = HEADER + "".join(KERNEL.format(name=f"k{i}", instruction=text)
                              for i, text in enumerate(texts))
    kernels = parse_text(module, "audit.ptx", "ptx").kernels
    explaining = affine.analysis("affine2", 2, extra_rules=(shipped_rule("affine_explain.lp"),))
    causes = set()
    for text, result in zip(texts, explaining.run(kernels), strict=True):
        bottoms = set(result.relations["affine_bot"])
        explained = {(v, n) for v, n, _, _ in result.relations["because"]}
        assert bottoms <= explained, (text, sorted(bottoms - explained)[:3])
        causes |= {why for _, _, why, _ in result.relations["because"]}
    assert {"wrap", "address", "overflow", "nonlinear", "difference", "operator"} <= causes


@pytest.mark.parametrize("analysis", ANALYSES)
def test_literals_that_fix_the_result(analysis):
    classes = all_classes(analysis)
    for form in PROVABLY_UNIFORM:
        (text,) = instances(form)
        seen = analysis in PROVABLY_UNIFORM_SEEN.get(form, ())
        assert all(classes[text].values()) == seen, text


def test_every_opcode_root_has_a_form():
    accepted = (front.ASSIGN_ROOTS | front.UNIFORM_COLLECTIVE_ROOTS | front.OPAQUE_ROOTS
                | front.LOAD_ROOTS | front.TEXTURE_ROOTS | front.ATOMIC_ROOTS)
    covered = {_root(f) for f in FORMS + UNIFORM_RESULT + LITERAL_FORMS}
    missing = accepted - covered - NOT_GENERATED.keys() - NO_RESULT
    assert not missing, sorted(missing)
    assert not (NOT_GENERATED.keys() & covered)


def test_every_instance_is_one_kernel_and_names_its_opcode():
    """No form falls through to `unknown opcode` (which would make it opaque and so
    trivially divergent), and every form has the operand count it seems to have."""
    texts = {t for form in ALL_FORMS for t in instances(form)}
    assert texts == set(all_classes("simple"))
    assert len(instances("add.s32 %r3, {r}, {r};")) == 2
    assert instances("add.s32 %r3, {r}, {r};")[1] == "add.s32 %r3, %r1, %r2;"
    assert instances("activemask.b32 %r3;") == ["activemask.b32 %r3;"]


def solved(result, degree: int) -> dict[str, tuple]:
    """SSA name → coefficients (tid⁰ first, None for ⊥) as the rules solved them."""
    got: dict[str, dict[int, int | None]] = {}
    for var, power, value in result.relations["affine_coef"]:
        got.setdefault(var, {})[power] = value
    for var, power in result.relations["affine_bot"]:
        got.setdefault(var, {})[power] = None
    return {v: tuple(c[p] for p in range(degree + 1)) for v, c in got.items()}


@pytest.mark.parametrize("analysis, degree", [pytest.param("affine", 1, marks=pytest.mark.slow),
                                              ("affine2", 2)])
def test_reference_solver_agrees_on_every_form(analysis, degree):
    for text, result in zip(*analysed_module(analysis), strict=True):
        assert solved(result, degree) == solve_reference(result.ssa, degree), text


@pytest.mark.parametrize("analysis", [AFFINE, "affine2"])
def test_simple_uniform_implies_affine_uniform_on_every_form(analysis):
    """Corollary 1: the affine analyses never call divergent what the simple one calls
    uniform."""
    other = all_classes(analysis)
    for text, names in all_classes("simple").items():
        assert all(other[text][n] for n, uniform in names.items() if uniform), text


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
    assert solved(result, degree) == solve_reference(result.ssa, degree)


CMPWRAP = """
.version 8.7
.target sm_80
.address_size 64
.visible .entry cmpwrap(.param .u64 cmpwrap_param_0)
{
    .reg .pred %p<3>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [cmpwrap_param_0];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, %tid.x;
    add.s32 %r2, %r1, -16;
    setp.lt.u32 %p1, %r1, %r2;
    @%p1 bra DONE;
    st.global.u32 [%rd2], %r1;
DONE:
    setp.lt.s32 %p2, %r1, %r2;
    @%p2 bra END;
    st.global.u32 [%rd2+4], %r1;
END:
    ret;
}
"""


@pytest.mark.parametrize("analysis", ["affine", "affine2"])
def test_unsigned_ordered_comparison_of_equal_strides_wraps_at_zero(analysis):
    """`tid < tid − 16` on u32 holds in lanes 0–15 only (it was called uniform: 6
    violations); on s32 it is false in every lane, and the difference decides."""
    analysed = analyze_text(CMPWRAP, "cmpwrap.ptx", analysis, language="ptx")
    (kernel,) = analysed.kernels
    assert [b.divergent for b in kernel.branches] == [True, False]
    (report,) = check(analysed)
    assert report.status == "checked" and report.violations == []


@pytest.mark.parametrize("opcode, name", [
    ("setp.lt.u32", "generic"), ("setp.lo.u32", "generic"), ("setp.hs.u64", "generic"),
    ("setp.le.b32", "generic"), ("set.gt.u32.u32", "generic"),
    ("setp.lt.s32", "cmp"), ("setp.ge.s64", "cmp"), ("set.lt.u32.s32", "cmp"),
    ("setp.eq.u32", "cmp"), ("setp.ne.b64", "cmp"), ("setp.eq.s16", "cmp"),
])
def test_which_integer_comparisons_the_difference_decides(opcode, name):
    assert normalise_ptx(opcode, 2) == name
