"""One error contract for every subcommand (issue 18, item 7).

Every file in tests/data/broken/ holds exactly one problem. Each subcommand that reads a
file must, on each of them, exit with status 2 and print exactly one
`FILE:LINE:COL: error: ...` line, the same line for every subcommand, and nothing else
that says `error`. EXPECTED names the line, column and words of that problem; a new
fixture without an entry fails the test.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpudiv.cli import main

BROKEN = Path(__file__).parent / "data" / "broken"

# fixture → (line, column, words the message must contain)
EXPECTED = {
    "deep_braces.ptx": (8, 1000, "nested too deeply"),
    "duplicate_kernel.musimd": (4, 1, "kernel 'k' already defined at line 1"),
    "duplicate_kernel.ptx": (11, 10, "entry 'good' already defined at line 5"),
    "kernel_assigned.musimd": (2, 3, "'kernel' is a reserved word"),
    "non_ascii_identifier.musimd": (2, 4, "unexpected character 'é'"),
    "non_ascii_identifier.ptx": (8, 17, "unexpected character 'é'"),
    "not_utf8.musimd": (2, 16, "not UTF-8 text: byte 0xe9"),
    "not_utf8.ptx": (8, 28, "not UTF-8 text: byte 0xff"),
    "one_good_one_broken.musimd": (5, 10, "unexpected end of line"),
    "one_good_one_broken.ptx": (14, 20, "unexpected ';'"),
    "reserved_word_assigned.musimd": (3, 3, "'tid' is a reserved word"),
    "reserved_word_parameter.musimd": (1, 13, "'ntid' is a reserved word"),
    "syntax_error.musimd": (2, 10, "unexpected end of line"),
    "syntax_error.ptx": (9, 2, "unexpected 'ret'"),
    "undefined_label.musimd": (2, 3, "undefined label 'NOWHERE'"),
    "undefined_label.ptx": (8, 2, "undefined label 'NOWHERE'"),
}

# subcommand → its arguments; {f} is the fixture, {var} a variable of its good kernel,
# {args} the launch arguments of that kernel (so that only the file's problem is reported).
COMMANDS = {
    "analyze": ["analyze", "{f}"],
    "analyze-json": ["analyze", "--format", "json", "{f}"],
    "check": ["check", "{f}"],
    "cfg": ["cfg", "{f}"],
    "solve": ["solve", "{f}"],
    "facts": ["facts", "{f}", "-o", "{out}"],
    "run": ["run", "{f}", "{args}"],
    "compare": ["compare", "{f}"],
    "explain": ["explain", "{f}", "{var}"],
    "transform": ["transform", "--pass", "identity", "{f}"],
}
LANGUAGE = {".musimd": {"var": "x", "args": "--param=a=1"},
            ".ptx": {"var": "%r1", "args": "--arg=u32:1"}}

FIXTURES = sorted(p.name for p in BROKEN.iterdir())


def test_every_fixture_has_an_expectation():
    """A fixture without an expected place would test nothing."""
    assert FIXTURES == sorted(EXPECTED)


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("fixture", FIXTURES)
def test_error_contract(fixture, command, capsys, tmp_path):
    path = BROKEN / fixture
    fill = {"f": str(path), "out": str(tmp_path / "out"), **LANGUAGE[path.suffix]}
    argv = [a.format(**fill) for a in COMMANDS[command]]
    try:
        status = main(argv)
    except SystemExit as exit_:  # argparse
        status = exit_.code
    err = capsys.readouterr().err
    line, column, words = EXPECTED[fixture]
    located = [x for x in err.splitlines()
               if re.match(rf"{re.escape(str(path))}:\d+:\d+: error: ", x)]
    assert status == 2, (argv, err)
    assert len(located) == 1, err
    assert located[0].startswith(f"{path}:{line}:{column}: error: "), located[0]
    assert words in located[0]
    others = [x for x in err.splitlines() if "error" in x and x not in located]
    assert not others, err
