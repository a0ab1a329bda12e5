"""Golden tests of the affine divergence analysis (Sampaio 2013 §3.5, Figs 2.2, 3.8, 3.10).

Coefficients are written as the papers print them, highest power first: degree 1 as
(a1, a0), degree 2 as (a2, a1, a0), with None for ⊥.
"""

import json
from pathlib import Path

import pytest

from gpudiv.analyses import DEFAULT_ANALYSIS, affine, affine2
from gpudiv.cli import main
from gpudiv.cli.explain import explain
from gpudiv.ir.operators import normalise_ptx
from gpudiv.lang.load import load, parse_text

ROOT = Path(__file__).parents[2]
SAMPLES = ROOT / "samples" / "musimd"
B = None  # ⊥


def analysed(name: str, degree: int, kernel: int = 0, **options):
    program = load(SAMPLES / name)
    assert not program.errors
    driver = affine2.analyze_kernel if degree == 2 else affine.analyze_kernel
    return driver(program.kernels[kernel], options=options or None)


def values(result, degree: int) -> dict[str, tuple]:
    """SSA name → coefficients, highest power first (degree 1: (a1, a0))."""
    return {v.name: v.affine[3 - degree - 1:] for v in result.variables}


def of(result, degree: int, source: str, phi_kind: str | None = None) -> tuple:
    (var,) = [v for v in result.by_source(source)
              if result.ssa.variables[v.name].phi_kind == phi_kind
              and (phi_kind or v.kind == "assign")][-1:]
    return values(result, degree)[var.name]


def parsed(text: str):
    return parse_text(text, "t.musimd").kernels[0]


def test_default_analysis_is_the_most_precise():
    assert DEFAULT_ANALYSIS == "affine2"


# --- Fig 2.2, column "Sec. 3.5" (printed as degree-2 polynomials) ----------------------

@pytest.fixture(scope="module", params=[1, 2])
def avg_square(request):
    return request.param, analysed("avgSquare.musimd", request.param)


@pytest.fixture(scope="module", params=[1, 2])
def sum_triangle(request):
    return request.param, analysed("sumTriangle.musimd", request.param)


def test_fig_2_2_sec_3_5_avg_square(avg_square):
    degree, result = avg_square
    pad = (0,) if degree == 2 else ()
    vals = values(result, degree)
    for param in ("c", "m", "v"):                       # 0·Tid² + 0·Tid + ⊥
        assert vals[param] == pad + (0, B)
    assert of(result, degree, "i", "mu") == pad + (1, B)    # 0·Tid² + Tid + ⊥
    assert of(result, degree, "N") == pad + (1, B)
    assert of(result, degree, "d", "mu") == pad + (0, B)    # d_in
    assert of(result, degree, "d", "eta") == pad + (0, B)   # d_out
    # "it can report that the loop in avgSquare is non-divergent": i < N is uniform.
    assert of(result, degree, "p") == pad + (0, B)
    assert {b.label: b.divergent for b in result.branches} == {"bb1": True, "LOOP": False}
    assert result.variable("d#4").klass == "uniform"


def test_fig_2_2_sec_3_5_sum_triangle(sum_triangle):
    degree, result = sum_triangle
    pad = (0,) if degree == 2 else ()
    assert of(result, degree, "L") == ((0, B, B) if degree == 2 else (B, B))
    assert of(result, degree, "d", "mu") == pad + (0, B)    # d_in: 0·Tid² + 0·Tid + ⊥
    assert of(result, degree, "d", "eta") == (B,) * (degree + 1)  # d_out: ⊥·Tid² + ⊥·Tid + ⊥
    # Fig 3.7/3.9: the inner branch on d % 2 cannot diverge; the loop exit can.
    assert {b.label: b.divergent for b in result.branches} == {
        "bb1": True, "LOOP": True, "bb3": False}


