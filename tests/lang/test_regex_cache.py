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
