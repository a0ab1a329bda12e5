"""The random μ-SIMD generator: programs parse, build CFG+SSA, solve, and keep their shapes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpudiv import ir
from gpudiv.analyses.facts import facts_text
from gpudiv.analyses.solve import SolveResult, shipped_rule, solve
from gpudiv.ir.cfg import build_cfg
from gpudiv.ir.ssa import SSAForm, build_ssa
from gpudiv.lang.musimd.parse import parse_musimd
from gpudiv.verify.randprog import random_program

SEEDS = range(300)
CHUNK = 50
RULES = [shipped_rule("cfg.lp"), shipped_rule("divergence.lp")]


def _first_chunk_fast(starts: range) -> list:
    """The chunk starts, all but the first marked slow (the fast loop runs one chunk)."""
    return [starts[0], *(pytest.param(s, marks=pytest.mark.slow) for s in starts[1:])]


def _kernel(text: str) -> ir.Kernel:
    """The single kernel of a generated text; fails on any error diagnostic."""
    program = parse_musimd(text)
    assert not program.errors, (program.errors, text)
    assert len(program.kernels) == 1
    return program.kernels[0]


def _analyse(kernel: ir.Kernel) -> tuple[SSAForm, SolveResult]:
    """CFG, SSA and the shipped rules on one kernel."""
    ssa = build_ssa(build_cfg(kernel))
    return ssa, solve(RULES, facts_text(ssa))


def _count(kernel: ir.Kernel, kind: str) -> int:
    """Number of instructions of one kind."""
    return sum(1 for instr in kernel.instructions() if instr.kind == kind)


def _backward_jumps_are_loops(kernel: ir.Kernel) -> bool:
    """Every jump or branch to an earlier label goes to a loop header `HEAD_i`."""
    position = {block.label: i for i, block in enumerate(kernel.blocks)}
    for i, block in enumerate(kernel.blocks):
        term = block.terminator
        if term is not None and term.target is not None and position[term.target] <= i:
            if term.kind != ir.JUMP or not term.target.startswith("HEAD_"):
                return False
    return True


def _check_structured(kernel: ir.Kernel, ssa: SSAForm) -> None:
    """One `sync` per conditional branch, at the branch's immediate post-dominator."""
    assert _count(kernel, ir.SYNC) == _count(kernel, ir.BRANCH)
    joins = set()
    for branch in ssa.branches:
        join = ssa.cfg.ipdom[branch.block]
        first = kernel.block(join).instructions
        assert first and first[0].kind == ir.SYNC, (branch.block, join)
        joins.add(join)
    assert len(joins) == len(ssa.branches)


def _check_barriers_top_level(kernel: ir.Kernel, ssa: SSAForm, result: SolveResult) -> None:
    """Barriers lie in no loop and in no branch's influence region."""
    in_region = {r for _, r in result.relation("region")}
    in_loop = set().union(*(loop.blocks for loop in ssa.cfg.loops.values()))
    for block in kernel.blocks:
        if any(instr.kind == ir.BARRIER for instr in block.instructions):
            assert block.label not in in_region | in_loop, block.label


@pytest.mark.parametrize("unstructured", [False, True], ids=["structured", "unstructured"])
@pytest.mark.parametrize("start", _first_chunk_fast(range(SEEDS.start, SEEDS.stop, CHUNK)))
def test_programs_parse_build_and_solve(start: int, unstructured: bool) -> None:
    for seed in range(start, start + CHUNK):
        text = random_program(seed, unstructured=unstructured, barriers=seed % 3 == 0)
        kernel = _kernel(text)
        ssa, result = _analyse(kernel)
        assert not ssa.cfg.unreachable and not ssa.cfg.no_exit and not ssa.cfg.falls_off_end
        assert _backward_jumps_are_loops(kernel), text
        assert max((loop.depth for loop in ssa.cfg.loops.values()), default=0) <= 3
        if unstructured:
            assert _count(kernel, ir.SYNC) == 0
        else:
            _check_structured(kernel, ssa)
        _check_barriers_top_level(kernel, ssa, result)


def test_deterministic_and_seed_dependent() -> None:
    assert random_program(7, 30) == random_program(7, 30)
    assert random_program(7, 30) != random_program(8, 30)
    assert random_program(7, 30, unstructured=True) == random_program(7, 30, unstructured=True)


def test_header_name_and_params() -> None:
    kernel = _kernel(random_program(1, 5, name="foo"))
    assert kernel.name == "foo" and kernel.params == ["n", "k"]


def test_max_depth_limits_nesting() -> None:
    for seed in range(40):
        ssa, _ = _analyse(_kernel(random_program(seed, 30, max_depth=1)))
        assert all(loop.depth == 1 for loop in ssa.cfg.loops.values())
    flat = _kernel(random_program(3, 30, max_depth=0))
    assert _count(flat, ir.BRANCH) == 0


def test_no_barrier_unless_asked() -> None:
    for seed in range(40):
        assert "barrier" not in random_program(seed, 30)


def test_shapes_appear() -> None:
    """Across seeds the generator produces loops, both branch kinds, φ/μ/η and joins."""
    kinds: set[str] = set()
    not_ipdom_join = False
    for seed in range(30):
        ssa, result = _analyse(_kernel(random_program(seed, 40, unstructured=True)))
        kinds |= {var.phi_kind or var.kind for var in ssa.variables.values()}
        not_ipdom_join |= any(
            ssa.cfg.ipdom.get(b) != j and _real_block(ssa, j) and j not in _loop_headers(ssa)
            for b, j in result.relation("join"))
    assert {"mu", "gamma", "eta", "atomic", "load"} <= kinds
    assert not_ipdom_join