def test_notes_5_3_sum_triangle_gsa_table(sum_triangle):
    """The full hand-computed table of notes §5.3 (GSA names mapped to ours)."""
    degree, result = sum_triangle
    vals = values(result, degree)
    table = {  # ours: (degree 1, degree 2)
        "g#1": ((B, B), (B, B, B)), "d#1": ((0, 0), (0, 0, 0)), "x#1": ((1, 1), (0, 1, 1)),
        "L#1": ((B, B), (0, B, B)), "i#1": ((1, 0), (0, 1, 0)), "i#2": ((1, B), (0, 1, B)),
        "i#3": ((1, B), (0, 1, B)), "p#1": ((B, B), (B, B, B)), "d#2": ((0, B), (0, 0, B)),
        "d#3": ((0, B), (0, 0, B)), "q#1": ((0, B), (0, 0, B)), "a#1": ((1, B), (0, 1, B)),
        "y#1": ((B, B), (B, B, B)), "s#2": ((B, B), (B, B, B)), "s#4": ((B, B), (B, B, B)),
        "d#4": ((B, B), (B, B, B)), "s#5": ((B, B), (B, B, B)), "a#2": ((B, B), (B, B, B)),
    }
    assert {name: vals[name] for name in table} == {n: t[degree - 1] for n, t in table.items()}


def test_notes_5_5_strict_fig_3_8_loses_avg_square():
    """Without the comparison-as-difference completion (strict GBNA) p0 and d_out are ⊥."""
    result = analysed("avgSquare.musimd", 1, cmp_difference=False)
    assert of(result, 1, "p") == (B, B)
    assert of(result, 1, "d", "eta") == (B, B)
    assert {b.label: b.divergent for b in result.branches} == {"bb1": True, "LOOP": True}


# --- Fig 3.10: degree 1 against degree 2 ----------------------------------------------

def test_fig_3_10_degree_one_against_degree_two():
    one = values(analysed("fig3_10_matrix_rows.musimd", 1), 1)
    two = values(analysed("fig3_10_matrix_rows.musimd", 2), 2)
    names = {"n": "n", "i0": "i#1", "i1": "i#2", "i2": "i#3", "k": "k#1"}
    printed = {  # var: (a1, a0), (a2, a1, a0) as printed in Fig 3.10
        "n": ((0, B), (0, 0, B)), "i0": ((B, 0), (0, B, 0)), "i1": ((B, B), (0, B, B)),
        "i2": ((B, B), (0, B, B)), "k": ((B, B), (0, B, B)),
    }
    assert {v: (one[n], two[n]) for v, n in names.items()} == printed
    # "the degree-two analysis finds that the highest coefficient of any of these
    # variables is zero": a2 = 0 for i0, i1, i2 (an affine function of Tid, Theorem 3).
    assert all(two[names[v]][0] == 0 for v in ("i0", "i1", "i2"))


# --- The slides' kernels (notes part A.8) ---------------------------------------------

def test_slides_ex_kernel():
    result = analysed("slides_affine.musimd", 1, kernel=0)
    vals = values(result, 1)
    assert vals["r2#1"] == (4, 0) and vals["r1#1"] == (4, B)   # %r1 = &v[tid]: affine
    assert vals["f1#1"] == (B, B) and vals["p1#1"] == (B, B)
    (f2,) = [v for v in result.by_source("f2") if v.kind == "phi"]
    assert vals[f2.name] == (B, B) and f2.reason[0] == "join"  # control dependent on %p1
    assert [b.divergent for b in result.branches] == [True]


def test_slides_ex_variants_gate_the_join():
    constants = analysed("slides_affine.musimd", 1, kernel=1)
    uniform = analysed("slides_affine.musimd", 1, kernel=2)
    (gated,) = [v for v in constants.by_source("f2") if v.kind == "phi"]
    (free,) = [v for v in uniform.by_source("f2") if v.kind == "phi"]
    assert gated.affine[1:] == (B, B)     # both sides constant, but the lanes split
    assert free.affine[1:] == (0, B)      # same γ behind a uniform predicate


