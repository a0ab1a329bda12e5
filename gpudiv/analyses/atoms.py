"""The atoms of a clingo model as Python values: (predicate name, argument values), in bulk.

Printing every atom and parsing the text back cost about 6 µs an atom, a sixth of the
analysis of a PTX file (issue 16, item 3). clingo's symbols are interned 64-bit ids, and
the atoms of a kernel share a few thousand arguments (its names and small numbers): an
`AtomReader` asks clingo's C library (`gpudiv.analyses.clingo_lib`) for each atom's name
and argument ids only, and turns each distinct argument id into a Python value once.

An atom is *plain* when it is a positive function symbol and every argument is a string,
an integer or a constant (a name without arguments); the reader gives None for any other,
and callers decide (`gpudiv.analyses.solve` prints it).
"""

from __future__ import annotations

from collections.abc import Sequence

from gpudiv.analyses.clingo_lib import library

Value = str | int
# A plain atom as the reader first sees it: its name and its arguments' clingo ids.
RawAtom = tuple[str, tuple[int, ...]]
Atom = tuple[str, tuple[Value, ...]]


class NotPlain:
    """The value of an argument that is neither a string, an integer nor a constant."""


NOT_PLAIN = NotPlain()


class AtomReader:
    """Reads atoms given as clingo symbol ids; `values` maps the id of every argument met
    so far to its value."""

    def __init__(self) -> None:
        self.values: dict[int, Value | NotPlain] = {}

    def read(self, symbols: Sequence[int]) -> list[Atom | None]:
        """Name and argument values of every atom; None for an atom that is not plain."""
        values = self.values
        return [None if raw is None or NOT_PLAIN in (row := tuple(map(values.__getitem__,
                                                                       raw[1])))
                else (raw[0], row) for raw in self.read_ids(symbols)]

    def read_ids(self, symbols: Sequence[int]) -> list[RawAtom | None]:
        """Name and argument ids of every positive function symbol (None for others), per
        atom one C call each for the name, the sign and the argument ids; afterwards
        `values` holds the value of every argument id."""
        ffi, lib = library()
        p_name, p_arguments = ffi.new("char**"), ffi.new("clingo_symbol_t**")
        p_size, p_positive = ffi.new("size_t*"), ffi.new("bool*")
        name_of, arguments_of = lib.clingo_symbol_name, lib.clingo_symbol_arguments
        is_positive, to_str, unpack = lib.clingo_symbol_is_positive, ffi.string, ffi.unpack
        values = self.values
        atoms: list[RawAtom | None] = []
        for symbol in symbols:
            # name_of fails for anything but a function (a number, a string, #inf, #sup)
            if not (name_of(symbol, p_name) and is_positive(symbol, p_positive)
                    and p_positive[0]):
                atoms.append(None)
                continue
            arguments_of(symbol, p_arguments, p_size)
            ids = tuple(unpack(p_arguments[0], p_size[0])) if p_size[0] else ()
            for argument in ids:
                if argument not in values:
                    values[argument] = plain_value(argument)
            atoms.append((to_str(p_name[0]).decode(), ids))
        return atoms


def plain_value(symbol: int) -> Value | NotPlain:
    """A string, integer or constant symbol (by id) as a Python value; NOT_PLAIN otherwise
    (a nested term, a tuple, a negative constant, #inf, #sup)."""
    ffi, lib = library()
    kind = lib.clingo_symbol_type(symbol)
    if kind == lib.clingo_symbol_type_number:
        number = ffi.new("int*")
        lib.clingo_symbol_number(symbol, number)
        return number[0]
    if kind == lib.clingo_symbol_type_string:
        text = ffi.new("char**")
        lib.clingo_symbol_string(symbol, text)
        return ffi.string(text[0]).decode()
    if kind == lib.clingo_symbol_type_function:
        name, size, positive = ffi.new("char**"), ffi.new("size_t*"), ffi.new("bool*")
        arguments = ffi.new("clingo_symbol_t**")
        lib.clingo_symbol_arguments(symbol, arguments, size)
        lib.clingo_symbol_is_positive(symbol, positive)
        lib.clingo_symbol_name(symbol, name)
        if size[0] == 0 and positive[0]:
            return ffi.string(name[0]).decode()
    return NOT_PLAIN
