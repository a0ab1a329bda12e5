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
  store, to compute another address (a `.param` copy of an inlined call counts as a
  copy), or in a `setp` (C++ `-G` code tests `this` against null); storing an address
  (except into a promoted slot: see `promote_ssa`), passing it to an opaque call, any
  other arithmetic on it, an atomic on it, mixing two objects or an object and another
  pointer in one register: not promoted; a `.local` store through an address that is not
  followed refuses every object;
- no store to it has an unknown offset (it could write any slot); loads at an unknown
  offset stay sources of divergence and change nothing else.
A slot is a (offset, size) range; a load whose range overlaps another range of the object
without being equal is not promoted, a store that does (a 64-bit store read back as two
32-bit halves; vector stores) refuses the object. Accesses through addresses read back
from promoted slots are `.local` accesses too (the front end's inference is redone on the
promoted copy), so a pointer to thread-private memory never makes its target uniform.
A guarded store (`@%p st`) is `slot = %p ? value : slot`. A slot narrower than 32 bits is
not a plain copy of the stored register (the value is truncated), so the affine analysis
sees it as an operator it does not look into (uniform in, uniform out).
"""

from __future__ import annotations

from collections import deque
from functools import cache

from gpudiv import ir
from gpudiv.ir.cfg import build_cfg
from gpudiv.ir.record import Record, replace
from gpudiv.ir.ssa import SSAForm, build_ssa
from gpudiv.lang.ptx.forms import SCALAR_TYPE_BITS
from gpudiv.lang.ptx.kernel import infer_generic_spaces, local_objects

# Opcode roots whose result is the address they read (or that address plus an offset).
_ADDRESS_COPY_ROOTS = frozenset({"mov", "cvta"})


class _Addr(Record, frozen=True):
    """An address into object `base` at `offset` bytes (None: unknown offset)."""

    base: str
    offset: int | None

    def __init__(self, base: str, offset: int | None) -> None:
        object.__setattr__(self, "base", base)
        object.__setattr__(self, "offset", offset)


class _Mixed(Record, frozen=True):
    """An address into one of `bases` at an unknown offset, or some other value."""

    bases: frozenset[str]

    def __init__(self, bases: frozenset[str]) -> None:
        object.__setattr__(self, "bases", bases)


# Lattice values of an SSA variable: not computed yet (absent), an address (_Addr), not an
# address (None), or several objects / an object and other values mixed (_Mixed).
_ADDRESS = (_Addr, _Mixed)


def _bases(value) -> frozenset[str]:
    """The objects an address value may point into."""
    if isinstance(value, _Addr):
        return frozenset({value.base})
    return value.bases if isinstance(value, _Mixed) else frozenset()


class SlotPlan(Record):
    """Which objects and slots are promoted, and the accesses that use them."""

    objects: set[str]
    # instruction id → (object, offset, size in bytes) of each promoted load and store
    accesses: dict[int, tuple[str, int, int]]
    # objects not promoted, and why (for explanations and tests)
    refused: dict[str, str]

    def __init__(self, objects: set[str] | None = None,
                       accesses: dict[int, tuple[str, int, int]] | None = None,
                       refused: dict[str, str] | None = None) -> None:
        self.objects = set() if objects is None else objects
        self.accesses = {} if accesses is None else accesses
        self.refused = {} if refused is None else refused


Range = tuple[str, int, int]  # (object, offset, size)

# Rounds of promotion: a slot may hold the address of another slot (nvcc -G stores `this`
# pointers and reference arguments in the frame); once the first is promoted, the address
# is followed through it and the second can be promoted in the next round.
MAX_ROUNDS = 4


def access_size(opcode: str) -> int | None:
    """Bytes a `ld`/`st` moves (`ld.local.v2.u32`: 8), None when the opcode does not say."""
    parts = opcode.split(".")
    bits = [SCALAR_TYPE_BITS[p] for p in parts if p in SCALAR_TYPE_BITS]
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


class PlanMemo(Record):
    """What the rounds and strategies of `promote_ssa` share: they plan the same SSA forms
    (and often rewrite the kernel with the same slots) several times."""

    # id() of a form → the form (kept alive, so that its id is not reused) and the address
    # values of its variables (`_addresses`)
    addresses: dict[int, tuple[SSAForm, dict]]
    # the promoted accesses → the SSA form of the kernel rewritten with them
    forms: dict[frozenset, SSAForm]
    # the arguments of `plan` (the form by id) → its result
    plans: dict[tuple, SlotPlan]
    # id() of a form → the form and its instructions that `plan` looks at (`_scanned`)
    scans: dict[int, tuple[SSAForm, list]]

    def __init__(self, addresses: dict[int, tuple[SSAForm, dict]] | None = None,
                       forms: dict[frozenset, SSAForm] | None = None,
                       plans: dict[tuple, SlotPlan] | None = None,
                       scans: dict[int, tuple[SSAForm, list]] | None = None) -> None:
        self.addresses = {} if addresses is None else addresses
        self.forms = {} if forms is None else forms
        self.plans = {} if plans is None else plans
        self.scans = {} if scans is None else scans


def plan(ssa: SSAForm, allowed: set[str] | None = None, trusted: frozenset[str] = frozenset(),
         known: frozenset[Range] = frozenset(), final: bool = False,
         memo: PlanMemo | None = None) -> SlotPlan:
    """Which `.local` objects of the kernel can be promoted (of `allowed`, default all),
    and their slots' accesses. `trusted`: objects assumed promotable, so that storing an
    address into one of their constant slots is a slot assignment, not an escape (checked
    again once they are promoted). `known`: slots promoted in earlier rounds; a store that
    overlaps one without being it refuses the object (`final`: any store to one does).
    `memo`: plans and address values of forms planned before (filled in)."""
    if memo is None:
        return _plan(ssa, allowed, trusted, known, final, PlanMemo())
    key = (id(ssa), None if allowed is None else frozenset(allowed), trusted, known, final)
    if key not in memo.plans:
        memo.addresses.setdefault(id(ssa), (ssa, {}))  # keeps the form alive
        memo.plans[key] = _plan(ssa, allowed, trusted, known, final, memo)
    return memo.plans[key]


def _plan(ssa: SSAForm, allowed: set[str] | None, trusted: frozenset[str],
          known: frozenset[Range], final: bool, memo: PlanMemo) -> SlotPlan:
    """`plan` without the look-up of earlier results."""
    kernel = ssa.cfg.kernel
    objects = local_objects(kernel)
    result = SlotPlan()
    if not objects:
        return result
    allowed = objects if allowed is None else allowed & objects
    instrs = kernel.by_id()
    refused: dict[str, str] = {}
    constant: dict[int, Range] = {}  # instruction id → its slot

    def refuse(value, why: str) -> None:
        for name in _bases(value):
            refused.setdefault(name, why)

    for n, instr, seen, access, unfollowed in _scanned(ssa, instrs, objects, memo):
        for k, value in enumerate(seen):
            if value is None or _address_use(instr, k):
                continue
            into_slot = (instr.kind == ir.STORE and k == 1 and isinstance(access, tuple)
                         and access[1] is not None and access[0] in trusted)
            if not into_slot:
                refuse(value, f"an address is used by `{instr.text}`")
        if unfollowed:
            refuse(_Mixed(frozenset(objects)), f"`{instr.text}` writes thread-private "
                                               "memory through an address not followed")
        if instr.kind not in (ir.LOAD, ir.STORE) or access is None:
            continue
        if isinstance(access, _Mixed):
            refuse(access, f"`{instr.text}` may access it through another pointer")
            continue
        base, offset, size = access
        if offset is None or size is None:
            if instr.kind == ir.STORE:
                refuse(_Addr(base, None), f"`{instr.text}` may write any of its slots")
            continue
        constant[n] = (base, offset, size)
    overlapping = _overlapping([*constant.values(), *known])
    for n, access in constant.items():
        if instrs[n].kind == ir.STORE and (access in overlapping or final and access in known):
            refused.setdefault(access[0], f"`{instrs[n].text}` overlaps one of its slots")
    result.refused = refused
    result.objects = allowed - set(refused)
    for n, (base, offset, size) in constant.items():
        if base in result.objects and (base, offset, size) not in overlapping:
            result.accesses[n] = (base, offset, size)
    return result


# An instruction `plan` looks at: its id, itself, the address values of its operands, its
# access (`_access`), and whether it writes thread-private memory through an address that
# is not followed.
Scanned = tuple[int, ir.Instruction, list, object, bool]


def _scanned(ssa: SSAForm, instrs: dict[int, ir.Instruction], objects: set[str],
             memo: PlanMemo) -> list[Scanned]:
    """The instructions of a form that read an address, access an object or write
    thread-private memory, in program order (computed once per form: `plan` looks at
    the same form with different assumptions)."""
    if id(ssa) in memo.scans:
        return memo.scans[id(ssa)][1]
    values = _cached_addresses(ssa, instrs, objects, memo)
    out: list[Scanned] = []
    for n, instr in instrs.items():
        if not ssa.instruction_block.get(n):
            continue
        seen = [values.get(u) if u is not None else None for u in ssa.uses[n]]
        access = _access(instr, seen, objects)
        unfollowed = (instr.kind in (ir.STORE, ir.ATOMIC) and instr.space == "local"
                      and (access if instr.kind == ir.STORE
                           else _access(instr, seen, objects, ir.STORE)) is None)
        if access is not None or unfollowed or any(v is not None for v in seen):
            out.append((n, instr, seen, access, unfollowed))
    memo.scans[id(ssa)] = (ssa, out)
    return out


def _access(instr: ir.Instruction, seen: list, objects: set[str], kind: str | None = None):
    """For a load or store into an object: (object, offset or None, size or None when
    it is not a plain scalar access), a _Mixed when the address may point elsewhere too,
    None for anything else. `kind`: take the instruction as one of this kind."""
    kind = kind or instr.kind
    if kind not in (ir.LOAD, ir.STORE):
        return None
    address = _symbol_address(instr, objects)
    if address is None and seen:
        address = seen[0]
        if isinstance(address, _Addr) and address.offset is not None:
            address = _Addr(address.base, address.offset + int(instr.attrs.get("disp", 0)))
    if address is None:
        return None
    if isinstance(address, _Mixed) or instr.space != "local":
        return _Mixed(_bases(address))
    size = access_size(str(instr.attrs.get("opcode", "")))
    simple = (size is not None and (kind == ir.LOAD or len(instr.args) == 2)
              and "element" not in instr.attrs)
    return (address.base, address.offset, size if simple else None)


def promote_ssa(ssa: SSAForm) -> SSAForm | None:
    """The SSA form of a copy of the kernel in which every promotable slot access is an
    assignment, or None when nothing is promoted (`attrs["unpromoted"]` of its kernel is
    the original, `attrs["stack_slots"]` the slot variables).

    Rounds promote slots reached through addresses held in slots promoted before. Done
    twice: trusting that slots which receive addresses will be promoted, and trusting
    nothing; each result is checked as a whole without any assumption (an object that
    fails is left out and that promotion done again), and the one that promotes more
    accesses is kept."""
    memo = PlanMemo()
    candidates = [_promotion(ssa, trusting, memo) for trusting in (True, False)]
    found = [c for c in candidates if c is not None]
    return max(found, key=lambda c: len(c[1]))[0] if found else None


def _promotion(ssa: SSAForm, trusting: bool, memo: PlanMemo
               ) -> tuple[SSAForm, dict[int, Range]] | None:
    """One promotion strategy of `promote_ssa`: its SSA form and promoted accesses."""
    kernel = ssa.cfg.kernel
    allowed = local_objects(kernel)
    for _ in range(len(allowed) + 1):
        if not allowed:
            return None
        trusted = frozenset(allowed) if trusting else frozenset()
        slots: dict[int, Range] = {}
        current = ssa
        for _ in range(MAX_ROUNDS):
            found = plan(current, allowed, trusted, frozenset(slots.values()), memo=memo)
            new = {n: r for n, r in found.accesses.items() if n not in slots}
            if not new:
                break
            slots.update(new)
            current = _rewritten(kernel, slots, memo)
        if not slots:
            return None
        check = plan(current, allowed, known=frozenset(slots.values()), final=True,
                     memo=memo)
        failing = {base for base, _, _ in slots.values()} & set(check.refused)
        if not failing:
            return current, slots
        allowed -= failing
    return None


def promote(ssa: SSAForm) -> ir.Kernel | None:
    """The promoted copy of the kernel (`promote_ssa`), or None."""
    promoted = promote_ssa(ssa)
    return None if promoted is None else promoted.cfg.kernel


def _rewrite(kernel: ir.Kernel, slots: dict[int, Range]) -> ir.Kernel:
    """A copy of the kernel with the accesses of `slots` made assignments. Addresses of
    thread-private memory now also flow through slot variables, so the front end's
    inference of `.local` accesses among generic ones is done again on the copy (an access
    through an address loaded from a promoted slot is `.local` too)."""
    blocks = []
    for block in kernel.blocks:
        instructions = []
        for instr in block.instructions:
            if instr.id in slots:
                base, offset, size = slots[instr.id]
                instr = _promoted(instr, slot_name(base, offset, size), size)
            elif instr.space == "generic":  # the inference may change it: a copy of its own
                instr = replace(instr, attrs=dict(instr.attrs))
            instructions.append(instr)
        blocks.append(replace(block, instructions=instructions))
    infer_generic_spaces([i for b in blocks for i in b.instructions])
    names = sorted({slot_name(*r) for r in slots.values()})
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
    if instr.guard is not None:  # lanes where the guard fails keep the old value
        return replace(instr, kind=ir.ASSIGN, dest=slot, space=None, operator="slct.guarded",
                       args=(instr.guard.operand, value, ir.Var(slot)), attrs=attrs,
                       guard=None)
    return replace(instr, kind=ir.ASSIGN, dest=slot, args=(value,), operator=plain,
                   space=None, attrs=attrs)


def _symbol_address(instr: ir.Instruction, objects: set[str]) -> _Addr | None:
    """`[__local_depot0+4]`: the object and offset an access names directly (a load,
    store or atomic)."""
    symbol = instr.attrs.get("symbol")
    if instr.kind in (ir.LOAD, ir.STORE, ir.ATOMIC) and symbol in objects:
        return _Addr(str(symbol), int(instr.attrs.get("offset", 0)))
    return None


def _address_use(instr: ir.Instruction, k: int) -> bool:
    """Whether reading an address as operand k of `instr` keeps it from escaping."""
    if instr.kind in (ir.LOAD, ir.STORE):
        return k == 0
    if instr.kind != ir.ASSIGN or instr.guard is not None:
        return False
    root = _root(str(instr.attrs.get("opcode", instr.operator or "")))
    if root == "setp":  # a predicate (a null test of `this`): no address can come of it
        return True
    return _transfers(instr, k)


@cache
def _root(opcode: str) -> str:
    """The opcode's first part (`add.s64` → `add`), remembered per opcode."""
    return opcode.split(".")[0]


