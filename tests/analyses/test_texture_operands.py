"""Texture and surface fetches read their coordinates, not only their handle (issue 17, 1).

A fetch through a uniform texture object at thread-dependent coordinates differs between
lanes; the affine analyses used to look only at the handle (the "address" of the load)
and called it uniform. These tests state the expected classes directly; since the
interpreter executes `tex` (issue 10), the oracle checks them too (tests/interp/
test_ptx_textures.py, test_oracle_on_samples).
"""

import json
from pathlib import Path

import pytest

from gpudiv.analyses import affine, affine2, simple
from gpudiv.analyses.affine_reference import solve_reference
from gpudiv.analyses.facts import atom_texts, kernel_facts
from gpudiv.api import analyze
from gpudiv.cli import main
from gpudiv.cli.explain import explain
from gpudiv.ir.cfg import build_cfg
from gpudiv.ir.ssa import build_ssa
from gpudiv.lang.load import load, parse_text

ROOT = Path(__file__).parents[2]
PTX_SAMPLE = ROOT / "samples" / "ptx" / "texture_object_coords.ptx"
CUDA = ROOT / "samples" / "cuda"
ANALYSES = ("simple", "affine", "affine2")
DIVERGENT_PTX = ("tex_tid", "tex2d_tid_y", "tld4_tid", "suld_tid")


def divergent_branches(path_or_program, analysis: str) -> dict[str, list[bool]]:
    """Kernel name → whether each of its branches is divergent."""
    return {k.name: [b.divergent for b in k.branches]
            for k in analyze(path_or_program, analysis).kernels}


@pytest.mark.parametrize("analysis", ANALYSES)
def test_fetch_at_thread_dependent_coordinates_is_divergent(analysis):
    branches = divergent_branches(PTX_SAMPLE, analysis)
    for name in DIVERGENT_PTX:
        assert branches[name] == [True], (analysis, name)
    assert branches["tex_uniform"] == [False], analysis


@pytest.mark.parametrize("analysis", ANALYSES)
def test_fetched_texels_are_classified_by_their_coordinates(analysis):
    kernels = {k.name: k for k in analyze(PTX_SAMPLE, analysis).kernels}
    for name in (*DIVERGENT_PTX, "tex_uniform"):
        fetched = [v for v in kernels[name].variables
                   if v.kind == "load" and v.line in _fetch_lines(name)]
        assert fetched, name
        assert all(v.uniform == (name == "tex_uniform") for v in fetched), (analysis, name)


def _fetch_lines(kernel_name: str) -> set[int]:
    """Source lines of the tex/tld4/suld instructions of a kernel of the PTX sample."""
    kernel = load(PTX_SAMPLE).kernel(kernel_name)
    return {i.loc.line for i in kernel.instructions() if i.space == "texture"}


@pytest.mark.parametrize("analysis", ANALYSES)
def test_cuda_texture_objects_o3(analysis):
    branches = divergent_branches(CUDA / "texture_objects.O3.ptx", analysis)
    assert branches["tex1d_fetch_tid"] == [True]
    assert branches["tex2d_sample_tid"] == [True]
    assert branches["tex1d_fetch_uniform"] == [False]
    assert branches["tex2d_sample_block"] == [False]


@pytest.mark.parametrize("analysis", ANALYSES)
def test_cuda_texture_objects_debug_build(analysis):
    branches = divergent_branches(CUDA / "texture_objects.G.ptx", analysis)
    assert any(branches["tex1d_fetch_tid"]) and any(branches["tex2d_sample_tid"])


def test_load_arg_facts_list_the_handle_and_every_coordinate():
    kernel = load(PTX_SAMPLE).kernel("tex2d_tid_y")
    facts = atom_texts(kernel_facts(build_ssa(build_cfg(kernel))))
    first = '"%f1#1"'
    assert f'load({first},"texture","%rd1#1")' in facts
    assert {a for a in facts if a.startswith(f"load_arg({first},")} == {
        f'load_arg({first},0,"%rd1#1")', f'load_arg({first},1,"%f5#1")',
        f'load_arg({first},2,"%f6#1")'}


def test_ordinary_loads_have_their_address_as_only_operand():
    facts = atom_texts(kernel_facts(build_ssa(build_cfg(load(PTX_SAMPLE).kernel("tex_tid")))))
    assert 'load_arg("%rd1#1",0,"tex_tid_param_0")' in facts
    assert not any(a.startswith('load_arg("%rd1#1",1,') for a in facts)


