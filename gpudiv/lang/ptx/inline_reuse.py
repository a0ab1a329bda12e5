"""Inlined bodies lowered once per calling state and copied at the other call sites.

Lowering a callee's body again at every call site was a fifth of analysing
particle_library.G, whose kernels inline 649 calls: 10,700 of their 14,400 IR
instructions (issue 16, item 3). What lowering one inlined body produces depends on the
call site through its names only, and through what can change the instructions: the
callee, the part of the stack of callers that its calls may meet (recursion and depth
limits, `calling_state`), the offsets written in each `.param` argument, and whether
the calling chain is empty. So the first call site in a
state is lowered as before and recorded (`BodyTemplate`); at each later one the recorded
items are copied with the call-site parts renumbered:

- the frame suffixes `@N` of the body and of the calls nested in it (registers, slots,
  labels), which lowering numbers in order: the same offset applies to all of them;
- the group ids of its PTX instructions, also numbered in order;
- the calling chain at the end of each `inlined_at`, and the kernel's call that every
  inlined group stands for;

and the lowering's tables are extended as lowering the body would have: labels
referenced, register types, slot offsets, nested call instances, inlined groups, notes,
calls left opaque. A body whose lowering reported an error or made an exit label (which
is numbered per kernel and becomes a block of its own) is lowered at every site.
`tests/lang/ptx/test_inline_reuse.py` lowers every sample file both ways and compares
the kernels field by field.
"""

from __future__ import annotations

from itertools import islice

from gpudiv import ir
from gpudiv.ir.record import Record
from gpudiv.lang.ptx.opcodes import MAX_INLINE_DEPTH

TYPE_CHECKING = False  # (typing is not imported on the analysis path)
if TYPE_CHECKING:
    from gpudiv.lang.ptx.forms import PFunction, PInstr
    from gpudiv.lang.ptx.lower import _Frame, _KernelLowering

# Attributes whose values never hold a frame's names: copied as they are.
_PLAIN_ATTRS = frozenset({
    "opcode", "origin", "function", "disp", "offset", "symbol", "symbol_space", "element",
    "carry", "case", "uniform_hint", "negated", "arg_symbols", "symbols", "symbol_spaces",
    "texture", "slot_read"})


class BodyTemplate(Record):
    """One inlined body as lowered at its first call site in a calling state, with what
    lowering it added to the lowering's tables."""

    items: list  # its instructions and ("label", name, loc, user) tuples
    call: int  # its call number (suffix `@call`); nested calls: call+1 … call+nested
    nested: int
    group: int  # the group count before it; its groups: group+1 … group+groups
    groups: int
    chain: tuple  # its frame's `inlined_at`
    group_source: PInstr | None  # the lowering's group source after it (None: no group)
    referenced: set[str]
    var_types: list[tuple[str, str]]
    slots: list[tuple[str, frozenset[int]]]  # each slot of its frames: offsets written
    call_instances: list[tuple[str, tuple]]
    inlined_forms: list[tuple[int, tuple]]
    notes: list[str]
    not_inlined: set[str]
    # filled on first use: `name_parts` of each name met, `changing_attrs`
    parts: dict[str, tuple[str, int, str] | None]
    attr_keys: list[tuple[str, ...] | None] | None

    def __init__(self, items: list, call: int, nested: int, group: int, groups: int, chain: tuple,
                       group_source: PInstr | None, referenced: set[str],
                       var_types: list[tuple[str, str]], slots: list[tuple[str, frozenset[int]]],
                       call_instances: list[tuple[str, tuple]],
                       inlined_forms: list[tuple[int, tuple]], notes: list[str],
                       not_inlined: set[str],
                       parts: dict[str, tuple[str, int, str] | None] | None = None,
                       attr_keys: list[tuple[str, ...] | None] | None = None) -> None:
        self.items = items
        self.call = call
        self.nested = nested
        self.group = group
        self.groups = groups
        self.chain = chain
        self.group_source = group_source
        self.referenced = referenced
        self.var_types = var_types
        self.slots = slots
        self.call_instances = call_instances
        self.inlined_forms = inlined_forms
        self.notes = notes
        self.not_inlined = not_inlined
        self.parts = {} if parts is None else parts
        self.attr_keys = attr_keys

    def name_parts(self, name: str) -> tuple[str, int, str] | None:
        """(`X@`, N, rest) of a name `X@N…` whose N is one of this body's frames, else
        None: the parts a copy renumbers."""
        if name in self.parts:
            return self.parts[name]
        parts = None
        at = name.find("@")
        if at >= 0:
            end = at + 1
            while end < len(name) and name[end].isdigit():
                end += 1
            if end > at + 1 and self.call <= (number := int(name[at + 1:end])) <= \
                    self.call + self.nested:
                parts = (name[:at + 1], number, name[end:])
        self.parts[name] = parts
        return parts

    def changing_attrs(self) -> list[tuple[str, ...] | None]:
        """For each item, the attributes a copy may change (None for a label)."""
        if self.attr_keys is None:
            self.attr_keys = [None if type(item) is tuple else
                              tuple(k for k in item.attrs if k not in _PLAIN_ATTRS)
                              for item in self.items]
        return self.attr_keys


