"""Grounding in parts (gpudiv.analyses.partition): where a kernel may be cut, what a plan
refuses, and that the answers in parts are those of the whole kernel: on random programs
cut at every possible place, on generated kernels of each scaling shape and on the CUDA
samples, under every shipped divergence analysis."""

from pathlib import Path

import pytest

from gpudiv.analyses import ANALYSES, driver, partition
from gpudiv.analyses.copies import plain_copies
from gpudiv.analyses.driver import prepare, timed_facts
from gpudiv.analyses.facts import RELATIONS
from gpudiv.analyses.partition import ENTITY_ARGUMENTS, articulations, plan, solve_in_parts
from gpudiv.analyses.solve import shipped_rule, solve
from gpudiv.lang.load import load, parse_text
from gpudiv.verify.randprog import random_program
from gpudiv.verify.randptx import random_ptx
from tests.analyses.test_driver import observable

SAMPLES = Path(__file__).parents[2] / "samples"
BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
DIVERGENCE = ("simple", "affine", "affine2")


def kernel_of(text: str, path: str, language: str):
    program = parse_text(text, path, language)
    assert not program.errors, program.errors
    return program.kernels[-1]


def solved_both_ways(analysis, kernel, part_facts: int):
    """(atoms grounded whole, atoms grounded in parts or None when no plan, the number of
    parts) by predicate."""
    ssa, _ = prepare(kernel)
    facts, _ = timed_facts(ssa, relations=analysis.relations, folding=plain_copies(ssa))
    files, hide = list(analysis.rule_files), driver.UNREAD_RELATIONS
    whole = solve(files, facts, analysis.extra, hide=hide)
    the_plan = plan(ssa, facts, part_facts)
    if the_plan is None:
        return _sorted(whole.atoms), None, 0
    parts = solve_in_parts(files, the_plan, analysis.extra, hide)
    assert parts is not None
    return _sorted(whole.atoms), _sorted(parts.atoms), len(the_plan.facts)


def _sorted(atoms) -> dict:
    return {name: sorted(rows, key=repr) for name, rows in atoms.items() if rows}


def test_every_input_relation_says_where_it_names_entities():
    assert ENTITY_ARGUMENTS.keys() <= RELATIONS.keys()
    memory = {"store", "instr_at", "mem_read", "mem_write", "mem_disp", "mem_size", "mem_def",
              "store_value", "barrier"}  # name instructions: read by the deadlock rules only
    assert RELATIONS.keys() - ENTITY_ARGUMENTS.keys() == memory
    for relation, positions in ENTITY_ARGUMENTS.items():
        assert positions[0] == 0 and max(positions) < RELATIONS[relation], relation
    for name in DIVERGENCE:
        assert ANALYSES[name].relations <= ENTITY_ARGUMENTS.keys()


def test_only_the_shipped_divergence_rules_are_grounded_in_parts(tmp_path):
    for name in DIVERGENCE:
        assert partition.partitioned(ANALYSES[name].rule_files)
    mine = tmp_path / "mine.lp"
    mine.write_text("mine(V) :- var(V, _).\n#show mine/1.\n")
    assert not partition.partitioned([*ANALYSES["simple"].rule_files, mine])
    assert not partition.partitioned([shipped_rule("deadlock.lp")])


DIAMONDS = """kernel k(n, v)
      t = tid
      a = t + n
      p = a < 3
      bnz p, L1
      a = a + 1
      jump L2
L1:   a = a - 1
L2:   sync
      b = a * 2
      c = 0
L3:   c = c + 1
      q = c < n
      bnz q, L3
      d = c + b
      r = d < 9
      bnz r, L4
      d = d + 1
L4:   sync
      e = v + t
      shared[e] = d
      stop
"""


def test_articulations_are_the_blocks_every_path_passes_outside_loops():
    kernel = kernel_of(DIAMONDS, "diamonds.musimd", "musimd")
    ssa, _ = prepare(kernel)
    cfg = ssa.cfg
    found = articulations(ssa)
    assert found, "the join l2 and the block after the loop pass every path"
    in_loops = set().union(*(loop.blocks for loop in cfg.loops.values()))
    assert not set(found) & in_loops
    for block in found:  # on the post-dominator chain of the entry, dominating the exit
        node, chain = "^entry", []
        while node in cfg.ipdom:
            node = cfg.ipdom[node]
            chain.append(node)
        assert block in chain
        node = "^exit"
        while node in cfg.idom and node != block:
            node = cfg.idom[node]
        assert node == block
    assert "L2" in found and "L3" not in found


def test_small_kernels_and_kernels_without_cuts_are_grounded_whole():
    kernel = kernel_of(DIAMONDS, "diamonds.musimd", "musimd")
    ssa, _ = prepare(kernel)
    facts, _ = timed_facts(ssa, relations=ANALYSES["affine2"].relations)
    assert plan(ssa, facts) is None  # far below 2 × PART_FACTS facts
    assert plan(ssa, facts, len(facts)) is None  # one part only
    assert plan(ssa, facts, 1) is not None


def test_a_kernel_that_returns_early_is_cut_only_before_the_return():
    """The early exit's branch meets its lanes again only at the kernel's exit: no block
    after it is passed by every path (a known limit: such kernels are grounded whole)."""
    early = DIAMONDS.replace("      p = a < 3\n", "      g = t < n\n      bz g, OUT\n"
                             "      p = a < 3\n") + "OUT:  stop\n"
    kernel = kernel_of(early, "early.musimd", "musimd")
    ssa, _ = prepare(kernel)
    assert articulations(ssa) == [ssa.cfg.ipdom["^entry"]]


