"""The analysis driver: kernels of a file solved together give exactly the results of
kernels solved one by one with all facts, and anything that cannot share a run falls back."""

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpudiv.analyses import ANALYSES, affine, driver, simple
from gpudiv.analyses.driver import input_relations_read, prepare
from gpudiv.analyses.facts import RELATIONS, facts_text
from gpudiv.analyses.launch_shape import kernel_shape
from gpudiv.analyses.solve import RuleError, solve
from gpudiv.lang.load import load, parse_text
from gpudiv.verify.randprog import random_program

SAMPLES = Path(__file__).parents[2] / "samples"
PTX_FILES = sorted(SAMPLES.glob("cuda/*.ptx")) + sorted(SAMPLES.glob("ptx_legacy/*.ptx"))


def alone_with_all_facts(analysis: driver.Analysis, kernel):
    """The reference: one clingo run for the kernel, every input relation, plain names
    (for the block shape its `.reqntid` declares, as the driver does)."""
    ssa, _ = prepare(kernel)
    shape, _ = kernel_shape(kernel, None)
    solved = solve(list(analysis.rule_files), facts_text(ssa, shape=shape), analysis.extra,
                   hide=driver.UNREAD_RELATIONS)
    return analysis.build(analysis.name, kernel, ssa, solved, {})


def observable(result) -> tuple:
    """Everything a report or the oracle reads from a kernel's result."""
    variables = [(v.name, v.klass, v.value, v.affine, v.reason, v.gated_by)
                 for v in result.variables]
    branches = [(b.label, b.divergent, b.condition) for b in result.branches]
    relations = {name: sorted(rows, key=repr) for name, rows in result.relations.items()}
    return variables, branches, relations


def kernels_of(path: Path):
    program = load(path)
    assert not program.errors, program.errors
    return program.kernels


@pytest.mark.parametrize(("name", "builds"), [
    pytest.param("simple", (".O3.ptx",), marks=pytest.mark.slow),
    pytest.param("simple", (".O3.ptx", ".G.ptx"), marks=pytest.mark.slow),
    pytest.param("affine2", (".O3.ptx", ".G.ptx"), marks=pytest.mark.slow)])
def test_joint_runs_equal_kernels_solved_alone_on_every_ptx_sample(name, builds):
    analysis = ANALYSES[name]
    checked = 0
    for path in PTX_FILES:
        if path.parent.name == "cuda" and not path.name.endswith(builds):
            continue
        kernels = kernels_of(path)
        for kernel, result in zip(kernels, analysis.run(kernels), strict=True):
            assert not isinstance(result, RuleError), (path, kernel.name, result)
            assert observable(result) == observable(alone_with_all_facts(analysis, kernel)), \
                (path.name, kernel.name)
            checked += 1
    assert checked >= 100


@pytest.mark.slow
@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1), kernels=st.integers(2, 4))
def test_joint_runs_equal_kernels_solved_alone_on_random_files(seed, kernels):
    """Several random μ-SIMD kernels in one file (their labels and variable names repeat
    from kernel to kernel): every analysis gives each the results it gets alone."""
    text = "\n".join(random_program(seed + i, 4 + (seed + i) % 20, unstructured=i % 2 == 1,
                                    name=f"rand{i}") for i in range(kernels))
    program = parse_text(text, "random.musimd", "musimd")
    assert not program.errors and len(program.kernels) == kernels
    for analysis in ANALYSES.values():
        for kernel, result in zip(program.kernels, analysis.run(program.kernels),
                                  strict=True):
            assert observable(result) == observable(alone_with_all_facts(analysis, kernel))


@pytest.mark.parametrize(("name", "module"), [("simple", simple), ("affine", affine),
                                              ("affine2", affine)])
def test_relations_left_out_of_the_model_are_written_back_as_the_rules_give_them(name,
                                                                                  module):
    """The relations others imply (uniform/1, affine_bot/2, ...) are not read from clingo
    (`Analysis.hidden`); the result has the rows a run that shows them gives, on a
    kernel with rows in each."""
    analysis = ANALYSES[name]
    assert module.IMPLIED <= analysis.hidden
    kernels = kernels_of(SAMPLES / "cuda" / "control_flow.O3.ptx")
    with_rows = 0
    for kernel, result in zip(kernels, analysis.run(kernels), strict=True):
        assert observable(result) == observable(alone_with_all_facts(analysis, kernel))
        with_rows += all(result.relations.get(r) for r, _arity in module.IMPLIED)
    assert with_rows


