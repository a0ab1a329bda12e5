"""Lowering one `.entry` (and, when inlining, the bodies it calls) to IR instructions and
labels: opcodes map to IR kinds through the tables of `ptx_opcodes`; guarded
instructions keep their guard (`ptx_guards` makes selects); calls to `.func` bodies are
inlined (or kept as calls), `.param` variables become slot registers, `ret`/`exit`
become `stop`."""

from __future__ import annotations

from collections.abc import Callable

from gpudiv import ir
from gpudiv.ir.record import Record
from gpudiv.lang.ptx.flatten import _FuncInfo, _Unit
from gpudiv.lang.ptx.forms import (
    PFunction,
    PInstr,
    PLabel,
    PLoc,
)
from gpudiv.lang.ptx.opcodes import (
    ASSIGN_ROOTS,
    ATOMIC_ROOTS,
    BARRIER_ROOTS,
    CARRY,
    CARRY_READERS,
    DROPPED_ROOTS,
    LOAD_ROOTS,
    MAX_INLINE_DEPTH,
    OPAQUE_ROOTS,
    REDUCTION_ROOTS,
    STORE_ROOTS,
    TEXTURE_ROOTS,
    UNIFORM_COLLECTIVE_ROOTS,
    _element_bytes,
    _is_special_name,
    _memory_space,
    special_class,
)

TYPE_CHECKING = False  # (no `typing` import on the analyze path)
if TYPE_CHECKING:
    from gpudiv.lang.ptx import inline_reuse

# ---------------------------------------------------------------------------------------
# Call summaries: what a call to a summarised function stands for.
# ---------------------------------------------------------------------------------------

# A callee's input or output: (its `.param`/`.reg` parameter, byte offset in it).
Slot = tuple[str, int]


class SummaryOutput(Record, frozen=True):
    """One output of a summarised function: the inputs it may differ with between lanes,
    whether it may differ whatever the inputs (`intrinsic`), the literal it always is
    (None: not known to be one), and the pointer inputs through which it reads memory
    (`local`: it differs between lanes when one of them points into the caller's
    thread-private stack frame)."""

    depends: frozenset[Slot]
    intrinsic: bool
    constant: int | None
    local: frozenset[Slot]

    def __init__(self, depends: frozenset[Slot], intrinsic: bool = False,
                       constant: int | None = None, local: frozenset[Slot] = frozenset()) -> None:
        object.__setattr__(self, "depends", depends)
        object.__setattr__(self, "intrinsic", intrinsic)
        object.__setattr__(self, "constant", constant)
        object.__setattr__(self, "local", local)


class CallSummary(Record, frozen=True):
    """How a call to one `.func` is lowered when calls are summarised: its outputs, by the
    slots the function writes (`gpudiv.analyses.call_summaries` derives them)."""

    inputs: tuple[Slot, ...]  # what the function reads of its parameters
    outputs: dict[Slot, SummaryOutput]

    def __init__(self, inputs: tuple[Slot, ...], outputs: dict[Slot, SummaryOutput]) -> None:
        object.__setattr__(self, "inputs", inputs)
        object.__setattr__(self, "outputs", outputs)


# ---------------------------------------------------------------------------------------
# Lowering one kernel.
# ---------------------------------------------------------------------------------------

class _Frame(Record):
    """One function body being lowered: the kernel itself or an inlined call."""

    info: _FuncInfo
    suffix: str
    ret_label: str | None
    stack: tuple[str, ...]
    inlined_at: tuple
    origin: tuple | None
    origin_inlined: tuple | None
    call: PInstr | None  # the kernel's call instruction this body is inlined for
    call_origin: tuple | None  # the CUDA position of that call
    # ("r" | "i", name) → the IR operands it reads in this frame (`_KernelLowering.value`)
    names: dict[tuple, tuple]

    def __init__(self, info: _FuncInfo, suffix: str = "", ret_label: str | None = None,
                       stack: tuple[str, ...] = (), inlined_at: tuple = (),
                       origin: tuple | None = None, origin_inlined: tuple | None = None,
                       call: PInstr | None = None, call_origin: tuple | None = None,
                       names: dict[tuple, tuple] | None = None) -> None:
        self.info = info
        self.suffix = suffix
        self.ret_label = ret_label
        self.stack = stack
        self.inlined_at = inlined_at
        self.origin = origin
        self.origin_inlined = origin_inlined
        self.call = call
        self.call_origin = call_origin
        self.names = {} if names is None else names

    @property
    def is_kernel(self) -> bool:
        return self.ret_label is None


# Operand tags that may name a symbol or a negation (what `operand_notes` records).
_NOTED_TAGS = frozenset("is!")
# How a call through a function pointer is named among the calls left opaque
# (`INDIRECT_CALL + "through R"`): warnings, and `check`'s launches, recognise it.
INDIRECT_CALL = "indirect call "


def _slot(base: str, offset: int) -> str:
    return base if offset == 0 else f"{base}+{offset}"


def _slot_offset(name: str, base: str) -> int:
    """The offset a slot variable `base+N` stands for."""
    return int(name[len(base) + 1:]) if len(name) > len(base) else 0


def _element(attrs: dict, element) -> dict:
    """Attributes with `element` (vector/pair position) or `carry` added when it applies."""
    if element is None:
        return dict(attrs)
    if element == "carry":
        return {**attrs, "carry": True}
    return {**attrs, "element": element}