def test_slides_column_average_kernel():
    result = analysed("slides_affine.musimd", 1, kernel=3)
    assert of(result, 1, "i") == (1, B) and of(result, 1, "i", "mu") == (1, B)
    assert values(result, 1)["i#1"] == (1, 0)
    assert of(result, 1, "N") == (1, B)
    assert of(result, 1, "p") == (0, B)              # the loop test is uniform
    assert of(result, 1, "d", "mu") == (0, B)
    assert values(result, 1)["a#2"] == (4, B)         # m + 4·i
    assert of(result, 1, "sum", "mu") == (B, B)
    assert of(result, 1, "q") == (B, B)
    assert {b.label: b.divergent for b in result.branches} == {"bb1": True, "LOOP": False}


# --- Table 3.6 arithmetic, completions, options, bounds --------------------------------

def coefficients_of(text: str, degree: int = 2, **options) -> dict[str, tuple]:
    driver = affine2.analyze_kernel if degree == 2 else affine.analyze_kernel
    result = driver(parsed(text), options=options or None)
    return {v.source: values(result, degree)[v.name] for v in result.variables}


ARITH = """kernel k(n)
  a = tid * 3
  b = a + 5
  c = b - a
  d = - b
  e = tid << 3
  f = tid * tid
  g = tid * n
  h = n * 0
  i = tid / 2
  j = 7 / -2
  l = -7 % 2
  m = 3 < 5
  o = tid << 30
  p = tid << 40
  q = ~ 5
  r = ! 0
  s = 9 >> 1
  t = -9 >> 1
  shared[0] = a
  stop
"""


def test_table_3_6_and_completions_degree_2():
    vals = coefficients_of(ARITH, 2)
    assert vals["a"] == (0, 3, 0) and vals["b"] == (0, 3, 5)
    assert vals["c"] == (0, 0, 5)                 # sub: the tid parts cancel
    assert vals["d"] == (0, -3, -5)               # unary minus negates
    assert vals["e"] == (0, 8, 0)                 # shift by a literal: × 2^3
    assert vals["f"] == (1, 0, 0)                 # degree 2 keeps tid²
    assert vals["g"] == (0, B, 0)                 # MLCA with 0 × ⊥ = 0
    assert vals["h"] == (0, 0, 0)                 # 0 × ⊥ = 0
    assert vals["i"] == (B, B, B)                 # other operators on tid: ⊥
    assert (vals["j"], vals["l"], vals["m"]) == ((0, 0, -3), (0, 0, -1), (0, 0, 1))
    assert vals["o"] == (0, B, 0)                 # 2^30 does not fit
    assert vals["p"] == (0, 0, 0)                 # shift count outside 0..31 gives 0
    assert (vals["q"], vals["r"], vals["s"], vals["t"]) == (
        (0, 0, -6), (0, 0, 1), (0, 0, 4), (0, 0, -5))


def test_degree_1_product_of_affine_values_is_bottom():
    vals = coefficients_of(ARITH, 1)
    assert vals["f"] == (B, B)                    # MLVA
    assert vals["g"] == (B, 0)
    assert vals["c"] == (0, 5)


@pytest.mark.parametrize(("option", "source", "on", "off"), [
    ("sub_linear", "c", (0, 0, 5), (B, B, B)),
    ("neg_linear", "d", (0, -3, -5), (B, B, B)),
    ("shl_linear", "e", (0, 8, 0), (B, B, B)),
    ("fold", "j", (0, 0, -3), (0, 0, B)),
    ("fold", "m", (0, 0, 1), (0, 0, B)),
])
def test_completions_can_be_switched_off(option, source, on, off):
    assert coefficients_of(ARITH, 2)[source] == on
    assert coefficients_of(ARITH, 2, **{option: False})[source] == off


