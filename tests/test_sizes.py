"""Inputs that grow (issue 17, item 8): work that must stay linear, and kernels the analysis
must give up on instead of exhausting memory. Never timed: the tests count executed lines,
atoms and blocks, or run under a memory limit."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from gpudiv.analyses import ANALYSES, driver
from gpudiv.api import analyze, analyze_text
from gpudiv.cli import main
from gpudiv.ir.cfg import build_cfg, region_walk, region_work
from gpudiv.ir.ssa import build_ssa
from gpudiv.lang.load import parse_text

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from size_inputs import (  # noqa: E402
    big_ptx,
    brx_switch,
    endless_loops,
    loop_continues,
    nested_ifs,
    skipped_loops,
    straight_line,
)


def executed_lines(fn) -> int:
    """Python lines executed by `fn()`: a measure of work that does not depend on time."""
    count = 0

    def tracer(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return tracer

    sys.settrace(tracer)
    try:
        fn()
    finally:
        sys.settrace(None)
    return count


def kernel_of(text: str, language: str):
    program = parse_text(text, f"generated.{language}", language)
    assert not program.errors
    (kernel,) = program.kernels
    return kernel


@pytest.mark.parametrize("make, language", [(nested_ifs, "musimd"), (brx_switch, "ptx")],
                         ids=["nested_ifs", "brx_switch"])
def test_cfg_and_ssa_work_is_linear(make, language):
    """Doubling the nest (or the switch) doubles the work of CFG and SSA construction:
    networkx's dominators and the φ placement walked the whole nest once per level
    (ratios 2.5 before)."""
    counts = []
    for size in (100, 200):
        kernel = kernel_of(make(size), language)
        counts.append(executed_lines(lambda k=kernel: build_ssa(build_cfg(k))))
    assert counts[1] / counts[0] < 2.2, counts


def test_cfg_work_is_linear_in_the_endless_loops():
    """Doubling the endless loops doubles the CFG's work: the exit was searched once per
    endless loop (ratio 3.7 before). (Many functions called once:
    tests/lang/ptx/test_functions.py.)"""
    counts = []
    for loops in (100, 200):
        kernel = kernel_of(endless_loops(loops), "musimd")
        counts.append(executed_lines(lambda k=kernel: build_cfg(k)))
    assert counts[1] / counts[0] < 2.2, counts


@pytest.mark.parametrize("make", [skipped_loops, loop_continues],
                         ids=["skipped_loops", "loop_continues"])
def test_cfg_work_is_linear_in_loop_exits_and_continues(make):
    """Doubling the loops whose exit is also reached from outside, or the `continue`s to a
    while loop's header, doubles the CFG's work: each dedicated exit block went through
    every loop, and the rejoin search walked the rest of the loop from each `continue`
    (ratios 2.45 and 3.15 before)."""
    counts = []
    for size in (100, 200):
        kernel = kernel_of(make(size), "musimd")
        counts.append(executed_lines(lambda k=kernel: build_cfg(k)))
    assert counts[1] / counts[0] < 2.2, counts


def test_atoms_read_back_are_linear_in_the_nest_depth():
    """region/2 and control_dependent/2 (quadratically many on a nest) are no longer turned
    into Python objects by the analyses."""
    sizes = []
    for depth in (40, 80):
        result = analyze_text(nested_ifs(depth), "nest.musimd", "affine2")
        (kernel,) = result.kernels
        assert "region" not in kernel.relations
        sizes.append(sum(len(rows) for rows in kernel.relations.values()))
    assert sizes[1] / sizes[0] < 2.2, sizes


def test_region_work_bounds_the_quadratic_part():
    """The estimate grows with the square of the nest depth, linearly on straight-line code
    and on many small kernels."""
    nest = [region_work(build_cfg(kernel_of(nested_ifs(d), "musimd"))) for d in (50, 100)]
    assert 3.5 < nest[1] / nest[0] < 4.5, nest
    assert region_work(build_cfg(kernel_of(straight_line(2000), "musimd"))) == 0


def test_analysis_gives_up_on_a_kernel_that_is_too_large(monkeypatch):
    monkeypatch.setattr(driver, "MAX_REGION_WORK", 10_000)
    monkeypatch.setattr(driver, "MAX_REGION_WALK", 10_000)
    text = nested_ifs(100) + nested_ifs(5).replace("kernel nest(", "kernel small(")
    result = analyze_text(text, "two.musimd")
    assert [k.name for k in result.kernels] == ["small"]
    (error,) = result.errors
    assert error.message.startswith("kernel nest: too large to analyse: its branches' "
                                    "influence regions add up to")
    assert "the kernel is skipped" in error.message


def test_a_long_sequence_of_branches_is_not_refused_for_its_quadratic_bound(monkeypatch):
    """`region_work` counts every block a branch's join post-dominates: quadratic for if/else
    diamonds one after the other, whose regions (what the rules walk) are two blocks."""
    from scaling_inputs import branches
    monkeypatch.setattr(driver, "MAX_REGION_WORK", 10_000)
    monkeypatch.setattr(driver, "MAX_REGION_WALK", 10_000)
    program = parse_text(branches(800), "seq.ptx", "ptx")
    (kernel,) = program.kernels
    cfg = build_cfg(kernel)
    assert region_work(cfg) > 10_000 and region_walk(cfg, 10_000) < 1_000
    result = analyze(program)
    assert not result.errors and len(result.kernels[0].branches) == 100


def test_instruction_limit(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(driver, "MAX_KERNEL_INSTRUCTIONS", 500)
    path = tmp_path / "line.musimd"
    path.write_text(straight_line(1000))
    code = main(["analyze", str(path)])
    err = capsys.readouterr().err
    assert code == 2
    assert "kernel line: too large to analyse: 1001 instructions (at most 500)" in err
    assert "Traceback" not in err


def test_size_limit_through_the_driver_api(monkeypatch):
    monkeypatch.setattr(driver, "MAX_REGION_WORK", 10_000)
    monkeypatch.setattr(driver, "MAX_REGION_WALK", 10_000)
    kernel = kernel_of(nested_ifs(100), "musimd")
    with pytest.raises(driver.SizeLimit, match="too large to analyse"):
        ANALYSES["simple"](kernel)


def test_many_kernels_are_not_refused():
    result = analyze_text(big_ptx(40), "many.ptx", language="ptx")
    assert len(result.kernels) == 40 and not result.errors


def _limit_memory() -> None:
    limit = 1536 * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def test_deep_nest_is_refused_within_bounded_memory(tmp_path):
    """A 1,500-deep nest of ifs at the default limits: refused in one line, under 1.5 GB
    of address space (before: minutes of grounding and gigabytes)."""
    path = tmp_path / "nest.musimd"
    path.write_text(nested_ifs(1500))
    done = subprocess.run([sys.executable, "-m", "gpudiv.cli", "analyze", "--brief",
                           str(path)], capture_output=True, text=True, timeout=600,
                          preexec_fn=_limit_memory, check=False, cwd=tmp_path,
                          env={**os.environ, "OPENBLAS_NUM_THREADS": "1",
                               "OMP_NUM_THREADS": "1"})  # thread arenas count as address space
    assert done.returncode == 2, done.stderr
    assert "kernel nest: too large to analyse" in done.stderr
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr


def test_switch_within_the_limit_is_analysed():
    result = analyze(parse_text(brx_switch(60), "sw.ptx", "ptx"))
    (kernel,) = result.kernels
    assert sum(b.divergent for b in kernel.branches) == 59
