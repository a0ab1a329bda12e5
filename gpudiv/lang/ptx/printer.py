"""IR → PTX text that `ptxas` accepts and that reads back to the same IR.

A PTX program keeps what the IR does not model (`program.attrs["module"]`): the
directives, module variables and device functions between kernels are written as they
were read, less DWARF: `.section` bodies and the `function_name`/`inlined_at` parts of
`.loc` (they name labels of the debug sections). Each kernel is written from its IR:

- the header from its parameters and performance directives, the body's declarations
  from the register table (`.reg`, one register a line; nested `{ }` scopes are flat,
  shadowing names were renamed `NAME$sN` when read) and the kernel's own variables;
- each group of IR instructions that still has the forms it had when it was read
  (`ir.Instruction.form`) as the PTX instruction it came from (a vector load, a guarded
  definition, an inlined call each come back as one instruction), with `.loc` lines
  where the CUDA position changes;
- every other instruction (one a pass created or changed) from its IR form: copies,
  jumps, conditional branches, `ret`; anything else raises `PrintError`.
"""

from __future__ import annotations

import re

from gpudiv import ir
from gpudiv.lang.marks import mark_comment, marked_labels
from gpudiv.lang.printing import PrintError
from gpudiv.lang.ptx.forms import PInstr, PParam, type_bytes

# DWARF sections and the parts of `.loc` that point into them.
_SECTION = re.compile(r"^[ \t]*\.section[^\n{]*\{[^}]*\}[ \t]*(?://[^\n]*)?\n?", re.M)
# The suffix of the registers of an inlined call (`%r1@2`: call 2).
_INLINED = re.compile(r"@\d+")
_LOC_DEBUG = re.compile(r"(\.loc[ \t]+\d+[ \t]+\d+[ \t]+\d+)[ \t]*,[^\n]*")


def print_ptx(program: ir.Program) -> str:
    """The text of a program read from PTX, its kernels written from their IR."""
    module = program.attrs.get("module")
    if program.language != "ptx" or module is None:
        raise PrintError(f"{program.path}: not a program read from PTX")
    if program.errors:
        raise PrintError(f"{program.path}: cannot print a program with errors")
    kernels = {k.name: k for k in program.kernels}
    files = {path: index for index, path in sorted(program.attrs.get("files", {}).items())}
    out: list[str] = []
    for kind, value in module:
        if kind == "text":
            out.append(_LOC_DEBUG.sub(r"\1", _SECTION.sub("", value)))
        elif value in kernels:
            out.append(print_kernel(kernels[value], files))
        else:
            raise PrintError(f"{program.path}: kernel '{value}' has no IR")
    return "".join(out).rstrip() + "\n"


def print_kernel(kernel: ir.Kernel, files: dict[str, int]) -> str:
    """One `.entry` with its header, declarations and body."""
    source = kernel.attrs.get("ptx_source")
    if not isinstance(source, dict):
        raise PrintError(f"kernel {kernel.name} was not read from PTX")
    body = _Body(kernel, source, files)
    body.write()
    lines = [_header(kernel.name, source)]
    lines.append("{")
    lines += [f"\t{d}" for d in _declarations(kernel, source, body.registers,
                                               body.callee_symbols, body.registerized)]
    lines.append("")
    lines += body.lines
    lines.append("}")
    return "\n".join(lines) + "\n"


def _header(name: str, source: dict) -> str:
    linkage = " ".join(source["linkage"])
    params = ",\n".join(f"\t{_param(p)}" for p in source["params"])
    head = f"{linkage} .entry {name}(\n{params}\n)" if linkage else f".entry {name}(\n{params}\n)"
    for directive in source["directives"]:
        head += f"\n{directive}"
    return head


def _param(param: PParam) -> str:
    return f"{param.space} {_layout(param.type, param.align, param.size)}{param.name}" + (
        _shape(param.type, param.size))


def _table(name: str, table) -> str:
    """A branch-target, call-target or call-prototype table of a body, by its name."""
    if table.kind == "callprototype":
        rets = f"({', '.join(_param(p) for p in table.rets)}) " if table.rets else ""
        params = ", ".join(_param(p) for p in table.params)
        return f"{name}: .callprototype {rets}_ ({params});"
    return f"{name}: .{table.kind} {', '.join(table.names)};"


