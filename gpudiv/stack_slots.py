"""Stack-frame slots as variables (issue 17, item 4): scalar replacement for the analysis.

nvcc `-G` (and any PTX with `.local` objects) keeps some variables in thread-private
memory: a variable whose address is taken (`f(&lo, &hi)`), a small struct, a returned
pair. Every load from thread-private memory is a source of divergence (one lane cannot
read another's frame), so debug builds looked far more divergent than `-O3` builds. Here
the slots of a `.local` object (`__local_depot0`, or any `.local` symbol) that are only
ever accessed at constant offsets become variables of their own: a store is an assignment
to the slot, a load a copy of it, and the usual gated SSA (φ at joins, η at loop exits,
rejoin copies) then says when a slot holds one value in every lane.

The promoted kernel is a copy for the analysis only; the program that runs (interpreter,
oracle) is the original, kept in `attrs["unpromoted"]`. Instruction numbers, blocks and
everything else stay the same, so the analysis' claims are claims about the original.

When it is sound. Addresses of an object are tracked from its symbol through `mov`,
`cvta`, and `add`/`sub` of a literal (a constant offset) or of another value (an unknown
offset), over SSA (φ: the join of the incoming offsets). An object is promoted only if
- none of its addresses escapes: an address is used only as the address of a load or
  store, or to compute another address (a `.param` copy of an inlined call counts as a
  copy); storing an address, passing it to an opaque call, comparing it, an atomic on it,
  mixing two objects or an object and another pointer in one register: not promoted;
- no store to it has an unknown offset (it could write any slot); loads at an unknown
  offset stay sources of divergence and change nothing else.
A slot is a (offset, size) range; ranges of the same object that overlap without being
equal (a 64-bit store read back as two 32-bit halves, vector accesses) are not promoted.
A guarded store (`@%p st`) is `slot = %p ? value : slot`. A slot narrower than 32 bits is
not a plain copy of the stored register (the value is truncated), so the affine analysis
sees it as an operator it does not look into (uniform in, uniform out).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from gpudiv import ir
from gpudiv.ssa import SSAForm

# Opcode roots whose result is the address they read (or that address plus an offset).
_ADDRESS_COPY_ROOTS = frozenset({"mov", "cvta"})
_TYPE_BITS = re.compile(r"^[bsuf](8|16|32|64|128)$")


@dataclass(frozen=True)
class _Addr:
    """An address into object `base` at `offset` bytes (None: unknown offset)."""

    base: str
    offset: int | None


# Lattice values of an SSA variable: not computed yet (absent), an address, not an address
# (None), or several objects / an object and other values mixed (_MIXED).
_MIXED = "mixed"


@dataclass
class SlotPlan:
    """Which objects and slots are promoted, and the accesses that use them."""

    objects: set[str] = field(default_factory=set)
    # instruction number → (slot name, size in bytes) for each promoted load and store
    accesses: dict[int, tuple[str, int]] = field(default_factory=dict)
    # objects not promoted, and why (for explanations and tests)
    refused: dict[str, str] = field(default_factory=dict)


def local_objects(kernel: ir.Kernel) -> set[str]:
    """Names of the kernel's `.local` symbols (the stack frame `__local_depot*` included)."""
    symbols = kernel.attrs.get("symbols") or {}
    return {name for name, detail in symbols.items() if detail and detail[0] == "local"}


def access_size(opcode: str) -> int | None:
    """Bytes a `ld`/`st` moves (`ld.local.v2.u32`: 8), None when the opcode does not say."""
    parts = opcode.split(".")
    bits = [int(m.group(1)) for p in parts if (m := _TYPE_BITS.match(p))]
    if len(bits) != 1:
        return None
    count = 1
    for p in parts:
        if p in ("v2", "v4", "v8"):
            count = int(p[1:])
    return bits[0] // 8 * count


def slot_name(base: str, offset: int, size: int) -> str:
    """The variable of a slot: `__local_depot0[4:8]` (bytes 4 to 7)."""
    return f"{base}[{offset}:{offset + size}]"