def test_a_file_of_small_kernels_is_one_clingo_run(monkeypatch):
    runs = []
    original = driver.solve_together

    def counting(*args, **kwargs):
        runs.append(len(args[1]))
        return original(*args, **kwargs)

    monkeypatch.setattr(driver, "solve_together", counting)
    kernels = kernels_of(SAMPLES / "cuda" / "control_flow.O3.ptx")
    assert len(kernels) >= 5
    ANALYSES["affine2"].run(kernels)
    assert runs == [len(kernels)]


def test_facts_limit_cuts_groups_with_the_same_results(monkeypatch):
    kernels = kernels_of(SAMPLES / "cuda" / "reductions.O3.ptx")
    analysis = ANALYSES["affine"]
    together = [observable(r) for r in analysis.run(kernels)]
    runs = []
    original = driver.solve_together
    monkeypatch.setattr(driver, "JOINT_FACTS_LIMIT", 1)
    monkeypatch.setattr(driver, "solve_together",
                        lambda *a, **k: runs.append(len(a[1])) or original(*a, **k))
    assert [observable(r) for r in analysis.run(kernels)] == together
    assert runs == [1] * len(kernels)


def test_names_with_the_namespace_mark_are_solved_alone(monkeypatch):
    kernels = kernels_of(SAMPLES / "cuda" / "vector_ops.O3.ptx")
    together = [observable(r) for r in ANALYSES["simple"].run(kernels)]
    # Every PTX register name contains '%': pretend that is the mark.
    monkeypatch.setattr(driver, "NAMESPACE_MARK", "%")
    monkeypatch.setattr(driver, "solve_together", lambda *a, **k: pytest.fail("joint run"))
    assert [observable(r) for r in ANALYSES["simple"].run(kernels)] == together


def test_atoms_without_a_kernel_name_fall_back_to_one_run_per_kernel():
    kernels = kernels_of(SAMPLES / "cuda" / "vector_ops.O3.ptx")
    shipped = ANALYSES["simple"]
    marked = driver.Analysis("simple", shipped.rule_files, shipped.build,
                             "marker(1).\n#show marker/1.\n")
    results = marked.run(kernels)
    assert len(results) == len(kernels) >= 2
    assert all(r.relations["marker"] == [(1,)] for r in results)


def test_a_users_rule_file_never_shares_runs(tmp_path, monkeypatch):
    rules = tmp_path / "reject.lp"
    kernels = kernels_of(SAMPLES / "cuda" / "control_flow.O3.ptx")
    label = kernels[1].blocks[-1].label
    assert label and all(b.label != label for k in kernels if k is not kernels[1]
                         for b in k.blocks)
    rules.write_text(f':- block("{label}").\n')  # a name: it must see names as written
    analysis = affine.analysis("affine", extra_rules=(rules,))
    assert not analysis.shares_runs and ANALYSES["affine"].shares_runs
    monkeypatch.setattr(driver, "solve_together", lambda *a, **k: pytest.fail("joint run"))
    results = analysis.run(kernels)
    assert [isinstance(r, RuleError) for r in results] == [k is kernels[1] for k in kernels]


def test_a_rule_error_is_reported_against_its_own_kernel():
    kernels = kernels_of(SAMPLES / "cuda" / "control_flow.O3.ptx")
    label = kernels[1].blocks[-1].label
    shipped = ANALYSES["simple"]
    # The joint run fails on kernel 1's namespaced name, the run of kernel 1 on its own name.
    rejecting = driver.Analysis("simple", shipped.rule_files, shipped.build,
                                f':- ipdom("1|{label}", _).\n:- ipdom("{label}", _).\n')
    results = rejecting.run(kernels)
    assert [isinstance(r, RuleError) for r in results] == [k is kernels[1] for k in kernels]
    assert "no answer set" in str(results[1])


def test_only_relations_the_rules_mention_are_grounded(tmp_path):
    simple_relations = ANALYSES["simple"].relations
    assert {"operand", "phi", "branch_cond", "ipdom"} <= simple_relations
    assert not {"def_line", "def_kind", "idom"} & simple_relations
    reads_def_line = tmp_path / "lines.lp"
    reads_def_line.write_text("late(V) :- def_line(V, L), L > 20.\n#show late/1.\n")
    analysis = affine.analysis("affine", extra_rules=(reads_def_line,))
    assert "def_line" in analysis.relations
    (kernel,) = kernels_of(SAMPLES / "musimd" / "sumTriangle.musimd")
    late = {v for (v,) in analysis(kernel).relations["late"]}
    assert late and all(kernel_line > 20 for kernel_line in
                        (analysis(kernel).ssa.variables[v].loc.line for v in late))
    including = tmp_path / "including.lp"
    including.write_text('#include "lines.lp".\n')
    assert input_relations_read((including,)) is None
    assert input_relations_read((tmp_path / "missing.lp",)) is None
    assert input_relations_read(simple.analysis().rule_files) <= set(RELATIONS)
