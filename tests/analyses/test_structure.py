"""Structural analysis (`gpudiv.analyses.structure`, `gpudiv structure`): the region
shapes reduce, each kind of unstructured edge is found on its minimal shape, and the
Fig 1 short-circuit example of Wu et al. (2011) is unstructured by Forward Copy edges."""

import json
from pathlib import Path

import pytest

from gpudiv.analyses.structure import (
    BACKWARD_COPY,
    CUT,
    FORWARD_COPY,
    SOURCE_PATTERNS,
    analyze_file,
    analyze_kernel,
    summarize,
)
from gpudiv.cli import main
from gpudiv.lang.load import parse_text

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
FIG1 = SAMPLES / "musimd" / "wu_fig1_short_circuit.musimd"


def structure(body: str):
    program = parse_text(f"kernel k(out)\n{body}", "shape.musimd")
    assert program.errors == []
    return analyze_kernel(program.kernels[0])


STRUCTURED = {
    "diamond": """
        a = tid & 1
        bz a, ELSE
        r = 1
        jump END
ELSE:   r = 2
END:    shared[tid] = r
        stop
""",
    "nested_diamonds": """
        a = tid & 1
        b = tid & 2
        bz a, ELSE
        bz b, IN
        r = 1
IN:     r = r + 1
        jump END
ELSE:   r = 2
END:    shared[tid] = r
        stop
""",
    "while_loop": """
        i = 0
HEAD:   p = i < tid
        bz p, END
        i = i + 1
        jump HEAD
END:    shared[tid] = i
        stop
""",
    "do_while_loop": """
        i = 0
BODY:   i = i + 1
        x = i * 2
        p = i < tid
        bnz p, BODY
        shared[tid] = i
        stop
""",
    "self_loop": """
        i = 0
SELF:   i = i + 1
        p = i < tid
        bnz p, SELF
        shared[tid] = i
        stop
""",
    "break_to_the_loop_exit": """
        i = 0
HEAD:   p = i < 8
        bz p, END
        q = i == tid
        bnz q, END
        i = i + 1
        jump HEAD
END:    shared[tid] = i
        stop
""",
}


@pytest.mark.parametrize("name", sorted(STRUCTURED))
def test_structured_shapes_reduce_without_marks(name):
    result = structure(STRUCTURED[name])
    assert result.structured and result.edges == []


def test_multi_exit_loop_needs_a_cut():
    result = structure("""
        i = 0
HEAD:   p = i < 8
        bz p, END
        q = i == tid
        bnz q, OTHER
        i = i + 1
        jump HEAD
OTHER:  i = 100
END:    shared[tid] = i
        stop
""")
    assert [(e.source, e.target, e.kind) for e in result.edges] == [("bb2", "OTHER", CUT)]
    assert result.edges[0].header == "HEAD" and result.edges[0].main_exit == "END"


def test_side_entry_into_a_loop_needs_a_backward_copy():
    result = structure("""
        a = tid & 1
        bnz a, INSIDE
HEAD:   i = i + 1
INSIDE: i = i + 2
        p = i < 20
        bnz p, HEAD
        shared[tid] = i
        stop
""")
    assert result.counts()[BACKWARD_COPY] == 1
    assert result.irreducible_loops
    (edge,) = [e for e in result.edges if e.kind == BACKWARD_COPY]
    assert {edge.target, *result.irreducible_loops} == {"HEAD", "INSIDE"}


def test_fig1_short_circuit_has_two_forward_copy_edges():
    (kernel,) = analyze_file(FIG1).kernels
    assert not kernel.structured
    assert kernel.counts() == {CUT: 0, FORWARD_COPY: 2, BACKWARD_COPY: 0}
    # either incoming edge of each two-predecessor join may be the one marked
    assert {e.target for e in kernel.edges} <= {"B3", "B5"}
    assert all(e.line > 0 for e in kernel.edges)


def test_samples_that_were_structured_stay_structured():
    for name in ("avgSquare", "loops_nested", "two_latch_loop", "sumTriangle"):
        assert analyze_file(SAMPLES / "musimd" / f"{name}.musimd").structured


def test_summary_counts_files_and_kernels():
    files = [analyze_file(FIG1), analyze_file(SAMPLES / "musimd" / "avgSquare.musimd")]
    summary = summarize(files)
    assert summary["files"] == 2 and summary["files_unstructured"] == 1
    assert summary["kernels_unstructured"] == 1 and summary[FORWARD_COPY] == 2


def test_cli_json_and_text(capsys):
    assert main(["structure", str(FIG1), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (kernel,) = data["files"][0]["kernels"]
    assert kernel["structured"] is False and kernel["forward_copy"] == 2
    assert {e["kind"] for e in kernel["edges"]} == {FORWARD_COPY}
    assert main(["structure", str(SAMPLES / "musimd")]) == 0
    out = capsys.readouterr().out
    assert "wu_fig1_short_circuit.musimd:14: forward_copy edge" in out or \
        "wu_fig1_short_circuit.musimd:16: forward_copy edge" in out
    assert out.splitlines()[-1].startswith("summary: ")


def test_cli_bad_input_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.musimd"
    bad.write_text("kernel k()\n  bnz x, NOWHERE\n")
    assert main(["structure", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"{bad}:2:")


def test_python_api_entry_point():
    import gpudiv

    result = gpudiv.structure(FIG1)
    assert not result.structured and result.kernels[0].counts()[FORWARD_COPY] == 2


def test_cli_schemes_text_and_json(capsys):
    assert main(["structure", str(SAMPLES / "musimd" / "break_and_stop.musimd"), "--schemes",
                 "--launches", "1", "--format", "json"]) == 0
    (kernel,) = json.loads(capsys.readouterr().out)["files"][0]["kernels"]
    schemes = kernel["schemes"]
    assert schemes["launches"] == 1 and schemes["transform"]["cut"] == 1
    runs = {r["scheme"]: r for r in schemes["runs"]}
    assert set(runs) == {"pdom", "earliest", "structured", "structured_earliest", "mimd"}
    assert all(r["same_memory"] for s, r in runs.items() if s != "mimd")
    assert main(["structure", str(FIG1), "--schemes", "--launches", "1"]) == 0
    out = capsys.readouterr().out
    assert "kernel wu_fig1: schemes over 1 launches" in out and "  pdom " in out
    assert main(["structure", str(FIG1), "--schemes", "--launches", "0"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_source_patterns_are_named():
    (fig1,) = analyze_file(FIG1).kernels
    assert {e.pattern for e in fig1.edges} == {SOURCE_PATTERNS["short_circuit"]}
    (stop,) = analyze_file(SAMPLES / "musimd" / "break_and_stop.musimd").kernels
    assert [e.pattern for e in stop.edges] == [SOURCE_PATTERNS["break"]]
    early = structure("""
        i = 0
HEAD:   p = i < 8
        bz p, END
        q = i == tid
        bnz q, OUT
        i = i + 1
        jump HEAD
OUT:    stop
END:    shared[tid] = i
        stop
""")
    assert [(e.kind, e.pattern) for e in early.edges] == [(CUT, SOURCE_PATTERNS["early_return"])]
