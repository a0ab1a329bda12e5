"""Reading source files: pick the front end by extension, refuse what cannot be read."""

from __future__ import annotations

import os

from gpudiv import ir
from gpudiv.ir.perf import paused_gc

TYPE_CHECKING = False  # (typing is not imported: an analysis never needs it)
if TYPE_CHECKING:  # (nor pathlib, 4-6 ms of a small file's process: paths are strings here)
    from pathlib import Path

MAX_FILE_BYTES = 64 * 1024 * 1024
LANGUAGES = {".musimd": "musimd", ".ptx": "ptx"}  # the suffixes the README names


class LoadError(Exception):
    """A file that cannot be read; the message is one `FILE: error: ...` line."""


def path_text(path: str | Path) -> str:
    """`str(Path(path))` (`a//b/./c` is `a/b/c`, `./x` is `x`), without importing pathlib
    for a path that is already so written."""
    text = os.fspath(path)
    if text and text != "." and "//" not in text and "/./" not in text \
            and not text.startswith("./") and not text.endswith(("/", "/.")):
        return text
    from pathlib import Path

    return str(Path(text))


def suffix_of(path: str | Path) -> str:
    """`Path(path).suffix`: the name's last `.part`, if the name has more than it."""
    name = os.path.basename(os.fspath(path))
    dot = name.rfind(".")
    return name[dot:] if 0 < dot < len(name) - 1 else ""


def language_of(path: str | Path) -> str:
    """The language of a file from its extension."""
    suffix = suffix_of(path)
    language = LANGUAGES.get(suffix.lower())
    if language is None:
        raise LoadError(f"{path}: error: unknown file type '{suffix}' "
                        f"(expected one of {', '.join(sorted(LANGUAGES))})")
    return language


def read_source(path: str | Path) -> str:
    """The text of a source file, with size and encoding checks."""
    if not os.path.exists(path):
        raise LoadError(f"{path}: error: no such file")
    if os.path.isdir(path):
        raise LoadError(f"{path}: error: is a directory")
    if not os.path.isfile(path):  # a FIFO, socket or device would block or never end
        raise LoadError(f"{path}: error: not a regular file")
    size = os.stat(path).st_size
    if size > MAX_FILE_BYTES:
        raise LoadError(f"{path}: error: file too large ({size} bytes; limit {MAX_FILE_BYTES})")
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError as error:
        raise LoadError(f"{path}: error: {error.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line, column = _place_of_byte(data, error.start)
        raise LoadError(f"{path}:{line}:{column}: error: not UTF-8 text: byte "
                        f"0x{data[error.start]:02x} cannot start or continue a UTF-8 "
                        "character") from None
    return text.removeprefix("\ufeff")  # a byte-order mark is not part of the program


def _place_of_byte(data: bytes, offset: int) -> tuple[int, int]:
    """1-based line and column (in characters) of a byte offset of undecodable data."""
    line_start = data.rfind(b"\n", 0, offset) + 1
    prefix = data[line_start:offset].decode("utf-8", errors="replace")
    return data.count(b"\n", 0, offset) + 1, len(prefix) + 1


def parse_text(text: str, path: str, language: str = "musimd", *,
               canonical: bool = True) -> ir.Program:
    """Parse source text in the given language (the front end imported on first use).
    PTX is read in the canonical form the analyses and the interpreter want (calls
    inlined, guarded definitions as selects); `canonical=False` keeps calls as calls and
    guarded definitions guarded (the `inline` and `guard-to-select` passes then give the
    canonical form)."""
    with paused_gc():
        if language == "musimd":
            from gpudiv.lang.musimd.parse import parse_musimd

            return parse_musimd(text, path)
        if language == "ptx":
            from gpudiv.lang.ptx.parse import parse_ptx

            return parse_ptx(text, path, canonical=canonical)
    raise LoadError(f"{path}: error: unsupported language '{language}'")


def load(path: str | Path, *, canonical: bool = True) -> ir.Program:
    """Read and parse one source file (μ-SIMD or PTX, by extension; `canonical`: see
    `parse_text`)."""
    path = path_text(path)
    if os.path.isdir(path):
        raise LoadError(f"{path}: error: is a directory (give a .musimd or .ptx file; "
                        "`gpudiv analyze`, `check` and `facts` search folders)")
    if not os.path.exists(path):
        raise LoadError(f"{path}: error: no such file")
    language = language_of(path)
    return parse_text(read_source(path), path, language, canonical=canonical)