def _real_block(ssa: SSAForm, label: str) -> bool:
    """Whether a label is a real block of the kernel (not a synthetic exit split)."""
    return label not in ssa.cfg.synthetic


def _loop_headers(ssa: SSAForm) -> set[str]:
    """Headers of all loops."""
    return {h for loop in ssa.cfg.loops.values() for h in loop.headers}


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(-2**40, 2**40), statements=st.integers(1, 60),
       max_depth=st.integers(0, 4), unstructured=st.booleans(), barriers=st.booleans())
def test_any_seed_and_size(seed: int, statements: int, max_depth: int, unstructured: bool,
                           barriers: bool) -> None:
    text = random_program(seed, statements, max_depth=max_depth, unstructured=unstructured,
                          barriers=barriers)
    kernel = _kernel(text)
    ssa, _ = _analyse(kernel)
    assert max((loop.depth for loop in ssa.cfg.loops.values()), default=0) <= max_depth
    assert _backward_jumps_are_loops(kernel)


# -- cycles mode ---------------------------------------------------------------------------

def _backward_targets(kernel: ir.Kernel) -> set[str]:
    """Labels that some jump or branch at or after them goes back to."""
    position = {block.label: i for i, block in enumerate(kernel.blocks)}
    return {term.target for i, block in enumerate(kernel.blocks)
            if (term := block.terminator) is not None and term.target is not None
            and position[term.target] <= i}


def _exit_targets(ssa: SSAForm, loop) -> set[str]:
    """Blocks outside a cycle that its blocks branch to (synthetic exit splits resolved)."""
    cfg = ssa.cfg
    found = set()
    for block in loop.blocks:
        for succ in cfg.successors(block):
            if succ not in loop.blocks:
                while succ in cfg.synthetic:
                    succ = cfg.successors(succ)[0]
                found.add(succ)
    return found


@pytest.mark.slow  # the fast loop checks cycles mode through tests/verify/test_oracle_cycles.py
@pytest.mark.parametrize("start", range(0, 200, CHUNK))
def test_cycles_mode_programs_parse_build_and_solve(start: int) -> None:
    for seed in range(start, start + CHUNK):
        text = random_program(seed, cycles=True, barriers=seed % 3 == 0)
        kernel = _kernel(text)
        ssa, result = _analyse(kernel)
        assert not ssa.cfg.unreachable and not ssa.cfg.no_exit and not ssa.cfg.falls_off_end
        assert _count(kernel, ir.SYNC) == 0
        # Backward jumps only reach loop heads and cycle entries, whose counters bound them.
        assert all(t.startswith(("HEAD_", "CY", "MID_")) for t in _backward_targets(kernel))
        _check_barriers_top_level(kernel, ssa, result)


@pytest.mark.slow
def test_cycles_mode_shapes_appear() -> None:
    """Across seeds: irreducible cycles entered on uniform and on thread-dependent values,
    switch chains with several exits, cycles nested in irreducible ones, rejoin points and
    divergent rejoin copies, η's of values leaving cycles."""
    seen = {"irreducible": 0, "several exits": 0, "nested in irreducible": 0, "rejoin": 0,
            "divergent rejoin": 0, "uniform entry": 0, "divergent entry": 0}
    for seed in range(60):
        text = random_program(seed, 25, cycles=True)
        ssa, result = _analyse(_kernel(text))
        loops = ssa.cfg.loops
        irreducible = {name for name, loop in loops.items() if len(loop.headers) > 1}
        seen["irreducible"] += bool(irreducible)
        seen["several exits"] += any(len(_exit_targets(ssa, loop)) > 1
                                     for loop in loops.values())
        seen["nested in irreducible"] += any(loop.parent in irreducible
                                             for loop in loops.values())
        seen["rejoin"] += bool(ssa.cfg.rejoins)
        seen["divergent rejoin"] += bool(result.relation("divergent_rejoin"))
        entries = [line.split("=")[1].split()[0] for line in text.splitlines()
                   if line.strip().startswith("e = ")]
        seen["uniform entry"] += any(e in ("n", "k", "ntid", "warpid") for e in entries)
        seen["divergent entry"] += any(e in ("tid", "laneid") for e in entries)
    assert all(count >= 10 for count in seen.values()), seen


def test_cycles_mode_is_deterministic_and_differs_from_plain_mode() -> None:
    assert random_program(5, 30, cycles=True) == random_program(5, 30, cycles=True)
    assert random_program(5, 30, cycles=True) != random_program(5, 30, unstructured=True)
    assert all("MID_" not in random_program(seed, 30, unstructured=True)
               for seed in range(20))


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(-2**40, 2**40), statements=st.integers(1, 60),
       max_depth=st.integers(0, 4), barriers=st.booleans())
def test_any_seed_and_size_with_cycles(seed: int, statements: int, max_depth: int,
                                       barriers: bool) -> None:
    """A cycle adds at most two levels to the loop forest (an inner cycle through MID)."""
    text = random_program(seed, statements, max_depth=max_depth, barriers=barriers,
                          cycles=True)
    kernel = _kernel(text)
    ssa, _ = _analyse(kernel)
    assert not ssa.cfg.unreachable and not ssa.cfg.no_exit
    assert max((loop.depth for loop in ssa.cfg.loops.values()), default=0) <= 2 * max_depth
    assert all(t.startswith(("HEAD_", "CY", "MID_")) for t in _backward_targets(kernel))
