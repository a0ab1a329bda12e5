"""What a known block shape tells the analyses about PTX special registers.

The block shape of a kernel comes from the program (`.reqntid X, Y, Z`: a launch with
any other shape fails) or from the user (`--block X[xY[xZ]]`, `block=` in the API). A
warp holds 32 consecutive threads of the block in linear order `x + X·(y + Y·z)`, so:

- `%ntid.x/y/z` are the constants X, Y, Z;
- `%tid.y` is 0 when Y = 1, and the same in every lane of a warp when X % 32 = 0;
- `%tid.z` is 0 when Z = 1, and the same in every lane of a warp when X·Y % 32 = 0;
- `%laneid` is `%tid.x % 32`, i.e. `%tid.x` minus a value common to the warp (affine
  `1·tid + ⊥`), when X % 32 = 0 or the block is one-dimensional (Y = Z = 1); then also
  `%tid.x >> k` (k ≥ 5, the warp index) is warp-uniform and `%tid.x & (2^k − 1)` is
  `1·tid + ⊥` (`derived_values`).

`.maxntid` only bounds the product X·Y·Z (CUDA launches a `__launch_bounds__(256)`
kernel with 16×16 blocks), so it never fixes X and is not used. Without a shape nothing
changes: `%tid.y`, `%tid.z` and `%laneid` are divergent.
"""

from __future__ import annotations

import re

from gpudiv import ir
from gpudiv.ir.operators import normalise
from gpudiv.ir.record import Record
from gpudiv.ir.ssa import SSAForm

WARP_SIZE = 32
MAX_BLOCK_THREADS = 1024


class BlockShape(Record, frozen=True):
    """Threads per block in x, y and z."""

    x: int
    y: int
    z: int

    def __init__(self, x: int, y: int = 1, z: int = 1) -> None:
        object.__setattr__(self, "x", x)
        object.__setattr__(self, "y", y)
        object.__setattr__(self, "z", z)

    def __str__(self) -> str:
        return f"{self.x}x{self.y}x{self.z}"

    @property
    def dims(self) -> tuple[int, int, int]:
        """(x, y, z)."""
        return (self.x, self.y, self.z)

    @property
    def lane_is_tid_x(self) -> bool:
        """Whether `%laneid` = `%tid.x % 32` in every lane."""
        return self.x % WARP_SIZE == 0 or (self.y == 1 and self.z == 1)


def parse_block(text: str) -> BlockShape:
    """`256`, `32x8` or `8x8x4` (commas also separate); ValueError with a one-line message."""
    parts = re.split(r"[x,]", text.strip())
    if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        raise ValueError(f"bad --block '{text}' (expected X, XxY or XxYxZ)")
    return block_shape(tuple(int(p) for p in parts), f"--block '{text}'")


def block_shape(dims: tuple[int, ...], what: str = "block shape") -> BlockShape:
    """A shape from 1 to 3 sizes (missing ones are 1); ValueError when it cannot launch."""
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise ValueError(f"bad {what}: expected 1 to 3 positive sizes")
    shape = BlockShape(*dims)
    if shape.x * shape.y * shape.z > MAX_BLOCK_THREADS:
        raise ValueError(f"bad {what}: {shape} is more than {MAX_BLOCK_THREADS} threads")
    return shape


def as_shape(block: BlockShape | str | tuple[int, ...] | None) -> BlockShape | None:
    """A shape from what the API accepts: a BlockShape, `"32x8"` or `(32, 8)`."""
    if block is None or isinstance(block, BlockShape):
        return block
    if isinstance(block, str):
        return parse_block(block)
    return block_shape(tuple(block))


def declared_shape(kernel: ir.Kernel) -> BlockShape | None:
    """The shape the kernel's `.reqntid` requires, if it has one that can launch."""
    dims = kernel.attrs.get("reqntid")
    if not dims:
        return None
    try:
        return block_shape(tuple(dims), ".reqntid")
    except ValueError:
        return None


