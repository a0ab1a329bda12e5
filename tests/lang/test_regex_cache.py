"""Compiled regexes kept on disk: what comes back from the file is what `re.compile` gives,
and anything wrong with the file only means compiling again."""

import re
from pathlib import Path

from gpudiv.lang import regex_cache
from gpudiv.lang.ptx import fast as ptx_fast

SOURCES = {"word": r"(?P<w>[A-Za-z_]\w*)(?:\.(?P<s>\w+))?", "gap": r"(?:\s+|//[^\n]*)*+",
           "number": r"-?(?>0[xX][0-9a-fA-F]+|[0-9]+)[uU]?"}


def test_patterns_read_back_equal_what_re_compiles(tmp_path, monkeypatch):
    """The first cache compiles and writes every pattern, a second one reads them back:
    equal patterns (equality compares the matcher's programs) that match alike."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first = regex_cache.RegexCache("t", SOURCES)
    compiled = {name: first.compile(name) for name in SOURCES}
    (written,) = (tmp_path / "gpudiv").iterdir()
    second = regex_cache.RegexCache("t", SOURCES)
    assert set(second._read()) == set(SOURCES)  # every program is in the file
    for name, source in SOURCES.items():
        loaded = second.compile(name)
        assert loaded == re.compile(source) == compiled[name]
        assert loaded.groupindex == re.compile(source).groupindex
    assert second.compile("word").fullmatch("ld.global").group("w", "s") == ("ld", "global")
    assert written.name.startswith("regex-t-")


def test_every_fast_path_pattern_comes_back_equal(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    sources = ptx_fast.build_patterns(ptx_fast.TERMINALS.__getitem__)._sources
    writer = regex_cache.RegexCache("ptx-fast", sources)
    for name in sources:
        writer.compile(name)
    reader = regex_cache.RegexCache("ptx-fast", sources)
    assert set(reader._read()) == set(sources)
    for name, source in sources.items():
        assert reader.compile(name) == re.compile(source), name


def test_damaged_or_foreign_files_are_compiled_again(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cache = regex_cache.RegexCache("t", SOURCES)
    cache.compile("word")
    where = Path(cache.file())
    good = where.read_bytes()
    for damaged in (b"", b"xy", good[:-7], good[:40] + bytes([good[40] ^ 1]) + good[41:]):
        where.write_bytes(damaged)
        again = regex_cache.RegexCache("t", SOURCES)
        assert again._read() == {}
        assert again.compile("word") == re.compile(SOURCES["word"])
    # Other patterns under the same names: another file, and never a wrong program.
    other = regex_cache.RegexCache("t", {**SOURCES, "word": r"[0-9]+"})
    assert other.file() != where and other.compile("word").fullmatch("42")
    # A program that the matcher refuses is not used.
    assert regex_cache._from_program("a", ("a", 32, [1, 2, 3], 0, {}, (None,))) is None


def test_no_cache_folder_means_plain_compiles(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    cache = regex_cache.RegexCache("t", SOURCES)
    assert cache.file() is None
    assert cache.compile("gap") == re.compile(SOURCES["gap"])


FLAGGED = {"line": r"(?m)^[ \t]*\.entry\b", "word": r"\w+"}


def test_compile_all_reads_the_file_once_and_writes_it_once(tmp_path, monkeypatch):
    """A module's patterns that every run uses: all compiled by the first process, the
    file written once, and read back equal (inline flags included) by the next."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    writes = []
    real_write = regex_cache.write_marshalled
    monkeypatch.setattr(regex_cache, "write_marshalled",
                        lambda *args: (writes.append(args[0]), real_write(*args)))
    first = regex_cache.RegexCache("flags", FLAGGED).compile_all()
    assert len(writes) == 1
    again = regex_cache.RegexCache("flags", FLAGGED)
    assert set(again._read()) == set(FLAGGED)
    loaded = again.compile_all()
    assert len(writes) == 1  # nothing new to store
    for name, source in FLAGGED.items():
        assert loaded[name] == first[name] == re.compile(source)
    assert loaded["line"].flags & re.M
    assert [m.start() for m in loaded["line"].finditer("x\n  .entry k\n.entry j")] == [2, 13]


def test_every_cached_module_pattern_equals_what_re_compiles():
    """The patterns the PTX reader and the solver take from the cache at import are those
    `re.compile` gives for the same text (a changed pattern gets another file)."""
    from gpudiv.analyses import solve
    from gpudiv.lang.ptx import chunks, parse

    for module in (chunks, parse, solve):
        for name, pattern in module._PATTERNS.items():
            assert pattern == re.compile(pattern.pattern), (module.__name__, name)


def test_a_lazy_pattern_compiles_when_first_used_and_acts_as_the_pattern(monkeypatch):
    compiled = []
    real = re.compile
    monkeypatch.setattr(re, "compile", lambda *args: (compiled.append(args), real(*args))[1])
    lazy = regex_cache.LazyPattern(r"^#show\s+(\w+)/(\d+)\.$", re.M)
    assert compiled == [] and "#show" in repr(lazy)
    text = "a.\n#show p/2.\n#show q/1."
    assert [m.groups() for m in lazy.finditer(text)] == [("p", "2"), ("q", "1")]
    assert lazy.sub("", text) == "a.\n\n"
    assert lazy.flags & re.M and lazy.groups == 2
    assert len(compiled) == 1  # once: each attribute is kept after its first lookup