def _transfers(instr: ir.Instruction, k: int) -> bool:
    """Whether operand k of an assignment is an address the result is computed from
    (a copy of it, or it plus an offset)."""
    if instr.kind != ir.ASSIGN or instr.guard is not None:
        return False
    root = _root(str(instr.attrs.get("opcode", instr.operator or "")))
    if instr.operator == "copy" or root in _ADDRESS_COPY_ROOTS:
        return len(instr.args) == 1
    if root == "add":
        return len(instr.args) == 2
    return root == "sub" and len(instr.args) == 2 and k == 0


def _rewritten(kernel: ir.Kernel, slots: dict[int, Range], memo: PlanMemo) -> SSAForm:
    """The SSA form of the kernel with the accesses of `slots` made assignments (built
    once per set of slots)."""
    key = frozenset(slots.items())
    if key not in memo.forms:
        memo.forms[key] = build_ssa(build_cfg(_rewrite(kernel, slots)))
    return memo.forms[key]


def _cached_addresses(ssa: SSAForm, instrs: dict[int, ir.Instruction], objects: set[str],
                      memo: PlanMemo) -> dict:
    """`_addresses` of a form, computed once per form."""
    form, values = memo.addresses.get(id(ssa), (ssa, None))
    if not values:
        values = _addresses(ssa, instrs, objects)
        memo.addresses[id(ssa)] = (ssa, values)
    return values