def calling_state(lowering: _KernelLowering, callee: PFunction, inner: _Frame) -> tuple:
    """What besides names, groups and chains the lowering of `callee`'s body depends on
    at this call site (its parameters already bound). The stack of callers matters only
    to the calls inside the body: one to a function on the stack is left opaque
    (recursion), and so is one `MAX_INLINE_DEPTH` calls deep. Of the stack, the state
    keeps the functions the body may inline, and its depth where the body's calls, up to
    `height` levels deep, may reach that limit. A leaf function's body is then one state
    whoever calls it (particle_library.G: 156 bodies lowered and 218 copied with the
    whole stack)."""
    written = tuple(tuple(sorted(lowering.slots.get(p.name + inner.suffix) or ()))
                    for p in callee.params if p.space != ".reg")
    calls = _call_graph(lowering, callee.name)
    if calls is None:
        stack: tuple = inner.stack
    else:
        reach, height = calls
        stack = (tuple(name for name in inner.stack if name in reach),
                 max(len(inner.stack), MAX_INLINE_DEPTH - height))
    return callee.name, stack, written, bool(inner.inlined_at)


def _call_graph(lowering: _KernelLowering, name: str, path: frozenset[str] = frozenset()
                ) -> tuple[frozenset[str], int] | None:
    """The functions that lowering `name`'s body may inline, at any depth, and how many
    levels of calls deep that goes (0: it calls none); None when it may inline a
    function already being inlined (recursion: one of `path`, the functions walked to
    reach it) or, through a pointer, any function: then the whole stack is the state."""
    known = lowering.call_graphs
    if name not in known:
        known[name] = _walk_calls(lowering, name, path | {name})
    return known[name]


def _walk_calls(lowering: _KernelLowering, name: str, path: frozenset[str]
                ) -> tuple[frozenset[str], int] | None:
    """`_call_graph` of `name` (the last of `path`), not yet known."""
    callees, indirect = lowering.unit.calls(name)
    if indirect and lowering.targets:
        return None
    reach: set[str] = set()
    height = 0
    for target in callees:
        below = None if target in path else _call_graph(lowering, target, path)
        if below is None:
            return None
        reach |= {target, *below[0]}
        height = max(height, below[1] + 1)
    return frozenset(reach), height


def lower_inlined_body(lowering: _KernelLowering, callee: PFunction, inner: _Frame) -> None:
    """Lower `callee`'s body in the frame `inner`: a copy of the body recorded in the same
    calling state, else lowered (and recorded when it can be copied)."""
    state = calling_state(lowering, callee, inner)
    template = lowering.templates.get(state)
    if template is not None:
        _replay(lowering, template, inner)
        return
    template = _record(lowering, callee, inner)
    if template is not None:
        lowering.templates[state] = template


def _added(table: dict, before: int) -> list[tuple]:
    """The entries added to `table` since it had `before` of them, in insertion order."""
    return list(islice(reversed(table.items()), len(table) - before))[::-1]


def _record(lowering: _KernelLowering, callee: PFunction, inner: _Frame
            ) -> BodyTemplate | None:
    """Lower the body and return it as a template; None when it must not be copied."""
    low = lowering
    start, call, group = len(low.items), low.calls, low.groups
    sizes = (len(low.var_types), len(low.slots), len(low.call_instances),
             len(low.inlined_forms), len(low.notes))
    diagnostics, exits = len(low.diagnostics), low.exits
    outer_referenced, outer_not_inlined = low.referenced, low.not_inlined
    low.referenced, low.not_inlined = set(), set()
    try:
        low.lower_body(inner)
    finally:
        referenced, not_inlined = low.referenced, low.not_inlined
        outer_referenced |= referenced
        outer_not_inlined |= not_inlined
        low.referenced, low.not_inlined = outer_referenced, outer_not_inlined
    if low.failed or len(low.diagnostics) != diagnostics or low.exits != exits:
        return None
    bases = [p.name + inner.suffix for p in callee.params
             if p.space != ".reg" and p.name + inner.suffix in low.slots]
    slots = [*bases, *(name for name, _ in _added(low.slots, sizes[1]))]
    return BodyTemplate(
        low.items[start:], call, low.calls - call, group, low.groups - group, inner.inlined_at,
        low.group_source if low.groups != group else None, referenced,
        _added(low.var_types, sizes[0]), [(s, frozenset(low.slots[s])) for s in slots],
        _added(low.call_instances, sizes[2]), _added(low.inlined_forms, sizes[3]),
        low.notes[sizes[4]:], not_inlined)


