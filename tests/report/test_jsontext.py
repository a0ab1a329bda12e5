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


def test_without_orjson(monkeypatch):
    monkeypatch.setattr(jsontext, "orjson", None)
    for document in DOCUMENTS:
        assert dumps_indented(document) == json.dumps(document, indent=2)


def test_small_documents_do_not_load_orjson_and_large_ones_do(tmp_path):
    """Importing orjson costs a one-file process more than `json` writing a small report."""
    import subprocess
    import sys

    code = ("import json, sys\nfrom gpudiv.report import jsontext\n"
            "small = {'kernels': [{'name': f'k{i}', 'vars': list(range(20))} for i in range(40)]}\n"
            "same = jsontext.dumps_indented(small) == json.dumps(small, indent=2)\n"
            "loaded = 'orjson' in sys.modules\n"
            "large = {'vars': [{'name': f'v{i}', 'class': 'uniform'} for i in range(3000)]}\n"
            "same = same and jsontext.dumps_indented(large) == json.dumps(large, indent=2)\n"
            "print(same, loaded, 'orjson' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, timeout=60, check=True)
    assert done.stdout.split() == ["True", "False", "True"], done.stdout + done.stderr