def test_a_fact_that_names_a_later_entity_refuses_the_plan():
    slot = {"x": 0, "y": 1, "b": 1}
    facts = [("var", "x", "x"), ("var", "y", "y"), ("operand", "y", "x"), ("block", "b")]
    assert partition._cut(facts, slot, {}, 1) is not None
    assert partition._cut([*facts, ("operand", "x", "y")], slot, {}, 1) is None
    assert partition._cut([*facts, ("store", 3, "global", "x")], slot, {}, 1) is None
    assert partition._cut([*facts, ("var", "nowhere", "z")], slot, {}, 1) is None


def test_a_part_imports_what_it_reads_from_earlier_parts_and_exports_it():
    slot = {"x": 0, "y": 1, "z": 2}
    facts = [("var", "x", "x"), ("var", "y", "y"), ("var", "z", "z"),
             ("operand", "y", "x"), ("operand", "z", "x"), ("arg", "z", 0, "y")]
    cut = partition._cut(facts, slot, {}, 1)
    assert [len(p) for p in cut.facts] == [1, 2, 3]
    assert cut.imports == [[], ["x"], ["x", "y"]]
    assert cut.exports == [{"x"}, {"y"}, set()]
    assert cut.plain == {"x": [("var", "x", "x")], "y": [("var", "y", "y")]}


def _random_kernels(seeds: range):
    """Random μ-SIMD kernels (structured, with cycles, unstructured) and PTX ones with
    device functions, of 12–40 statements."""
    for seed in seeds:
        statements = 12 + seed % 29
        mode = seed % 4
        if mode == 3:
            yield kernel_of(random_ptx(seed, statements, calls=seed % 8 == 3),
                            f"rand{seed}.ptx", "ptx")
        else:
            yield kernel_of(random_program(seed, statements, cycles=mode == 1,
                                           unstructured=mode == 2),
                            f"rand{seed}.musimd", "musimd")


@pytest.mark.parametrize("seeds", [pytest.param(range(1, 3)),  # a cycle, unstructured
                                   pytest.param(range(120), marks=pytest.mark.slow)])
def test_random_programs_cut_at_every_place_give_the_whole_answer(seeds):
    cut = 0
    for seed, kernel in zip(seeds, _random_kernels(seeds), strict=True):
        for name in DIVERGENCE:
            whole, parts, how_many = solved_both_ways(ANALYSES[name], kernel,
                                                      1 + seed % 3 * 7)
            if parts is not None:
                assert parts == whole, (seed, name)
                cut += how_many > 2
    assert cut >= len(seeds)  # most programs have several places to cut


SHAPES = ("straight_line", "loop_nests", "branches", "calls", "local_memory")


@pytest.mark.parametrize("shape", [SHAPES[0], *(pytest.param(s, marks=pytest.mark.slow)
                                                for s in SHAPES[1:])])
def test_generated_kernels_in_parts_give_the_whole_answer(shape):
    import importlib.util

    spec = importlib.util.spec_from_file_location("scaling_inputs",
                                                  BENCHMARKS / "scaling_inputs.py")
    inputs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(inputs)
    kernel = kernel_of(getattr(inputs, shape)(400), f"{shape}.ptx", "ptx")
    for name in DIVERGENCE:
        whole, parts, how_many = solved_both_ways(ANALYSES[name], kernel, 300)
        assert parts == whole, name
        assert how_many >= 3, name


CUDA = sorted((SAMPLES / "cuda").glob("*.ptx"))


@pytest.mark.parametrize("path", [pytest.param(p, marks=pytest.mark.slow) for p in CUDA])
def test_cuda_samples_in_parts_give_the_whole_answer(path):
    for kernel in load(path).kernels:
        for name in DIVERGENCE:
            whole, parts, _ = solved_both_ways(ANALYSES[name], kernel, 40)
            assert parts is None or parts == whole, (kernel.name, name)


@pytest.mark.parametrize("name", DIVERGENCE)
def test_the_driver_grounds_a_large_kernel_in_parts_with_the_same_results(monkeypatch, name):
    kernels = load(SAMPLES / "cuda" / "control_flow.O3.ptx").kernels
    analysis = ANALYSES[name]
    whole = [observable(r) for r in analysis.run(kernels)]
    runs = []
    original = driver.solve_in_parts
    monkeypatch.setattr(partition, "PART_FACTS", 90)
    monkeypatch.setattr(driver, "solve_in_parts",
                        lambda *a, **k: runs.append(1) or original(*a, **k))
    assert [observable(r) for r in analysis.run(kernels)] == whole
    assert runs


def test_a_part_that_fails_leaves_the_kernel_to_a_whole_run(monkeypatch):
    kernel = kernel_of(DIAMONDS, "diamonds.musimd", "musimd")
    analysis = ANALYSES["affine2"]
    ssa, _ = prepare(kernel)
    facts, _ = timed_facts(ssa, relations=analysis.relations, folding=plain_copies(ssa))
    the_plan = plan(ssa, facts, 1)

    def failing(*_args):
        raise partition.RuleError("error: no")

    monkeypatch.setattr(partition, "_ground_and_solve", failing)
    assert solve_in_parts(list(analysis.rule_files), the_plan, analysis.extra,
                          driver.UNREAD_RELATIONS) is None
    monkeypatch.setattr(partition, "PART_FACTS", 1)
    whole = observable(analysis.run([kernel])[0])
    monkeypatch.undo()
    assert whole == observable(analysis.run([kernel])[0])