def _addresses(ssa: SSAForm, instrs: dict[int, ir.Instruction], objects: set[str]) -> dict:
    """The address value of every SSA variable that may hold one: a fixed point over the
    variables that may carry an object's address at all (φs join their operands; an
    operand that never carries an address makes the join mixed). A worklist in definition
    order: a variable is computed again only when an operand it reads has changed (the
    transfer functions are monotone, so this is the fixed point a round-robin finds)."""
    carriers, readers = _carriers(ssa, instrs, objects)
    carrying = frozenset(carriers)
    values: dict[str, object] = {}
    work = deque(carriers)
    queued = set(carriers)
    while work:
        name = work.popleft()
        queued.discard(name)
        value = _transfer(ssa.variables[name], instrs, objects, values, carrying, ssa)
        if value is not None and values.get(name) != value:
            values[name] = value
            for reader in readers.get(name, ()):
                if reader not in queued:
                    queued.add(reader)
                    work.append(reader)
    for name in carriers:  # (only a cycle of φs that no address reaches: be safe)
        values.setdefault(name, _Mixed(frozenset(objects)))
    return values


def _carriers(ssa: SSAForm, instrs: dict[int, ir.Instruction], objects: set[str]
              ) -> tuple[list[str], dict[str, list[str]]]:
    """SSA variables that may hold an address of an object (reachability from the objects'
    symbols through address arithmetic and φs), in definition order; and for each
    variable the variables computed from it."""
    readers: dict[str, list[str]] = {}
    for var in ssa.variables.values():
        if var.kind in ("phi", "eta", "rejoin"):
            sources = var.operands
        elif (var.kind == ir.ASSIGN and var.instruction is not None
              and _transfers(instrs[var.instruction], 0)):  # operand 0 transfers if any
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
    return [name for name in ssa.variables if name in found], readers


