"""Reading source files: pick the front end by extension, refuse what cannot be read."""

from __future__ import annotations

from pathlib import Path

from gpudiv import ir
from gpudiv.ir.perf import paused_gc

MAX_FILE_BYTES = 64 * 1024 * 1024
LANGUAGES = {".musimd": "musimd", ".ptx": "ptx"}  # the suffixes the README names


class LoadError(Exception):
    """A file that cannot be read; the message is one `FILE: error: ...` line."""


def language_of(path: Path) -> str:
    """The language of a file from its extension."""
    language = LANGUAGES.get(path.suffix.lower())
    if language is None:
        raise LoadError(f"{path}: error: unknown file type '{path.suffix}' "
                        f"(expected one of {', '.join(sorted(LANGUAGES))})")
    return language


def read_source(path: Path) -> str:
    """The text of a source file, with size and encoding checks."""
    if not path.exists():
        raise LoadError(f"{path}: error: no such file")
    if path.is_dir():
        raise LoadError(f"{path}: error: is a directory")
    if not path.is_file():  # a FIFO, socket or device would block or never end
        raise LoadError(f"{path}: error: not a regular file")
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise LoadError(f"{path}: error: file too large ({size} bytes; limit {MAX_FILE_BYTES})")
    try:
        data = path.read_bytes()
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
    path = Path(path)
    if path.is_dir():
        raise LoadError(f"{path}: error: is a directory (give a .musimd or .ptx file; "
                        "`gpudiv analyze`, `check` and `facts` search folders)")
    if not path.exists():
        raise LoadError(f"{path}: error: no such file")
    language = language_of(path)
    return parse_text(read_source(path), str(path), language, canonical=canonical)
