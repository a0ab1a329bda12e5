"""JSON text of report documents, byte for byte what `json.dumps(document, indent=2)` writes.

Python's encoder writes indented JSON in pure Python: on a PTX file with a few thousand
variables that was a tenth of `gpudiv analyze --format json` (issue 16, item 3). orjson
writes the same text about fifteen times faster where the two agree; `dumps_indented` uses
it and keeps `json`'s output exactly:

- non-ASCII characters (and DEL) become `\\uXXXX` escapes, astral ones surrogate pairs,
  as `json`'s default `ensure_ascii` writes them;
- a number in exponent notation or below 0.0001 (where orjson writes `1e-5` or `0.00001`
  and `json` `1e-05`), an integer beyond 64 bits, a key that is not a string or a string
  that is not valid Unicode: the whole document goes through `json` instead.

Without orjson installed everything goes through `json`. Not covered: a float that is not
finite (`json` writes `NaN` or `Infinity`, which is not JSON; orjson writes `null`); no
report of gpudiv holds one.
"""

from __future__ import annotations

import json
import re

try:
    import orjson
except ImportError:  # pragma: no cover - a dependency; the fallback is tested by patching
    orjson = None

# The end of a number that orjson may format unlike `json`: in exponent notation, or a
# decimal below 0.0001. Every value of indented JSON ends a line (or the text), so a
# string never matches; each pattern starts with a literal, which `re` searches for fast
# (one pattern with both alternatives took 14 ms on a 640 kB report).
_UNLIKE_NUMBERS = (re.compile(r"e[-+]?\d+(?:,?\n|\Z)"), re.compile(r"0\.0000\d*(?:,?\n|\Z)"))
# What `json` escapes beyond what orjson does: DEL and every non-ASCII character (as the
# complement of the rest: the range up to U+10FFFF took 6 ms to compile at start-up).
_UNESCAPED = re.compile("[^\x00-\x7e]")


def _escape(match: re.Match[str]) -> str:
    """The `\\uXXXX` escape `json` writes for one character (a surrogate pair above FFFF)."""
    code = ord(match[0])
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 | (code >> 10):04x}\\u{0xDC00 | (code & 0x3FF):04x}"


def _orjson_text(document: object) -> str | None:
    """orjson's indented text with `json`'s escapes, or None where it may differ."""
    if orjson is None:
        return None
    try:
        text = orjson.dumps(document, option=orjson.OPT_INDENT_2).decode()
    except TypeError:  # big integers, non-string keys, lone surrogates
        return None
    if any(pattern.search(text) for pattern in _UNLIKE_NUMBERS):
        return None
    if "\x7f" in text or not text.isascii():
        text = _UNESCAPED.sub(_escape, text)
    return text


def dumps_indented(document: object) -> str:
    """`json.dumps(document, indent=2)`, faster (orjson) where the result is the same."""
    text = _orjson_text(document)
    return json.dumps(document, indent=2) if text is None else text
