"""The code-motion program model: candidates, expression identity, local predicates."""

from __future__ import annotations

from gpudiv.lang.load import parse_text
from gpudiv.transforms.motion import build_model, facts

BLOCK = """kernel k(a, b, c)
      x = a + b
      y = a + b
      a = a + 1
      z = a + b
      w = c / b
      shared[tid] = w
"""


def test_entry_and_exit_parts_and_local_predicates():
    program = parse_text(BLOCK, "k.musimd", "musimd")
    assert program.errors == []
    model = build_model(program.kernels[0])
    e = next(n for n, key in enumerate(model.keys) if key[0] == "+" and
             [str(a) for a in key[1]] == ["a", "b"])
    view = model.views[(e, model.labels[0])]
    assert [i.dest for i in view.entry] == ["x", "y"]  # before a is modified
    assert [i.dest for i in view.exit] == ["z"]         # after the last modification
    assert not view.transparent
    text = facts(model)
    assert f"ncomp({e},0)." in text and f"xcomp({e},0)." in text
    assert f"transp({e},0)." not in text


def test_division_and_memory_never_move():
    model = build_model(parse_text(BLOCK, "k.musimd", "musimd").kernels[0])
    assert all(key[0] != "/" for key in model.keys)  # may trap
