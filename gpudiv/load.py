"""Reading source files: pick the front end by extension, refuse what cannot be read."""

from __future__ import annotations

from pathlib import Path

from gpudiv import ir
from gpudiv.frontend.musimd import parse_musimd
from gpudiv.frontend.ptx import parse_ptx
from gpudiv.perf import paused_gc

MAX_FILE_BYTES = 64 * 1024 * 1024
LANGUAGES = {".musimd": "musimd", ".simd": "musimd", ".ptx": "ptx"}


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
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise LoadError(f"{path}: error: not UTF-8 text (byte {error.start})") from None
    except OSError as error:
        raise LoadError(f"{path}: error: {error.strerror}") from None


def parse_text(text: str, path: str, language: str = "musimd") -> ir.Program:
    """Parse source text in the given language."""
    with paused_gc():
        if language == "musimd":
            return parse_musimd(text, path)
        if language == "ptx":
            return parse_ptx(text, path)
    raise LoadError(f"{path}: error: unsupported language '{language}'")


def load(path: str | Path) -> ir.Program:
    """Read and parse one source file (μ-SIMD or PTX, by extension)."""
    path = Path(path)
    language = language_of(path)
    return parse_text(read_source(path), str(path), language)
