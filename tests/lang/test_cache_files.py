"""The cache files' reader and writer (`gpudiv.lang.cache_files`): what is written under a
header reads back under that header only, and a damaged or missing file reads as nothing."""

from __future__ import annotations

from gpudiv.lang import cache_files


def test_a_value_reads_back_under_its_header_only(tmp_path):
    path = tmp_path / "c.bin"
    cache_files.write_marshalled(path, (1, "build"), {"a": (1, 2)})
    assert cache_files.read_marshalled(path, (1, "build")) == {"a": (1, 2)}
    assert cache_files.read_marshalled(path, (2, "build")) is None
    assert cache_files.read_marshalled(path, (1, "another build")) is None
    assert [p.name for p in tmp_path.iterdir()] == ["c.bin"]  # no temporary file left


def test_damaged_missing_and_unwritable_files_are_nothing(tmp_path):
    path = tmp_path / "c.bin"
    cache_files.write_marshalled(path, (1,), [1, 2, 3])
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    assert cache_files.read_marshalled(path, (1,)) is None
    assert cache_files.read_marshalled(tmp_path / "missing.bin", (1,)) is None
    assert cache_files.read_marshalled(None, (1,)) is None
    cache_files.write_marshalled(tmp_path / "no" / "such" / "c.bin", (1,), [1])  # no error
    cache_files.write_marshalled(None, (1,), [1])


def test_no_folder_when_it_cannot_be_made(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert cache_files.cache_folder() is None
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert cache_files.cache_folder() == str(tmp_path / "cache" / "gpudiv")
