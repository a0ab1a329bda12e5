"""Reading files (gpudiv.lang.load): what cannot be read is one line with its place."""

from pathlib import Path

import pytest

from gpudiv.lang.load import LoadError, load, path_text, suffix_of


def test_a_byte_order_mark_is_accepted(tmp_path):
    path = tmp_path / "bom.musimd"
    path.write_bytes(b"\xef\xbb\xbfkernel k(a)\n  x = a\n  stop\n")
    program = load(path)
    assert not program.diagnostics and program.kernels[0].name == "k"


def test_not_utf8_is_reported_at_line_and_column(tmp_path):
    path = tmp_path / "latin1.musimd"
    path.write_bytes("kernel k(a)\n  x = a # café\n  stop\n".encode("latin-1"))
    with pytest.raises(LoadError) as caught:
        load(path)
    assert str(caught.value) == (f"{path}:2:14: error: not UTF-8 text: byte 0xe9 cannot start "
                                 "or continue a UTF-8 character")


def test_a_folder_or_a_missing_file_is_named(tmp_path):
    with pytest.raises(LoadError, match="is a directory \\(give a .musimd or .ptx file"):
        load(tmp_path)
    with pytest.raises(LoadError, match="no such file"):
        load(tmp_path / "nope.ptx")


def test_only_the_documented_suffixes_are_read(tmp_path):
    path = tmp_path / "k.simd"
    path.write_text("kernel k(a)\n  stop\n")
    with pytest.raises(LoadError, match=r"unknown file type '.simd' \(expected one of "
                                        r".musimd, .ptx\)"):
        load(path)


@pytest.mark.parametrize("path", ["a//b/./c", "./x.ptx", "x.ptx", "/a/b.ptx", "//a", "///a",
                                  "a/", "a/.", ".", "", "a/../b", "x.tar.gz", ".ptx", "a.",
                                  "dir.d/x", "sub/k.PTX"])
def test_path_text_and_suffix_are_pathlibs(path):
    """Paths stay strings on the way to an analysis (pathlib is 4-6 ms of a small file's
    process); what `load` names a file and which front end it picks are as with pathlib."""
    assert path_text(path) == str(Path(path))
    assert suffix_of(path) == Path(path).suffix