def _layout(type_: str, align: int, size: int) -> str:
    """`.align A .TYPE ` (the alignment only when it is not the type's own)."""
    natural = 1 if type_ == "pred" else type_bytes(type_ or "b8")
    text = f".align {align} " if align and align != natural else ""
    return text + (f".{type_} " if type_ else ".b8 ")


def _shape(type_: str, size: int) -> str:
    """`[N]` for an array (size in elements), `[]` for an unsized one, else nothing."""
    element = 1 if type_ == "pred" else type_bytes(type_ or "b8")
    if size == 0:
        return "[]"
    if size == element:
        return ""
    return f"[{size // element}]"


def _init(items: tuple, array: bool) -> str:
    if not items:
        return ""
    texts = []
    for item in items:
        if item[0] == "sym":
            texts.append(item[1] + (f"+{item[2]}" if item[2] else ""))
        else:
            texts.append(str(item[1]))
    return f" = {{{', '.join(texts)}}}" if array or len(texts) > 1 else f" = {texts[0]}"


def _declarations(kernel: ir.Kernel, source: dict, registers: set[str],
                  callee_symbols: dict[str, tuple], registerized: set[str]) -> list[str]:
    lines = []
    symbols = dict(source["symbols"])
    for name, detail in callee_symbols.items():
        if symbols.setdefault(name, detail) != detail:
            raise PrintError(f"kernel {kernel.name}: a called function's variable {name} "
                             "clashes with the kernel's")
    for name, (space, type_, align, size, init) in symbols.items():
        shape = _shape(type_, size)
        extern = ".extern " if size == 0 else ""
        lines.append(f"{extern}.{space} {_layout(type_, align, size)}{name}{shape}"
                     f"{_init(init, bool(shape))};")
    params = {n: d for n, d in source["param_decls"].items() if n not in registerized}
    for name, (type_, align, size) in params.items():
        lines.append(f".param {_layout(type_, align, size)}{name}{_shape(type_, size)};")
    for name, table in source.get("tables", {}).items():
        lines.append(_table(name, table))
    others = {*symbols, *params, *kernel.params}
    spelled: dict[str, str] = {}
    for name in sorted(registers - others):
        type_ = kernel.registers.get(name)
        if not type_:
            raise PrintError(f"kernel {kernel.name}: register {name} has no type")
        legal = _legal(name)
        if spelled.setdefault(legal, name) != name or (legal != name and legal in others):
            raise PrintError(f"kernel {kernel.name}: registers {name} and "
                             f"{spelled[legal]} would both be written {legal}")
        lines.append(f".reg .{type_} {legal};")
    return lines


def operand_text(op: tuple) -> str:
    """A parsed PTX operand (`gpudiv.lang.ptx.forms`) as PTX text."""
    tag = op[0]
    if tag in ("r", "i"):
        return op[1]
    if tag == "n":
        return op[2] if len(op) > 2 else str(op[1])
    if tag == "s":
        return f"{operand_text(op[1])}+{op[2]}"  # ptxas wants `[%r1+-4]`, not `[%r1-4]`
    if tag == "v":
        return "{" + ", ".join(operand_text(o) for o in op[1]) + "}"
    if tag == "a":
        return "[" + ", ".join(operand_text(o) for o in op[1]) + "]"
    if tag == "p":
        return "(" + ", ".join(operand_text(o) for o in op[1]) + ")"
    if tag == "|":
        return f"{operand_text(op[1])}|{operand_text(op[2])}"
    if tag == "!":
        return "!" + operand_text(op[1])
    raise PrintError(f"unknown operand form {op!r}")


def instruction_text(pi: PInstr) -> str:
    """A parsed PTX instruction as one line of PTX."""
    guard = f"@{'!' if pi.negated else ''}{pi.guard} " if pi.guard else ""
    operands = ", ".join(operand_text(o) for o in pi.operands)
    return f"{guard}{pi.opcode}{' ' + operands if operands else ''};"


def operand_names(op: tuple) -> list[str]:
    """The `%`-names and identifiers an operand mentions."""
    tag = op[0]
    if tag in ("r", "i"):
        return [op[1]]
    if tag in ("s", "!"):
        return operand_names(op[1])
    if tag in ("v", "a", "p"):
        return [n for o in op[1] for n in operand_names(o)]
    if tag == "|":
        return operand_names(op[1]) + operand_names(op[2])
    return []


