"""PTX front end: Lark grammar `grammar/ptx.lark` → IR (`gpudiv.ir`), the same IR as μ-SIMD.

Reading happens in four steps, each in its own module:

1. **Parse** (`ptx_chunks`, `ptx_parser`) — the file is cut into top-level chunks (a
   function with its body, a DWARF section, a run of directives) by a brace-depth scan,
   and each chunk is parsed on its own, so a syntax error loses only its own chunk.
   Chunks are read by the fast path of `ptx_fast` (regexes built from the grammar's
   terminals); any chunk it does not recognise is parsed by the LALR parser
   (`ptx_syntax`, imported only then), whose callbacks run inside it (no parse tree is
   built). Both yield the same plain parsed forms (`ptx_forms`).
2. **Flatten** (`ptx_flatten`) — each function body becomes one list of instructions,
   labels and `.loc` marks; nested `{ }` scopes are resolved (a name that shadows an
   outer one or repeats a sibling scope's is renamed) and the declarations give the
   register, symbol and `.param` tables.
3. **Lower** (`ptx_lower`, `ptx_kernel`) — every `.entry` becomes an `ir.Kernel`: opcodes
   map to IR kinds through the tables of `ptx_opcodes`, calls to `.func` bodies in the
   file are inlined (unless read with `canonical=False`), `ret`/`exit` become `stop`, and
   instructions are split into basic blocks.
4. **Canonicalize** (`ptx_guards`) — guarded definitions become selects (unless read
   with `canonical=False`).

This module reads a file through these steps (`parse_ptx`).

The decisions (what is uniform, how calls and guards are modelled) are documented in
`docs/ptx.md`; docs/design.md "Semantics choices for PTX" is the specification.
"""

from __future__ import annotations

import re
import time

from gpudiv import ir
from gpudiv.ir.perf import paused_gc
from gpudiv.lang.ptx import fast as ptx_fast
from gpudiv.lang.ptx.chunks import _HEADER, _chunks
from gpudiv.lang.ptx.flatten import _Unit
from gpudiv.lang.ptx.forms import (
    PDecl,
    PFile,
    PFunction,
    PScope,
    number,
)

# Re-exported: gpudiv.interp.ptx reads _float_bits, tests the opcode tables from here.
from gpudiv.lang.ptx.forms import float_bits as _float_bits  # noqa: F401
from gpudiv.lang.ptx.guards import guard_to_select
from gpudiv.lang.ptx.kernel import (
    _launch_directives,
    _register_table,
    _source_record,
    _split_blocks,
    infer_generic_spaces,
)
from gpudiv.lang.ptx.lower import INDIRECT_CALL, CallSummary, _Frame, _KernelLowering
from gpudiv.lang.ptx.opcodes import (  # noqa: F401
    ASSIGN_ROOTS,
    ATOMIC_ROOTS,
    BARRIER_ROOTS,
    DROPPED_ROOTS,
    LOAD_ROOTS,
    OPAQUE_ROOTS,
    REDUCTION_ROOTS,
    STORE_ROOTS,
    TEXTURE_ROOTS,
    UNIFORM_COLLECTIVE_ROOTS,
    special_class,
)
from gpudiv.lang.regex_cache import RegexCache

# The fast path's regexes (re-exported for the tests).
fast_patterns = ptx_fast.patterns


