"""Copy folding (`gpudiv.analyses.copies`): which assignments are plain copies, and the
shipped analyses give every sample the same answer with and without folding them."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpudiv.analyses import affine, get_analysis, simple
from gpudiv.analyses.copies import _chain, _roots, plain_copies
from gpudiv.analyses.driver import prepare
from gpudiv.analyses.facts import facts_text
from gpudiv.ir.record import replace
from gpudiv.lang.load import load, parse_text
from tests.fast_loop import debug_builds_slow

SAMPLES = Path(__file__).resolve().parents[2] / "samples"

COPIES = """
.version 7.0
.target sm_80
.address_size 64
.visible .entry copies(.param .u64 out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %r1;
    mov.u32 %r3, %r2;
    mov.u32 %r4, 7;
    cvt.u64.u32 %rd2, %r3;
    cvt.s64.s32 %rd3, %r3;
    add.s32 %r5, %r3, %r4;
    setp.lt.u32 %p1, %r3, 16;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd4, %rd1;
    add.s64 %rd5, %rd4, %rd3;
    st.global.u32 [%rd5], %r5;
DONE:
    ret;
}
"""


def _ssa(text: str):
    (kernel,) = parse_text(text, "copies.ptx", "ptx").kernels
    return prepare(kernel)[0]


def test_plain_copies_and_their_roots():
    """`mov` and a sign-extending `cvt` of a variable are plain copies, followed to the
    first variable that is not one; a literal and a zero-extending `cvt` are not."""
    ssa = _ssa(COPIES)
    source_of = {name: var.source for name, var in ssa.variables.items()}
    folding = plain_copies(ssa)
    copied = {source_of[name]: (source_of[folding.source[name]], source_of[root])
              for name, root in folding.root.items()}
    assert copied == {"%r1": ("%tid.x", "%tid.x"), "%r2": ("%r1", "%tid.x"),
                      "%r3": ("%r2", "%tid.x"), "%rd3": ("%r3", "%tid.x")}


@pytest.mark.parametrize("copy_facts", [set(), {"x", "a"}, {"x", "a", "b", "c", "l1"},
                                        {f"l{k}" for k in range(1, 300)}])
def test_roots_are_the_ends_of_the_chains_each_walked_once(copy_facts):
    """`_roots` reuses each chain's tail: the same roots and `copy/2`-only chains as
    walking `_chain` from every copy, on a long chain, a branch into it and a cycle
    (which SSA never has: then each member is walked on its own)."""
    source = {"x": "a", "a": "b", "b": "a", "c": "d",
              **{f"l{k}": f"l{k + 1}" for k in range(300)}, "side": "l150"}
    root, constant = _roots(source, copy_facts)
    chains = {name: _chain(name, source) for name in source}
    assert root == {name: chain[-1] for name, chain in chains.items()}
    assert constant == {name for name, chain in chains.items()
                        if all(step in copy_facts for step in chain[:-1])}


def test_folded_copies_have_no_facts_and_their_roots_stand_for_them():
    ssa = _ssa(COPIES)
    folding = plain_copies(ssa)
    facts = facts_text(ssa, folded=folding.root)
    for name in folding.root:
        assert f'"{name}"' not in facts
    add = next(name for name, var in ssa.variables.items() if var.source == "%r5")
    root = folding.root[next(n for n, v in ssa.variables.items() if v.source == "%r3")]
    assert f'arg("{add}",0,"{root}")' in facts


def test_only_the_shipped_rules_alone_fold_copies():
    """An extra rule file (explain's, deadlock.lp) may read a copy's own facts."""
    assert simple.analysis().fold_copies and affine.analysis(degree=2).fold_copies
    assert not affine.analysis(degree=2, extra_rules=("mine.lp",)).fold_copies


def _same_answers(path: Path, name: str) -> None:
    """Variables (class, reason, constant, gates, coefficients), branches and every
    solved relation are the same with copies folded and without."""
    kernels = load(path).kernels
    folded = get_analysis(name)
    plain = replace(folded, fold_copies=False)
    for with_folding, without in zip(folded.run(kernels), plain.run(kernels), strict=True):
        assert type(with_folding) is type(without)
        if isinstance(without, Exception):
            assert str(with_folding) == str(without)
            continue
        assert with_folding.variables == without.variables
        assert with_folding.branches == without.branches
        assert ({k: set(v) for k, v in with_folding.relations.items() if v}
                == {k: set(v) for k, v in without.relations.items() if v})


PTX_SAMPLES = sorted((SAMPLES / "cuda").glob("*.ptx")) + \
    sorted((SAMPLES / "cuda_large").glob("*.ptx"))
# μ-SIMD copies pass constants (copy/2), PTX `mov`s do not: a few of each in the fast loop,
# the CUDA samples with the most calls and stack slots (copies of arguments and results).
FAST_MUSIMD = ("sumTriangle.musimd", "avgSquare.musimd", "wu_fig1_short_circuit.musimd")
FAST_CUDA = ("many_calls.O3.ptx", "device_functions.O3.ptx", "recursion.O3.ptx",
             "stack_slots.O3.ptx", "function_pointers.O3.ptx", "textures.O3.ptx")


@pytest.mark.parametrize("path", debug_builds_slow(
    PTX_SAMPLES, lambda p: p.name not in FAST_CUDA), ids=lambda p: p.name)
def test_folding_changes_no_answer_on_the_cuda_samples(path):
    _same_answers(path, "affine2")


@pytest.mark.parametrize("path", debug_builds_slow(PTX_SAMPLES, lambda p: True),
                         ids=lambda p: p.name)
@pytest.mark.parametrize("name", ["simple", "affine"])
def test_folding_changes_no_answer_of_the_other_analyses_on_the_cuda_samples(path, name):
    _same_answers(path, name)


@pytest.mark.parametrize("path", debug_builds_slow(
    sorted((SAMPLES / "musimd").glob("*.musimd")) + sorted((SAMPLES / "ptx").glob("*.ptx")),
    lambda p: p.name not in FAST_MUSIMD), ids=lambda p: p.name)
@pytest.mark.parametrize("name", ["simple", "affine", "affine2"])
def test_folding_changes_no_answer_on_the_other_samples(path, name):
    _same_answers(path, name)
