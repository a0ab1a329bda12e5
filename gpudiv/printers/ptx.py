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
from gpudiv.frontend.marks import mark_comment, marked_labels
from gpudiv.frontend.ptx_forms import PInstr, PParam, type_bytes
from gpudiv.printers import PrintError

# DWARF sections and the parts of `.loc` that point into them.
_SECTION = re.compile(r"^[ \t]*\.section[^\n{]*\{[^}]*\}[ \t]*(?://[^\n]*)?\n?", re.M)
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
    lines += [f"\t{d}" for d in _declarations(kernel, source, body.registers)]
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


def _declarations(kernel: ir.Kernel, source: dict, registers: set[str]) -> list[str]:
    lines = []
    for name, (space, type_, align, size, init) in source["symbols"].items():
        shape = _shape(type_, size)
        extern = ".extern " if size == 0 else ""
        lines.append(f"{extern}.{space} {_layout(type_, align, size)}{name}{shape}"
                     f"{_init(init, bool(shape))};")
    for name, (type_, align, size) in source["param_decls"].items():
        lines.append(f".param {_layout(type_, align, size)}{name}{_shape(type_, size)};")
    others = {*source["symbols"], *source["param_decls"], *kernel.params}
    for name in sorted(registers - others):
        type_ = kernel.registers.get(name)
        if not type_:
            raise PrintError(f"kernel {kernel.name}: register {name} has no type")
        lines.append(f".reg .{type_} {name};")
    return lines


def operand_text(op: tuple) -> str:
    """A parsed PTX operand (`gpudiv.frontend.ptx_forms`) as PTX text."""
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


def _names(op: tuple) -> list[str]:
    """The `%`-names and identifiers an operand mentions."""
    tag = op[0]
    if tag in ("r", "i"):
        return [op[1]]
    if tag in ("s", "!"):
        return _names(op[1])
    if tag in ("v", "a", "p"):
        return [n for o in op[1] for n in _names(o)]
    if tag == "|":
        return _names(op[1]) + _names(op[2])
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
        rewritten = [i for i in kernel.instructions() if i.group not in keep]
        labels = set(self.source["labels"]) | {i.target for i in rewritten if i.target}
        labels |= marked_labels(kernel)
        written: set[int] = set()
        for block in kernel.blocks:
            if block.label in labels:
                self.lines.append(f"{_label(block.label)}:")
            for instr in block.instructions:
                group = instr.group
                if group in keep and (group in forms or group in inlined):
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
                if group in inlined:
                    raise PrintError(f"kernel {kernel.name}: an instruction inlined from a "
                                     f"call was rewritten ('{instr.text}'); it cannot be "
                                     "printed as PTX", instr.loc)
                self.loc(instr.attrs.get("origin"))
                self.lines.append(f"\t{self.rewritten(instr)}"
                                  f"{mark_comment(instr, '//', _label)}")

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
        names = [n for o in pi.operands for n in _names(o)] + ([pi.guard] if pi.guard else [])
        self.registers.update(n for n in names if n in self.kernel.registers)

    def mention(self, value: ir.Operand) -> str:
        if isinstance(value, ir.Var):
            if value.name not in self.kernel.registers or "@" in value.name:
                raise PrintError(f"kernel {self.kernel.name}: {value.name} is not a "
                                 "declared PTX register")
            self.registers.add(value.name)
        return str(value)

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
            dest = self.mention(ir.Var(instr.dest))
            type_ = self.kernel.registers[instr.dest]
            return f"{guard}mov.{_mov_type(type_)} {dest}, {self.mention(instr.args[0])};"
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


def _mov_type(type_: str) -> str:
    """`mov` takes b/u/s/f types and pred; 8-bit registers move as 16-bit."""
    if type_ in ("pred", "f16x2", "bf16x2"):
        return "pred" if type_ == "pred" else "b32"
    if type_[1:] == "8":
        return type_[0] + "16"
    return type_


def _label(name: str) -> str:
    """A label as PTX spells it (`.` and `@`, which IR-made labels may hold, become `$`)."""
    return name.replace(".", "$").replace("@", "$").replace("^", "$")