def _transfer(var, instrs, objects, values, carriers, ssa):
    """The address value of one SSA variable from its definition (None: not known yet)."""
    if var.kind == "special":
        return _Addr(var.name, 0)
    if var.kind in ("phi", "eta", "rejoin"):
        joined, other = None, False
        for operand in var.operands:
            if operand in carriers:
                joined = _join(joined, values.get(operand))
            else:
                other = True  # an address or some other value
        if other and joined is not None:
            return _Mixed(_bases(joined))
        return joined
    instr = instrs[var.instruction]
    operands = [values.get(u) if u is not None else None for u in ssa.uses[var.instruction]]
    addresses = [(k, v) for k, v in enumerate(operands) if isinstance(v, _ADDRESS)]
    if not addresses:
        return None
    everything = frozenset().union(*(_bases(v) for _, v in addresses))
    if len(addresses) > 1 or isinstance(addresses[0][1], _Mixed):
        return _Mixed(everything)
    (k, address), = addresses
    if len(instr.args) == 1:
        return address
    root = _root(str(instr.attrs.get("opcode", "")))
    other = instr.args[1 - k]
    if root == "sub" and k == 1:
        return _Mixed(everything)  # something minus an address is no address we track
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
    return _Mixed(_bases(a) | _bases(b))


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