class _Body:
    """Writes the body of one kernel and notes the registers it mentions."""

    def __init__(self, kernel: ir.Kernel, source: dict, files: dict[str, int]):
        self.kernel = kernel
        self.source = source
        self.files = files
        self.lines: list[str] = []
        self.registers: set[str] = set()
        self.origin: tuple | None = None
        self.file_index = 1
        # variables of callees written inline (their `.local` depots): declared in the kernel
        self.callee_symbols: dict[str, tuple] = {}
        # `.param` variables of the kernel's body (call sequences): read and written by
        # `ld.param`/`st.param` when the call is written inline
        self.param_slots = set(source["param_decls"])
        self.registerized: set[str] = set()  # those written as registers (see below)

    def unchanged_groups(self) -> set[int]:
        """Groups whose instructions still have the forms they were read with."""
        current: dict[int, list[tuple]] = {}
        for instr in self.kernel.instructions():
            if instr.group is not None:
                current.setdefault(instr.group, []).append(instr.form())
        recorded = self.source["group_forms"]
        return {g for g, forms in current.items() if tuple(forms) == recorded.get(g)}

    def write(self) -> None:
        kernel = self.kernel
        keep = self.unchanged_groups()
        forms: dict[int, PInstr] = self.source["forms"]
        inlined = self.source["inlined"]
        layout = [(block, instr) for block in kernel.blocks for instr in block.instructions]
        expanded = self.expanded_positions(layout, keep)
        from_ir = self.registerize_slots(layout, expanded)
        rewritten = [i for i in kernel.instructions() if i.group not in keep]
        labels = set(self.source["labels"]) | {i.target for i in rewritten if i.target}
        labels |= {layout[p][1].target for p in expanded if layout[p][1].target}
        labels |= marked_labels(kernel)
        written: set[object] = set()
        position = 0
        for block in kernel.blocks:
            if block.label in labels:
                self.lines.append(f"{_label(block.label)}:")
            for instr in block.instructions:
                here, position = position, position + 1
                group = instr.group
                if here in expanded:
                    self.write_inline(instr, group in keep, written)
                    continue
                if group in keep and here not in from_ir and (group in forms or group in inlined):
                    # an inlined body is written as the call that inlined it
                    pi, origin = ((forms[group], instr.attrs.get("origin")) if group in forms
                                  else inlined[group])
                    if id(pi) in written:
                        continue
                    written.add(id(pi))
                    self.loc(origin)
                    self.mention_source(pi)
                    self.lines.append(f"\t{instruction_text(pi)}"
                                      f"{mark_comment(instr, '//', _label)}")
                    continue
                self.loc(instr.attrs.get("origin"))
                self.lines.append(f"\t{self.rewritten(instr)}"
                                  f"{mark_comment(instr, '//', _label)}")

    def expanded_positions(self, layout: list[tuple[ir.Block, ir.Instruction]],
                           keep: set[int]) -> set[int]:
        """Positions (in `layout`) of the instructions of the inlined calls that cannot be
        written back as their `call`: a pass changed, added or removed code between the
        call's first and last instruction, or a branch from outside enters it. Each such
        call is written inline (`write_inline`)."""
        inlined = self.source["inlined"]
        if not inlined:
            return set()
        call_group = {id(pi): g for g, pi in self.source["forms"].items()}
        calls = {call_group[id(pi)] for pi, _ in inlined.values() if id(pi) in call_group}
        regions: dict[int, list[int]] = {}
        owner: list[int | None] = []
        for position, (_, instr) in enumerate(layout):
            group = instr.group
            key = None
            if group in inlined:
                key = call_group.get(id(inlined[group][0]), -1 - group)
            elif group in calls:
                key = group
            owner.append(key)
            if key is not None:
                regions.setdefault(key, []).append(position)
        written_inline: set[int] = set()  # the keys of the calls written inline
        for key, positions in regions.items():
            first, last = positions[0], positions[-1]
            span = range(first, last + 1)
            pristine = all(owner[p] == key and layout[p][1].group in keep for p in span)
            if pristine:
                entered = {layout[p][0].label for p in span if p > first
                           and layout[p][0].instructions[0] is layout[p][1]}
                pristine = not any(i.target in entered for p, (_, i) in enumerate(layout)
                                   if owner[p] != key)
            if not pristine:
                written_inline.add(key)
        # An instruction written from the IR outside those calls that names a register of
        # a call (`%r1@2`: code moved out of it) needs that call written inline as well.
        suffixes = {record[1]: owner_key for group, record in
                    self.source.get("inlined_forms", {}).items()
                    if (owner_key := call_group.get(id(inlined[group][0]))) is not None}
        for position, (_, instr) in enumerate(layout):
            if owner[position] in written_inline or instr.group in keep:
                continue
            names = [v.name for v in instr.reads if isinstance(v, ir.Var)]
            for name in (*names, instr.dest or ""):
                for suffix in _INLINED.findall(name):
                    if suffix in suffixes:
                        written_inline.add(suffixes[suffix])
        return {p for key in written_inline for p in range(regions[key][0], regions[key][-1] + 1)
                if owner[p] == key}

    def registerize_slots(self, layout: list[tuple[ir.Block, ir.Instruction]],
                          expanded: set[int]) -> set[int]:
        """The `.param` variables of the call sequences of calls written inline become
        registers (ptxas rejects, even crashes on, `st.param`/`ld.param` of a variable
        no `call` passes): they leave `param_slots`, and the positions of the kernel's
        instructions that write or read them (printed from the IR, as `mov`) are
        returned."""
        touched: set[str] = set()
        for position in expanded:
            instr = layout[position][1]
            if instr.attrs.get("function") is None:  # the call's own parameter passing
                names = [v.name for v in instr.args if isinstance(v, ir.Var)]
                touched.update(n.partition("+")[0] for n in (*names, instr.dest or ""))
        touched &= self.param_slots
        if not touched:
            return set()
        self.param_slots -= touched
        self.registerized = touched
        return {p for p, (_, instr) in enumerate(layout) if p not in expanded
                and any(n.partition("+")[0] in touched for n in
                        (*(v.name for v in instr.args if isinstance(v, ir.Var)),
                         instr.dest or ""))}

    def write_inline(self, instr: ir.Instruction, kept: bool, written: set[object]) -> None:
        """One instruction of a call written inline: an unchanged instruction of the
        callee as its PTX text with the callee's registers and labels renamed for this
        call site; the parameter passing (`.param` slots are registers here), `ret`,
        nested calls and what a pass changed from the IR."""
        group = instr.group
        record = self.source.get("inlined_forms", {}).get(group) if kept else None
        if record is not None and not _from_ir_when_inline(record[0]):
            if ("group", group) in written:
                return
            written.add(("group", group))
            pi = self.renamed(*record)
            self.loc(instr.attrs.get("origin"))
            self.mention_source(pi)
            spelled = {n: _legal(n) for o in pi.operands for n in operand_names(o) if "@" in n}
            guard = _legal(pi.guard) if pi.guard else None
            pi = PInstr(guard, pi.negated, pi.opcode, [_rename(o, spelled) for o in pi.operands],
                        pi.line, pi.column, pi.text)
            self.lines.append(f"\t{instruction_text(pi)}"
                              f"{mark_comment(instr, '//', _label)}")
            return
        self.loc(instr.attrs.get("origin"))
        self.lines.append(f"\t{self.rewritten(instr)}{mark_comment(instr, '//', _label)}")

    def renamed(self, pi: PInstr, suffix: str, function: str) -> PInstr:
        """A callee's instruction with its registers and labels named as in this kernel's
        IR (`%r1` of the call with suffix `@2` is `%r1@2`); `mention_source` and the
        declarations spell them as PTX."""
        registers, ranges, labels, symbols = self.source["bodies"][function]
        self.callee_symbols.update(symbols)
        names: dict[str, str] = {}
        for op in pi.operands:
            for name in operand_names(op):
                stem = name.rstrip("0123456789")
                if name in registers or (stem != name and stem in ranges):
                    names[name] = name + suffix
                elif name in labels:
                    names[name] = _label(name + suffix)
        guard = pi.guard
        if guard is not None and (guard in registers
                                  or guard.rstrip("0123456789") in ranges):
            guard = guard + suffix
        operands = [_rename(o, names) for o in pi.operands]
        return PInstr(guard, pi.negated, pi.opcode, operands, pi.line, pi.column, pi.text)

    def loc(self, origin) -> None:
        """A `.loc` line when the CUDA position (`origin`) of what follows changes."""
        if origin == self.origin:
            return
        if origin is None:
            self.lines.append(f"\t.loc\t{self.file_index} 0 0")
        else:
            path, line, column = origin  # type: ignore[misc]
            self.file_index = self.files.get(path, self.file_index)
            self.lines.append(f"\t.loc\t{self.file_index} {line} {column}")
        self.origin = origin  # type: ignore[assignment]

    def mention_source(self, pi: PInstr) -> None:
        names = [n for o in pi.operands for n in operand_names(o)]
        names += [pi.guard] if pi.guard else []
        self.registers.update(n for n in names if n in self.kernel.registers)

    def mention(self, value: ir.Operand) -> str:
        if isinstance(value, ir.Var):
            name = value.name
            if (name not in self.kernel.registers or "@" in _INLINED.sub("", name)
                    or name.startswith("%%") or self.slot(name) is not None):
                raise PrintError(f"kernel {self.kernel.name}: {name} is not a "
                                 "declared PTX register")
            self.registers.add(name)
            return _legal(name)
        return str(value)

    def slot(self, name: str) -> str | None:
        """`[param0+4]` for a `.param` variable of the kernel's body read or written as
        the IR slot `param0+4`; None for any other name."""
        base, _, offset = name.partition("+")
        if base not in self.param_slots:
            return None
        return f"[{base}+{offset or 0}]"

    def slot_copy(self, instr: ir.Instruction, guard: str) -> str | None:
        """A copy from or to a `.param` variable of the kernel's body (the parameter
        passing of a call written inline) as `ld.param`/`st.param`; None for others."""
        dest, source = instr.dest or "", instr.args[0]
        into = self.slot(dest)
        if into is not None:
            type_ = self.kernel.registers.get(dest, "")
            if not type_ or type_ == "pred":
                raise PrintError(f"kernel {self.kernel.name}: .param {dest} has no PTX type")
            return f"{guard}st.param.{_param_type(type_)} {into}, {self.mention(source)};"
        if isinstance(source, ir.Var) and self.slot(source.name) is not None:
            type_ = self.kernel.registers.get(source.name, "")
            if not type_ or type_ == "pred":
                raise PrintError(f"kernel {self.kernel.name}: .param {source.name} has no "
                                 "PTX type")
            return (f"{guard}ld.param.{_param_type(type_)} "
                    f"{self.mention(ir.Var(dest))}, {self.slot(source.name)};")
        return None

    def rewritten(self, instr: ir.Instruction) -> str:
        """An instruction without a PTX source form, written from its IR form."""
        kind = instr.kind
        guard = ""
        if instr.guard is not None:
            guard = f"@{'!' if instr.guard.negated else ''}{self.mention(instr.guard.operand)} "
        if kind == ir.JUMP:
            return f"{guard}bra {_label(instr.target or '')};"
        if kind == ir.BRANCH and instr.operator in ("bz", "bnz") and not guard:
            condition = self.mention(instr.args[0])
            negate = "!" if instr.operator == "bz" else ""
            return f"@{negate}{condition} bra {_label(instr.target or '')};"
        if kind == ir.STOP and not instr.args:
            return f"{guard}ret;"
        if kind == ir.ASSIGN and instr.operator == "copy" and instr.dest and len(instr.args) == 1:
            slot_copy = self.slot_copy(instr, guard)
            if slot_copy is not None:
                return slot_copy
            dest = self.mention(ir.Var(instr.dest))
            type_ = self.kernel.registers[instr.dest]
            source = instr.args[0]
            if isinstance(source, ir.Const) and type_[0] == "f":
                return f"{guard}mov.b{type_bytes(type_) * 8} {dest}, {source};"
            access = _param_access(instr, self.kernel.registers.get(
                source.name, "") if isinstance(source, ir.Var) else "", type_)
            if access is not None:
                return f"{guard}cvt.{_cvt_type(type_)}.{access} {dest}, {self.mention(source)};"
            return f"{guard}mov.{_mov_type(type_)} {dest}, {self.mention(source)};"
        if (kind == ir.ASSIGN and instr.dest and instr.operator
                and instr.operator == instr.attrs.get("opcode") and not instr.implicit):
            # a plain computation copied by a pass (code motion): `opcode dest, args;`
            args = ", ".join(self.mention(a) for a in instr.args)
            return f"{guard}{instr.operator} {self.mention(ir.Var(instr.dest))}, {args};"
        if (kind == ir.LOAD and instr.dest and instr.operator == instr.attrs.get("opcode")
                and len(instr.args) == 1 and isinstance(instr.args[0], ir.Var)
                and "symbol" not in instr.attrs and not instr.implicit):
            # a load copied by a pass (scalar replacement): `ld… dest, [base+disp];`
            disp = int(instr.attrs.get("disp", 0))
            address = self.mention(instr.args[0]) + (f"+{disp}" if disp else "")
            return f"{guard}{instr.operator} {self.mention(ir.Var(instr.dest))}, [{address}];"
        if kind == ir.FENCE and instr.operator and not instr.implicit:
            return f"{guard}{instr.operator};"
        raise PrintError(f"kernel {self.kernel.name}: cannot print rewritten instruction "
                         f"'{instr.text or kind}' ({kind} {instr.operator}) as PTX", instr.loc)


