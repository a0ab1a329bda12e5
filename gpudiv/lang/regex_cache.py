"""Compiled regular expressions kept on disk between processes (process start-up).

Python compiles a regular expression in Python code (it parses the pattern, then writes the
program the C matcher runs), which cost the PTX fast path's patterns 5 to 8 ms of every
`gpudiv` process, more than reading a small file with them (issue 16). A `RegexCache` keeps
the programs of one set of patterns in one file of the user's cache folder
(`gpudiv.lang.cache_files`, where `gpudiv.lang.grammars` keeps Lark's tables too), named
after the set's patterns and the Python build; loading them back costs a fraction of a
millisecond.

A program is Python's own compiled form, taken from the interpreter's regex compiler
(`re._parser`, `re._compiler`: internals, hence every precaution): it is stored only when
the pattern built from it equals the one `re.compile` gives (pattern equality compares the
programs), the file holds plain data (`marshal`: the patterns, numbers and strings) under
a checksum, and the C matcher validates a program before it runs it. A file that is
missing, damaged or from another Python, a pattern it lacks, and any failure of these
steps mean `re.compile` as usual (then the file is written again, when the folder allows).
"""

from __future__ import annotations

import os
import re
import sys
import zlib

from gpudiv.lang.cache_files import cache_folder, read_marshalled, write_marshalled

try:  # the C matcher's entry point (CPython); without it nothing is cached
    import _sre
except ImportError:  # pragma: no cover - other interpreters
    _sre = None

_FORMAT = 2  # 2: (header, programs) under the checksum


def _engine() -> str:
    """What a program depends on: the Python build and its regex engine."""
    return f"{sys.version}|{getattr(_sre, 'MAGIC', '')}|{getattr(_sre, 'CODESIZE', '')}"


class RegexCache:
    """The compiled patterns of `sources` (name → regular expression; flags written in
    the pattern, `(?m)`), each read from the cache file or compiled on first use."""

    def __init__(self, set_name: str, sources: dict[str, str]):
        self.sources = sources
        self.set_name = set_name
        self.programs: dict[str, tuple] | None = None  # read from the file on first use

    def file(self) -> str | None:
        """The cache file of this set of patterns (None: no cache folder)."""
        folder = cache_folder() if _sre is not None else None
        if folder is None:
            return None
        key = "\0".join(f"{name}\0{source}" for name, source in sorted(self.sources.items()))
        digest = zlib.crc32(f"{key}\0{_engine()}".encode())
        return os.path.join(folder, f"regex-{self.set_name}-{digest:08x}.bin")

    def compile(self, name: str) -> re.Pattern:
        """The compiled pattern `name`: from the cache file when it holds it, else by
        `re.compile` (and then stored)."""
        pattern, added = self._compile_one(name)
        if added:
            self._write()
        return pattern

    def compile_all(self) -> dict[str, re.Pattern]:
        """Every pattern of the set (a module's patterns that every run uses), the file
        read once and written at most once."""
        compiled, added = {}, False
        for name in self.sources:
            compiled[name], stored = self._compile_one(name)
            added |= stored
        if added:
            self._write()
        return compiled

    def _compile_one(self, name: str) -> tuple[re.Pattern, bool]:
        """The pattern `name` and whether its program was newly added to `programs`."""
        source = self.sources[name]
        if self.programs is None:
            self.programs = self._read()
        program = self.programs.get(name)
        if program is not None:
            pattern = _from_program(source, program)
            if pattern is not None:
                return pattern, False
        pattern = re.compile(source)
        program = _program_of(source, pattern)
        if program is None:
            return pattern, False
        self.programs[name] = program
        return pattern, True

    def _read(self) -> dict[str, tuple]:
        """The stored programs of this set (empty when the file is missing, damaged or
        holds other patterns)."""
        programs = read_marshalled(self.file(), (_FORMAT, _engine()))
        if not isinstance(programs, dict):
            return {}
        return {name: program for name, program in programs.items()
                if name in self.sources and isinstance(program, tuple) and program
                and program[0] == self.sources[name]}

    def _write(self) -> None:
        """Store the programs known so far (a file that cannot be written: no cache)."""
        write_marshalled(self.file(), (_FORMAT, _engine()), self.programs)


class LazyPattern:
    """A regular expression compiled when first used, for a module's patterns that most
    runs never need (error messages, options): compiling them at import cost every
    command about 0.1 ms a pattern. Its attributes are the compiled pattern's (`match`,
    `sub`, `pattern`, …); each is looked up once and kept, so a later `X.match` costs what
    it costs on the compiled pattern."""

    def __init__(self, source: str, flags: int = 0):
        self._source_and_flags = (source, flags)

    def __getattr__(self, name: str):
        if name.startswith("__"):  # copy, pickle and introspection probing: not a pattern's
            raise AttributeError(name)
        pattern = self.__dict__.get("_pattern")
        if pattern is None:
            pattern = self._pattern = re.compile(*self._source_and_flags)
        value = getattr(pattern, name)
        setattr(self, name, value)
        return value

    def __repr__(self) -> str:
        return f"LazyPattern({self._source_and_flags[0]!r})"


def _program_of(source: str, compiled: re.Pattern) -> tuple | None:
    """(source, flags, code, groups, group index, index group): what the C matcher is
    built from, as `re.compile` builds it; None when the interpreter does not work that
    way or the pattern built from it differs from `compiled`."""
    try:
        from re import _compiler, _parser

        parsed = _parser.parse(source, 0)
        code = [int(word) for word in _compiler._code(parsed, 0)]
        groupindex = {str(k): int(v) for k, v in parsed.state.groupdict.items()}
        indexgroup = [None] * parsed.state.groups
        for group_name, index in groupindex.items():
            indexgroup[index] = group_name
        program = (source, int(parsed.state.flags), code, parsed.state.groups - 1,
                   groupindex, tuple(indexgroup))
    except Exception:  # noqa: BLE001 - interpreter internals: any change means no cache
        return None
    rebuilt = _from_program(source, program)
    if rebuilt != compiled or rebuilt.groupindex != compiled.groupindex:
        return None
    return program


def _from_program(source: str, program: tuple) -> re.Pattern | None:
    """The pattern built from a stored program (None when the matcher refuses it)."""
    try:
        stored, flags, code, groups, groupindex, indexgroup = program
        if stored != source:
            return None
        return _sre.compile(source, flags, code, groups, groupindex, indexgroup)
    except Exception:  # noqa: BLE001 - a damaged or foreign program: compile instead
        return None