class _Reader:
    """Everything about one file: parse all chunks, then lower every `.entry`."""

    def __init__(self, text: str, path: str, canonical: bool = True):
        self.text = text
        self.path = path
        self.canonical = canonical
        self.program = ir.Program(path, "ptx", [])
        self.functions: dict[str, PFunction] = {}
        self.order: list[PFunction] = []
        self.symbols: dict[str, str] = {}
        self.symbol_details: dict[str, tuple] = {}  # (space, type, align, size, init)
        self.files: dict[int, str] = {}

    def parse(self, fast: bool = True) -> None:
        self._parse_chunks(ptx_fast.patterns() if fast else None)
        for message, offset in _value_warnings(self.text):
            line = self.text.count("\n", 0, offset) + 1
            column = offset - self.text.rfind("\n", 0, offset)
            self.program.diagnostics.append(ir.Diagnostic("warning", message, self.path,
                                                          line, column))

    def _parse_chunks(self, fast: ptx_fast.Patterns | None) -> None:
        """Parse every chunk: the fast path reads what it knows by itself (Lark is then
        not even imported), Lark reads the rest."""
        text = self.text
        line = 1
        previous = 0
        line_start = 0  # offset after the last newline before `previous`
        names: dict[str, tuple] = {}
        for start, end in _chunks(text):
            newlines = text.count("\n", previous, start)
            if newlines:  # incremental, so that a file of one long line stays linear
                line += newlines
                line_start = text.rfind("\n", previous, start) + 1
            previous = start
            column = start - line_start + 1
            source = text[start:end]
            items = body_fast = None
            if fast is not None:
                reader = ptx_fast.BodyReader(fast, source, line, column, names)
                items = reader.chunk()
                # Lark reads the header and the fast path the body, unless the body is
                # what the fast path could not read.
                body_fast = None if reader.body_failed else fast
            if items is None:
                items = self._parse_with_lark(source, line, column, body_fast, names)
                if items is None:
                    continue
            for item in items:
                self.collect(item)
            self.record_chunk(source, items)

    def _parse_with_lark(self, source: str, line: int, column: int,
                         fast: ptx_fast.Patterns | None,
                         names: dict[str, tuple]) -> list | None:
        """The parsed forms of a chunk read by Lark (with `fast`: its function body by the
        fast path, its header by Lark), or None after recording Lark's syntax error."""
        from lark.exceptions import LarkError, UnexpectedInput

        from gpudiv.lang.ptx import syntax

        with syntax._PARSE_LOCK:
            builder = syntax._BUILDER
            builder.source = source
            builder.line0, builder.column0 = line, column
            try:
                return syntax._parse_chunk(syntax.parser(), fast, names)
            except UnexpectedInput as error:
                err_line, err_column = error.line, error.column
                if not isinstance(err_line, int) or err_line < 1:  # at the end of the chunk
                    err_line = source.count("\n") + 1
                    err_column = len(source) - source.rfind("\n")
                err_column += column - 1 if err_line == 1 else 0
                err_line += line - 1
                self.program.diagnostics.append(ir.Diagnostic(
                    "error", syntax._syntax_message(error), self.path, err_line, err_column))
            except LarkError as error:
                self.program.diagnostics.append(ir.Diagnostic(
                    "error", str(error).splitlines()[0], self.path, line, column))
        return None

    def record_chunk(self, text: str, items: list) -> None:
        """Keep a chunk for printing: an `.entry` with a body is printed from its IR
        kernel, everything else (directives, module variables, device functions) as
        read (`program.attrs["module"]`: ("text", text) and ("entry", name) items)."""
        module = self.program.attrs.setdefault("module", [])
        entry = next((i for i in items if isinstance(i, PFunction) and i.kind == "entry"
                      and i.body is not None), None)
        if entry is None:
            module.append(("text", text))
            return
        header = _HEADER.search(text)
        if header is not None and header.start() > 0:
            module.append(("text", text[:header.start()]))
        module.append(("entry", entry.name))

    def collect(self, item) -> None:
        if isinstance(item, PFunction):
            known = self.functions.get(item.name)
            if known is not None and known.body is not None and item.body is not None:
                self.program.diagnostics.append(ir.Diagnostic(
                    "error", f"{item.kind} '{item.name}' already defined at line {known.line}",
                    self.path, item.line, item.column))
                return
            if known is None or item.body is not None:
                self.functions[item.name] = item
            if item.body is not None:
                self.order.append(item)
                self.collect_files(item.body)
        elif isinstance(item, PDecl):
            for name, _ in item.names:
                self.symbols[name] = item.space
                if name in item.details:
                    self.symbol_details[name] = (item.space, *item.details[name])
        elif isinstance(item, PFile):
            self.files[item.index] = item.path

    def collect_files(self, scope: PScope) -> None:
        for stmt in scope.stmts:
            if isinstance(stmt, PFile):
                self.files[stmt.index] = stmt.path
            elif isinstance(stmt, PScope):
                self.collect_files(stmt)

    def lower(self, parse_ms: float) -> None:
        self.program.attrs["files"] = dict(self.files)
        unit = _Unit(self.path, self.functions, self.symbols, self.files)
        entries = [fn for fn in self.order if fn.kind == "entry"]
        for fn in entries:
            start = time.perf_counter()
            kernel = self.lower_kernel(unit, fn)
            if kernel is not None:
                self.program.kernels.append(kernel)
                self.program.parse_ms[fn.name] = (
                    parse_ms / len(entries) + (time.perf_counter() - start) * 1000)

    def lower_kernel(self, unit: _Unit, fn: PFunction, inline: bool | None = None,
                     summaries: dict[str, CallSummary | None] | None = None,
                     sites: dict[tuple[int, int], dict] | None = None,
                     targets: dict[str, CallSummary] | None = None
                     ) -> ir.Kernel | None:
        """One `.entry` as an IR kernel. Canonical (the default): calls inlined, guarded
        definitions as selects; else calls kept as calls (`inline`: unless told) and
        guarded definitions as guarded instructions. With `summaries`, calls to those
        functions are lowered as their summaries (`_KernelLowering.summary_call`), and
        with `targets` indirect calls as calls that may reach those functions
        (`_KernelLowering.indirect_call`, for the interpreter).
        A `.func` is lowered on its own (`_KernelLowering.lower_function`): its
        parameters become `call.input` definitions, not kernel parameters."""
        info = unit.info(fn.name)
        lowering = _KernelLowering(unit, info, self.program.diagnostics,
                                   self.canonical if inline is None else inline, summaries,
                                   sites)
        lowering.targets = targets or {}
        if fn.kind == "func":
            lowering.lower_function(_Frame(info, ret_label="$ret", stack=(fn.name,)))
        else:
            lowering.lower_body(_Frame(info))
        if lowering.failed:
            return None
        blocks = _split_blocks(lowering.items, lowering.referenced) + lowering.exit_blocks
        loc = ir.Loc(fn.line, fn.column)
        if not blocks or not any(b.instructions for b in blocks):
            blocks.append(ir.Block("$end", [ir.Instruction(ir.STOP, loc, text="")], loc,
                                   user_label=False))
        params = [] if fn.kind == "func" else fn.params
        kernel = ir.Kernel(fn.name, [p.name for p in params], blocks, loc)
        guard_temps = guard_to_select(kernel) if self.canonical else {}
        instructions = kernel.instructions()
        for position, instr in enumerate(instructions):  # a kernel read: ids in program order
            instr.id = position
        kernel.next_id = len(instructions)
        infer_generic_spaces(instructions)
        used = {a.name for i in instructions for a in i.reads if isinstance(a, ir.Special)}
        kernel.specials = {name: klass for name, klass in sorted(lowering.specials.items())
                           if name in used or name not in lowering.symbol_names}
        symbols = {name: detail for name, detail in self.symbol_details.items()}
        for body in lowering.bodies.values():
            symbols.update(body.symbol_details)
        kernel.attrs = {
            "reg_types": lowering.var_types,
            "params": tuple((p.name, p.type, p.size, p.align) for p in params),
            "symbols": symbols,
        }
        if fn.kind == "func":  # read by the facts of call summaries
            kernel.attrs["call_return"] = tuple(i.id for i in instructions
                                                if i.operator == "call.return")
        kernel.registers = _register_table(lowering, instructions, guard_temps)
        kernel.attrs["ptx_source"] = _source_record(fn, info, lowering, kernel)
        kernel.attrs.update(_launch_directives(fn.directives))
        if lowering.kept_calls:
            kernel.attrs["ptx_unlowered"] = Unlowered(unit, fn, self.symbol_details)
        if lowering.call_instances:
            kernel.attrs["call_instances"] = dict(lowering.call_instances)
        if lowering.not_inlined:  # the interpreter lowers it again with calls kept
            kernel.attrs["calls_not_inlined"] = tuple(sorted(lowering.not_inlined))
            kernel.attrs["ptx_text"] = self.text
        labels = {b.label for b in blocks}
        for instr in kernel.instructions():
            if instr.target is not None and instr.target not in labels:
                self.program.diagnostics.append(ir.Diagnostic(
                    "error", f"undefined label '{instr.target}' in kernel {fn.name}",
                    self.path, instr.loc.line, instr.loc.column))
                return None
        what = "function" if fn.kind == "func" else "kernel"
        if lowering.unknown:
            names = ", ".join(sorted(lowering.unknown))
            self.warn(f"{what} {fn.name}: unknown opcodes treated as opaque (results "
                      f"divergent): {names}", loc)
        bodiless = sorted(n for n in lowering.bodiless if not n.startswith(INDIRECT_CALL))
        pointers = sorted(n[len(INDIRECT_CALL):] for n in lowering.bodiless
                          if n.startswith(INDIRECT_CALL))
        if bodiless:
            self.warn(f"{what} {fn.name}: calls to functions without a body in this file are "
                      f"opaque (results divergent): {', '.join(bodiless)}", loc)
        if pointers:
            self.warn(f"{what} {fn.name}: calls through function pointers are opaque "
                      f"(results divergent): {', '.join(pointers)}", loc)
        for note in dict.fromkeys(lowering.notes):
            self.warn(f"{what} {fn.name}: {note}", loc)
        return kernel

    def warn(self, message: str, loc: ir.Loc) -> None:
        self.program.diagnostics.append(ir.Diagnostic("warning", message, self.path,
                                                      loc.line, loc.column))