def test_unknown_option_is_refused():
    with pytest.raises(ValueError, match="unknown affine option 'nope'"):
        affine.analyze_kernel(parsed(ARITH), options={"nope": False})


def test_coefficients_at_the_2_pow_30_bound_become_bottom():
    vals = coefficients_of("""kernel k()
      a = tid * 1073741823
      b = a + tid
      c = 1073741824
      d = c - 1
      e = tid * 32768
      f = e * 32768
      shared[0] = a
      stop
    """)
    assert vals["a"] == (0, 2**30 - 1, 0)
    assert vals["b"] == (0, B, 0)                 # 2^30 is out of range
    assert vals["c"] == (0, 0, B) and vals["d"] == (0, 0, B)
    assert vals["e"] == (0, 32768, 0) and vals["f"] == (0, B, 0)


def test_gamma_at_unstructured_join_and_mu_meet():
    result = affine2.analyze_kernel(load(SAMPLES / "join_unstructured.musimd").kernels[0])
    (phi,) = [v for v in result.by_source("x") if v.kind == "phi"]
    assert phi.affine == (B, B, B) and phi.gated_by == ["bb1"]
    counter = affine2.analyze_kernel(load(SAMPLES / "temporal_divergence.musimd").kernels[0])
    (mu,) = [v for v in counter.by_source("k") if counter.ssa.variables[v.name].phi_kind == "mu"]
    (eta,) = [v for v in counter.by_source("k")
              if counter.ssa.variables[v.name].phi_kind == "eta"]
    assert mu.affine == (0, 0, B) and eta.affine == (B, B, B)


# --- PTX: the same rules through the normaliser ---------------------------------------

@pytest.mark.parametrize(("opcode", "operands", "name"), [
    ("add.s32", 2, "add"), ("add.s64", 2, "add"), ("sub.u32", 2, "sub"),
    ("mul.lo.s32", 2, "mul"), ("mul.wide.s32", 2, "mul"), ("mul.hi.s32", 2, "generic"),
    ("mad.lo.s32", 3, "mad"), ("mad.wide.u32", 3, "mad"), ("mad.lo.cc.u32", 3, "generic"),
    ("shl.b32", 2, "shl"), ("shl.b64", 2, "shl"), ("neg.s32", 1, "neg"),
    ("neg.f32", 1, "generic"), ("mov.u32", 1, "copy"), ("mov.f32", 1, "copy"),
    ("cvt.s64.s32", 1, "copy"), ("cvt.u32.u16", 1, "copy"), ("cvt.u32.u64", 1, "generic"),
    ("cvt.rn.f32.s32", 1, "generic"), ("setp.lt.s32", 2, "cmp"), ("setp.ge.u32", 2, "generic"),
    ("setp.lt.f32", 2, "generic"), ("setp.lt.and.s32", 3, "generic"),
    ("add.f32", 2, "generic"), ("add.sat.s32", 2, "generic"), ("selp.b32", 3, "generic"),
    ("and.b32", 2, "generic"), ("shr.u32", 2, "generic"), ("add.s32", 3, "generic"),
])
def test_ptx_opcodes_normalise_to_affine_operators(opcode, operands, name):
    assert normalise_ptx(opcode, operands) == name


def test_ptx_global_index_is_affine():
    kernel = load(ROOT / "samples" / "cuda" / "vector_ops.O3.ptx").kernel("vec_add")
    result = affine2.analyze_kernel(kernel)
    ins = kernel.instructions()
    by_text = {ins[result.ssa.variables[v.name].instruction].text.split()[0]: v
               for v in result.variables if v.kind == "assign"}
    assert by_text["mad.lo.s32"].affine == (0, 1, B)      # ctaid.x * ntid.x + tid.x
    assert by_text["mul.wide.s32"].affine == (0, 4, B)    # its byte offset
    assert by_text["setp.ge.s32"].klass == "divergent"    # i < n: the bounds check
    assert [b.divergent for b in result.branches] == [True]


