"""The examples of README.md and docs/*.md run and print what they show (issue 18, item 1).

Each checked block is one test (id: document and line). The blocks of one document run in
order in one scratch folder (`tests/doc_examples.py` says how blocks are chosen, matched
and marked). When an output drifts, the failure shows a diff; re-record the drifted
blocks with `python tests/doc_examples.py --update` and review the change.
"""

from __future__ import annotations

import json

import pytest

from tests import doc_examples as docs

_SPACES: dict[str, docs.Workspace] = {}


def _space(block: docs.Block) -> docs.Workspace:
    """The scratch folder of the block's document (one per document and test run)."""
    key = str(block.doc)
    if key not in _SPACES:
        _SPACES[key] = docs.Workspace.create()
    return _SPACES[key]


def _checked() -> list:
    params = []
    for doc in docs.documents():
        for block in docs.blocks(doc):
            if block.kind in ("skip", "prose", "python"):
                continue
            params.append(pytest.param(block, id=block.name))
    return params


# Each example runs gpudiv on real samples: together they cost a quarter of the fast
# loop, so they run in the full suite (CI) only; the checker itself is tested below.
@pytest.mark.slow
@pytest.mark.parametrize("block", _checked())
def test_example(block):
    if block.kind == "json-subset":
        problems = docs.check_json(block, _space(block))
        assert not problems, "\n".join(problems)
        return
    if block.kind == "excerpt":
        differences, redone = docs.check_excerpt(block)
    else:
        differences, redone = docs.check_session(block, _space(block))
    assert differences == 0, (
        f"the example at {block.name} no longer prints what it shows "
        "(re-record with `python tests/doc_examples.py --update`):\n"
        + docs.diff(block, redone))


@pytest.mark.slow
@pytest.mark.parametrize("doc", [pytest.param(d, id=str(d.relative_to(docs.ROOT)))
                                 for d in docs.documents()
                                 if any(b.kind == "python" for b in docs.blocks(d))])
def test_python_examples(doc):
    python = [b for b in docs.blocks(doc) if b.kind == "python"]
    failure = docs.run_python(python, docs.Workspace.create())
    assert not failure, failure


def test_every_gpudiv_command_is_checked():
    """A block that shows gpudiv commands is a `$ ` session, or marked skip with a reason."""
    unchecked = []
    for doc in docs.documents():
        for block in docs.blocks(doc):
            if block.kind == "prose" and any(line.lstrip().startswith("gpudiv ")
                                             for line in block.lines):
                unchecked.append(block.name)
            if block.kind == "skip" and not block.marker_arg:
                unchecked.append(f"{block.name} (skip without a reason)")
    assert not unchecked


# ---------------------------------------------------------------------------------------
# The matcher: it must fail when an output changes, and re-record around elisions
# ---------------------------------------------------------------------------------------

def test_align_accepts_elisions_spaces_and_times():
    shown = ["head", "...", "x  =  1", "done in 2.01 s with 2 jobs", "a ... z"]
    actual = ["head", "one", "two", "x = 1", "done in 9.5 s with 2 jobs", "a middle z"]
    assert docs.align(shown, actual)[0] == 0


def test_align_fails_when_an_output_changes():
    shown = ["run summary: 45 files, 133 kernels", "...", "last"]
    actual = ["run summary: 47 files, 141 kernels", "more", "last"]
    differences, redone = docs.align(shown, actual)
    assert differences == 1
    assert redone == ["run summary: 47 files, 141 kernels", "...", "last"]


def test_align_re_records_around_elisions():
    shown = ["a", "b", "...", "z"]
    actual = ["a", "b2", "new", "c", "d", "z", "tail"]
    differences, redone = docs.align(shown, actual)
    assert differences > 0
    assert docs.align(redone, actual)[0] == 0
    assert "..." in redone


def test_json_subset():
    actual = {"a": 1, "xs": [{"n": "p", "k": 2}, {"n": "q", "k": 3}], "timing_ms": {"t": 5}}
    assert docs.json_subset({"a": 1, "xs": [{"n": "q"}], "timing_ms": {"t": 1}}, actual) == []
    assert docs.json_subset({"a": "..."}, actual) == []
    assert docs.json_subset({"a": 2}, actual) == ["$.a: shown 2, actual 1"]
    assert docs.json_subset({"xs": [{"n": "r"}]}, actual)
    assert docs.json_subset({"b": 1}, actual)


def test_a_drifted_readme_example_is_caught(tmp_path):
    """The real runner on a copy of a README example whose output was edited."""
    doc = docs.ROOT / "README.md"
    session = next(b for b in docs.blocks(doc)
                   if b.kind == "session" and b.lines[0].startswith("$ gpudiv explain"))
    edited = docs.Block(session.doc, session.line, session.end, session.indent,
                        session.info, [line.replace("divergent", "uniform", 1)
                                       for line in session.lines])
    space = docs.Workspace.create()
    assert docs.check_session(session, space)[0] == 0
    differences, redone = docs.check_session(edited, space)
    assert differences == 1 and redone == session.lines


def test_json_example_is_checked_against_the_default_analysis():
    """The README's JSON example is compared (with the default analysis' counts)."""
    block = next(b for b in docs.blocks(docs.ROOT / "README.md") if b.kind == "json-subset")
    shown = json.loads("\n".join(block.lines))
    assert "--format json" in block.marker_arg
    assert shown["inputs"][0]["kernels"][0]["summary"]
