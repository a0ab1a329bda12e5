"""JSON text of report documents, byte for byte what `json.dumps(document, indent=2)` writes.

Python's encoder writes indented JSON in pure Python: on a PTX file with a few thousand
variables that was a tenth of `gpudiv analyze --format json` (issue 16, item 3). Two
writers replace it where they give the same text:

- `_small_text` writes the document in one pass with the string escaper of `json`'s C
  accelerator (its `ensure_ascii` escapes: `\\uXXXX`, astral characters as surrogate
  pairs) and `json`'s spelling of every other value; it leaves to `json` only a key that
  is not a string and a value `json` rejects. A document of up to `SMALL_DOCUMENT`
  values goes through it while orjson is not loaded: importing `json` was 2 ms of a
  one-file process, more than writing its report, and importing orjson loads
  `dataclasses` (with `inspect`), `datetime`, `uuid` and `platform`, which an `analyze`
  process otherwise never imports.
- orjson writes larger documents about fifteen times faster than `json`. Its text is
  kept with `json`'s escapes for DEL and non-ASCII characters; a number in exponent
  notation or below 0.0001 (where orjson writes `1e-5` or `0.00001` and `json` `1e-05`),
  an integer beyond 64 bits, a key that is not a string or a string that is not valid
  Unicode send the whole document to `_small_text` instead, and so does a missing
  orjson. Not covered: a float that is not finite (`json` writes `NaN` or `Infinity`,
  which is not JSON; orjson writes `null`); no report of gpudiv holds one.
"""

from __future__ import annotations

from gpudiv.lang.regex_cache import LazyPattern

try:  # `json`'s own escaper of strings (ensure_ascii), from its C accelerator
    from _json import encode_basestring_ascii as _quoted
except ImportError:  # pragma: no cover - CPython has it; `json` writes everything then
    _quoted = None

_INFINITY = float("inf")
_UNLOADED = object()
orjson: object = _UNLOADED  # the orjson module once loaded (None: not installed)
# Values (containers and scalars) of a document small enough for `_small_text` while
# orjson is not loaded: about 700 kB of indented JSON (a report's values take about 35
# bytes). In fresh processes (least of 5), `_small_text` took 1.1, 7.3, 11.5 and 37.9 ms
# on 1,000, 8,000, 16,000 and 32,000 values, orjson's import and writing 17.5, 27.0,
# 26.4 and 21.5 ms (`json`: 3.4, 9.8, 25.4, 62.0).
SMALL_DOCUMENT = 20000

# The end of a number that orjson may format unlike `json`: in exponent notation, or a
# decimal below 0.0001. Every value of indented JSON ends a line (or the text), so a
# string never matches; each pattern starts with a literal, which `re` searches for fast
# (one pattern with both alternatives took 14 ms on a 640 kB report). Searched in
# orjson's UTF-8 bytes: a quarter faster than in the text once it holds a non-ASCII
# character.
_UNLIKE_NUMBERS = (LazyPattern(rb"e[-+]?\d+(?:,?\n|\Z)"), LazyPattern(rb"0\.0000\d*(?:,?\n|\Z)"))
# Every ASCII byte, deleted to leave the bytes of the non-ASCII characters.
_ASCII = bytes(range(128))
_FEW_CHARACTERS = 8
# One character `json` escapes beyond what orjson does: DEL or any non-ASCII one.
_NOT_ASCII = LazyPattern("[^\x00-\x7e]")


def _escape(char: str) -> str:
    """The `\\uXXXX` escape `json` writes for one character (a surrogate pair above FFFF)."""
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 | (code >> 10):04x}\\u{0xDC00 | (code & 0x3FF):04x}"


def _ascii_escaped(raw: bytes) -> bytes:
    """UTF-8 JSON text with `json`'s escapes for DEL and every non-ASCII character.

    A report repeats a few such characters (the ← of explanations) thousands of times:
    each distinct one is replaced throughout at once (in UTF-8 the bytes of one character
    never occur inside another's): particle_library.G's 5.7 MB report took 56 ms with a
    regex substitution calling back per character, 17 ms so. With more than
    `_FEW_CHARACTERS` distinct ones, one pass per character would be quadratic: the regex
    substitution then."""
    characters = set(raw.translate(None, _ASCII).decode())
    if len(characters) > _FEW_CHARACTERS:
        text = _NOT_ASCII.sub(lambda match: _escape(match[0]), raw.decode())
        return text.encode("ascii")
    for char in sorted(characters):
        raw = _escape(char).encode().join(raw.split(char.encode()))
    return b"\\u007f".join(raw.split(b"\x7f"))