class _Renaming:
    """The names, operands and attributes of a template at a new call site."""

    def __init__(self, template: BodyTemplate, shift: int, chain: tuple) -> None:
        self.template, self.shift = template, shift
        self.old_chain, self.chain = template.chain, chain
        self.names: dict[str, str] = {}
        self.vars: dict[str, ir.Var] = {}
        self.chains: dict[tuple, tuple] = {}

    def name(self, name: str) -> str:
        """`X@N…` with N renumbered when it is one of the template's frames."""
        known = self.names.get(name)
        if known is None:
            parts = self.template.name_parts(name)
            known = self.names[name] = name if parts is None else \
                f"{parts[0]}{parts[1] + self.shift}{parts[2]}"
        return known

    def operand(self, operand: ir.Operand) -> ir.Operand:
        """A register renamed; constants and special registers as they are."""
        if type(operand) is not ir.Var:
            return operand
        known = self.vars.get(operand.name)
        if known is None:
            known = self.vars[operand.name] = ir.Var(self.name(operand.name))
        return known

    def value(self, value: object) -> object:
        """An attribute value with every name in it renamed."""
        if isinstance(value, str):
            return self.name(value)
        if isinstance(value, ir.Var):
            return self.operand(value)
        if isinstance(value, tuple):
            return tuple(map(self.value, value))
        return value

    def attrs(self, attrs: dict[str, object], keys: tuple[str, ...]) -> dict[str, object]:
        """An instruction's attributes at the new site (`keys`: those that may change)."""
        copied = dict(attrs)
        for key in keys:
            value = copied[key]
            if key != "inlined_at":
                copied[key] = self.value(value)
                continue
            # every chain of the body ends with the chain of its frame
            chain = self.chains.get(value)
            if chain is None:
                chain = self.chains[value] = value[:len(value) - len(self.old_chain)] + \
                    self.chain
            copied[key] = chain
        return copied


def _replay(lowering: _KernelLowering, template: BodyTemplate, inner: _Frame) -> None:
    """Append a copy of the template for the frame `inner` (its call already numbered)."""
    low = lowering
    renaming = _Renaming(template, low.calls - template.call, inner.inlined_at)
    name, operand, attrs = renaming.name, renaming.operand, renaming.attrs
    group_shift = low.groups - template.group
    items = low.items
    for item, keys in zip(template.items, template.changing_attrs(), strict=True):
        if keys is None:  # a label
            items.append((item[0], name(item[1]), *item[2:]))
            continue
        guard = item.guard
        items.append(ir.Instruction(
            item.kind, item.loc, name(item.dest) if item.dest is not None else None,
            tuple(map(operand, item.args)), item.operator, item.space,
            name(item.target) if item.target is not None else None, item.text,
            attrs(item.attrs, keys) if keys else dict(item.attrs), item.id,
            item.group + group_shift if item.group is not None else None,
            ir.Guard(operand(guard.operand), guard.negated) if guard is not None else None,
            tuple(map(operand, item.implicit))))
    low.calls += template.nested
    low.groups += template.groups
    if template.group_source is not None:
        low.group_source = template.group_source
    low.referenced.update(map(name, template.referenced))
    for register, type_ in template.var_types:
        low.var_types[name(register)] = type_
    for slot, offsets in template.slots:
        low.slots[name(slot)] = set(offsets)
    for suffix, (parent, line, column, callee) in template.call_instances:
        low.call_instances[name(suffix)] = (name(parent), line, column, callee)
    call = (inner.call, inner.call_origin)
    for group, (pi, suffix, function) in template.inlined_forms:
        low.inlined_groups[group + group_shift] = call
        low.inlined_forms[group + group_shift] = (pi, name(suffix), function)
    low.notes.extend(template.notes)
    low.not_inlined |= template.not_inlined