def _from_ir_when_inline(pi: PInstr) -> bool:
    """A callee instruction that an inline call writes from the IR: `ret` (a jump to the
    end of the call), a nested call and the `.param` accesses of the parameter passing
    (their variables are registers inline)."""
    root, *mods = pi.opcode.split(".")
    return root in ("ret", "call") or (root in ("ld", "st") and "param" in mods)


def _legal(name: str) -> str:
    """An IR register name as a PTX identifier: the `@N` of an inlined call's registers
    and the `+N` of `.param` slots become `$N` and `$oN`."""
    return name.replace("@", "$").replace("+", "$o")


def _rename(op: tuple, names: dict[str, str]) -> tuple:
    """An operand with the `%`-names and identifiers in `names` replaced."""
    tag = op[0]
    if tag in ("r", "i"):
        return (tag, names.get(op[1], op[1]), *op[2:])
    if tag in ("s", "!"):
        return (tag, _rename(op[1], names), *op[2:])
    if tag in ("v", "a", "p"):
        return (tag, [_rename(o, names) for o in op[1]])
    if tag == "|":
        return ("|", _rename(op[1], names), _rename(op[2], names))
    return op


def _param_access(instr: ir.Instruction, source: str, dest: str) -> str | None:
    """The integer type of the `.param` access (`ld.param.s8`) a copy came from, when it
    reads fewer bytes than one of its registers holds (`cvt` then truncates or extends
    as the access did); None when a `mov` copies the same bits."""
    opcode = str(instr.attrs.get("opcode", ""))
    if not opcode.startswith(("ld.param", "st.param")) or not source or not dest:
        return None
    access = opcode.rsplit(".", 1)[-1]
    size = type_bytes(access)
    if size == type_bytes(source) == type_bytes(dest) or access[0] not in "bus":
        return None
    if "pred" in (source, dest) or dest[0] == "f" or source[0] == "f":
        raise PrintError(f"cannot copy a {source} .param value into a {dest} register")
    return _cvt_type(access)


def _cvt_type(type_: str) -> str:
    """`cvt` takes u/s/f types: a bit type converts as unsigned."""
    return "u" + type_[1:] if type_[0] == "b" else type_


def _param_type(type_: str) -> str:
    """The type of an `ld.param`/`st.param` of a register of type `type_`."""
    return "b32" if type_ in ("f16x2", "bf16x2") else type_


def _mov_type(type_: str) -> str:
    """`mov` takes b/u/s/f types and pred; 8-bit registers move as 16-bit."""
    if type_ in ("pred", "f16x2", "bf16x2"):
        return "pred" if type_ == "pred" else "b32"
    if type_ in ("f16", "bf16"):
        return "b16"
    if type_[1:] == "8":
        return type_[0] + "16"
    return type_


def _label(name: str) -> str:
    """A label as PTX spells it (`.` and `@`, which IR-made labels may hold, become `$`)."""
    return name.replace(".", "$").replace("@", "$").replace("^", "$")
