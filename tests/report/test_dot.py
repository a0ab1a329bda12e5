"""`gpudiv cfg`: DOT with blocks, instructions and branch edges coloured by divergence; SVG."""

import re
import shutil
from pathlib import Path

import pytest

import gpudiv
from gpudiv.cli import main
from gpudiv.report.dot import DIVERGENT_EDGE, DIVERGENT_FILL, UNIFORM_EDGE, cfg_dot

SAMPLES = Path(__file__).parents[2] / "samples"
SUM_TRIANGLE = SAMPLES / "musimd" / "sumTriangle.musimd"


def node_line(dot: str, name: str) -> str:
    return next(line for line in dot.splitlines() if line.strip().startswith(f'"{name}" ['))


def test_dot_blocks_instructions_and_colours():
    result = gpudiv.analyze(SUM_TRIANGLE).kernel("sumTriangle")
    dot = cfg_dot(result)
    assert dot.startswith('digraph "sumTriangle" {') and dot.rstrip().endswith("}")
    for label in ("^entry", "^exit", "bb1", "LOOP", "bb3", "JOIN", "EXIT", "DONE"):
        assert f'"{label}"' in dot
    # the divergent loop test is filled red, the uniform `d % 2` test is not
    assert DIVERGENT_FILL in node_line(dot, "LOOP") and DIVERGENT_FILL not in node_line(dot, "bb3")
    assert "d#2 = μ(d#1, d#3)" in node_line(dot, "LOOP")
    assert "p = i &lt; L" in node_line(dot, "LOOP")
    edges = {(m[1], m[2]): m[3] for m in re.finditer(r'"([^"]+)" -> "([^"]+)"(.*);', dot)}
    assert DIVERGENT_EDGE in edges[("LOOP", "EXIT")] and 'label="taken"' in edges[("LOOP", "EXIT")]
    assert 'label="fall"' in edges[("LOOP", "bb3")] and "penwidth=2" in edges[("LOOP", "bb3")]
    assert UNIFORM_EDGE in edges[("bb3", "JOIN")] and "penwidth" not in edges[("bb3", "JOIN")]
    assert edges[("bb2", "LOOP")] == ""


def test_cfg_command_writes_dot(tmp_path, capsys):
    assert main(["cfg", str(SUM_TRIANGLE)]) == 0
    assert capsys.readouterr().out.startswith('digraph "sumTriangle"')
    out = tmp_path / "k.dot"
    assert main(["cfg", str(SAMPLES / "cuda" / "vector_ops.O3.ptx"), "--kernel", "saxpy",
                 "-o", str(out)]) == 0
    assert out.read_text().startswith('digraph "saxpy"')


@pytest.mark.parametrize(("args", "message"), [
    (["--kernel", "nope"], "no kernel 'nope' (kernels: vec_add, saxpy, "),
    ([], "several kernels (vec_add, saxpy, vec_clamp_masked, vec_scale_if); choose one"),
    (["-o", "/nonexistent-dir/x.dot", "--kernel", "saxpy"], "cannot write: no such directory"),
])
def test_cfg_errors_are_one_line(capsys, args, message):
    assert main(["cfg", str(SAMPLES / "cuda" / "vector_ops.O3.ptx"), *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz 'dot' is not installed")
def test_svg_when_graphviz_is_installed(tmp_path):
    out = tmp_path / "k.svg"
    assert main(["cfg", str(SUM_TRIANGLE), "-o", str(out)]) == 0
    svg = out.read_text()
    assert "<svg" in svg and "LOOP" in svg and DIVERGENT_FILL in svg


def test_svg_without_graphviz_is_a_one_line_error(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["cfg", str(SUM_TRIANGLE), "--format", "svg"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "error: Graphviz 'dot' is not on PATH (install graphviz for SVG)"
