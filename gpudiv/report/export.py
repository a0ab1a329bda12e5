"""Fact export: the facts of kernels (and, on request, what the rules derive) for other tools.

`gpudiv facts FILE… -o DIR --format souffle|csv|json|lp [--derived ANALYSIS]` writes

- `souffle`: one `<relation>.facts` file per relation (tab-separated, no header) and a
  `schema.dl` with a typed `.decl` (`symbol`/`number`) and an `.input` line per relation,
  so that `souffle -F DIR schema.dl` loads them;
- `csv`: one `<relation>.csv` per relation with a header row;
- `json`: one `<relation>.jsonl` per relation, a JSON object per line keyed by column;
- `lp`: one `facts.lp` of ASP facts (the rules read it as is when no kernel column is
  added).

Which relations, their column names and types come from `rules/SCHEMA.md` (see its
section "Exported facts"): every input relation of `gpudiv.analyses.facts.RELATIONS`, and with
`--derived` every relation `#show`n by the analysis' rule files. Every declared relation
gets a file, empty or not. With more than one kernel in the export (or `keyed=True`), each
relation gets two leading columns, `file` and `kernel`. Symbols never contain a tab or a
line break in Soufflé files: a backslash, tab, newline and carriage return are written as
`\\\\`, `\\t`, `\\n` and `\\r`.
"""

from __future__ import annotations

import csv
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import clingo

from gpudiv import ir
from gpudiv.analyses import get_analysis
from gpudiv.analyses.driver import prepare
from gpudiv.analyses.facts import RELATIONS, Constant, kernel_facts, quote
from gpudiv.analyses.launch_shape import kernel_shape
from gpudiv.analyses.schema import Relation, documented_relations, shown_relations
from gpudiv.analyses.solve import shipped_rule, solve
from gpudiv.ir.cfg import CFGLimit
from gpudiv.lang.load import load
from gpudiv.report.corpus import collect_inputs

FORMATS = ("souffle", "csv", "json", "lp")
KEY_COLUMNS = ("file", "kernel")


class ExportError(Exception):
    """An export that cannot be done; the message is one line."""


@dataclass
class Table:
    """One exported relation: its columns, their types and its rows (`Value`s)."""

    name: str
    columns: tuple[str, ...]
    types: list[str]
    rows: list[tuple[Value, ...]] = field(default_factory=list)


@dataclass
class ExportResult:
    """What an export wrote."""

    directory: Path
    format: str
    keyed: bool
    kernels: list[tuple[str, str]]
    written: list[Path]
    rows: dict[str, int]
    diagnostics: list[ir.Diagnostic]
    timing_ms: dict[str, float]


def analysis_rule_files(analysis: str) -> list[str]:
    """The names of the shipped rule files an analysis solves with."""
    return [Path(path).name for path in get_analysis(analysis).rule_files]


def derived_relations(analysis: str) -> list[tuple[str, int]]:
    """`(name, arity)` of every relation the analysis' rule files show, in file order."""
    shown: dict[tuple[str, int], None] = {}
    for name in analysis_rule_files(analysis):
        for signature in shown_relations(Path(shipped_rule(name)).read_text(encoding="utf-8")):
            shown.setdefault(signature)
    return list(shown)


def _declare(name: str, arity: int, keyed: bool,
             documented: dict[str, Relation]) -> Table:
    """An empty table with columns and types from SCHEMA.md (a1… and symbols if absent)."""
    relation = documented.get(name)
    if relation is not None and relation.arity == arity:
        columns, types = relation.columns, list(relation.column_types())
    else:
        columns, types = tuple(f"a{i + 1}" for i in range(arity)), ["symbol"] * arity
    seen: dict[str, int] = {}
    unique = []
    for column in columns:
        seen[column] = seen.get(column, 0) + 1
        unique.append(column if seen[column] == 1 else f"{column}{seen[column]}")
    if keyed:
        return Table(name, (*KEY_COLUMNS, *unique), ["symbol", "symbol", *types])
    return Table(name, tuple(unique), types)


# A value of a row: an integer, a string (quoted in ASP) or a bare constant.
Value = int | str