def plan(ssa: SSAForm) -> SlotPlan:
    """Which `.local` objects of the kernel can be promoted, and their slots' accesses."""
    kernel = ssa.cfg.kernel
    objects = local_objects(kernel)
    result = SlotPlan()
    if not objects:
        return result
    instrs = kernel.instructions()
    values = _addresses(ssa, instrs, objects)
    refused: dict[str, str] = {}
    constant: dict[int, tuple[str, int, int]] = {}  # instruction → (object, offset, size)

    def refuse(value, why: str) -> None:
        if value == _MIXED:
            for name in objects:
                refused.setdefault(name, why)
        elif isinstance(value, _Addr):
            refused.setdefault(value.base, why)

    for n, instr in enumerate(instrs):
        if not ssa.instruction_block[n]:
            continue
        uses = ssa.uses[n]
        seen = [values.get(u) if u is not None else None for u in uses]
        for k, value in enumerate(seen):
            if value is None:
                continue
            if not _address_use(instr, k):
                refuse(value, f"an address is used by `{instr.text}`")
        address = _symbol_address(instr, objects)
        if address is None and instr.kind in (ir.LOAD, ir.STORE) and seen:
            address = seen[0]
            if isinstance(address, _Addr) and address.offset is not None:
                address = _Addr(address.base, address.offset + int(instr.attrs.get("disp", 0)))
        if instr.kind not in (ir.LOAD, ir.STORE) or address is None:
            continue
        if address == _MIXED or instr.space != "local":
            refuse(address, f"`{instr.text}` may access it through another pointer")
            continue
        size = access_size(str(instr.attrs.get("opcode", "")))
        simple = (size is not None and (instr.kind == ir.LOAD or len(instr.args) == 2)
                  and "element" not in instr.attrs)
        if address.offset is None or not simple:
            if instr.kind == ir.STORE:
                refuse(address, f"`{instr.text}` may write any of its slots")
            continue
        constant[n] = (address.base, address.offset, size)  # type: ignore[arg-type]
    result.refused = refused
    result.objects = objects - set(refused)
    overlapping = _overlapping(constant.values())
    for n, (base, offset, size) in constant.items():
        if base in result.objects and (base, offset, size) not in overlapping:
            result.accesses[n] = (slot_name(base, offset, size), size)
    return result


def promote(ssa: SSAForm) -> ir.Kernel | None:
    """A copy of the kernel whose promotable slot accesses are assignments, or None when
    nothing is promoted (`attrs["unpromoted"]` is the original, `attrs["stack_slots"]`
    the slot variables)."""
    slots = plan(ssa).accesses
    if not slots:
        return None
    kernel = ssa.cfg.kernel
    blocks = []
    n = 0
    for block in kernel.blocks:
        instructions = []
        for instr in block.instructions:
            instructions.append(_promoted(instr, *slots[n]) if n in slots else instr)
            n += 1
        blocks.append(replace(block, instructions=instructions))
    names = sorted({name for name, _ in slots.values()})
    attrs = {**kernel.attrs, "unpromoted": kernel, "stack_slots": tuple(names)}
    return replace(kernel, blocks=blocks, attrs=attrs)


def original(kernel: ir.Kernel) -> ir.Kernel:
    """The kernel as written (the one to run), whether or not `kernel` is promoted."""
    return kernel.attrs.get("unpromoted", kernel)  # type: ignore[return-value]


def _promoted(instr: ir.Instruction, slot: str, size: int) -> ir.Instruction:
    """The assignment that replaces a load from or a store to a slot."""
    plain = "copy" if size >= 4 else f"slot.b{size * 8}"
    attrs = {**instr.attrs, "slot": slot}
    if instr.kind == ir.LOAD:
        return replace(instr, kind=ir.ASSIGN, args=(ir.Var(slot),), operator=plain,
                       space=None, attrs=attrs)
    value = instr.args[1]
    guard = str(instr.attrs.get("guard") or "")
    if guard:  # lanes where the guard fails keep the old value
        return replace(instr, kind=ir.ASSIGN, dest=slot, space=None, operator="slct.guarded",
                       args=(ir.Var(guard.lstrip("!")), value, ir.Var(slot)), attrs=attrs)
    return replace(instr, kind=ir.ASSIGN, dest=slot, args=(value,), operator=plain,
                   space=None, attrs=attrs)


def _symbol_address(instr: ir.Instruction, objects: set[str]) -> _Addr | None:
    """`[__local_depot0+4]`: the object and offset an access names directly."""
    symbol = instr.attrs.get("symbol")
    if instr.kind in (ir.LOAD, ir.STORE) and symbol in objects:
        return _Addr(str(symbol), int(instr.attrs.get("offset", 0)))
    return None


