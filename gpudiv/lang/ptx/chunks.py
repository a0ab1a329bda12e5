"""Cutting a PTX file into top-level chunks (a function with its body, a DWARF section, a
run of directives) by a brace-depth scan that skips comments and strings: each chunk is
parsed on its own, so a syntax error loses only its own chunk."""

from __future__ import annotations

import re
from collections.abc import Iterator

from gpudiv.lang.regex_cache import RegexCache

# ---------------------------------------------------------------------------------------
# Chunks: top-level pieces parsed on their own.
# ---------------------------------------------------------------------------------------

# Block comments are found by `_scan` (an unterminated `/*` must not make the scan look
# for `*/` again at every later `/*`: that would be quadratic); an unterminated string runs
# to the end of its line, and the possessive loop never backtracks into it. Every file is
# cut by these patterns: their compiled programs come from the cache (0.8 ms to compile).
_PATTERNS = RegexCache("ptx-chunks", {
    "scan": r'(?m)//[^\n]*|/\*|"(?:[^"\\\n]|\\.)*+"?|[{};]'
            r'|(?P<header>^[ \t]*(?:\.(?:visible|weak|extern)[ \t]+)?\.(?:entry|func)\b)',
    "header": r"(?m)^[ \t]*(?:\.(?:visible|weak|extern)[ \t]+)*\.(?:entry|func)\b",
    "rest_of_line": r"[ \t\r\f]*(?://[^\n]*)?(?:\n|$)",
    "next_char": r"\s*(\S)",
}).compile_all()
_SCAN = _PATTERNS["scan"]
_HEADER = _PATTERNS["header"]
_REST_OF_LINE = _PATTERNS["rest_of_line"]
_NEXT_CHAR = _PATTERNS["next_char"]


def _scan(text: str) -> Iterator[re.Match]:
    """The braces, semicolons and function headers of a text outside comments and
    strings, in one linear pass."""
    last_close = text.rfind("*/")
    pos = 0
    while (match := _SCAN.search(text, pos)) is not None:
        pos = match.end()
        first = match.group()[0]
        if first == "/":
            if match.group() == "/*" and pos <= last_close:  # a `*/` follows: skip to it
                pos = text.find("*/", pos) + 2
            continue  # (an unterminated `/*` is an error Lark reports; scanning goes on)
        if first != '"':
            yield match


def _chunks(text: str) -> list[tuple[int, int]]:
    """(start, end) offsets of top-level pieces: each ends after a `;` or a closing `}`
    at brace depth 0 (and the rest of that line when it holds only a comment). A function
    header inside an unclosed body starts a new piece, so a missing `}` loses one function."""
    cuts: list[tuple[int, int]] = []
    depth = 0
    start = 0
    for match in _scan(text):
        char = match.group()
        if match.lastgroup == "header":  # `.entry` / `.func` at the start of a line
            if depth and match.start() > start:
                cuts.append((start, match.start()))
                start, depth = match.start(), 0
            continue
        if char == "{":
            depth += 1
            continue
        if char == "}":
            depth = max(depth - 1, 0)
            if depth:
                continue
            following = _NEXT_CHAR.match(text, match.end())
            if following and following.group(1) in ";,=":
                continue  # the end of an initializer, not of a body
        elif char != ";" or depth:
            continue
        end = match.end()
        rest = _REST_OF_LINE.match(text, end)
        if rest:
            end = rest.end()
        cuts.append((start, end))
        start = end
    if text[start:].strip():
        cuts.append((start, len(text)))
    return cuts
