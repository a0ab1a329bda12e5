"""Flattening: one PTX function body becomes one list of instructions, labels and `.loc`
marks. Nested `{ }` scopes are resolved (a name that shadows an outer one or repeats a
sibling scope's is renamed `NAME$sN`) and the declarations give the register, symbol
and `.param` tables (`_FuncInfo`); `_Unit` is what a file offers every kernel."""

from __future__ import annotations

from gpudiv.ir.record import Record
from gpudiv.lang.ptx.forms import (
    PDecl,
    PFunction,
    PInstr,
    PLabel,
    PLoc,
    PScope,
    PTable,
)

# ---------------------------------------------------------------------------------------
# Flattening: one function body → a list of instructions, labels, .loc marks.
# ---------------------------------------------------------------------------------------

class _FuncInfo(Record):
    """One function's flattened body and what it declares: registers, local symbols,
    labels, branch-target tables, errors and the types the interpreter reads."""

    fn: PFunction
    stmts: list
    registers: set[str]
    register_ranges: set[str]
    symbols: dict[str, str]  # local variable → space
    labels: dict[str, PLabel]
    tables: dict[str, list[str]]  # branch-target tables
    # `name: .branchtargets …` / `.calltargets …` / `.callprototype …` by name, as read
    table_forms: dict[str, PTable]
    errors: list[tuple[str, int, int]]
    # For the interpreter: declared register types (plain names and `%r<N>` stems) and
    # the layout of variables declared in the body (type, alignment, size, initializer).
    reg_types: dict[str, str]
    range_types: dict[str, str]
    symbol_details: dict[str, tuple]
    # `.param` variables declared in the body (call sequences): name → (type, align, size)
    param_decls: dict[str, tuple]

    def __init__(self, fn: PFunction, stmts: list | None = None, registers: set[str] | None = None,
                       register_ranges: set[str] | None = None,
                       symbols: dict[str, str] | None = None,
                       labels: dict[str, PLabel] | None = None,
                       tables: dict[str, list[str]] | None = None,
                       table_forms: dict[str, PTable] | None = None,
                       errors: list[tuple[str, int, int]] | None = None,
                       reg_types: dict[str, str] | None = None,
                       range_types: dict[str, str] | None = None,
                       symbol_details: dict[str, tuple] | None = None,
                       param_decls: dict[str, tuple] | None = None) -> None:
        self.fn = fn
        self.stmts = [] if stmts is None else stmts
        self.registers = set() if registers is None else registers
        self.register_ranges = set() if register_ranges is None else register_ranges
        self.symbols = {} if symbols is None else symbols
        self.labels = {} if labels is None else labels
        self.tables = {} if tables is None else tables
        self.table_forms = {} if table_forms is None else table_forms
        self.errors = [] if errors is None else errors
        self.reg_types = {} if reg_types is None else reg_types
        self.range_types = {} if range_types is None else range_types
        self.symbol_details = {} if symbol_details is None else symbol_details
        self.param_decls = {} if param_decls is None else param_decls

    def is_register(self, name: str) -> bool:
        if name in self.registers:
            return True
        stem = name.rstrip("0123456789")
        return stem != name and stem in self.register_ranges

    def reg_type(self, name: str) -> str | None:
        if name in self.reg_types:
            return self.reg_types[name]
        return self.range_types.get(name.rstrip("0123456789"))


def _rename_operand(op: tuple, names: dict[str, str]) -> tuple:
    tag = op[0]
    if tag in ("r", "i"):
        new = names.get(op[1])
        return (tag, new) if new else op
    if tag in ("v", "a", "p"):
        return (tag, [_rename_operand(o, names) for o in op[1]])
    if tag == "s":
        return ("s", _rename_operand(op[1], names), op[2])
    if tag == "|":
        return ("|", _rename_operand(op[1], names), _rename_operand(op[2], names))
    if tag == "!":
        return ("!", _rename_operand(op[1], names))
    return op


