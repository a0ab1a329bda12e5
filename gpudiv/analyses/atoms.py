"""The atoms of a clingo model as Python values: (predicate name, argument values), in bulk.

Printing every atom and parsing the text back cost about 6 µs an atom, a sixth of the
analysis of a PTX file (issue 16, item 3). clingo's symbols are interned 64-bit ids, and
the atoms of a kernel share a few thousand arguments (its names and small numbers): an
`AtomReader` asks clingo for each atom's name and argument ids only, and turns each
distinct argument id into a Python value once. It talks to clingo's C library through the
cffi module of clingo's Python package (the `Symbol` accessors cost a Python call and a new
`Symbol` object per argument); without that module it takes the accessors, with the same
results.

An atom is *plain* when it is a positive function symbol and every argument is a string,
an integer or a constant (a name without arguments); the reader gives None for any other,
and callers decide (`gpudiv.analyses.solve` prints it).
"""

from __future__ import annotations

from collections.abc import Sequence

import clingo

try:  # clingo's own cffi bindings (clingo ≥ 5.5); absent: the public accessors
    from clingo._internal import _ffi, _lib
except ImportError:  # pragma: no cover - every supported clingo has them
    _ffi = _lib = None

Value = str | int
# A plain atom as the reader first sees it: its name and its arguments' clingo ids.
RawAtom = tuple[str, tuple[int, ...]]
Atom = tuple[str, tuple[Value, ...]]


class NotPlain:
    """The value of an argument that is neither a string, an integer nor a constant."""


NOT_PLAIN = NotPlain()


def plain_value(symbol: clingo.Symbol) -> Value | NotPlain:
    """A string, integer or constant argument as a Python value; NOT_PLAIN otherwise."""
    kind = symbol.type
    if kind == clingo.SymbolType.Number:
        return symbol.number
    if kind == clingo.SymbolType.String:
        return symbol.string
    if kind == clingo.SymbolType.Function and symbol.positive and not symbol.arguments:
        return symbol.name
    return NOT_PLAIN


class AtomReader:
    """Reads atoms; `values` maps the id of every argument met so far to its value."""

    def __init__(self) -> None:
        self.values: dict[int, Value | NotPlain] = {}

    def read(self, symbols: Sequence[clingo.Symbol]) -> list[Atom | None]:
        """Name and argument values of every atom; None for an atom that is not plain."""
        values = self.values
        return [None if raw is None or NOT_PLAIN in (row := tuple(map(values.__getitem__,
                                                                       raw[1])))
                else (raw[0], row) for raw in self.read_ids(symbols)]

    def read_ids(self, symbols: Sequence[clingo.Symbol]) -> list[RawAtom | None]:
        """Name and argument ids of every positive function symbol (None for others);
        afterwards `values` holds the value of every argument id."""
        if _lib is None:
            return [self._raw_public(symbol) for symbol in symbols]
        return self._raw_c(symbols)

    def _raw_public(self, symbol: clingo.Symbol) -> RawAtom | None:
        """One atom through the `Symbol` accessors."""
        if symbol.type != clingo.SymbolType.Function or not symbol.positive:
            return None
        arguments = symbol.arguments
        for argument in arguments:
            if argument._rep not in self.values:
                self.values[argument._rep] = plain_value(argument)
        return symbol.name, tuple(argument._rep for argument in arguments)

    def _raw_c(self, symbols: Sequence[clingo.Symbol]) -> list[RawAtom | None]:
        """All atoms through clingo's C functions: per atom one call each for the name,
        the sign and the argument ids."""
        p_name, p_arguments = _ffi.new("char**"), _ffi.new("clingo_symbol_t**")
        p_size, p_positive = _ffi.new("size_t*"), _ffi.new("bool*")
        p_number, p_text = _ffi.new("int*"), _ffi.new("char**")
        name_of, arguments_of = _lib.clingo_symbol_name, _lib.clingo_symbol_arguments
        is_positive, to_str, unpack = _lib.clingo_symbol_is_positive, _ffi.string, _ffi.unpack
        values = self.values
        atoms: list[RawAtom | None] = []
        for symbol in symbols:
            rep = symbol._rep
            # name_of fails for anything but a function (a number, a string, #inf, #sup)
            if not (name_of(rep, p_name) and is_positive(rep, p_positive) and p_positive[0]):
                atoms.append(None)
                continue
            arguments_of(rep, p_arguments, p_size)
            ids = tuple(unpack(p_arguments[0], p_size[0])) if p_size[0] else ()
            for argument in ids:
                if argument not in values:
                    values[argument] = _c_value(argument, p_number, p_text)
            atoms.append((to_str(p_name[0]).decode(), ids))
        return atoms


def _c_value(rep: int, p_number, p_text) -> Value | NotPlain:
    """`plain_value` of the symbol with clingo id `rep`, through the C functions (with the
    caller's `int*` and `char**` out-parameters)."""
    kind = _lib.clingo_symbol_type(rep)
    if kind == _lib.clingo_symbol_type_number:
        _lib.clingo_symbol_number(rep, p_number)
        return p_number[0]
    if kind == _lib.clingo_symbol_type_string:
        _lib.clingo_symbol_string(rep, p_text)
        return _ffi.string(p_text[0]).decode()
    return plain_value(clingo.Symbol(rep))
