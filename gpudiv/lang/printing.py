"""Printers: IR → program text, one module per language (`musimd`, `ptx`).

`print_program` picks the printer of the language the program was read from; what it
writes parses back to the same IR (`gpudiv.lang.compare.first_difference`).
"""

from __future__ import annotations

from gpudiv import ir


class PrintError(Exception):
    """An instruction or program the printer cannot write in its language."""

    def __init__(self, message: str, loc: ir.Loc | None = None):
        super().__init__(message)
        self.loc = loc


def print_program(program: ir.Program) -> str:
    """The text of a program in the language it was read from."""
    from gpudiv.lang.musimd.printer import print_musimd
    from gpudiv.lang.ptx.printer import print_ptx

    if program.language == "musimd":
        return print_musimd(program)
    if program.language == "ptx":
        return print_ptx(program)
    raise PrintError(f"no printer for language '{program.language}'")