# --- Explanations ---------------------------------------------------------------------

def test_explain_divergent_eta_down_to_the_thread_id():
    (e,) = explain(str(SAMPLES / "sumTriangle.musimd"), "d#4")
    rules = [s.rule for s in e.divergence]
    assert rules[0] == "loop_exit" and rules[1] == "branch" and rules[-1] == "source"
    assert e.divergence[-1].variable == "tid"
    assert e.divergence[1].origin == "p#1" and e.divergence[1].depth == 1
    assert e.unknown[0].rule == "loop_exit"
    assert e.affine == {"tid2": "bottom", "tid": "bottom", "const": "bottom"}


def test_explain_uniform_counter_is_a_merge():
    (mu,) = explain(str(SAMPLES / "avgSquare.musimd"), "d#2")
    assert mu.klass == "uniform" and mu.divergence == []
    assert [(s.rule, s.origin) for s in mu.unknown] == [("merge", "d#3")]
    both = explain(str(SAMPLES / "avgSquare.musimd"), "i", analysis="affine")
    assert [e.variable for e in both] == ["i#1", "i#2", "i#3"]


def test_explain_cli_text_and_json(capsys):
    path = str(SAMPLES / "sumTriangle.musimd")
    assert main(["explain", path, "L#1"]) == 0
    out = capsys.readouterr().out
    assert "L#1 (source L, line 13) in kernel sumTriangle: divergent = 0·tid² + ⊥·tid + ⊥" in out
    assert "line 7: tid is the thread index: it differs between lanes [source]" in out
    assert main(["explain", path, "--kernel", "sumTriangle", "q#1", "--format", "json"]) == 0
    (doc,) = json.loads(capsys.readouterr().out)["explanations"]
    assert doc["class"] == "uniform" and doc["divergence"] == []
    assert doc["unknown"][-1]["rule"] == "merge"
    assert main(["explain", path, "nope"]) == 2
    assert "no variable 'nope'" in capsys.readouterr().err


def test_analyze_json_carries_affine_values(capsys):
    assert main(["analyze", "--format", "json", str(SAMPLES / "avgSquare.musimd")]) == 0
    (kernel,) = json.loads(capsys.readouterr().out)["inputs"][0]["kernels"]
    assert kernel["analysis"] == "affine2"
    by_name = {v["name"]: v for v in kernel["variables"]}
    assert by_name["i#2"]["affine"] == {"tid2": 0, "tid": 1, "const": "bottom"}
    assert by_name["i#2"]["class"] == "affine"
    assert by_name["d#1"]["affine"] == {"tid2": 0, "tid": 0, "const": 0}
    assert by_name["s#2"]["reason"]["rule"] == "operand"
    assert [b["divergent"] for b in kernel["branches"]] == [True, False]


def test_compare_cli(capsys, tmp_path):
    rules = tmp_path / "strict.lp"
    rules.write_text("affine_off(cmp_difference).\n")
    assert main(["compare", str(SAMPLES / "avgSquare.musimd"), "--analysis", "simple",
                 "--analysis", "affine2", "--rules", str(rules), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (kernel,) = doc["kernels"]
    assert doc["variants"] == ["simple", "affine2", "affine2+strict.lp"]
    assert kernel["counts"]["affine2"] == {"constant": 2, "uniform": 8, "constaffine": 1,
                                          "affine": 5, "divergent": 6}
    classes = {d["name"]: d["classes"] for d in kernel["differences"]}
    assert classes["p#1"] == {"simple": "divergent", "affine2": "uniform",
                              "affine2+strict.lp": "divergent"}
    assert doc["total"]["simple"]["divergent"] == 14
    assert main(["compare", str(SAMPLES / "avgSquare.musimd"), "--rules",
                 str(tmp_path / "missing.lp")]) == 2