class _KernelLowering:
    """Lowers one `.entry` (and the bodies it calls) to a list of IR instructions/labels."""

    # Inlined bodies copied from their first lowering in the same calling state
    # (`gpudiv.lang.ptx.inline_reuse`); False: every call site lowered anew.
    reuse_bodies = True

    def __init__(self, unit: _Unit, info: _FuncInfo, diagnostics: list[ir.Diagnostic],
                 inline: bool = True,
                 summaries: dict[str, CallSummary | None] | None = None,
                 sites: dict[tuple[int, int], dict] | None = None):
        self.unit = unit
        self.inline = inline  # calls to bodies of the file inlined, else kept as calls
        # Calls to these functions become their summaries (`summary_call`), the others
        # (and those mapped to None: no summary could be made) opaque calls; None:
        # calls are inlined or kept as `inline` says.
        self.summaries = summaries
        # (line, column) of a call → output slot → what its callee's analysis in that
        # call's context knows of it: ("constant", K) or ("affine", (a2, a1, a0))
        self.sites = sites or {}
        # For the interpreter (`FunctionReader.executable`): the functions an indirect
        # call may reach, with their shapes (an indirect call is then `indirect_call`).
        self.targets: dict[str, CallSummary] = {}
        # Inlined calls: frame suffix → (the caller's frame suffix, the call's line and
        # column, the callee): how inlined copies map to call sites (call summaries).
        self.call_instances: dict[str, tuple[str, int, int, str]] = {}
        self.kept_calls = 0  # calls to bodies kept as calls (`inline` False)
        # the calls inlining leaves opaque though they may reach a function of the file
        # (recursion, depth: the callee; a function pointer: "indirect call through R"):
        # the interpreter runs such a kernel with calls as calls
        self.not_inlined: set[str] = set()
        self.kernel_info = info
        self.diagnostics = diagnostics
        self.items: list = []  # ir.Instruction or ("label", name, loc, user)
        self.exit_blocks: list[ir.Block] = []
        self.referenced: set[str] = set()
        self.specials: dict[str, str] = {}
        self.slots: dict[str, set[int]] = {}
        self.params = [p.name for p in info.fn.params]
        self.param_set = set(self.params)
        self.unknown: dict[str, int] = {}
        self.bodiless: dict[str, int] = {}
        self.notes: list[str] = []
        self.failed = False
        self.calls = 0
        self.exits = 0
        self.var_types: dict[str, str] = {}  # IR register name → declared PTX type
        # The kernel and every function inlined into it, by name (a list's `in` compared
        # the records field by field at every call: quadratic in the functions called).
        self.bodies = {info.fn.name: info}
        self.symbol_names: set[str] = set()
        self.group_forms: dict[int, PInstr] = {}  # group → the kernel's PTX instruction
        self.kernel_groups: dict[int, int] = {}  # id() of a kernel's PInstr → its group
        # group of an inlined body → (the kernel's call, its CUDA position)
        self.inlined_groups: dict[int, tuple[PInstr, tuple | None]] = {}
        # group of an inlined body → (the callee's PTX instruction, the frame's register
        # suffix, the callee's name): what the printer needs to write the body inline
        self.inlined_forms: dict[int, tuple[PInstr, str, str]] = {}
        self.own_labels: set[str] = set()  # labels of the kernel's body (not inlined)
        self.groups = 0  # the group id of the last PTX instruction lowered
        self.group_source: PInstr | None = None
        self.templates: dict[tuple, inline_reuse.BodyTemplate] = {}  # calling state → inlined body
        # function → what its body may inline and how deep (`inline_reuse._call_graph`)
        self.call_graphs: dict[str, tuple[frozenset[str], int] | None] = {}

    # -- small helpers -----------------------------------------------------------------
    def error(self, message: str, line: int, column: int) -> None:
        diagnostic = ir.Diagnostic("error", message, self.unit.path, line, column)
        if not any(str(d) == str(diagnostic) for d in self.diagnostics[-20:]):
            self.diagnostics.append(diagnostic)
        self.failed = True

    def instr(self, frame: _Frame, pi: PInstr, kind: str, **fields) -> ir.Instruction:
        attrs = {"opcode": pi.opcode}
        if frame.origin is not None:
            attrs["origin"] = frame.origin
        if frame.origin_inlined:
            attrs["inlined_at"] = (frame.origin_inlined, *frame.inlined_at)
        elif frame.inlined_at:
            attrs["inlined_at"] = frame.inlined_at
        if frame.suffix:
            attrs["function"] = frame.info.fn.name
        extra = fields.pop("attrs", None)
        if extra:
            attrs.update(extra)
        return ir.Instruction(kind, ir.Loc(pi.line, pi.column), text=pi.text, attrs=attrs,
                              group=self.group(frame, pi), **fields)

    def group(self, frame: _Frame, pi: PInstr) -> int:
        """The group id of the IR instructions lowered from `pi`: one per PTX instruction
        of the kernel, one per inlined copy of a callee's instruction."""
        if frame.is_kernel:
            known = self.kernel_groups.get(id(pi))
            if known is not None:
                self.group_source = pi
                return known
        if pi is not self.group_source:
            self.group_source = pi
            self.groups += 1
            if frame.is_kernel:
                self.kernel_groups[id(pi)] = self.groups
                self.group_forms[self.groups] = pi
            elif frame.call is not None:
                self.inlined_groups[self.groups] = (frame.call, frame.call_origin)
                self.inlined_forms[self.groups] = (pi, frame.suffix, frame.info.fn.name)
        return self.groups

    def label(self, name: str, line: int, column: int, user: bool = True) -> None:
        self.items.append(("label", name, ir.Loc(line, column), user))

    def value(self, frame: _Frame, op: tuple) -> tuple[ir.Operand, ...]:
        """The IR operands an operand reads (flattened: vectors give several)."""
        tag = op[0]
        if tag == "r" or tag == "i":
            # Names recur on most lines: their operands are worked out once per frame.
            known = frame.names.get(op)
            if known is None:
                known = frame.names[op] = self.name_value(frame, tag, op[1])
            return known
        if tag == "n":
            return (ir.Const(op[1]),)
        if tag == "s" or tag == "!":
            return self.value(frame, op[1])
        if tag in ("v", "a", "p"):
            return tuple(v for o in op[1] for v in self.value(frame, o))
        if tag == "|":
            return self.value(frame, op[1]) + self.value(frame, op[2])
        return ()

    def name_value(self, frame: _Frame, tag: str, name: str) -> tuple[ir.Operand, ...]:
        """The operand of a `%`-name (tag "r") or identifier (tag "i"): a register, a
        special register, a symbol's address, or nothing for `_`."""
        if tag == "r":
            if (not frame.info.is_register(name) and _is_special_name(name)
                    and not frame.info.is_register(name.split(".", 1)[0])):
                self.specials.setdefault(name, special_class(name))
                return (ir.Special(name),)
            return (self.register(frame, name),)
        if name == "_":
            return ()
        if frame.info.is_register(name):
            return (self.register(frame, name),)
        return (self.symbol_address(name),)

    def symbol_address(self, name: str) -> ir.Special:
        """A symbol used as a value (`mov.u64 %rd1, sym`): its address is the same in every
        lane but not a number the analyses know, so it is a uniform special register
        named after the symbol (never the constant 0)."""
        self.specials[name] = "uniform"
        self.symbol_names.add(name)
        return ir.Special(name)

    def register(self, frame: _Frame, name: str) -> ir.Var:
        """The IR variable of a register; its declared type is noted for the interpreter."""
        full = name + frame.suffix
        if full not in self.var_types:
            type_ = frame.info.reg_type(name)
            if type_:
                self.var_types[full] = type_
        return ir.Var(full)

    def values(self, frame: _Frame, ops: list) -> tuple[ir.Operand, ...]:
        flat: list[ir.Operand] = []
        for op in ops:
            flat += self.value(frame, op)
        return tuple(flat)

    def operand_notes(self, frame: _Frame, ops: list) -> dict[str, tuple]:
        """What `values` flattens away, aligned with its result: for each IR operand the
        symbol and offset it names (`sym`, `sym+4`), and whether it is negated (`!%p`).
        Empty when there is nothing to note."""
        if not any(op[0] in _NOTED_TAGS for op in ops):  # the commonest: registers, numbers
            return {}
        symbols: list = []
        negated: list[int] = []
        for op in ops:
            count = len(self.value(frame, op))
            inner = op[1] if op[0] == "!" else op
            base, offset = (inner[1], inner[2]) if inner[0] == "s" else (inner, 0)
            if (base[0] == "i" and base[1] != "_" and not frame.info.is_register(base[1])
                    and count == 1):
                symbols.append((base[1], offset))
            else:
                symbols.extend([None] * count)
            if op[0] == "!" and count == 1:
                negated.append(len(symbols) - 1)
        notes: dict[str, tuple] = {}
        if any(symbols):
            notes["arg_symbols"] = tuple(symbols)
        if negated:
            notes["negated"] = tuple(negated)
        return notes

    def dests(self, frame: _Frame, op: tuple) -> list[str]:
        """Names an operand in destination position writes."""
        return [name for name, _ in self.dest_elements(frame, op)]

    def dest_elements(self, frame: _Frame, op: tuple) -> list[tuple[str, int | None]]:
        """(name, element) for each name a destination operand writes; the element is the
        position in a vector `{a, _, c}` or pair `a|b` (None for a plain register)."""
        tag = op[0]
        if tag in ("r", "i"):
            if op[1] == "_":
                return []
            if frame.info.is_register(op[1]):
                self.register(frame, op[1])
            return [(op[1] + frame.suffix, None)]
        if tag in ("v", "|"):
            parts = op[1] if tag == "v" else [op[1], op[2]]
            return [(d, k) for k, p in enumerate(parts) for d, _ in self.dest_elements(frame, p)]
        return []

    def address(self, frame: _Frame, op: tuple) -> tuple[ir.Operand, str | None, int]:
        """(base operand, symbol or None, offset) of an address operand `[…]`."""
        inner = op[1][0] if op[0] == "a" and op[1] else op
        offset = 0
        if inner[0] == "s":
            inner, offset = inner[1], inner[2]
        if inner[0] == "i" and not frame.info.is_register(inner[1]):
            return ir.Const(0), inner[1], offset
        if inner[0] == "n":
            return ir.Const(inner[1]), None, offset
        values = self.value(frame, inner)
        return (values[0] if values else ir.Const(0)), None, offset

    def symbol_space(self, frame: _Frame, name: str) -> str | None:
        if name in frame.info.symbols:
            return frame.info.symbols[name]
        return self.unit.symbols.get(name)

    def read_slot(self, base: str, offset: int, size: int | None) -> list[ir.Operand]:
        """The slot variables a `.param` read at base+offset sees."""
        written = self.slots.get(base)
        if not written or offset in written:
            return [ir.Var(_slot(base, offset))]
        if size:
            overlap = sorted(o for o in written if offset <= o < offset + size)
            if overlap:
                return [ir.Var(_slot(base, o)) for o in overlap]
        return [ir.Var(_slot(base, o)) for o in sorted(written)]

    def slot_name(self, frame: _Frame, op: tuple) -> str | None:
        """The renamed `.param` slot an operand names, if it names one: any symbol but a
        parameter of the kernel itself (old ABIs pass the callee's own parameter names,
        undeclared in the caller, as call arguments)."""
        if op[0] == "a" and op[1]:
            op = op[1][0]
        if op[0] == "s":
            op = op[1]
        if op[0] != "i" or op[1] == "_" or frame.info.is_register(op[1]):
            return None
        if frame.is_kernel and op[1] in self.param_set:
            return None
        return op[1] + frame.suffix

    def copy(self, frame: _Frame, pi: PInstr, dest: str, args: list[ir.Operand],
             **attrs) -> ir.Instruction:
        operator = "copy" if len(args) == 1 else pi.opcode
        return self.instr(frame, pi, ir.ASSIGN, dest=dest, args=tuple(args), operator=operator,
                          attrs=attrs or None)

    # -- emission with guards ----------------------------------------------------------
    def guard_operand(self, frame: _Frame, pi: PInstr) -> ir.Operand:
        name = pi.guard
        if frame.info.is_register(name) or not _is_special_name(name):
            return self.register(frame, name)
        return self.value(frame, ("r", name))[0]

    def emit(self, frame: _Frame, pi: PInstr, produced: list[ir.Instruction]) -> None:
        """Append instructions, each guarded by the PTX instruction's guard (a guarded
        definition stays one guarded instruction: `ptx_guards.guard_to_select` makes it a
        select where the analyses want one)."""
        if pi.guard is None:
            self.items.extend(produced)
            return
        typed = ir.Guard(self.guard_operand(frame, pi), pi.negated)
        for instr in produced:
            instr.guard = typed
        self.items.extend(produced)

    def branch_on_guard(self, frame: _Frame, pi: PInstr, target: str, when: bool,
                        **attrs) -> ir.Instruction:
        """A conditional branch to `target` taken when the guard holds (`when`) or not."""
        taken_if_true = when != pi.negated
        return self.instr(frame, pi, ir.BRANCH, operator="bnz" if taken_if_true else "bz",
                          args=(self.guard_operand(frame, pi),), target=target,
                          attrs=attrs or None)

    # -- the body walk -------------------------------------------------------------------
    def lower_body(self, frame: _Frame) -> None:
        info = frame.info
        if info.errors:
            for message, line, column in info.errors:
                self.error(message, line, column)
            return
        files = self.unit.files
        for stmt in info.stmts:
            if isinstance(stmt, PInstr):
                self.lower_instr(frame, stmt)
            elif isinstance(stmt, PLabel):
                self.label(stmt.name + frame.suffix, stmt.line, stmt.column)
                if frame.is_kernel:
                    self.own_labels.add(stmt.name)
            elif isinstance(stmt, PLoc):
                path = files.get(stmt.file, f"<file {stmt.file}>")
                frame.origin = (path, stmt.line, stmt.column) if stmt.line > 0 else None
                frame.origin_inlined = None
                if stmt.inlined_at is not None:
                    f, line, column = stmt.inlined_at
                    frame.origin_inlined = (files.get(f, f"<file {f}>"), line, column)

    def lower_instr(self, frame: _Frame, pi: PInstr) -> None:
        opcode = pi.opcode
        parts = opcode.split(".")
        root, mods = parts[0], parts[1:]
        ops = pi.operands
        if root in ASSIGN_ROOTS:
            self.lower_assign(frame, pi, root, mods)
        elif root in LOAD_ROOTS:
            self.lower_load(frame, pi, mods)
        elif root in STORE_ROOTS:
            self.lower_store(frame, pi, root, mods)
        elif root in ATOMIC_ROOTS or root in REDUCTION_ROOTS:
            has_dest = root in ATOMIC_ROOTS and len(ops) >= 2 and ops[0][0] != "a"
            dests = self.dests(frame, ops[0]) if has_dest else []
            rest = ops[1:] if has_dest else ops
            space = _memory_space(mods) or ("surface" if root == "sured" else "generic")
            base, symbol, offset = (self.address(frame, rest[0]) if rest
                                    else (ir.Const(0), None, 0))
            args = (base, *self.values(frame, rest[1:]))
            attrs = self.address_attrs(frame, space, symbol, offset)
            produced = [self.instr(frame, pi, ir.ATOMIC, dest=d, args=args, operator=opcode,
                                   space=space, attrs=dict(attrs))
                        for d in dests or [None]]
            self.emit(frame, pi, produced)
        elif root in TEXTURE_ROOTS:
            elements = self.dest_elements(frame, ops[0]) if ops else []
            coords = [v for v in self.values(frame, ops[1:]) if not isinstance(v, ir.Const)
                      and not (isinstance(v, ir.Special) and v.name in self.symbol_names)]
            args = tuple(coords) or (ir.Const(0),)
            attrs = self.texture_attrs(frame, ops[1] if len(ops) > 1 else ("a", []))
            self.emit(frame, pi, [self.instr(frame, pi, ir.LOAD, dest=d, args=args,
                                             operator=opcode, space="texture",
                                             attrs=_element(attrs, k))
                                  for d, k in elements])
        elif root == "bra":
            self.lower_bra(frame, pi, mods)
        elif root == "brx":
            self.lower_brx(frame, pi, mods)
        elif root == "call":
            self.lower_call(frame, pi, mods)
        elif root == "ret":
            if frame.is_kernel:
                self.lower_exit(frame, pi)
            elif pi.guard is None:
                self.items.append(self.instr(frame, pi, ir.JUMP, target=frame.ret_label))
                self.referenced.add(frame.ret_label)
            else:
                self.items.append(self.branch_on_guard(frame, pi, frame.ret_label, True))
                self.referenced.add(frame.ret_label)
        elif root in ("exit", "trap"):
            self.lower_exit(frame, pi)
        elif root in BARRIER_ROOTS:
            if "warp" in mods:  # bar.warp.sync (__syncwarp): no block-wide effect
                self.emit(frame, pi, [self.instr(frame, pi, ir.FENCE, operator=opcode,
                                                 implicit=self.values(frame, ops))])
                return
            reduction = "red" in mods and ops  # bar.red, barrier.red, barrier.cta.red
            read = self.values(frame, ops[1:] if reduction else ops)  # not the destination
            produced = [self.instr(frame, pi, ir.BARRIER, implicit=read)]
            if reduction:
                notes = self.operand_notes(frame, ops[1:])
                produced += [self.instr(frame, pi, ir.ASSIGN, dest=d, operator=opcode,
                                        implicit=self.values(frame, ops[1:]),
                                        attrs=dict(notes))
                             for d in self.dests(frame, ops[0])]
            self.emit(frame, pi, produced)
        elif root in DROPPED_ROOTS:
            self.emit(frame, pi, [self.instr(frame, pi, ir.FENCE, operator=opcode,
                                             implicit=self.values(frame, ops))])
        elif root in UNIFORM_COLLECTIVE_ROOTS:
            # The operands are implicit reads, not arguments (the result is uniform).
            dests = self.dests(frame, ops[0]) if ops else []
            notes = self.operand_notes(frame, ops[1:])
            self.emit(frame, pi, [self.instr(frame, pi, ir.ASSIGN, dest=d, operator=opcode,
                                             implicit=self.values(frame, ops[1:]),
                                             attrs=dict(notes))
                                  for d in dests])
        else:
            if root not in OPAQUE_ROOTS:
                self.unknown.setdefault(opcode, pi.line)
            self.lower_opaque(frame, pi, opcode)

    def lower_opaque(self, frame: _Frame, pi: PInstr, operator: str) -> None:
        ops = pi.operands
        if ops and ops[0][0] in ("r", "i", "v", "|"):
            dests = self.dest_elements(frame, ops[0])
            args, notes = self.values(frame, ops[1:]), self.operand_notes(frame, ops[1:])
        else:
            dests = []
            args, notes = self.values(frame, ops), self.operand_notes(frame, ops)
        self.emit(frame, pi, [self.instr(frame, pi, ir.OPAQUE, dest=d, args=args,
                                         operator=operator, attrs=_element(notes, k))
                              for d, k in dests or [(None, None)]])

    def lower_assign(self, frame: _Frame, pi: PInstr, root: str, mods: list[str]) -> None:
        ops = pi.operands
        if not ops:
            return
        dests = self.dest_elements(frame, ops[0])
        args = self.values(frame, ops[1:])
        notes = self.operand_notes(frame, ops[1:])
        if root in CARRY_READERS:
            args = (*args, ir.Var(CARRY))
            if "arg_symbols" in notes:
                notes["arg_symbols"] = (*notes["arg_symbols"], None)
        if "cc" in mods:
            dests.append((CARRY, "carry"))
        attrs = dict(notes)
        symbols = [o[1][1] if o[0] == "s" else o[1] for o in ops[1:]
                   if (o[0] == "i" or (o[0] == "s" and o[1][0] == "i"))]
        symbols = [s for s in symbols if s != "_" and not frame.info.is_register(s)]
        if symbols:
            attrs.update({"symbols": tuple(symbols),
                          "symbol_spaces": tuple(self.symbol_space(frame, s) for s in symbols)})
        self.emit(frame, pi, [self.instr(frame, pi, ir.ASSIGN, dest=d, args=args,
                                         operator=pi.opcode, attrs=_element(attrs, k))
                              for d, k in dests])

    def lower_load(self, frame: _Frame, pi: PInstr, mods: list[str]) -> None:
        ops = pi.operands
        if len(ops) < 2:
            self.lower_opaque(frame, pi, pi.opcode)
            return
        elements = self.dest_elements(frame, ops[0])
        space = _memory_space(mods) or "generic"
        size = _element_bytes(mods)
        base, symbol, offset = self.address(frame, ops[1])
        produced: list[ir.Instruction] = []
        if space == "param":
            slot = self.slot_name(frame, ops[1])
            if slot is not None:
                for dest, k in elements:
                    where = offset + (k or 0) * size
                    sources = self.read_slot(slot, where, size)
                    extra = {}
                    if len(sources) > 1:  # several slots: the interpreter joins their bytes
                        extra = {"slot_read": (where, size, tuple(
                            _slot_offset(v.name, slot) for v in sources))}
                    produced.append(self.copy(frame, pi, dest, sources,
                                              slot=_slot(slot, where), **extra))
            elif symbol is not None and frame.is_kernel and symbol in self.param_set:
                produced = [self.instr(frame, pi, ir.LOAD, dest=d, args=(ir.Var(symbol),),
                                       operator=pi.opcode, space="param",
                                       attrs=_element({"symbol": symbol,
                                                       "offset": offset + (k or 0) * size,
                                                       "disp": offset + (k or 0) * size}, k))
                            for d, k in elements]
            elif symbol is None and not frame.is_kernel:
                # A .param read through a register inside a called function: the value
                # may come from any argument, so it is not seen through.
                produced = [self.instr(frame, pi, ir.OPAQUE, dest=d, args=(base,),
                                       operator=pi.opcode) for d, _ in elements]
            else:
                produced = [self.instr(frame, pi, ir.LOAD, dest=d, args=(base,),
                                       operator=pi.opcode, space="param",
                                       attrs=_element(self.address_attrs(
                                           frame, space, symbol, offset + (k or 0) * size,
                                           offset), k))
                            for d, k in elements]
            self.emit(frame, pi, produced)
            return
        self.emit(frame, pi, [
            self.instr(frame, pi, ir.LOAD, dest=d, args=(base,), operator=pi.opcode,
                       space=space, attrs=_element(self.address_attrs(
                           frame, space, symbol, offset + (k or 0) * size, offset), k))
            for d, k in elements])

    def texture_attrs(self, frame: _Frame, address: tuple) -> dict[str, object]:
        """`texture`: the handle of `[tex, {x, y}]` (or `[tex, smp, {…}]`), and `coords`:
        every coordinate operand, constants included."""
        parts = address[1] if address[0] == "a" else []
        handle = next((p[1] for p in parts if p[0] == "i" and not frame.info.is_register(p[1])),
                      None)
        vector = next((p for p in parts if p[0] == "v"), None)
        coords = self.values(frame, [vector]) if vector is not None else ()
        return {"texture": handle, "coords": coords} if handle else {}

    def address_attrs(self, frame: _Frame, space: str, symbol: str | None, disp: int,
                      offset: int | None = None) -> dict[str, object]:
        """Attributes of a memory access: `disp`, the byte displacement from the base
        operand (the symbol's address for `[sym+4]`), and for symbols `symbol`, `offset`
        (the offset written in the operand) and, in generic space, `symbol_space`."""
        attrs: dict[str, object] = {}
        if symbol is not None:
            attrs = {"symbol": symbol, "offset": disp if offset is None else offset}
            if space == "generic":
                attrs["symbol_space"] = self.symbol_space(frame, symbol)
        attrs["disp"] = disp
        return attrs

    def lower_store(self, frame: _Frame, pi: PInstr, root: str, mods: list[str]) -> None:
        ops = pi.operands
        addresses = [o for o in ops if o[0] == "a"]
        if not addresses:
            return  # cp.async.commit_group, cp.async.wait_group N, …: ordering only
        space = _memory_space(mods) or ("surface" if root == "sust" else "generic")
        base, symbol, offset = self.address(frame, ops[0])
        values = self.values(frame, ops[1:])
        if root == "st" and space == "param":
            slot = self.slot_name(frame, ops[0])
            if slot is not None:
                size = _element_bytes(mods)
                written = self.slots.setdefault(slot, set())
                produced = []
                for k, val in enumerate(values):
                    where = offset + k * size
                    written.add(where)
                    produced.append(self.copy(frame, pi, _slot(slot, where), [val]))
                self.emit(frame, pi, produced)
                return
        attrs = self.address_attrs(frame, space, symbol, offset)
        if root == "st" and len(ops) == 2:
            # One store per element: (address, value), the shape μ-SIMD stores have.
            size = _element_bytes(mods)
            notes = self.operand_notes(frame, ops[1:]).get("arg_symbols")
            vector = ops[1][0] == "v"
            produced = []
            for k, v in enumerate(values):
                extra = dict(self.address_attrs(frame, space, symbol, offset + k * size,
                                                offset))
                if vector:
                    extra["element"] = k
                if notes and notes[k]:
                    extra["arg_symbols"] = (None, notes[k])
                produced.append(self.instr(frame, pi, ir.STORE, args=(base, v),
                                           operator=pi.opcode, space=space, attrs=extra))
        else:
            # sust, stmatrix, cp.async, st.async: one store; the address (the surface
            # coordinates for sust) first, then everything else it reads.
            coords = [v for v in self.values(frame, [ops[0]]) if not isinstance(v, ir.Const)
                      and not (isinstance(v, ir.Special) and v.name in self.symbol_names)]
            address = tuple(coords) if root == "sust" and coords else (base,)
            produced = [self.instr(frame, pi, ir.STORE, args=(*address, *values),
                                   operator=pi.opcode, space=space, attrs=attrs or None)]
        self.emit(frame, pi, produced)

    # -- control flow ----------------------------------------------------------------------
    def check_label(self, frame: _Frame, name: str, pi: PInstr) -> str:
        if name not in frame.info.labels:
            kernel = self.kernel_info.fn.name
            where = f"kernel {kernel}" if frame.is_kernel else f"function {frame.info.fn.name}"
            self.error(f"undefined label '{name}' in {where}", pi.line, pi.column)
        target = name + frame.suffix
        self.referenced.add(target)
        return target

    def lower_bra(self, frame: _Frame, pi: PInstr, mods: list[str]) -> None:
        ops = pi.operands
        if not ops or ops[0][0] != "i":
            self.error(f"'{pi.opcode}' needs a label operand", pi.line, pi.column)
            return
        target = self.check_label(frame, ops[0][1], pi)
        attrs = {"uniform_hint": True} if "uni" in mods else {}
        if pi.guard is None:
            self.items.append(self.instr(frame, pi, ir.JUMP, target=target, attrs=attrs))
        else:
            self.items.append(self.branch_on_guard(frame, pi, target, True, **attrs))

    def lower_brx(self, frame: _Frame, pi: PInstr, mods: list[str]) -> None:
        ops = pi.operands
        if len(ops) < 2:
            self.error(f"'{pi.opcode}' needs an index and a target list", pi.line, pi.column)
            return
        table = ops[1]
        if table[0] == "i" and table[1] in frame.info.tables:
            names = frame.info.tables[table[1]]
        elif table[0] in ("p", "v"):
            names = [o[1] for o in table[1] if o[0] == "i"]
        else:
            self.error(f"undefined branch-target table '{table[1] if len(table) > 1 else ''}'",
                       pi.line, pi.column)
            return
        if not names:
            return
        targets = [self.check_label(frame, n, pi) for n in names]
        index = self.value(frame, ops[0])
        index_arg = index[0] if index else ir.Const(0)
        skip = None
        attrs = {"uniform_hint": True} if "uni" in mods else {}
        if pi.guard is not None:
            self.exits += 1
            skip = f"$brx.{self.exits}"
            self.items.append(self.branch_on_guard(frame, pi, skip, False))
            self.referenced.add(skip)
        for case, target in enumerate(targets[:-1]):
            self.items.append(self.instr(frame, pi, ir.BRANCH, operator="brx.idx",
                                         args=(index_arg,), target=target,
                                         attrs={"case": case, **attrs}))
        self.items.append(self.instr(frame, pi, ir.JUMP, target=targets[-1],
                                     attrs={"case": len(targets) - 1, **attrs}))
        if skip is not None:
            self.label(skip, pi.line, pi.column, user=False)

    def lower_exit(self, frame: _Frame, pi: PInstr) -> None:
        if pi.guard is None:
            self.items.append(self.instr(frame, pi, ir.STOP))
            return
        self.exits += 1
        label = f"$exit.{self.exits}"
        self.referenced.add(label)
        self.items.append(self.branch_on_guard(frame, pi, label, True))
        stop = self.instr(frame, pi, ir.STOP)
        self.exit_blocks.append(ir.Block(label, [stop], ir.Loc(pi.line, pi.column),
                                         user_label=False))

    def lower_call(self, frame: _Frame, pi: PInstr, mods: list[str]) -> None:
        ops = pi.operands
        rets: list = []
        position = 0
        if ops and ops[0][0] == "p":
            rets, position = ops[0][1], 1
        if position >= len(ops):
            self.error("call without a target", pi.line, pi.column)
            return
        target = ops[position]
        args = ops[position + 1][1] if (len(ops) > position + 1
                                       and ops[position + 1][0] == "p") else []
        name = target[1] if target[0] == "i" else None
        callee = self.unit.functions.get(name) if name else None
        if callee is None and name is None and self.targets:
            self.indirect_call(frame, pi, target, rets, args)
            return
        if callee is None or callee.body is None:
            reason = f"{name}" if name else f"{INDIRECT_CALL}through {target[1]}"
            if name is None and self.inline and self.summaries is None \
                    and any(f.body is not None and f.kind == "func"
                            for f in self.unit.functions.values()):
                self.not_inlined.add(reason)  # it may reach a function of the file
            self.bodiless.setdefault(reason, pi.line)
            self.opaque_call(frame, pi, rets, args)
            return
        if self.summaries is not None:
            summary = self.summaries.get(name)
            if summary is None:  # no summary: recursive (none before its own), or failed
                why = ("it could not be summarised (see the errors above)"
                       if name in self.summaries else "it is recursive")
                self.notes.append(f"call to '{name}' at line {pi.line} is treated as opaque: "
                                  f"{why}")
                self.opaque_call(frame, pi, rets, args)
            else:
                self.summary_call(frame, pi, callee, rets, args, summary)
            return
        if not self.inline:
            self.kept_calls += 1
            self.opaque_call(frame, pi, rets, args)
            return
        if name in frame.stack:
            self.notes.append(f"recursive call to '{name}' at line {pi.line} is treated as "
                              f"opaque")
            self.not_inlined.add(name)
            self.opaque_call(frame, pi, rets, args)
            return
        if len(frame.stack) >= MAX_INLINE_DEPTH:
            self.not_inlined.add(name)
            self.notes.append(f"call to '{name}' at line {pi.line} is nested deeper than "
                              f"{MAX_INLINE_DEPTH} calls and is treated as opaque")
            self.opaque_call(frame, pi, rets, args)
            return
        self.inline_call(frame, pi, callee, rets, args)

    def opaque_call(self, frame: _Frame, pi: PInstr, rets: list, args: list) -> None:
        inputs: list[ir.Operand] = []
        for arg in args:
            slot = self.slot_name(frame, arg)
            if slot is not None:
                inputs.extend(self.read_slot(slot, 0, None))
            else:
                inputs.extend(self.value(frame, arg))
        produced = []
        for ret in rets:
            slot = self.slot_name(frame, ret)
            if slot is not None:
                self.slots[slot] = {0}
                dests = [slot]
            else:
                dests = self.dests(frame, ret)
            produced += [self.instr(frame, pi, ir.OPAQUE, dest=d, args=tuple(inputs),
                                    operator="call") for d in dests]
        if not produced:
            produced = [self.instr(frame, pi, ir.OPAQUE, args=tuple(inputs), operator="call")]
        self.emit(frame, pi, produced)

    def inline_call(self, frame: _Frame, pi: PInstr, callee: PFunction, rets: list,
                    args: list) -> None:
        self.calls += 1
        suffix = f"@{self.calls}"
        self.call_instances[suffix] = (frame.suffix, pi.line, pi.column, callee.name)
        info = self.unit.info(callee.name)
        self.bodies.setdefault(callee.name, info)
        chain = tuple(o for o in (frame.origin, frame.origin_inlined) if o) + frame.inlined_at
        inner = _Frame(info, suffix, f"$ret{suffix}", (*frame.stack, frame.info.fn.name), chain,
                       call=pi if frame.is_kernel else frame.call,
                       call_origin=frame.origin if frame.is_kernel else frame.call_origin)
        skip = None
        if pi.guard is not None:
            skip = f"$skip{suffix}"
            self.items.append(self.branch_on_guard(frame, pi, skip, False))
            self.referenced.add(skip)
        bound: list[ir.Instruction] = []
        for param, arg in zip(callee.params, args, strict=False):
            if param.space == ".reg":
                bound.append(self.copy(frame, pi, param.name + suffix, self.value(frame, arg)))
                continue
            base = param.name + suffix
            source = self.slot_name(frame, arg)
            if source is not None:
                offsets = sorted(self.slots.get(source) or {0})
                for o in offsets:
                    bound.append(self.copy(frame, pi, _slot(base, o), [ir.Var(_slot(source, o))]))
                self.slots[base] = set(offsets)
            else:
                bound.append(self.copy(frame, pi, base, self.value(frame, arg)))
                self.slots[base] = {0}
        self.items.extend(bound)
        if self.reuse_bodies:  # (imported here: most kernels call nothing)
            from gpudiv.lang.ptx.inline_reuse import lower_inlined_body

            lower_inlined_body(self, callee, inner)
        else:
            self.lower_body(inner)
        self.label(inner.ret_label, pi.line, pi.column, user=False)
        self.referenced.add(inner.ret_label)
        results: list[ir.Instruction] = []
        for param, ret in zip(callee.rets, rets, strict=False):
            base = param.name + suffix
            offsets = [0] if param.space == ".reg" else sorted(self.slots.get(base) or {0})
            target = self.slot_name(frame, ret)
            if target is not None:
                for o in offsets:
                    results.append(self.copy(frame, pi, _slot(target, o),
                                             [ir.Var(_slot(base, o))]))
                self.slots[target] = set(offsets)
            else:
                for dest in self.dests(frame, ret):
                    source = ([ir.Var(base)] if param.space == ".reg"
                              else self.read_slot(base, 0, None))
                    results.append(self.copy(frame, pi, dest, source))
        self.items.extend(results)
        if skip is not None:
            self.label(skip, pi.line, pi.column, user=False)

    # -- call summaries ------------------------------------------------------------------
    def argument_operands(self, frame: _Frame, callee: PFunction, args: list
                          ) -> dict[str, Callable[[int], tuple[ir.Operand, ...]]]:
        """For each parameter of the callee that gets an argument: the caller's operands
        the callee's read at an offset sees (what `inline_call` would copy there)."""
        bound: dict[str, Callable[[int], tuple[ir.Operand, ...]]] = {}
        for param, arg in zip(callee.params, args, strict=False):
            source = None if param.space == ".reg" else self.slot_name(frame, arg)
            if source is None:
                values = self.value(frame, arg)
                bound[param.name] = lambda _offset, values=values: values
                continue
            written = sorted(self.slots.get(source) or {0})

            def seen(offset: int, source: str = source, written: list[int] = written
                     ) -> tuple[ir.Operand, ...]:
                if offset in written:
                    return (ir.Var(_slot(source, offset)),)
                return tuple(ir.Var(_slot(source, o)) for o in written)

            bound[param.name] = seen
        return bound

    def summary_call(self, frame: _Frame, pi: PInstr, callee: PFunction, rets: list,
                     args: list, summary: CallSummary) -> None:
        """A call as its summary: one opaque `call` instruction that reads every argument
        (what escapes into the callee stays visible), and for each result an instruction
        that reads only the arguments the result depends on (`call.result`), the literal
        it always is, or an opaque `call` result when it may differ whatever the
        arguments."""
        bound = self.argument_operands(frame, callee, args)
        operands = {slot: bound[slot[0]](slot[1]) for slot in summary.inputs
                    if slot[0] in bound}
        everything = tuple(dict.fromkeys(
            [*(v for param in callee.params if param.name in bound
               for v in bound[param.name](0)),
             *(v for seen in operands.values() for v in seen)]))
        position = {v: k for k, v in enumerate(everything)}
        # Which arguments each input sees (None: no argument, an undefined value).
        call_inputs = tuple((slot, tuple(position[v] for v in operands[slot])
                             if slot in operands else None) for slot in summary.inputs)
        attrs = {"callee": callee.name}
        produced = [self.instr(frame, pi, ir.OPAQUE, args=everything, operator="call",
                               attrs={**attrs, "call_inputs": call_inputs})]

        known = self.sites.get((pi.line, pi.column), {})

        def result(dest: str, outputs: list[SummaryOutput],
                   slots: list[Slot]) -> ir.Instruction:
            made = result_of(dest, outputs, slots)
            if len(slots) == 1:  # which output it is (`call_summaries.site_values`)
                made.attrs["output"] = slots[0]
            return made

        def result_of(dest: str, outputs: list[SummaryOutput],
                      slots: list[Slot]) -> ir.Instruction:
            value = known.get(slots[0]) if len(slots) == 1 else None
            if value is not None and value[0] == "constant":
                return self.copy(frame, pi, dest, [ir.Const(value[1])], **attrs)
            if value is not None:  # affine: its coefficients, for the affine rules
                return self.instr(frame, pi, ir.OPAQUE, dest=dest, args=everything,
                                  operator="call", attrs={**attrs, "affine": value[1]})
            unbound = any(d not in operands for out in outputs
                          for d in (*out.depends, *out.local))
            if unbound or any(out.intrinsic for out in outputs):
                return self.instr(frame, pi, ir.OPAQUE, dest=dest, args=everything,
                                  operator="call", attrs=dict(attrs))
            constants = {out.constant for out in outputs}
            if len(outputs) == 1 and None not in constants:
                return self.copy(frame, pi, dest, [ir.Const(outputs[0].constant)], **attrs)
            reads = tuple(dict.fromkeys(v for out in outputs for d in sorted(out.depends)
                                        for v in operands[d]))
            pointers = tuple(dict.fromkeys(v for out in outputs for d in sorted(out.local)
                                           for v in operands[d] if v not in reads))
            extra = {}
            if pointers or any(out.local for out in outputs):
                # whether these point into thread-private memory is known once the
                # kernel is lowered (`infer_generic_spaces` makes the result opaque)
                extra["address_args"] = tuple(
                    k for k, v in enumerate((*reads, *pointers))
                    if any(v in operands[d] for out in outputs for d in out.local))
            return self.instr(frame, pi, ir.ASSIGN, dest=dest, args=(*reads, *pointers),
                              operator="call.result", attrs={**attrs, **extra})

        for param, ret in zip(callee.rets, rets, strict=False):
            written = sorted(o for name, o in summary.outputs if name == param.name) or [0]
            missing = SummaryOutput(frozenset(), intrinsic=True)  # never written: undefined
            target = self.slot_name(frame, ret)
            if target is not None:
                for o in written:
                    output = summary.outputs.get((param.name, o), missing)
                    produced.append(result(_slot(target, o), [output], [(param.name, o)]))
                self.slots[target] = set(written)
                continue
            seen = [0] if 0 in written or param.space == ".reg" else written
            outputs = [summary.outputs.get((param.name, o), missing) for o in seen]
            slots = [(param.name, o) for o in seen]
            produced += [result(dest, outputs, slots) for dest in self.dests(frame, ret)]
        self.emit(frame, pi, produced)

    def indirect_call(self, frame: _Frame, pi: PInstr, target: tuple, rets: list,
                      args: list) -> None:
        """A call through a function pointer, for the interpreter: one `call` reading the
        pointer and every argument, with `attrs["indirect"]`: for each function it may
        reach (those with as many parameters and results), which arguments its input
        slots read; per result slot one instruction with `attrs["indirect_output"]`: the
        output slot of each of those functions it takes (None: never written)."""
        candidates = [(f, callee) for f in self.targets
                      if len((callee := self.unit.functions[f]).params) == len(args)
                      and len(callee.rets) == len(rets)]
        if not candidates:
            self.bodiless.setdefault(f"{INDIRECT_CALL}through {target[1]}", pi.line)
            self.opaque_call(frame, pi, rets, args)
            return
        pointer = self.value(frame, target)
        everything: dict[ir.Operand, None] = dict.fromkeys(pointer)
        reads = []
        for f, callee in candidates:
            bound = self.argument_operands(frame, callee, args)
            operands = {slot: bound[slot[0]](slot[1]) for slot in self.targets[f].inputs
                        if slot[0] in bound}
            everything.update(dict.fromkeys(v for seen in operands.values() for v in seen))
            reads.append((f, operands))
        position = {v: k for k, v in enumerate(everything)}
        indirect = tuple((f, tuple((slot, tuple(position[v] for v in operands[slot])
                                    if slot in operands else None)
                                   for slot in self.targets[f].inputs))
                         for f, operands in reads)
        attrs = {"indirect": indirect}
        produced = [self.instr(frame, pi, ir.OPAQUE, args=tuple(everything), operator="call",
                               attrs=attrs)]
        for k, ret in enumerate(rets):
            names = [callee.rets[k].name for _, callee in candidates]
            written = sorted({o for (f, _), name in zip(candidates, names, strict=True)
                              for n, o in self.targets[f].outputs if n == name} or {0})

            def taken(offset: int, names: list[str] = names) -> tuple:
                return tuple((f, (name, offset) if (name, offset) in self.targets[f].outputs
                              else None)
                             for (f, _), name in zip(candidates, names, strict=True))

            slot_target = self.slot_name(frame, ret)
            if slot_target is not None:
                produced += [self.instr(frame, pi, ir.OPAQUE, dest=_slot(slot_target, o),
                                        args=tuple(everything), operator="call",
                                        attrs={"indirect_output": taken(o)})
                             for o in written]
                self.slots[slot_target] = set(written)
                continue
            produced += [self.instr(frame, pi, ir.OPAQUE, dest=dest, args=tuple(everything),
                                    operator="call", attrs={"indirect_output": taken(0)})
                         for dest in self.dests(frame, ret)]
        self.emit(frame, pi, produced)

    def lower_function(self, frame: _Frame) -> None:
        """A `.func` body on its own (`frame`: its root frame, with a return label): its
        parameters are defined by `call.input` instructions (one per offset of a `.param`
        the body reads), every `ret` meets at the return label, where one `call.return`
        instruction reads the outputs (one per offset of a `.param` the body writes)."""
        fn = frame.info.fn
        header = PInstr(None, False, "call.input", [], fn.line, fn.column, "")
        start = len(self.items)
        self.lower_body(frame)
        read = {a.name for item in self.items[start:] if isinstance(item, ir.Instruction)
                for a in item.reads if isinstance(a, ir.Var)}
        inputs = []
        for param in fn.params:
            names = [param.name] if param.space == ".reg" else sorted(
                (n for n in read if n == param.name or n.startswith(param.name + "+")),
                key=lambda n: _slot_offset(n, param.name))
            inputs += [self.instr(frame, header, ir.OPAQUE, dest=n, operator="call.input",
                                  attrs={"input": (param.name, _slot_offset(n, param.name))})
                       for n in names]
        self.items[start:start] = inputs
        self.label(frame.ret_label, fn.line, fn.column, user=False)
        self.referenced.add(frame.ret_label)
        outputs: list[ir.Operand] = []
        slots: list[Slot] = []
        for param in fn.rets:
            offsets = [0] if param.space == ".reg" else sorted(self.slots.get(param.name)
                                                                or {0})
            for o in offsets:
                outputs.append(ir.Var(_slot(param.name, o)))
                slots.append((param.name, o))
        ret = PInstr(None, False, "call.return", [], fn.line, fn.column, "")
        self.items.append(self.instr(frame, ret, ir.OPAQUE, args=tuple(outputs),
                                     operator="call.return", attrs={"outputs": tuple(slots)}))
        self.items.append(self.instr(frame, ret, ir.STOP))
