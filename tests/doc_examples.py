"""The examples of README.md and docs/*.md, as runnable checks (issue 18, item 1).

`tests/test_docs.py` runs them; this module finds them, runs them and compares, and from
the command line re-records the shown output of the examples that drifted:

    python tests/doc_examples.py            # list what differs (a diff per example)
    python tests/doc_examples.py --update   # rewrite the drifted outputs in place
    python tests/doc_examples.py --no-slow  # leave out the blocks marked slow

Re-recording keeps the elisions (`...`) of a block and replaces each drifted line by the
actual line most like it; review the diff (`git diff README.md docs/`) before committing,
and put `...` back by hand where a re-recorded block shows more than it should.

Fenced code blocks that are checked:

- a block whose first line starts with `$ ` is a shell session: each `$ COMMAND` (with `\\`
  continuation lines) runs with bash in a scratch folder holding links to `samples/`,
  `benchmarks/` and `rules/`, `gpudiv` being this interpreter's `python -m gpudiv.cli`; its
  stdout and stderr together must match the lines below it. `$ cat FILE` of a file that
  does not exist there creates it with the shown lines (a file the reader is asked to
  write). The commands of one document run in order, in one folder.
- ```python blocks run in order in one fresh interpreter per document, in the same folder.
- a block after `<!-- doc-test: excerpt-of PATH -->` must match the file PATH;
- a block after `<!-- doc-test: json-subset-of COMMAND -->` must be a JSON subset of
  what COMMAND prints: every key shown with the same value, every list element shown
  found in the actual list, `"..."` matching anything and `timing_ms` not compared.

Matching: a line `...` stands for any number of lines, `...` inside a line for any text;
runs of spaces count as one, and times (`2.01 s`, `1.5 ms`) are not compared. A block
after `<!-- doc-test: skip (REASON) -->` is not checked; one after
`<!-- doc-test: slow -->` only runs without `-m "not slow"`. Other fenced blocks
(``` sh install commands, grammar listings) are prose.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = ("README.md", "docs/*.md")
LINKED = ("samples", "benchmarks", "rules")
TIMEOUT_S = 300

_FENCE = re.compile(r"^(?P<indent> *)```(?P<info>[\w+-]*)\s*$")
_MARKER = re.compile(r"<!--\s*doc-test:\s*(?P<kind>[\w-]+)\s*(?P<arg>.*?)\s*-->")
_TIME = re.compile(r"\b\d+(?:\.\d+)?\s?(?:s|ms)\b")


@dataclass
class Block:
    """A fenced code block of a document and what to check of it."""

    doc: Path
    line: int            # 1-based line of the opening fence
    end: int             # 1-based line of the closing fence
    indent: str
    info: str
    lines: list[str]     # its content, without the fence's indentation
    marker: str = ""     # skip, slow, excerpt-of, json-subset-of (or "")
    marker_arg: str = ""

    @property
    def kind(self) -> str:
        """session, python, excerpt, json-subset, skip or prose."""
        if self.marker == "skip":
            return "skip"
        if self.marker == "excerpt-of":
            return "excerpt"
        if self.marker == "json-subset-of":
            return "json-subset"
        if self.lines and self.lines[0].startswith("$ "):
            return "session"
        if self.info == "python":
            return "python"
        return "prose"

    @property
    def slow(self) -> bool:
        """Marked `<!-- doc-test: slow -->`."""
        return self.marker == "slow"

    @property
    def name(self) -> str:
        """A test id: document and line."""
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def documents() -> list[Path]:
    """README.md and docs/*.md."""
    found: list[Path] = []
    for pattern in DOCUMENTS:
        found += sorted(ROOT.glob(pattern))
    return found


def blocks(doc: Path) -> list[Block]:
    """The fenced blocks of a document, with the doc-test marker just above each."""
    text = doc.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(text):
        fence = _FENCE.match(text[i])
        if not fence:
            i += 1
            continue
        indent = fence["indent"]
        j = i + 1
        while j < len(text) and text[j].strip() != "```":
            j += 1
        body = [x[len(indent):] if x.startswith(indent) else x.lstrip() for x in text[i + 1:j]]
        marker = next((m for k in range(i - 1, max(i - 4, -1), -1)
                       if (m := _MARKER.search(text[k]))), None)
        out.append(Block(doc, i + 1, j + 1, indent, fence["info"], body,
                         marker["kind"] if marker else "", marker["arg"] if marker else ""))
        i = j + 1
    return out


# ---------------------------------------------------------------------------------------
# Matching shown output with elisions
# ---------------------------------------------------------------------------------------

def _normal(line: str) -> str:
    return " ".join(_TIME.sub("<time>", line).split())


def _line_matches(shown: str, actual: str) -> bool:
    shown, actual = _normal(shown), _normal(actual)
    if "..." not in shown:
        return shown == actual
    pattern = ".*".join(re.escape(part) for part in shown.split("..."))
    return re.fullmatch(pattern, actual) is not None


def _is_elision(line: str) -> bool:
    return line.strip() == "..."


def align(shown: list[str], actual: list[str]) -> tuple[int, list[str]]:
    """(number of differences, the shown block re-recorded from `actual`): an edit
    distance where an elision line eats any number of actual lines for free, so that the
    re-recorded block keeps the elisions and the abridgement of the shown one. Among
    alignments with as few differences, a shown line is replaced by the actual line most
    like it."""
    n, m = len(shown), len(actual)
    inf = (float("inf"), 0.0)
    cost: list[list[tuple[float, float]]] = [[inf] * (m + 1) for _ in range(n + 1)]
    step: list[list[str]] = [[""] * (m + 1) for _ in range(n + 1)]
    cost[n][m] = (0, 0.0)

    def plus(c: tuple[float, float], differences: int, unlike: float) -> tuple[float, float]:
        return c[0] + differences, c[1] + unlike

    for i in range(n, -1, -1):
        for j in range(m, -1, -1):
            if i == n and j == m:
                continue
            options: list[tuple[tuple[float, float], str]] = []
            if i < n and _is_elision(shown[i]):
                options.append((cost[i + 1][j], "end-elision"))  # the elision ends here
                if j < m:
                    options.append((cost[i][j + 1], "eat"))      # it eats actual[j]
            else:
                if i < n and j < m:
                    if _line_matches(shown[i], actual[j]):
                        options.append((cost[i + 1][j + 1], "keep"))
                    else:
                        unlike = 1 - difflib.SequenceMatcher(
                            None, _normal(shown[i]), _normal(actual[j])).ratio()
                        options.append((plus(cost[i + 1][j + 1], 1, unlike), "replace"))
                if i < n:
                    options.append((plus(cost[i + 1][j], 1, 1.0), "drop"))  # line is gone
                if j < m:
                    options.append((plus(cost[i][j + 1], 1, 1.0), "add"))   # new line
            cost[i][j], step[i][j] = min(options, key=lambda o: o[0])
    i = j = 0
    redone: list[str] = []
    while i < n or j < m:
        how = step[i][j]
        if how == "end-elision":
            redone.append(shown[i])
            i += 1
        elif how == "eat":
            j += 1
        elif how == "keep":
            redone.append(shown[i])
            i, j = i + 1, j + 1
        elif how == "replace":
            redone.append(actual[j])
            i, j = i + 1, j + 1
        elif how == "drop":
            i += 1
        else:
            redone.append(actual[j])
            j += 1
    return int(cost[0][0][0]), redone


def json_subset(shown, actual, where: str = "$") -> list[str]:
    """Where the shown JSON is not a part of the actual JSON (empty: it is)."""
    if shown == "...":
        return []
    if isinstance(shown, dict):
        if not isinstance(actual, dict):
            return [f"{where}: expected an object, got {json.dumps(actual)[:80]}"]
        problems = []
        for key, value in shown.items():
            if key not in actual:
                problems.append(f"{where}: no key {key!r} (keys: {', '.join(actual)})")
            elif key != "timing_ms":
                problems += json_subset(value, actual[key], f"{where}.{key}")
        return problems
    if isinstance(shown, list):
        if not isinstance(actual, list):
            return [f"{where}: expected a list, got {json.dumps(actual)[:80]}"]
        problems = []
        for k, item in enumerate(shown):
            tries = [json_subset(item, candidate, f"{where}[{k}]") for candidate in actual]
            if all(tries):  # no element fits: the problems of the one that fits best
                problems += min(tries, key=len) if tries else [f"{where}: empty list"]
        return problems
    if shown != actual:
        return [f"{where}: shown {json.dumps(shown)}, actual {json.dumps(actual)}"]
    return []


# ---------------------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------------------

@dataclass
class Workspace:
    """The scratch folder where one document's examples run, in order."""

    path: Path
    bin: Path
    done: set[int] = field(default_factory=set)

    @classmethod
    def create(cls) -> Workspace:
        """A temporary folder with links to the repository's samples, and a `gpudiv`."""
        path = Path(tempfile.mkdtemp(prefix="gpudiv-doc-"))
        for name in LINKED:
            (path / name).symlink_to(ROOT / name)
        bindir = path / ".bin"
        bindir.mkdir()
        shim = bindir / "gpudiv"
        shim.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m gpudiv.cli \"$@\"\n")
        shim.chmod(0o755)
        return cls(path, bindir)

    def env(self) -> dict[str, str]:
        """The environment of the commands: our `gpudiv` first on PATH, no terminal."""
        env = dict(os.environ)
        env["PATH"] = f"{self.bin}{os.pathsep}{env.get('PATH', '')}"
        env.pop("PYTHONPATH", None)
        env["COLUMNS"] = "200"
        return env

    def shell(self, command: str) -> str:
        """stdout and stderr of a bash command line, together."""
        done = subprocess.run(["bash", "-c", command], cwd=self.path, env=self.env(),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=TIMEOUT_S)
        return done.stdout


def commands(block: Block) -> list[tuple[str, list[str]]]:
    """(command, shown output lines) of each `$ ` command of a session block."""
    out: list[tuple[str, list[str]]] = []
    lines = block.lines
    i = 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            raise ValueError(f"{block.name}: output before the first '$ ' command")
        command = lines[i][2:]
        while command.endswith("\\") and i + 1 < len(lines):
            i += 1
            command = command[:-1].rstrip() + " " + lines[i].strip()
        i += 1
        start = i
        while i < len(lines) and not lines[i].startswith("$ "):
            i += 1
        out.append((command, lines[start:i]))
    return out


def check_session(block: Block, space: Workspace) -> tuple[int, list[str]]:
    """Run a session block: (differences, the block re-recorded)."""
    total, redone = 0, []
    for command, shown in commands(block):
        cat = re.fullmatch(r"cat (\S+)", command)
        if cat and not (space.path / cat[1]).exists():
            target = space.path / cat[1]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("\n".join(shown) + "\n", encoding="utf-8")
            actual = shown
        else:
            actual = space.shell(command).rstrip("\n").splitlines()
        differences, lines = align(shown, actual)
        total += differences
        redone += _original_command_lines(block, command) + lines
    return total, redone


def _original_command_lines(block: Block, command: str) -> list[str]:
    """The `$ ` line and its continuation lines as written in the block."""
    for i, line in enumerate(block.lines):
        if not line.startswith("$ "):
            continue
        j, joined = i, line[2:]
        while joined.endswith("\\") and j + 1 < len(block.lines):
            j += 1
            joined = joined[:-1].rstrip() + " " + block.lines[j].strip()
        if joined == command:
            return block.lines[i:j + 1]
    return [f"$ {command}"]


def check_excerpt(block: Block) -> tuple[int, list[str]]:
    """Compare a block with the file it quotes."""
    actual = (ROOT / block.marker_arg).read_text(encoding="utf-8").splitlines()
    # A quoted listing is a part of the file: elisions are implied at both ends.
    shown = ["...", *block.lines, "..."]
    differences, redone = align(shown, actual)
    return differences, redone[1:-1]


def check_json(block: Block, space: Workspace) -> list[str]:
    """Problems of a json-subset-of block (empty: none)."""
    output = space.shell(block.marker_arg)
    try:
        actual = json.loads(output)
    except json.JSONDecodeError:
        return [f"`{block.marker_arg}` did not print JSON: {output[:300]}"]
    return json_subset(json.loads("\n".join(block.lines)), actual)


def run_python(doc_blocks: list[Block], space: Workspace) -> str:
    """Run a document's Python blocks in order in one interpreter; '' or the error."""
    code = []
    for block in doc_blocks:
        code.append(f"# --- {block.name}")
        code += block.lines
    script = space.path / "doc_snippets.py"
    script.write_text("\n".join(code) + "\n", encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], cwd=space.path, env=space.env(),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=TIMEOUT_S)
    return "" if done.returncode == 0 else done.stdout[-3000:]


def diff(block: Block, redone: list[str]) -> str:
    """A unified diff from the shown block to the re-recorded one."""
    return "\n".join(difflib.unified_diff(block.lines, redone, f"{block.name} (shown)",
                                          "actual", lineterm=""))


def rewrite(doc: Path, updates: list[tuple[Block, list[str]]]) -> None:
    """Replace the contents of blocks of a document by their re-recorded lines."""
    text = doc.read_text(encoding="utf-8").splitlines()
    for block, lines in sorted(updates, key=lambda u: -u[0].line):
        text[block.line:block.end - 1] = [block.indent + x if x else x for x in lines]
    doc.write_text("\n".join(text) + "\n", encoding="utf-8")


def main(argv: list[str]) -> int:
    """Check (or with --update re-record) every example; exit 1 when one differs."""
    update = "--update" in argv
    with_slow = "--no-slow" not in argv
    status = 0
    for doc in documents():
        space = Workspace.create()
        updates = []
        doc_blocks = blocks(doc)
        for block in doc_blocks:
            if block.kind in ("skip", "prose", "python") or (block.slow and not with_slow):
                continue
            if block.kind == "json-subset":
                problems = check_json(block, space)
                if problems:
                    status = 1
                    print(f"{block.name}: not a part of the actual JSON (edit by hand):\n  "
                          + "\n  ".join(problems))
                continue
            differences, redone = (check_excerpt(block) if block.kind == "excerpt"
                                   else check_session(block, space))
            if differences:
                status = 1
                print(diff(block, redone))
                updates.append((block, redone))
        failure = run_python([b for b in doc_blocks if b.kind == "python"], space)
        if failure:
            status = 1
            print(f"{doc.name}: a Python example failed:\n{failure}")
        if update and updates:
            rewrite(doc, updates)
            print(f"{doc.relative_to(ROOT)}: re-recorded {len(updates)} block(s)")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
