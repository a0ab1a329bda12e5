"""The fact schema as data: relations documented in rules/SCHEMA.md and shown by rule files.

`rules/SCHEMA.md` is the one description of every relation, input or derived. This module
reads its tables (one row per relation: `` `name(A, B)` `` and its meaning) so that exports
can name their columns after it and tests can check that code and documentation agree.
It also reads the `#show` statements and the header comment of a rule file, which is how
`gpudiv rules` lists what each shipped file derives.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from gpudiv.analyses.solve import rules_dir

_ROW = re.compile(r"^\|\s*`(?P<name>[a-z_][A-Za-z0-9_]*)(?:\((?P<args>[^)]*)\))?`\s*\|"
                  r"(?P<meaning>.*)\|\s*$")
_SHOW = re.compile(r"^\s*#show\s+(?P<neg>-?)(?P<name>[a-z_][A-Za-z0-9_']*)\s*/\s*"
                   r"(?P<arity>\d+)\s*\.", re.MULTILINE)
_HEADER_ENTRY = re.compile(r"^%\s+(?P<name>[a-z_][A-Za-z0-9_]*)\((?P<args>[^)]*)\)\s+"
                           r"(?P<text>\S.*)$")


@dataclass(frozen=True)
class Relation:
    """One documented relation: its columns (argument names), meaning and section."""

    name: str
    columns: tuple[str, ...]
    meaning: str
    section: str
    numbers: frozenset[str] = frozenset()

    @property
    def arity(self) -> int:
        """Number of arguments."""
        return len(self.columns)

    @property
    def signature(self) -> str:
        """`name/arity`, as clingo writes it."""
        return f"{self.name}/{self.arity}"

    def column_types(self) -> tuple[str, ...]:
        """`number` or `symbol` for each column (SCHEMA.md's "Number columns" table)."""
        return tuple("number" if c in self.numbers else "symbol" for c in self.columns)


def schema_path() -> Path:
    """Path of the shipped SCHEMA.md."""
    return Path(rules_dir()) / "SCHEMA.md"


RELATION_PARTS = ("input relations", "derived relations")
NUMBERS_PART = "exported facts"


def parse_schema(text: str) -> dict[str, Relation]:
    """Every relation of a SCHEMA.md text, by name (the first row wins on duplicates).

    Rows count only under a `## Input relations…` or `## Derived relations…` heading; the
    "Number columns" table under `## Exported facts…` says which columns are integers.
    """
    relations: dict[str, Relation] = {}
    numbers: dict[str, frozenset[str]] = {}
    section = part = ""
    for line in text.splitlines():
        if line.startswith("#"):
            section = line.lstrip("#").strip()
            if line.startswith("## "):
                part = section.lower()
            continue
        match = _ROW.match(line)
        if match and part.startswith(NUMBERS_PART):
            names = match["meaning"].strip().strip("|").replace("`", "")
            numbers[match["name"]] = frozenset(n.strip() for n in names.split(",") if n.strip())
            continue
        if not part.startswith(RELATION_PARTS):
            continue
        if match is None:
            continue
        args = match["args"]
        columns = tuple(a.strip() for a in args.split(",")) if args and args.strip() else ()
        meaning = match["meaning"].strip().rstrip("|").strip()
        relations.setdefault(match["name"], Relation(match["name"], columns, meaning, section))
    for name, columns in numbers.items():
        if name in relations:
            old = relations[name]
            relations[name] = Relation(old.name, old.columns, old.meaning, old.section, columns)
    return relations


@cache
def documented_relations() -> dict[str, Relation]:
    """The relations of the shipped rules/SCHEMA.md."""
    return parse_schema(schema_path().read_text(encoding="utf-8"))


def shown_relations(text: str) -> list[tuple[str, int]]:
    """The `(name, arity)` of every positive `#show name/arity.` of a rule text, in order."""
    body = "\n".join(line.split("%", 1)[0] for line in text.splitlines())
    return [(m["name"], int(m["arity"])) for m in _SHOW.finditer(body) if not m["neg"]]


@dataclass(frozen=True)
class RuleFile:
    """A shipped rule file: its summary line and the relations it shows, described."""

    name: str
    path: Path
    summary: str
    shows: tuple[tuple[str, int, str], ...]


def header_descriptions(text: str) -> tuple[str, dict[str, str]]:
    """The header's first paragraph (without `file.lp:`) and `name(...)  description`
    entries."""
    summary = ""
    in_summary = True
    entries: dict[str, str] = {}
    current: str | None = None
    for line in text.splitlines():
        if not line.startswith("%"):
            break
        body = line[1:].strip()
        if in_summary:
            if body and not summary:
                summary = body.split(":", 1)[1].strip() if ":" in body.split()[0] else body
            elif body:
                summary += " " + body
            else:
                in_summary = not summary
            continue
        match = _HEADER_ENTRY.match(line)
        if match:
            current = match["name"]
            entries.setdefault(current, match["text"].strip())
        elif current and body and line.startswith("%" + " " * 6):
            entries[current] += " " + body
        else:
            current = None
    return summary, entries


def rule_file(path: Path) -> RuleFile:
    """Summary and shown relations (described by the header, else by SCHEMA.md) of a file."""
    text = path.read_text(encoding="utf-8")
    summary, described = header_descriptions(text)
    documented = documented_relations()
    shows = []
    for name, arity in shown_relations(text):
        meaning = described.get(name) or (documented[name].meaning if name in documented
                                          else "")
        shows.append((name, arity, meaning))
    return RuleFile(path.name, path, summary, tuple(shows))


def shipped_rule_files() -> list[RuleFile]:
    """Every shipped `.lp` file, by name."""
    return [rule_file(p) for p in sorted(Path(rules_dir()).glob("*.lp"))]