def _flatten(fn: PFunction) -> _FuncInfo:
    info = _FuncInfo(fn)
    for param in (*fn.params, *fn.rets):
        if param.space == ".reg":
            info.registers.add(param.name)
            info.reg_types[param.name] = param.type
    renames: dict[str, str] = {}
    counter = 0
    # Every name declared so far: a declaration in a sibling scope (`{ .param .b8
    # retval0[4]; … }` then `{ .param .b32 retval0; … }`, as nvcc -G writes call
    # sequences) is another variable, possibly of another type, so it gets its own name.
    declared = {p.name for p in (*fn.params, *fn.rets)}

    def declare(decl: PDecl, visible: set[str], ranges: set[str], undo: list) -> None:
        nonlocal counter
        for name, shape in decl.names:
            final = name
            stem = name.rstrip("0123456789")
            shadows = name in visible or (stem != name and stem in ranges) or name in declared
            is_range = bool(shape) and shape.startswith("<")
            declared.add(name)
            if shadows and not is_range:
                counter += 1
                final = f"{name}$s{counter}"
                while final in declared:
                    counter += 1
                    final = f"{name}$s{counter}"
                declared.add(final)
                undo.append((name, renames.get(name)))
                renames[name] = final
            detail = decl.details.get(name)
            if decl.space == "reg":
                type_ = detail[0] if detail else ""
                if shape and shape.startswith("<"):
                    info.register_ranges.add(name)
                    info.range_types[name] = type_
                    ranges.add(name)
                else:
                    info.registers.add(final)
                    info.reg_types[final] = type_
                    visible.add(name)
                continue
            visible.add(name)
            if decl.space == "param" and detail is not None:
                info.param_decls[final] = detail[:3]
            if decl.space != "param":  # .param variables are value slots (see read_slot)
                info.symbols[final] = decl.space
                if detail is not None:
                    info.symbol_details[final] = (decl.space, *detail)

    def walk(scope: PScope, outer: set[str], outer_ranges: set[str]) -> None:
        visible = set(outer)
        ranges = set(outer_ranges)
        undo: list = []
        pending_label: PLabel | None = None
        for stmt in scope.stmts:
            if isinstance(stmt, PInstr):
                if renames:
                    stmt.operands = [_rename_operand(o, renames) for o in stmt.operands]
                    if stmt.guard in renames:
                        stmt.guard = renames[stmt.guard]
                info.stmts.append(stmt)
            elif isinstance(stmt, PLabel):
                if stmt.name in info.labels:
                    first = info.labels[stmt.name]
                    info.errors.append((f"label '{stmt.name}' already defined at line "
                                        f"{first.line}", stmt.line, stmt.column))
                    continue
                info.labels[stmt.name] = stmt
                info.stmts.append(stmt)
                pending_label = stmt
                continue
            elif isinstance(stmt, PTable):
                if pending_label is not None and info.stmts and info.stmts[-1] is pending_label:
                    # `name: .branchtargets …` names a table, not a place in the code.
                    info.stmts.pop()
                    del info.labels[pending_label.name]
                    info.tables[pending_label.name] = stmt.names
                    info.table_forms[pending_label.name] = stmt
            elif isinstance(stmt, PDecl):
                declare(stmt, visible, ranges, undo)
            elif isinstance(stmt, PScope):
                walk(stmt, visible, ranges)
            elif isinstance(stmt, PLoc):
                info.stmts.append(stmt)
            pending_label = None
        for name, previous in reversed(undo):
            if previous is None:
                renames.pop(name, None)
            else:
                renames[name] = previous

    if fn.body is not None:
        walk(fn.body, {p.name for p in (*fn.params, *fn.rets)}, set())
    return info


class _Unit(Record):
    """What a file offers to every kernel: functions, module symbols, the .file table."""

    path: str
    functions: dict[str, PFunction]
    symbols: dict[str, str]
    files: dict[int, str]
    infos: dict[str, _FuncInfo]

    def __init__(self, path: str, functions: dict[str, PFunction], symbols: dict[str, str],
                       files: dict[int, str], infos: dict[str, _FuncInfo] | None = None) -> None:
        self.path = path
        self.functions = functions
        self.symbols = symbols
        self.files = files
        self.infos = {} if infos is None else infos

    def info(self, name: str) -> _FuncInfo:
        if name not in self.infos:
            self.infos[name] = _flatten(self.functions[name])
        return self.infos[name]

    def calls(self, name: str) -> tuple[set[str], bool]:
        """The functions with a body that `name` calls directly, and whether it calls
        through a function pointer."""
        found: set[str] = set()
        indirect = False
        for stmt in self.info(name).stmts:
            if not isinstance(stmt, PInstr) or not stmt.opcode.startswith("call"):
                continue
            ops = stmt.operands
            position = 1 if ops and ops[0][0] == "p" else 0
            if position < len(ops) and ops[position][0] == "i":
                callee = self.functions.get(ops[position][1])
                if callee is not None and callee.body is not None:
                    found.add(callee.name)
            elif position < len(ops):
                indirect = True
        return found, indirect