class Unlowered:
    """What the `inline` pass needs to lower a kernel again with its calls inlined: the
    file's functions and the kernel's `.entry` (shared, never copied: they are not
    changed after reading)."""

    def __init__(self, unit: _Unit, fn: PFunction, symbol_details: dict[str, tuple]):
        self.unit = unit
        self.fn = fn
        self.symbol_details = symbol_details

    def __deepcopy__(self, memo: dict) -> Unlowered:
        return self


def inline_calls(kernel: ir.Kernel) -> ir.Kernel:
    """The kernel lowered again from its PTX with every call to a body of the file
    inlined (guarded definitions stay guarded instructions). A kernel without kept calls
    is returned as it is; one changed since it was read raises ValueError (the lowering
    starts from the PTX, so inlining must come first)."""
    unlowered = kernel.attrs.get("ptx_unlowered")
    if not isinstance(unlowered, Unlowered):
        return kernel
    source = kernel.attrs.get("ptx_source")
    groups: dict[int, list[tuple]] = {}
    for instr in kernel.instructions():
        groups.setdefault(instr.group if instr.group is not None else -1, []).append(
            instr.form())
    if not isinstance(source, dict) or {g: tuple(f) for g, f in groups.items()} != (
            source["group_forms"]):
        raise ValueError(f"kernel {kernel.name} was changed since it was read; inline "
                         "its calls first")
    reader = _Reader("", unlowered.unit.path, canonical=False)
    reader.symbol_details = unlowered.symbol_details
    inlined = reader.lower_kernel(unlowered.unit, unlowered.fn, inline=True)
    if inlined is None:
        raise ValueError(f"kernel {kernel.name}: its calls cannot be inlined: "
                         + "; ".join(d.message for d in reader.program.diagnostics))
    return inlined


