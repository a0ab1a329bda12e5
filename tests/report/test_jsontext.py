"""dumps_indented writes exactly what json.dumps(indent=2) writes, with orjson and without."""

import json

import pytest

from gpudiv.report import jsontext
from gpudiv.report.jsontext import dumps_indented

DOCUMENTS = [
    {"tool": "gpudiv", "inputs": [{"path": "a.ptx", "kernels": [], "errors": {}}], "n": None},
    {"timing_ms": {"parse": 0.0, "ssa": 1.25, "facts": 0.001, "ground": 12345.678},
     "flags": [True, False], "neg": -3, "big": 2**63 - 1},
    {"text": "é\x7f\u2028\U0001F600 \x1f\b\n\t\"\\ /"},           # escapes and astral
    {"runs": "a ← b ←←é\U0001F600←" * 50, "more": ["x\x7f←", "日本語", "\x80\xff"]},  # repeats
    {"many": "".join(map(chr, range(0x7d, 0x200))) + "\x7f\U0001F600" * 3},  # many distinct
    {"small": 1e-05, "tiny": 3.5e-09, "exp": 1e16, "huge": 1.5e300},  # exponent forms
    {"beyond": 2**70, "negative beyond": -(2**65)},                    # orjson refuses
    {1: "int key", "s": [1, 2]},                                       # non-string key
    {"surrogate": "\ud800"},                                           # not valid UTF-8
    [[], {}, [[{}]], "", 0],
    [1e-05, [2.5e-07], {"x": 0.00001234}], 1e-05, 1.5e16, {"a": [1e300]},  # value ends
    {"fingerprint": "0e5", "s": "line e5,\n 0.00001"},          # look like numbers, are not
]


@pytest.mark.parametrize("document", DOCUMENTS)
def test_same_text_as_json(document):
    assert dumps_indented(document) == json.dumps(document, indent=2)


@pytest.mark.parametrize("document", DOCUMENTS[:5])
def test_orjson_path_is_taken_where_it_agrees(document):
    if jsontext.orjson is None:
        pytest.skip("orjson is not installed")
    assert jsontext._orjson_text(document) == json.dumps(document, indent=2)


SPECIAL_FLOATS = [{"nan": float("nan"), "inf": [float("inf"), float("-inf")], "z": -0.0}]


class Text(str):
    """A str subclass: json writes the string it is."""


class Count(int):
    """An int subclass with a repr of its own: json writes the integer."""

    def __repr__(self) -> str:
        return "Count(...)"


@pytest.mark.parametrize("document", [*DOCUMENTS, *SPECIAL_FLOATS, True, None, "x", 7,
                                      {Text("k"): (Text("v"), Count(3), False)},
                                      {"deep": [[[[{"a": [{}]}]]]], "t": ()}])
def test_small_documents_written_here_are_what_json_writes(document):
    """`_small_text`: the same text as `json`, or None (then `json` writes it) for what
    it does not cover, here a non-string key."""
    text = jsontext._small_text(document)
    if text is None:
        assert isinstance(document, dict) and any(not isinstance(k, str) for k in document)
        return
    assert text == json.dumps(document, indent=2)


def test_random_documents_written_here_are_what_json_writes():
    import random

    chance = random.Random(16)
    leaves = [None, True, False, 0, -7, 2**64, 0.5, 1e-07, 3.25e22, "", "é←\x7f\n\"", "ok"]

    def document(depth: int) -> object:
        pick = chance.randrange(4 if depth < 4 else 1)
        if pick == 1:
            return [document(depth + 1) for _ in range(chance.randrange(4))]
        if pick == 2:
            return tuple(document(depth + 1) for _ in range(chance.randrange(3)))
        if pick == 3:
            return {f"k{i}←": document(depth + 1) for i in range(chance.randrange(4))}
        return chance.choice(leaves)

    for _ in range(300):
        made = document(0)
        assert jsontext._small_text(made) == json.dumps(made, indent=2)


def test_without_orjson(monkeypatch):
    monkeypatch.setattr(jsontext, "orjson", None)
    for document in DOCUMENTS:
        assert dumps_indented(document) == json.dumps(document, indent=2)


def test_small_documents_do_not_load_orjson_and_large_ones_do(tmp_path):
    """Importing orjson costs a one-file process more than writing a small report here;
    neither loads `json`."""
    import subprocess
    import sys

    code = ("import sys\nfrom gpudiv.report import jsontext\n"
            "small = {'kernels': [{'name': f'k{i}', 'vars': list(range(20))} for i in range(40)]}\n"
            "text = jsontext.dumps_indented(small)\n"
            "loaded = 'orjson' in sys.modules, 'json' in sys.modules\nimport json\n"
            "same = text == json.dumps(small, indent=2)\n"
            "large = {'vars': [{'name': f'v{i}', 'class': 'uniform'} for i in range(8000)]}\n"
            "same = same and jsontext.dumps_indented(large) == json.dumps(large, indent=2)\n"
            "print(same, *loaded, 'orjson' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, timeout=60, check=True)
    assert done.stdout.split() == ["True", "False", "False", "True"], done.stdout + done.stderr
