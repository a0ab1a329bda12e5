"""PTX opcode and special-register tables: what an opcode root or a special register
means to the lowering (`ptx_lower`). The grammar knows none of this; docs/ptx.md lists
every modelling choice."""

from __future__ import annotations

from gpudiv.lang.ptx.forms import TYPE_BYTES as _TYPE_BYTES

# ---------------------------------------------------------------------------------------
# Tables: what an opcode or a special register means. The grammar knows none of this.
# ---------------------------------------------------------------------------------------

# Special registers that hold one value in all lanes of a warp. Every other special
# register (%tid.*, %laneid, %clock*, %globaltimer*, %lanemask_*, %pm*, unknown ones) is
# divergent; docs/design.md "Semantics choices for PTX": %tid.y/%tid.z are divergent
# unless the launch shape says otherwise.
UNIFORM_SPECIALS = frozenset({
    "%ntid", "%ctaid", "%nctaid", "%gridid", "%warpid", "%nwarpid", "%smid", "%nsmid",
    "%total_smem_size", "%dynamic_smem_size", "%aggr_smem_size", "%is_explicit_cluster",
    "%clusterid", "%nclusterid", "%cluster_ctaid", "%cluster_nctaid", "%cluster_ctarank",
    "%cluster_nctarank", "%current_graph_exec",
})
KNOWN_SPECIALS = UNIFORM_SPECIALS | frozenset({
    "%tid", "%laneid", "%clock", "%clock_hi", "%clock64", "%globaltimer",
    "%globaltimer_lo", "%globaltimer_hi", "%lanemask_eq", "%lanemask_le", "%lanemask_lt",
    "%lanemask_ge", "%lanemask_gt",
})
_SPECIAL_FAMILIES = (("%envreg", "uniform"), ("%reserved_smem", "uniform"), ("%pm", "divergent"))

# Opcode roots (the text before the first dot) by what they lower to.
ASSIGN_ROOTS = frozenset("""
    add sub mul mad mul24 mad24 sad div rem abs neg min max popc clz bfind fns brev bfe bfi
    bmsk szext prmt lop3 shf shl shr and or xor not cnot copysign rcp sqrt rsqrt sin cos lg2
    ex2 tanh fma testp setp set selp slct cvt cvta mov isspacep istypep mapa getctarank
    addc subc madc dp4a dp2a txq suq createpolicy alloca stacksave
    vadd vsub vabsdiff vmin vmax vshl vshr vmad vset vadd2 vsub2 vavrg2 vabsdiff2 vmin2 vmax2
    vset2 vadd4 vsub4 vavrg4 vabsdiff4 vmin4 vmax4 vset4
""".split())
# Warp collectives whose result is the same in every active lane that executes them
# (documented choice: uniform, i.e. an assignment without operands).
UNIFORM_COLLECTIVE_ROOTS = frozenset({"vote", "activemask", "redux"})
# Lane-exchanging or per-lane collective operations: the result is opaque (divergent).
OPAQUE_ROOTS = frozenset({
    "shfl", "match", "wmma", "mma", "wgmma", "ldmatrix", "movmatrix", "elect", "mbarrier",
    "tcgen05", "clusterlaunchcontrol", "tensormap", "multimem",
})
LOAD_ROOTS = frozenset({"ld", "ldu"})
TEXTURE_ROOTS = frozenset({"tex", "tld4", "suld"})
STORE_ROOTS = frozenset({"st", "stmatrix", "sust", "cp"})
ATOMIC_ROOTS = frozenset({"atom"})
REDUCTION_ROOTS = frozenset({"red", "sured"})
BARRIER_ROOTS = frozenset({"bar", "barrier"})
# Ordering, hint and scheduling instructions with no effect on values or control flow
# (lowered to `ir.FENCE`, which the analyses and the interpreter pass over).
DROPPED_ROOTS = frozenset({
    "membar", "fence", "prefetch", "prefetchu", "nanosleep", "pmevent", "brkpt",
    "griddepcontrol", "setmaxnreg", "discard", "applypriority", "stackrestore",
})
CARRY_READERS = frozenset({"addc", "subc", "madc"})
MEMORY_SPACES = ("param", "global", "shared", "const", "local")
MAX_INLINE_DEPTH = 8

# The carry flag written by `.cc` instructions and read by addc/subc/madc ('%%' cannot
# start a PTX name, so it cannot collide with a register).
CARRY = "%%cc"


def special_class(name: str) -> str:
    """'uniform' or 'divergent' for a special register such as `%ctaid.x`."""
    base = name.split(".", 1)[0]
    if base in UNIFORM_SPECIALS:
        return "uniform"
    for prefix, klass in _SPECIAL_FAMILIES:
        if base.startswith(prefix):
            return klass
    return "divergent"


def _is_special_name(name: str) -> bool:
    base = name.split(".", 1)[0]
    return (base in KNOWN_SPECIALS or "." in name
            or any(base.startswith(prefix) for prefix, _ in _SPECIAL_FAMILIES))


def _memory_space(mods: list[str]) -> str | None:
    for mod in mods:
        base = mod.split("::", 1)[0]
        if base in MEMORY_SPACES:
            return base
    return None


def _element_bytes(mods: list[str]) -> int:
    """Bytes of one element of a typed opcode (`ld.param.v2.b32` → 4)."""
    for mod in reversed(mods):
        if mod[:1] in "bsuf" and mod[1:] in _TYPE_BYTES:
            return _TYPE_BYTES[mod[1:]]
        if mod in ("f16x2", "bf16x2", "e4m3x2", "e5m2x2"):
            return 4
    return 4