# What every file is checked with (from the cache: compiling took 0.4 ms a process).
_PATTERNS = RegexCache("ptx-values", {
    "directive": r"\.(version|target|address_size)[ \t]+([^\n;/]*)",
    "long_digits": r"[0-9a-fA-F]{17}",
    "known_target": r"(?:sm|compute)_(\d+)[af]?",
}).compile_all()
_DIRECTIVE = _PATTERNS["directive"]
_LONG_DIGITS = _PATTERNS["long_digits"]
_KNOWN_TARGET = _PATTERNS["known_target"]
# Compiled by `re` when first needed (a file with a long literal; too deep nesting).
_WIDE_LITERAL = (r"//[^\n]*|/\*.*?(?:\*/|\Z)|\"[^\"\n]*\"?"
                 r"|(?<![\w.$%])-?(?:0[xX][0-9a-fA-F]{17,}|\d{20,})[uU]?\b")


def _value_warnings(text: str) -> list[tuple[str, int]]:
    """(warning, offset) for directives no PTX toolchain emits (`.version 99.0`,
    `.target sm_999`, `.address_size 128`) and integer literals beyond 64 bits."""
    found = []
    for match in _DIRECTIVE.finditer(text):
        line_start = text.rfind("\n", 0, match.start()) + 1
        if text[line_start:match.start()].strip():
            continue  # not a directive at the start of its line
        kind, value = match[1], match[2].strip()
        if kind == "version":
            major = value.split(".", 1)[0]
            if not major.isdigit() or not 1 <= int(major) <= 9:
                found.append((f".version {value}: not a PTX ISA version (1.0 to 9.x); "
                              "ignored", match.start(2)))
        elif kind == "address_size" and value not in ("32", "64"):
            found.append((f".address_size {value}: addresses are 32 or 64 bits; ignored",
                          match.start(2)))
        elif kind == "target":
            for name in (t.strip() for t in value.split(",")):
                known = _KNOWN_TARGET.fullmatch(name)
                if name.startswith(("sm_", "compute_")) and (
                        known is None or not 10 <= int(known[1]) < 200):
                    found.append((f".target {name}: not a GPU architecture (sm_10 to "
                                  "sm_1xx); ignored", match.start(2) + value.find(name)))
    if _LONG_DIGITS.search(text) is None:  # one quick scan: the usual case
        return found
    for match in re.finditer(_WIDE_LITERAL, text, re.S):
        token = match.group()
        if token[:1] in "/\"":
            continue
        value = number(token)
        if not -(1 << 63) <= value < 1 << 64:
            found.append((f"integer literal {token} does not fit in 64 bits; it is taken "
                          "modulo 2^64", match.start()))
    return found


