"""Users' rule files: what gpudiv hands to clingo, checked before clingo sees it.

A user's rule file must be a regular file named `*.lp` (a FIFO or `/dev/zero` would block
or never end), of at most `MAX_RULE_BYTES`, UTF-8 text with non-ASCII characters only in
strings, comments and `#script` blocks (clingo reports a stray non-ASCII byte with a
message that is not valid UTF-8, and its Python binding then aborts the whole process:
"PANIC: exception in nothrow scope"). With `allow_scripts=False` a `#script` block is an
error: in a clingo whose scripting is enabled it runs arbitrary code (README, "Rule files
are programs"). Files a rule file `#include`s are checked the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from gpudiv.analyses.solve import RuleError

MAX_RULE_BYTES = 16 * 1024 * 1024
RULE_SUFFIX = ".lp"
_DIRECTIVE = re.compile(r"#(script|include)\b")
_INCLUDED = re.compile(r'\s*"((?:[^"\\]|\\.)*)"')
_SCRIPT_END = re.compile(r"#end\s*\.")


@dataclass(frozen=True)
class Scan:
    """What a rule file contains besides rules: `#script` places and included files."""

    scripts: tuple[tuple[int, int], ...]
    includes: tuple[str, ...]


def _place(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of a character offset."""
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def scan_rules(text: str, path: str) -> Scan:
    """Find `#script` blocks and `#include "…"` directives, skipping comments (`%`, and
    `%* … *%`, which nest) and strings; RuleError at the first non-ASCII character
    anywhere else."""
    scripts: list[tuple[int, int]] = []
    includes: list[str] = []
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if text.startswith("%*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("%*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*%", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif char == "%":
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif char == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
        elif char == "#" and (match := _DIRECTIVE.match(text, i)):
            if match[1] == "script":
                scripts.append(_place(text, i))
                end = _SCRIPT_END.search(text, match.end())
                i = n if end is None else end.end()
            else:
                included = _INCLUDED.match(text, match.end())
                if included:
                    includes.append(included[1])
                i = match.end()
        elif not char.isascii():
            line, column = _place(text, i)
            raise RuleError(f"{path}:{line}:{column}: error: unexpected character {char!r} "
                            "(clingo accepts non-ASCII characters only in strings and "
                            "comments)")
        else:
            i += 1
    return Scan(tuple(scripts), tuple(includes))


def _read(path: Path) -> str:
    """The text of a rule file that is safe to give clingo (see the module doc)."""
    if not path.exists():
        raise RuleError(f"{path}: error: no such rule file")
    if path.is_dir():
        raise RuleError(f"{path}: error: is a directory, not a rule file")
    if not path.is_file():
        raise RuleError(f"{path}: error: not a regular file")
    size = path.stat().st_size
    if size > MAX_RULE_BYTES:
        raise RuleError(f"{path}: error: rule file too large ({size} bytes; limit "
                        f"{MAX_RULE_BYTES})")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise RuleError(f"{path}: error: not UTF-8 text (byte {error.start})") from None
    except OSError as error:
        raise RuleError(f"{path}: error: cannot read the rule file: {error.strerror}"
                        ) from None


def check_rule_file(path: str | Path, allow_scripts: bool = True) -> None:
    """RuleError (one `FILE[:LINE:COL]: error: …` line) unless `path` is a rule file that
    clingo can be given: see the module doc. Included files are checked too."""
    path = Path(path)
    if path.suffix != RULE_SUFFIX:
        raise RuleError(f"{path}: error: not a rule file (expected a clingo program "
                        f"named *{RULE_SUFFIX})")
    seen: set[Path] = set()
    pending = [path]
    while pending:
        current = pending.pop()
        if current.resolve() in seen:
            continue
        seen.add(current.resolve())
        scan = scan_rules(_read(current), str(current))
        if scan.scripts and not allow_scripts:
            line, column = scan.scripts[0]
            raise RuleError(f"{current}:{line}:{column}: error: #script blocks run arbitrary "
                            "code and --no-scripts forbids them")
        for name in scan.includes:  # as clingo looks: beside the file, then from here
            found = [c for c in (current.parent / name, Path(name)) if c.exists()]
            pending += found[:1]  # a missing one is clingo's error to report
