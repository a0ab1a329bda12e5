"""The cached LALR tables give the same parser as a fresh build."""

from pathlib import Path

from gpudiv.lang import grammars
from gpudiv.lang.musimd.parse import _ToIR

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "musimd" / "sumTriangle.musimd"


def test_cached_parser_parses_as_a_fresh_one(tmp_path, monkeypatch):
    """First build writes the cache file, the second loads it; both parse alike."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    text = SAMPLE.read_text()
    first = grammars.lalr_parser("musimd.lark", transformer=_ToIR())
    (written,) = (tmp_path / "gpudiv").iterdir()
    assert written.stat().st_size > 0
    second = grammars.lalr_parser("musimd.lark", transformer=_ToIR())
    assert repr(first.parse(text)) == repr(second.parse(text))


def test_no_cache_folder_means_no_cache(tmp_path, monkeypatch):
    """A cache folder that cannot be made: no cache file, the parser still works."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert grammars.cache_file("musimd.lark", "x") is None
    assert grammars.lalr_parser("musimd.lark", transformer=_ToIR()).parse(SAMPLE.read_text())