@pytest.mark.parametrize("degree", [1, 2])
def test_reference_solver_agrees_on_texture_fetches(degree):
    driver = affine2.analyze_kernel if degree == 2 else affine.analyze_kernel
    for kernel in load(PTX_SAMPLE).kernels:
        result = driver(kernel)
        expected = solve_reference(result.ssa, degree)
        got = {}
        for var, power, value in result.relations["affine_coef"]:
            got.setdefault(var, {})[power] = value
        for var, power in result.relations["affine_bot"]:
            got.setdefault(var, {})[power] = None
        assert {v: tuple(c[p] for p in range(degree + 1)) for v, c in got.items()} == expected


def test_explain_names_the_coordinate():
    (report,) = explain(str(PTX_SAMPLE), "%f1#1", kernel="tex_tid", analysis="affine")
    assert report.klass == "divergent"
    assert [(s.rule, s.origin) for s in report.divergence[:1]] == [("operand", "%r1#1")]
    assert ("address", "%r1#1") in {(s.rule, s.origin) for s in report.unknown}


TEXREF = """
.version 7.0
.target sm_80
.address_size 64
.global .texref t;
.visible .entry k(.param .u32 k_param_0, .param .u64 k_param_1)
{{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .f32 %f<8>;
    .reg .b64 %rd<3>;
    ld.param.u32 %r1, [k_param_0];
    ld.param.u64 %rd1, [k_param_1];
    mov.u32 %r2, %tid.x;
    cvt.rn.f32.u32 %f6, {lod};
    cvt.rn.f32.u32 %f7, %r1;
    {fetch}
    setp.gt.f32 %p1, %f1, 0f00000000;
    @%p1 bra DONE;
    st.global.f32 [%rd1], %f2;
DONE:
    ret;
}}
"""

FETCHES = {
    # (fetch, lod source) → divergent?
    ("tex.1d.v4.f32.s32 {%f1, %f2, %f3, %f4}, [t, {%r2}];", "%r1"): True,
    ("tex.1d.v4.f32.s32 {%f1, %f2, %f3, %f4}, [t, {%r1}];", "%r1"): False,
    ("tex.1d.v4.f32.s32 {%f1, %f2, %f3, %f4}, [t, {7}];", "%r1"): False,
    ("tex.1d.v4.f32.s32 {%f1, %f2, %f3, %f4}, [%rd1, {%r2}];", "%r1"): True,
    ("tex.level.1d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [%rd1, {%f7}], %f6;", "%r2"): True,
    ("tex.level.1d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [%rd1, {%f7}], %f6;", "%r1"): False,
    ("tex.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [%rd1, {%f7, %f6}];", "%r2"): True,
    ("tex.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [%rd1, {%f7, %f7}];", "%r2"): False,
}


@pytest.mark.parametrize("analysis", ANALYSES)
@pytest.mark.parametrize("fetch, lod", list(FETCHES))
def test_each_fetch_operand_counts(analysis, fetch, lod):
    program = parse_text(TEXREF.format(fetch=fetch, lod=lod), "t.ptx", "ptx")
    assert not program.errors, program.errors
    assert divergent_branches(program, analysis)["k"] == [FETCHES[fetch, lod]]


def test_cli_reports_the_texture_branches(capsys):
    status = main(["analyze", "--analysis", "affine2", "--format", "json", str(PTX_SAMPLE)])
    assert status in (0, 1)
    report = json.loads(capsys.readouterr().out)
    divergent = {k["name"]: [b["divergent"] for b in k["branches"]]
                 for k in report["inputs"][0]["kernels"]}
    assert divergent == {**{name: [True] for name in DIVERGENT_PTX}, "tex_uniform": [False]}


def test_simple_analysis_agrees_with_the_affine_ones_on_the_fetches():
    for kernel in load(PTX_SAMPLE).kernels:
        uniform = {v.name for v in simple.analyze_kernel(kernel).variables if v.uniform}
        for driver in (affine.analyze_kernel, affine2.analyze_kernel):
            fetched = {v.name: v.uniform for v in driver(kernel).variables
                       if v.kind == "load"}
            assert all(u == (name in uniform) for name, u in fetched.items()), kernel.name
