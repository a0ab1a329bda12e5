"""Traits of operations: what a pass must respect before it moves, duplicates, removes
or speculates an instruction (xDSL's operation traits; LLVM's `isConvergent`,
`mayHaveSideEffects`, `isSafeToSpeculativelyExecute`).

- `side_effects`: writes memory or does something besides defining its destination
  (stores, atomics, reductions, barriers, calls, opaque operations without a result);
- `may_trap`: can fault or stop the kernel (memory accesses, integer division, `trap`);
- `convergent`: its result or effect depends on which lanes execute it together, so it
  must not be made control dependent on more or fewer branches (`bar`, `barrier`,
  `shfl`, `vote`, `activemask`, `redux`, `match`, `bar.warp.sync`, μ-SIMD `barrier`
  and `sync`);
- `barrier`: a block-wide synchronisation;
- `terminator`: ends a block;
- `speculatable`: none of side effects, may-trap or convergent (it may run on paths it
  did not run on before).
"""

from __future__ import annotations

from gpudiv import ir

SIDE_EFFECTS = "side_effects"
MAY_TRAP = "may_trap"
CONVERGENT = "convergent"
BARRIER = "barrier"
TERMINATOR = "terminator"
SPECULATABLE = "speculatable"

# PTX opcode roots of warp- or block-collective operations.
CONVERGENT_ROOTS = frozenset({"bar", "barrier", "shfl", "vote", "activemask", "redux",
                              "match", "elect", "wmma", "mma", "ldmatrix", "stmatrix"})
_TRAPPING_ROOTS = frozenset({"div", "rem", "trap", "brkpt"})


def opcode_root(instr: ir.Instruction) -> str:
    """The PTX opcode root of an instruction (`ld` of `ld.global.u32`), or ''."""
    return str(instr.attrs.get("opcode", "")).split(".", 1)[0]


def traits(instr: ir.Instruction) -> frozenset[str]:
    """The traits of one instruction."""
    kind, root = instr.kind, opcode_root(instr)
    found: set[str] = set()
    if kind in (ir.STORE, ir.ATOMIC, ir.BARRIER) or (kind == ir.OPAQUE and instr.dest is None):
        found.add(SIDE_EFFECTS)
    if root == "call" or (kind == ir.FENCE and root in ("membar", "fence")):
        found.add(SIDE_EFFECTS)
    if kind in (ir.LOAD, ir.STORE, ir.ATOMIC) or root in _TRAPPING_ROOTS:
        found.add(MAY_TRAP)
    if kind == ir.ASSIGN and instr.operator in ("/", "%") and not root:
        found.add(MAY_TRAP)  # μ-SIMD division by zero stops the run
    if kind in (ir.BARRIER, ir.SYNC) or root in CONVERGENT_ROOTS or (
            kind == ir.FENCE and root == "bar"):
        found.add(CONVERGENT)
    if kind == ir.BARRIER:
        found.add(BARRIER)
    if kind in ir.TERMINATORS:
        found.add(TERMINATOR)
    if not found & {SIDE_EFFECTS, MAY_TRAP, CONVERGENT, TERMINATOR}:
        found.add(SPECULATABLE)
    return frozenset(found)


def is_speculatable(instr: ir.Instruction) -> bool:
    """Whether the instruction may run where it did not run before."""
    return SPECULATABLE in traits(instr)


def is_convergent(instr: ir.Instruction) -> bool:
    """Whether the set of lanes executing the instruction together matters."""
    return CONVERGENT in traits(instr)