_NESTING = r"//[^\n]*|/\*.*?(?:\*/|\Z)|\"[^\"\n]*\"?|[{}()\[\]\n]"


def _deepest_nesting(text: str) -> tuple[int, int, int]:
    """(depth, line, column) of the first place where brackets nest deepest."""
    depth = best = 0
    line, line_start, where = 1, 0, (1, 1)
    for match in re.finditer(_NESTING, text, re.S):
        token = match.group()
        if token == "\n" or len(token) > 1:
            newlines = token.count("\n")
            if newlines:
                line += newlines
                line_start = match.start() + token.rfind("\n") + 1
            continue
        if token in "{([":
            depth += 1
            if depth > best:
                best, where = depth, (line, match.start() - line_start + 1)
        else:
            depth = max(depth - 1, 0)
    return best, *where


def parse_ptx(text: str, path: str = "<string>", *, fast: bool = True,
              canonical: bool = True) -> ir.Program:
    """Parse PTX text into a Program (one kernel per `.entry`); errors are collected as
    diagnostics, never raised. `fast=False` reads function bodies with Lark alone instead
    of the fast path (`ptx_fast`); both give the same Program. `canonical=False` keeps
    guarded definitions as guarded instructions (see `ptx_guards`)."""
    return parse_ptx_timed(text, path, fast=fast, canonical=canonical)[0]


def parse_ptx_timed(text: str, path: str = "<string>", *, fast: bool = True,
                    canonical: bool = True) -> tuple[ir.Program, dict[str, float]]:
    """`parse_ptx` and the milliseconds of its two stages: `parse` (chunks to parsed
    forms) and `lower` (parsed forms to IR kernels)."""
    reader = _Reader(text, path, canonical)
    timings = {"parse": 0.0, "lower": 0.0}
    start = time.perf_counter()
    try:
        with paused_gc():
            reader.parse(fast)
            parsed = time.perf_counter()
            timings["parse"] = (parsed - start) * 1000
            reader.lower(timings["parse"])
            timings["lower"] = (time.perf_counter() - parsed) * 1000
    except RecursionError:
        depth, line, column = _deepest_nesting(text)
        reader.program.diagnostics.append(ir.Diagnostic(
            "error", f"input nested too deeply ({depth} levels of braces, brackets and "
            "parentheses here)", path, line, column))
        return reader.program, timings
    if "gpudiv:" in text:
        from gpudiv.lang.marks import read_marks

        lines = text.splitlines()
        for kernel in reader.program.kernels:
            read_marks(kernel, lines, path, reader.program.diagnostics)
    reader.program.diagnostics.sort(key=lambda d: (d.line, d.column))
    if not reader.program.kernels and not reader.program.diagnostics:
        reader.program.diagnostics.append(ir.Diagnostic(
            "warning", "no .entry kernel in this file", path, 1, 1))
    return reader.program, timings
