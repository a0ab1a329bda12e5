"""Golden tests of the simple divergence analysis (Sampaio 2013 §3.4, Fig 3.6)."""

from pathlib import Path

import pytest

from gpudiv import api
from gpudiv.analyses.simple import analyze_kernel
from gpudiv.lang.load import load, parse_text

SAMPLES = Path(__file__).parents[2] / "samples" / "musimd"


def kernel_result(name: str):
    program = load(SAMPLES / name)
    assert not program.errors
    return analyze_kernel(program.kernels[0])


def classes_of(result, source: str) -> list[str]:
    """Classes of the SSA variables of one source variable, by kind."""
    return [(v.kind, v.klass) for v in result.by_source(source)]


def phi_class(result, source: str, phi_kind: str) -> str:
    (var,) = [v for v in result.by_source(source)
              if result.ssa.variables[v.name].phi_kind == phi_kind]
    return var.klass


@pytest.fixture(scope="module")
def sum_triangle():
    return kernel_result("sumTriangle.musimd")


@pytest.fixture(scope="module")
def avg_square():
    return kernel_result("avgSquare.musimd")


def test_fig_2_2_sec_3_4_parameters_uniform(sum_triangle, avg_square):
    for result in (sum_triangle, avg_square):
        for param in ("c", "m", "v"):
            assert result.variable(param).klass == "uniform"


def test_fig_2_2_sec_3_4_sum_triangle(sum_triangle):
    # L = (Tid + 1) * c: D. d inside the loop (the μ): U. d after the loop (the η): D.
    assert {v.klass for v in sum_triangle.by_source("L")} == {"divergent"}
    assert phi_class(sum_triangle, "d", "mu") == "uniform"
    assert phi_class(sum_triangle, "d", "eta") == "divergent"
    assert phi_class(sum_triangle, "i", "mu") == "divergent"
    gates = {v.name: v.gated_by for v in sum_triangle.variables if v.gated_by}
    assert gates == {"d#2": ["LOOP"], "i#2": ["LOOP"], "s#2": ["LOOP"], "s#4": ["bb3"],
                     "d#4": ["LOOP"], "s#5": ["LOOP"]}


def test_fig_2_2_sec_3_4_avg_square(avg_square):
    # i and N: D; d_out: D. The printed d_in cell says D, but the rules of Fig 3.6 give U
    # (RMUD has no predicate gate, exactly as for sumTriangle's d_in; notes §5.2). We
    # follow the rules: d_in is uniform.
    assert phi_class(avg_square, "i", "mu") == "divergent"
    assert {v.klass for v in avg_square.by_source("N")} == {"divergent"}
    assert phi_class(avg_square, "d", "mu") == "uniform"
    assert phi_class(avg_square, "d", "eta") == "divergent"


def test_sec_3_4_fig_3_7_inner_branch_uniform(sum_triangle):
    # "the instruction bnz p1, l12 cannot cause a divergence, even though the predicate
    # p1 is data dependent on variable d1, which is created inside a divergent loop."
    by_line = {b.line: b for b in sum_triangle.branches}
    assert by_line[9].divergent        # if (Tid < c)
    assert by_line[16].divergent       # the loop test i < L
    assert not by_line[18].divergent   # if (d % 2)
    assert {v.klass for v in sum_triangle.by_source("q")} == {"uniform"}


def test_temporal_divergence_counter():
    result = kernel_result("temporal_divergence.musimd")
    assert phi_class(result, "k", "mu") == "uniform"
    assert phi_class(result, "k", "eta") == "divergent"
    assert result.variable("k#3").klass == "uniform"  # k + 1 inside the loop


def test_unstructured_join_is_divergent():
    result = kernel_result("join_unstructured.musimd")
    (phi,) = [v for v in result.by_source("x") if v.kind == "phi"]
    assert phi.klass == "divergent"
    assert ("bb1", "JOIN") in result.relations["join"]
    assert phi.gated_by == ["bb1"]
    assert [b.divergent for b in result.branches] == [True, False]


def test_nested_loops():
    result = kernel_result("loops_nested.musimd")
    branches = {b.label: b.divergent for b in result.branches}
    assert branches == {"OUTER": False, "INNER": True}
    assert phi_class(result, "i", "mu") == "uniform"
    assert phi_class(result, "i", "eta") == "uniform"
    assert phi_class(result, "j", "mu") == "uniform"
    assert phi_class(result, "j", "eta") == "divergent"
    assert phi_class(result, "s", "mu") == "divergent"


def test_sources_of_divergence():
    text = """kernel k(p)
      a = laneid
      b = warpid
      c = ntid
      d = local[0]
      e = atominc shared[0]
      f = shared[p]
      g = p + 1
      shared[0] = a
      shared[1] = b
      shared[2] = c
      shared[3] = d
      shared[4] = e
      shared[5] = f
      shared[6] = g
      stop
    """
    result = analyze_kernel(parse_text(text, "k.musimd").kernels[0])
    klass = {v.source: v.klass for v in result.variables}
    assert klass == {"p": "uniform", "a": "divergent", "b": "uniform", "c": "uniform",
                     "d": "divergent", "e": "divergent", "f": "uniform", "g": "uniform"}


def test_constants_are_reported_with_their_value():
    result = analyze_kernel(parse_text("kernel k()\n x = 7\n y = x\n stop\n", "k.musimd")
                            .kernels[0])
    assert [(v.klass, v.value) for v in result.variables] == [("constant", 7), ("constant", 7)]


def test_read_before_definition_is_divergent_with_warning():
    text = "kernel k()\n bz tid, L\n x = 1\nL: sync\n shared[0] = x\n stop\n"
    result = analyze_kernel(parse_text(text, "k.musimd").kernels[0])
    assert any("'x' may be read before it is defined" in w for w, _ in result.warnings)
    (phi,) = [v for v in result.by_source("x") if v.kind == "phi"]
    assert phi.klass == "divergent"


def test_read_before_definition_is_reported_where_it_is_read():
    text = "kernel k(a)\n y = a\n x = z + y\n stop\n"
    analysis = api.analyze_text(text, "k.musimd", "simple")
    (warning,) = [d for d in analysis.diagnostics if d.severity == "warning"]
    assert (warning.line, warning.column) == (3, 2) and "'z' may be read" in warning.message