def _load_orjson():
    """The orjson module, imported on first use; None when it is not installed."""
    global orjson
    if orjson is _UNLOADED:
        try:
            import orjson as module
        except ImportError:  # pragma: no cover - a dependency; the fallback is tested
            module = None
        orjson = module
    return orjson


def _smaller_than(document: object, limit: int) -> bool:
    """Whether the document holds at most `limit` values (stops counting beyond)."""
    pending, count = [document], 0
    while pending:
        item = pending.pop()
        count += 1
        if count > limit:
            return False
        if type(item) is dict:
            pending.extend(item.values())
        elif type(item) in (list, tuple):
            pending.extend(item)
    return True


def _orjson_text(document: object) -> str | None:
    """orjson's indented text with `json`'s escapes, or None where it may differ."""
    module = _load_orjson()
    if module is None:
        return None
    try:
        raw = module.dumps(document, option=module.OPT_INDENT_2)
    except TypeError:  # big integers, non-string keys, lone surrogates
        return None
    if any(pattern.search(raw) for pattern in _UNLIKE_NUMBERS):
        return None
    if b"\x7f" in raw or not raw.isascii():
        raw = _ascii_escaped(raw)
    return raw.decode("ascii")


def _small_text(document: object) -> str | None:
    """`json.dumps(document, indent=2)` of a document of dicts with string keys, lists,
    tuples, strings, integers, floats, booleans and None, as `json`'s encoder writes it;
    None for anything else (then `json` writes it, or raises as it does)."""
    if _quoted is None:
        return None
    parts: list[str] = []
    try:
        written = _write(document, "\n", parts)
    except RecursionError:  # nested too deeply (or a cycle): `json` says which
        return None
    return "".join(parts) if written else None


def _write(value: object, newline: str, parts: list[str]) -> bool:
    """Append the text of `value` at the indentation `newline` (a newline and the
    spaces of its level); False for what `_small_text` leaves to `json`."""
    # The order of json.encoder's checks: a str, an int or a float subclass is written as
    # the str, int or float it is (True and False first: bool is an int).
    if isinstance(value, str):
        parts.append(_quoted(value))
    elif value is None:
        parts.append("null")
    elif value is True:
        parts.append("true")
    elif value is False:
        parts.append("false")
    elif isinstance(value, int):
        parts.append(int.__repr__(value))
    elif isinstance(value, float):
        parts.append(_float_text(value))
    elif isinstance(value, (list, tuple)):
        if not value:
            parts.append("[]")
            return True
        inner = newline + "  "
        separator = "[" + inner
        for item in value:
            parts.append(separator)
            if not _write(item, inner, parts):
                return False
            separator = "," + inner
        parts.append(newline + "]")
    elif isinstance(value, dict):
        if not value:
            parts.append("{}")
            return True
        inner = newline + "  "
        separator = "{" + inner
        for key, item in value.items():
            if not isinstance(key, str):
                return False
            parts.append(separator + _quoted(key) + ": ")
            if not _write(item, inner, parts):
                return False
            separator = "," + inner
        parts.append(newline + "}")
    else:
        return False
    return True


def _float_text(value: float) -> str:
    """A float as `json` writes it (`NaN` and `Infinity` included, as it allows them)."""
    if value != value:
        return "NaN"
    if value == _INFINITY:
        return "Infinity"
    if value == -_INFINITY:
        return "-Infinity"
    return float.__repr__(value)


def dumps_indented(document: object) -> str:
    """`json.dumps(document, indent=2)`: by orjson for a large document where its text is
    the same, else written here (`_small_text`), else by `json`."""
    small = orjson is _UNLOADED and _smaller_than(document, SMALL_DOCUMENT)
    text = None if small else _orjson_text(document)
    if text is None:
        text = _small_text(document)
    if text is None:
        import json  # (only here: a key that is not a string, a type `json` rejects)

        text = json.dumps(document, indent=2)
    return text