def _address_use(instr: ir.Instruction, k: int) -> bool:
    """Whether reading an address as operand k of `instr` keeps it from escaping."""
    if instr.kind in (ir.LOAD, ir.STORE):
        return k == 0
    if instr.kind != ir.ASSIGN or instr.attrs.get("guard"):
        return False
    root = str(instr.attrs.get("opcode", instr.operator or "")).split(".")[0]
    if instr.operator == "copy" or root in _ADDRESS_COPY_ROOTS:
        return len(instr.args) == 1
    if root == "add":
        return len(instr.args) == 2
    return root == "sub" and len(instr.args) == 2 and k == 0


def _addresses(ssa: SSAForm, instrs: list[ir.Instruction], objects: set[str]) -> dict:
    """The address value of every SSA variable that may hold one: a fixed point over the
    variables that may carry an object's address at all (φs join their operands; an
    operand that never carries an address makes the join mixed)."""
    carriers = _carriers(ssa, instrs, objects)
    values: dict[str, object] = {}
    changed = True
    while changed:
        changed = False
        for name in carriers:
            value = _transfer(ssa.variables[name], instrs, objects, values, carriers, ssa)
            if value is not None and values.get(name) != value:
                values[name] = value
                changed = True
    for name in carriers:  # (only a cycle of φs that no address reaches: be safe)
        values.setdefault(name, _MIXED)
    return values


def _carriers(ssa: SSAForm, instrs: list[ir.Instruction], objects: set[str]) -> list[str]:
    """SSA variables that may hold an address of an object (reachability from the objects'
    symbols through address arithmetic and φs), in definition order."""
    readers: dict[str, list[str]] = {}
    for var in ssa.variables.values():
        if var.kind in ("phi", "eta", "rejoin"):
            sources = var.operands
        elif var.kind == ir.ASSIGN and var.instruction is not None and any(
                _address_use(instrs[var.instruction], k)
                for k in range(len(instrs[var.instruction].args))):
            sources = [u for u in ssa.uses[var.instruction] if u is not None]
        else:
            continue
        for source in sources:
            readers.setdefault(source, []).append(var.name)
    found = {name for name in objects if name in ssa.variables}
    work = list(found)
    while work:
        for reader in readers.get(work.pop(), ()):
            if reader not in found:
                found.add(reader)
                work.append(reader)
    return [name for name in ssa.variables if name in found]


def _transfer(var, instrs, objects, values, carriers, ssa):
    """The address value of one SSA variable from its definition (None: not known yet)."""
    if var.kind == "special":
        return _Addr(var.name, 0)
    if var.kind in ("phi", "eta", "rejoin"):
        joined = None
        for operand in var.operands:
            if operand not in carriers:
                return _MIXED  # an address or some other value
            joined = _join(joined, values.get(operand))
        return joined
    instr = instrs[var.instruction]
    operands = [values.get(u) if u is not None else None for u in ssa.uses[var.instruction]]
    if _MIXED in operands:
        return _MIXED
    addresses = [(k, v) for k, v in enumerate(operands) if isinstance(v, _Addr)]
    if not addresses:
        return None
    if len(addresses) > 1:
        return _MIXED
    (k, address), = addresses
    if len(instr.args) == 1:
        return address
    root = str(instr.attrs.get("opcode", "")).split(".")[0]
    other = instr.args[1 - k]
    if root == "sub" and k == 1:
        return _MIXED  # something minus an address is no address we track
    if address.offset is not None and isinstance(other, ir.Const):
        return _Addr(address.base, address.offset + (other.value if root == "add"
                                                     else -other.value))
    return _Addr(address.base, None)


def _join(a, b):
    """The join of two address values (None: not known yet)."""
    if a is None:
        return b
    if b is None or a == b:
        return a
    if isinstance(a, _Addr) and isinstance(b, _Addr) and a.base == b.base:
        return _Addr(a.base, None)
    return _MIXED


def _overlapping(ranges) -> set[tuple[str, int, int]]:
    """The (object, offset, size) ranges that overlap a different range of their object."""
    distinct = sorted(set(ranges))
    out: set[tuple[str, int, int]] = set()
    for i, (base, offset, size) in enumerate(distinct):
        for other in distinct[i + 1:]:
            if other[0] != base or other[1] >= offset + size:
                continue
            out |= {(base, offset, size), other}
    return out