def kernel_shape(kernel: ir.Kernel,
                 requested: BlockShape | None) -> tuple[BlockShape | None, str | None]:
    """The shape a kernel runs with, and a warning when the request contradicts its
    `.reqntid` (which wins: a launch with another shape fails). μ-SIMD kernels have no
    PTX special registers, so no shape applies to them."""
    if "reg_types" not in kernel.attrs:  # only the PTX front end records register types
        return None, None
    declared = declared_shape(kernel)
    if declared is None:
        return requested, None
    if requested is not None and requested != declared:
        return declared, (f"--block {requested} ignored: .reqntid requires {declared}")
    return declared, None


class SpecialValue(Record, frozen=True):
    """What a shape says about one special register: a constant, warp-uniform, or the
    lane index (`%tid.x % 32`)."""

    kind: str  # "constant", "uniform" or "lane"
    value: int | None

    def __init__(self, kind: str, value: int | None = None) -> None:
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "value", value)


def special_values(shape: BlockShape | None,
                   specials: dict[str, str]) -> dict[str, SpecialValue]:
    """For the special registers a kernel reads, what the shape makes known about them."""
    if shape is None:
        return {}
    known: dict[str, SpecialValue] = {}
    for axis, size in zip("xyz", shape.dims, strict=True):
        known[f"%ntid.{axis}"] = SpecialValue("constant", size)
    if shape.y == 1:
        known["%tid.y"] = SpecialValue("constant", 0)
    elif shape.x % WARP_SIZE == 0:
        known["%tid.y"] = SpecialValue("uniform")
    if shape.z == 1:
        known["%tid.z"] = SpecialValue("constant", 0)
    elif shape.x * shape.y % WARP_SIZE == 0:
        known["%tid.z"] = SpecialValue("uniform")
    if shape.lane_is_tid_x:
        known["%laneid"] = SpecialValue("lane")
    return {name: value for name, value in known.items() if name in specials}


# Integer types of the shifts and divisions `derived_values` reads (a value of %tid.x,
# below 1024, is the same whatever the width or signedness).
_INTEGER_TYPES = frozenset({"u32", "s32", "b32", "u64", "s64", "b64"})


def derived_values(ssa: SSAForm, shape: BlockShape | None) -> dict[str, SpecialValue]:
    """SSA variables computed from `%tid.x` that a shape whose warps are runs of 32
    consecutive `%tid.x` values (`lane_is_tid_x`) makes known: `%tid.x >> k` and
    `%tid.x / 2^k` with k ≥ 5 are the same in every lane of a warp ("uniform", the warp
    index), `%tid.x & (2^k − 1)` and `%tid.x % 2^k` are `%tid.x` minus a value common to
    the warp ("lane"). `%tid.x` is followed through copies (`mov`, widening `cvt`)."""
    if shape is None or not shape.lane_is_tid_x:
        return {}
    instrs = ssa.cfg.kernel.by_id()
    known: dict[str, SpecialValue] = {}
    for var in ssa.variables.values():
        if var.kind != ir.ASSIGN or var.instruction is None:
            continue
        instr = instrs[var.instruction]
        opcode = str(instr.attrs.get("opcode", ""))
        root, *modifiers = opcode.split(".")
        uses = ssa.uses[var.instruction]
        if (len(instr.args) != 2 or not isinstance(instr.args[1], ir.Const)
                or not _INTEGER_TYPES & set(modifiers) or instr.guard is not None
                or not _is_tid_x(ssa, instrs, uses[0])):
            continue
        value = instr.args[1].value
        power = value.bit_length() - 1 if value > 0 and value & (value - 1) == 0 else None
        if root == "shr" and 5 <= value <= 31 or root == "div" and power and power >= 5:
            known[var.name] = SpecialValue("uniform")
        elif (root == "and" and value + 1 >= 32 and (value + 1) & value == 0
              or root == "rem" and power and power >= 5):
            known[var.name] = SpecialValue("lane")
    return known


def _is_tid_x(ssa: SSAForm, instrs: dict[int, ir.Instruction], name: str | None) -> bool:
    """Whether an SSA variable holds `%tid.x` itself (through copies)."""
    for _ in range(64):
        if name == "%tid.x":
            return True
        var = ssa.variables.get(name) if name is not None else None
        if var is None or var.kind != ir.ASSIGN or var.instruction is None:
            return False
        instr = instrs[var.instruction]
        if len(instr.args) != 1 or instr.guard is not None or normalise(instr) != "copy":
            return False
        name = ssa.uses[var.instruction][0]
    return False
