"""The μ-SIMD front end: the syntax of docs/design.md ("μ-SIMD syntax and semantics"),
blocks, labels, diagnostics."""

import pytest

from gpudiv import ir
from gpudiv.lang.musimd.parse import parse_musimd

ALL_FORMS = """# every instruction form of docs/design.md
kernel forms(p1, p2)
L0:
  v = p1
  v = -5
  a = v + -5
  b = a-5
  c = - a
  d = ! a
  e = ~ a
  f = a min b
  g = a max b
  h = a << 2
  i = shared[a]
  shared[a] = 3
  j = local[b]
  local[b] = j
  k = atominc shared[a]
  m = atomadd shared[a], 2
  bz k, L0
  bnz m, L1
  jump L1
L1: sync
  barrier
  stop
kernel second()
  stop
"""


def test_every_instruction_form_parses():
    program = parse_musimd(ALL_FORMS, "forms.musimd")
    assert program.errors == []
    assert [k.name for k in program.kernels] == ["forms", "second"]
    kernel = program.kernels[0]
    assert kernel.params == ["p1", "p2"]
    instrs = kernel.instructions()
    assert instrs[1].args == (ir.Const(-5),)
    assert (instrs[2].operator, instrs[2].args) == ("+", (ir.Var("v"), ir.Const(-5)))
    assert (instrs[3].operator, instrs[3].args) == ("-", (ir.Var("a"), ir.Const(5)))
    assert [i.operator for i in instrs[4:7]] == ["neg", "!", "~"]
    assert [i.kind for i in instrs[10:16]] == ["load", "store", "load", "store", "atomic",
                                                "atomic"]
    assert [i.space for i in instrs[10:14]] == ["shared", "shared", "local", "local"]
    assert instrs[0].loc == ir.Loc(4, 3)
    assert instrs[0].text == "v = p1"


def test_basic_blocks_and_labels():
    program = parse_musimd(ALL_FORMS, "forms.musimd")
    labels = [b.label for b in program.kernels[0].blocks]
    assert labels == ["L0", "bb1", "bb2", "L1"]
    assert program.kernels[0].blocks[0].loc.line == 3


def test_specials_are_not_variables():
    program = parse_musimd("kernel k()\n x = tid + laneid\n y = warpid * ntid\n stop\n")
    args = [a for i in program.kernels[0].instructions() for a in i.args]
    assert all(isinstance(a, ir.Special) for a in args)


def test_syntax_error_has_line_and_column_and_other_kernels_survive():
    text = "kernel good()\n stop\nkernel bad()\n x = = 3\n stop\nkernel also()\n stop\n"
    program = parse_musimd(text, "f.musimd")
    assert [k.name for k in program.kernels] == ["good", "also"]
    (error,) = program.errors
    assert (error.line, error.column) == (4, 6)
    assert str(error).startswith("f.musimd:4:6: error: unexpected '='")


def test_undefined_label():
    program = parse_musimd("kernel k()\n jump NOWHERE\n stop\n", "f.musimd")
    (error,) = program.errors
    assert str(error) == "f.musimd:2:2: error: undefined label 'NOWHERE' in kernel k"
    assert program.kernels == []


def test_duplicate_label_and_kernel():
    program = parse_musimd("kernel k()\nA: stop\nA: stop\nkernel k()\n stop\n", "f.musimd")
    messages = [e.message for e in program.errors]
    assert "label 'A' already defined at line 2" in messages
    assert "kernel 'k' already defined at line 1" in messages


def test_unknown_character_and_empty_file():
    program = parse_musimd("kernel k()\n x = 3 $ 4\n stop\n", "f.musimd")
    assert "unexpected character '$'" in program.errors[0].message
    assert parse_musimd("# nothing\n", "e.musimd").errors[0].message == "no kernel found"


def test_several_labels_on_one_instruction():
    program = parse_musimd("kernel k()\nA:\nB: stop\n jump A\n", "f.musimd")
    blocks = program.kernels[0].blocks
    assert [(b.label, len(b.instructions)) for b in blocks[:2]] == [("A", 0), ("B", 1)]


