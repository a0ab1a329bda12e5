"""The host-program front end: lowering to single-statement nodes, and one-line errors."""

from pathlib import Path

import pytest

from gpudiv.ir import host as h
from gpudiv.lang.host.parse import HostError, parse_host

HOST = Path(__file__).parents[3] / "samples" / "host"
HEADER = 'import "fig5_2.musimd"\nn = 64\nd = malloc(n)\ne = malloc(n)\n'


def parse(body: str) -> h.HostProgram:
    return parse_host(HEADER + body, str(HOST / "t.host"))


def error_of(body: str) -> str:
    with pytest.raises(HostError) as info:
        parse(body)
    return str(info.value)


def test_structured_program_lowers_to_single_statements():
    prog = parse("i = 0\nwhile i < 2 {\n  Kernel1<<<2, 32>>>(d, e)\n  i = i + 1\n}\n"
                 "if i == 2 { memset(d, 1) } else { free(e) }\n")
    kinds = [type(prog.nodes[n].stmt).__name__ for n in prog.rpo()]
    assert kinds.count("Branch") == 2 and kinds.count("Launch") == 1
    assert all(len(prog.succ[n]) == (2 if isinstance(prog.nodes[n].stmt, h.Branch) else 1)
               for n in prog.nodes if n != prog.end)
    assert prog.types == {"n": "scalar", "d": "buffer", "e": "buffer", "i": "scalar"}


def test_flat_form_with_labels_and_gotos():
    prog = parse("i = 0\nL: if i < 3 goto B else X\nB: i = i + 1\ngoto L\nX: pass\n")
    branch = next(n for n in prog.nodes if isinstance(prog.nodes[n].stmt, h.Branch))
    body = prog.succ[branch][0]
    assert str(prog.nodes[body].stmt) == "i = i + 1" and prog.succ[body] == [branch]


@pytest.mark.parametrize("body, message", [
    ("Nope<<<1, 32>>>(d)\n", "5:1: error: unknown kernel 'Nope'"),
    ("Kernel1<<<1, 32>>>(d)\n", "5:1: error: kernel 'Kernel1' takes 2 arguments"),
    ("Kernel1<<<1, 32>>>(d, n)\n", "5:23: error: type mismatch: parameter 'in1'"),
    ("d = 5\n", "5:1: error: type mismatch: 'd' is a buffer, assigned a scalar"),
    ("x = d + 1\n", "type mismatch: a buffer ('d') where a number is needed"),
    ("memcpy(n, d)\n", "5:1: error: type mismatch: memcpy copies"),
    ("goto Z\n", "5:6: error: unknown label 'Z'"),
    ("x = = 1\n", "5:5: error: unexpected '='"),
    ("x = y\n", "5:5: error: undefined variable 'y'"),
    ("x = 1 +\n", "6:1: error: unexpected end of file"),
    ("input a = 1\ninput a = 2\n", "6:7: error: input 'a' declared twice"),
])
def test_bad_programs_get_one_located_line(body, message):
    text = error_of(body)
    assert "\n" not in text and message in text and text.startswith(str(HOST / "t.host"))


def test_bad_import_is_located():
    with pytest.raises(HostError, match=r":1:8: error: cannot import 'missing.musimd'"):
        parse_host('import "missing.musimd"\n', str(HOST / "t.host"))