_ATOM = re.compile(r"^(-?[a-z_][A-Za-z0-9_']*)(?:\((.*)\))?$", re.DOTALL)
_ARGUMENT = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|(-?\d+)|([a-z_][A-Za-z0-9_\']*))\s*(,|$)',
                       re.DOTALL)
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_UNESCAPED = {"n": "\n", "t": "\t"}


def _unescape(text: str) -> str:
    return _ESCAPE.sub(lambda m: _UNESCAPED.get(m[1], m[1]), text) if "\\" in text else text


def parse_atom(text: str) -> tuple[str, tuple[Value, ...]]:
    """`name(args)` as clingo prints it → name and values (nested terms: via clingo)."""
    match = _ATOM.match(text)
    if match is None:
        return _parse_with_clingo(text)
    arguments = match[2]
    if arguments is None:
        return match[1], ()
    values: list[Value] = []
    position = 0
    while position < len(arguments):
        part = _ARGUMENT.match(arguments, position)
        if part is None or part.end() == position:
            return _parse_with_clingo(text)
        string, number, constant, _ = part.groups()
        if string is not None:
            values.append(_unescape(string))
        elif number is not None:
            values.append(int(number))
        else:
            values.append(Constant(constant))
        position = part.end()
    return match[1], tuple(values)


def _parse_with_clingo(text: str) -> tuple[str, tuple[Value, ...]]:
    symbol = clingo.parse_term(text)
    return symbol.name, tuple(_symbol_value(a) for a in symbol.arguments)


def _symbol_value(symbol: clingo.Symbol) -> Value:
    if symbol.type == clingo.SymbolType.Number:
        return symbol.number
    if symbol.type == clingo.SymbolType.String:
        return symbol.string
    return Constant(str(symbol))


@dataclass
class Collected:
    """The tables of an export before they are written."""

    tables: dict[str, Table]
    keyed: bool
    kernels: list[tuple[str, str]]
    diagnostics: list[ir.Diagnostic]
    timing_ms: dict[str, float]


def collect(paths: list[str | Path], derived: str | None = None,
            keyed: bool | None = None) -> Collected:
    """Load the files (folders: every readable file below them) and build every table."""
    timing = {"load": 0.0, "facts": 0.0, "solve": 0.0}
    start = time.perf_counter()
    programs = [load(p) for p in collect_inputs(paths)]
    timing["load"] = (time.perf_counter() - start) * 1000
    diagnostics = [d for program in programs for d in program.diagnostics]
    kernels = [(program.path, kernel) for program in programs for kernel in program.kernels]
    keyed = len(kernels) > 1 if keyed is None else keyed
    documented = documented_relations()
    signatures = list(RELATIONS.items())
    rule_files = []
    if derived is not None:
        signatures += derived_relations(derived)
        rule_files = [shipped_rule(f) for f in analysis_rule_files(derived)]
    tables: dict[str, Table] = {}
    for name, arity in signatures:
        tables.setdefault(name, _declare(name, arity, keyed, documented))
    for path, kernel in kernels:
        start = time.perf_counter()
        try:
            ssa, _ = prepare(kernel)  # stack slots promoted, as the analyses see the kernel
        except CFGLimit as error:
            raise ExportError(f"{path}:{kernel.loc.line}:{kernel.loc.column}: error: "
                              f"{error}") from None
        shape, _ = kernel_shape(kernel, None)
        facts = kernel_facts(ssa, shape=shape)
        rows = [(fact[0], fact[1:]) for fact in facts]
        timing["facts"] += (time.perf_counter() - start) * 1000
        if rule_files:
            start = time.perf_counter()
            solved = solve(rule_files, facts)
            rows += [parse_atom(str(s)) for s in sorted(solved.symbols)]
            timing["solve"] += (time.perf_counter() - start) * 1000
        start = time.perf_counter()
        prefix = (path, kernel.name) if keyed else ()
        for name, values in rows:
            table = tables.get(name)
            if table is None:
                table = tables[name] = _declare(name, len(values), keyed, documented)
            table.rows.append((*prefix, *values))
        timing["facts"] += (time.perf_counter() - start) * 1000
    for table in tables.values():
        for index, kind in enumerate(table.types):
            if kind == "number" and not all(type(row[index]) is int for row in table.rows):
                table.types[index] = "symbol"
    return Collected(tables, keyed, [(p, k.name) for p, k in kernels], diagnostics, timing)


def plain(symbol: clingo.Symbol) -> int | str:
    """A clingo symbol as a Python value: numbers as int, strings unquoted, other terms as
    their text."""
    value = _symbol_value(symbol)
    return str(value) if isinstance(value, Constant) else value


def souffle_escape(text: str) -> str:
    """A symbol for a tab-separated Soufflé fact file (no tab or line break inside)."""
    return (text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")
            .replace("\r", "\\r"))


def _lp_term(value: Value) -> str:
    if isinstance(value, Constant) or type(value) is int:
        return str(value)
    return quote(value).replace("\n", "\\n")


def _write_souffle(tables: dict[str, Table], directory: Path, header: str) -> list[Path]:
    written = []
    decls = [f"// {header}", "// Load with: souffle -F DIR schema.dl (see rules/SCHEMA.md)", ""]
    for table in tables.values():
        columns = ", ".join(f"{c}:{t}" for c, t in zip(table.columns, table.types, strict=True))
        decls += [f".decl {table.name}({columns})", f".input {table.name}"]
        path = directory / f"{table.name}.facts"
        with path.open("w", encoding="utf-8", newline="\n") as out:
            for row in table.rows:
                out.write("\t".join(souffle_escape(str(v)) if t == "symbol" else str(v)
                                    for v, t in zip(row, table.types, strict=True)) + "\n")
        written.append(path)
    schema = directory / "schema.dl"
    schema.write_text("\n".join(decls) + "\n", encoding="utf-8")
    return [schema, *written]


def _write_csv(tables: dict[str, Table], directory: Path) -> list[Path]:
    written = []
    for table in tables.values():
        path = directory / f"{table.name}.csv"
        with path.open("w", encoding="utf-8", newline="") as out:
            writer = csv.writer(out)
            writer.writerow(table.columns)
            for row in table.rows:
                writer.writerow(row)
        written.append(path)
    return written


def _write_json(tables: dict[str, Table], directory: Path) -> list[Path]:
    written = []
    for table in tables.values():
        path = directory / f"{table.name}.jsonl"
        with path.open("w", encoding="utf-8", newline="\n") as out:
            for row in table.rows:
                values = [v if t == "number" else str(v)
                          for v, t in zip(row, table.types, strict=True)]
                out.write(json.dumps(dict(zip(table.columns, values, strict=True)),
                                     ensure_ascii=False) + "\n")
        written.append(path)
    return written


def _write_lp(tables: dict[str, Table], directory: Path, header: str) -> list[Path]:
    path = directory / "facts.lp"
    with path.open("w", encoding="utf-8", newline="\n") as out:
        out.write(f"% {header}\n")
        for table in tables.values():
            for row in table.rows:
                out.write(f"{table.name}({','.join(_lp_term(v) for v in row)}).\n")
    return [path]


def prepare_directory(directory: str | Path) -> Path:
    """Create the output directory (and parents); ExportError if it cannot be written."""
    directory = Path(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / ".gpudiv-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as error:
        reason = error.strerror or str(error)
        raise ExportError(f"{directory}: error: cannot write the output directory: "
                          f"{reason}") from None
    if not os.access(directory, os.W_OK):
        raise ExportError(f"{directory}: error: cannot write the output directory")
    return directory


def export(paths: list[str | Path], directory: str | Path, fmt: str,
           derived: str | None = None, keyed: bool | None = None) -> ExportResult:
    """Export the facts of every kernel of the files (and folders) to `directory` in
    format `fmt`; see the module doc."""
    if fmt not in FORMATS:
        raise ExportError(f"error: unknown export format '{fmt}' (expected one of "
                          f"{', '.join(FORMATS)})")
    inputs = collect_inputs(paths)
    out = prepare_directory(directory)
    collected = collect(inputs, derived, keyed)
    tables, timing = collected.tables, collected.timing_ms
    count = len(collected.kernels)
    header = (f"gpudiv facts of {count} kernel{'' if count == 1 else 's'}"
              + (f", derived by the {derived} analysis" if derived else ""))
    start = time.perf_counter()
    try:
        if fmt == "souffle":
            written = _write_souffle(tables, out, header)
        elif fmt == "csv":
            written = _write_csv(tables, out)
        elif fmt == "json":
            written = _write_json(tables, out)
        else:
            written = _write_lp(tables, out, header)
    except OSError as error:
        raise ExportError(f"{out}: error: cannot write: {error.strerror or error}") from None
    timing["write"] = (time.perf_counter() - start) * 1000
    return ExportResult(out, fmt, collected.keyed, collected.kernels, written,
                        {t.name: len(t.rows) for t in tables.values()},
                        collected.diagnostics, timing)