def test_names_that_start_with_a_keyword_are_names():
    text = ("kernel k(kernels)\n stopper = 1\n sharedx = stopper + kernels\n bza = 2\n"
            " minx = sharedx min 3\n atomincx = atominc shared[minx]\n bnz bza, L\n"
            "L: sync\n stop\n")
    program = parse_musimd(text, "k.musimd")
    assert program.errors == []
    instrs = program.kernels[0].instructions()
    assert [i.dest for i in instrs[:5]] == ["stopper", "sharedx", "bza", "minx", "atomincx"]
    assert [(i.kind, i.loc.line, i.loc.column) for i in instrs[-3:]] == [
        ("branch", 7, 2), ("sync", 8, 4), ("stop", 9, 2)]


@pytest.mark.parametrize("word", ["tid", "laneid", "warpid", "ntid", "min", "max", "atominc",
                                  "atomadd", "kernel", "shared", "local", "stop", "sync"])
def test_reserved_words_cannot_be_assigned(word):
    program = parse_musimd(f"kernel k(a)\n  x = a\nL: {word} = x + 1\n  stop\n", "r.musimd")
    (error,) = program.errors
    assert (error.line, error.column) == (3, 4)
    assert error.message == f"'{word}' is a reserved word and cannot be assigned"
    assert program.kernels == []


@pytest.mark.parametrize("word", ["tid", "laneid", "warpid", "ntid", "min", "max", "atominc",
                                  "atomadd"])
def test_reserved_words_cannot_name_parameters(word):
    program = parse_musimd(f"kernel k(a, {word})\n  stop\n", "r.musimd")
    (error,) = program.errors
    assert (error.line, error.column) == (1, 13)
    assert f"'{word}' is a reserved word and cannot name a parameter" in error.message


def test_reserved_words_can_still_be_read_and_compared():
    program = parse_musimd("kernel k(a)\n  x = tid == a\n  y = a min x\n  stop\n")
    assert not program.diagnostics and len(program.kernels) == 1


def test_duplicate_parameters_and_wide_literals_are_warned():
    program = parse_musimd("kernel k(a, a)\n  x = a + 4294967296\n  y = -2147483648\n"
                           "  z = 4294967295\n  stop\n", "w.musimd")
    assert [(d.severity, d.line, d.column) for d in program.diagnostics] == [
        ("warning", 1, 13), ("warning", 2, 3)]
    assert "parameter 'a' is listed twice" in program.diagnostics[0].message
    assert "4294967296 does not fit in 32 bits; it is taken modulo 2^32 (0)" in \
        program.diagnostics[1].message
    assert len(program.kernels) == 1


THREE_KERNELS = """kernel a()
  x = 1
  stop

kernel b(p)
  y = p + 1
  bz y, L  # gpudiv: reconverge L
  y = 2
L: sync
  stop
kernel c()
  z = = 1
"""


def test_places_in_later_kernels_are_lines_of_the_file(monkeypatch):
    """Each kernel is parsed on its own text (not padded to its place in the file: that
    made parsing quadratic in a file of many kernels), its places moved to the file's."""
    from gpudiv.lang.musimd import parse as musimd_parse

    parsed_texts = []
    real_parser = musimd_parse.parser()

    class Recording:
        def parse(self, text):
            parsed_texts.append(text)
            return real_parser.parse(text)

    monkeypatch.setattr(musimd_parse, "parser", lambda: Recording())
    program = parse_musimd(THREE_KERNELS, "m.musimd")
    assert [len(t.splitlines()) for t in parsed_texts] == [4, 6, 2]
    a, b = program.kernels
    assert (a.loc.line, b.loc.line) == (1, 5)
    assert [(i.loc.line, i.loc.column, i.text) for i in b.instructions()] == [
        (6, 3, "y = p + 1"), (7, 3, "bz y, L"), (8, 3, "y = 2"), (9, 4, "sync"), (10, 3, "stop")]
    assert b.blocks[-1].label == "L" and b.blocks[-1].loc.line == 9
    assert b.instructions()[1].attrs[ir.RECONVERGE] == "L"
    (error,) = program.errors
    assert (error.line, error.column) == (12, 7)
