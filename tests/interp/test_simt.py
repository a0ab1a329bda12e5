"""Reconvergence policies, counters and SIMT-deadlock detection (gpudiv.interp.simt) on
both machines: the golden examples of the seeds (Wu et al. Fig 3, Sampaio Fig 3.4), spin
locks in μ-SIMD and CUDA, and outputs that do not depend on the policy."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from gpudiv import api, ir
from gpudiv.interp.musimd import LaunchConfig, run_kernel, time_slots
from gpudiv.interp.ptx import PtxExecutionError, PtxLaunch, run_ptx_kernel
from gpudiv.interp.ptx_synthesis import synthesize_launches
from gpudiv.interp.simt import CycleDetector, DeadlockError
from gpudiv.lang.load import load
from gpudiv.lang.musimd.parse import parse_musimd

ROOT = Path(__file__).resolve().parents[2]
MUSIMD = ROOT / "samples" / "musimd"
CUDA = ROOT / "samples" / "cuda"
DEADLOCK = re.compile(r"^SIMT deadlock in kernel \w+ at line \d+: lanes? [0-9, -]+ spins? in "
                      r"the loop at line \d+ waiting for lanes? [0-9, -]+, which waits? to "
                      r"reconverge at line \d+")


@cache
def program(path: Path) -> ir.Program:
    return load(path)


def musimd(name: str, kernel: str | None = None) -> ir.Kernel:
    p = program(MUSIMD / name)
    return p.kernel(kernel) if kernel else p.kernels[0]


def slots(trace) -> list[tuple[str, int]]:
    """(block, active lanes) of each time slot of a traced run."""
    out: list[tuple[str, int]] = []
    previous = None
    for step in trace:
        key = (step.label, tuple(step.active))
        if key != previous:
            out.append((step.label, len(step.active)))
            previous = key
    return out


# ---------------------------------------------------------------------------------------
# Golden: Wu et al. 2011, Fig 3 (warp of 7, 7 paths): 12 slots under PDOM, 7 earliest
# ---------------------------------------------------------------------------------------


def test_wu_fig3_pdom_takes_12_time_slots():
    result = run_kernel(musimd("wu_fig3.musimd"), LaunchConfig(7, 7, reconvergence="ipdom"),
                        trace=True)
    assert slots(result.trace) == [("E", 7), ("B1", 7), ("B2", 4), ("B3", 3), ("B4", 2),
                                   ("B5", 1), ("B5", 1), ("B3", 3), ("B4", 2), ("B5", 1),
                                   ("B5", 1), ("X", 7)]
    assert time_slots(result.trace) == 12
    assert sum(n for _, n in slots(result.trace)) == 39  # 3.25 threads per slot
    counters = result.counters
    assert (counters.divergent_branches, counters.reconvergences,
            counters.max_stack_depth) == (6, 9, 7)


def test_wu_fig3_earliest_reconvergence_takes_7_time_slots():
    result = run_kernel(musimd("wu_fig3.musimd"),
                        LaunchConfig(7, 7, reconvergence="frontier"), trace=True)
    assert slots(result.trace) == [("E", 7), ("B1", 7), ("B2", 4), ("B3", 6), ("B4", 4),
                                   ("B5", 4), ("X", 7)]
    assert time_slots(result.trace) == 7
    assert (result.counters.reconvergences, result.counters.max_stack_depth) == (4, 4)


def test_wu_fig3_compare_table_and_same_memory():
    runs = api.compare_reconvergence(musimd("wu_fig3.musimd"), LaunchConfig(7, 7))
    assert [(r.policy, r.status, r.slots, r.same_as_mimd) for r in runs] == [
        ("ipdom", "finished", 12, True), ("aware", "finished", 12, True),
        ("frontier", "finished", 7, True), ("mimd", "finished", 95, True)]
    assert runs[3].counters.simd_efficiency == pytest.approx(1 / 7)


def test_cli_compare_reconvergence(capsys):
    from gpudiv.cli import main
    code = main(["run", str(MUSIMD / "wu_fig3.musimd"), "--threads", "7", "--warp", "7",
                 "--compare-reconvergence"])
    out = capsys.readouterr().out
    assert code == 0
    rows = {line.split()[0]: line.split() for line in out.splitlines()[2:6]}
    assert rows["ipdom"][-2:] == ["12", "yes"] and rows["frontier"][-2:] == ["7", "yes"]


# ---------------------------------------------------------------------------------------
# Golden: Sampaio Fig 3.4 under `sync`, and the same outputs under every policy
# ---------------------------------------------------------------------------------------

MATRIX = {k: v for k, v in enumerate([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16])}


@pytest.mark.parametrize("policy", ["sync", "ipdom", "frontier", "mimd", "aware"])
def test_sum_triangle_outputs_under_every_policy(policy):
    config = LaunchConfig(4, 4, {"c": 4, "m": 0, "v": 100}, dict(MATRIX), reconvergence=policy)
    result = run_kernel(musimd("sumTriangle.musimd"), config, trace=True)
    assert [result.shared[100 + t] for t in range(4)] == [0, 6, 7, 24]
    if policy == "sync":  # the thesis' trace: threads leave the loop one by one
        loop_branch = [s.active for s in result.trace if s.line == 16]
        assert loop_branch == [[0, 1, 2, 3], [0, 1, 2, 3], [1, 2, 3], [2, 3], [3]]
        assert result.counters.warp_instructions == 54


# ---------------------------------------------------------------------------------------
# Spin locks: deadlock under ipdom/frontier, finish under mimd, the hand-fixed lock agrees
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["ipdom", "frontier"])
def test_musimd_spin_lock_deadlocks(policy):
    with pytest.raises(DeadlockError) as caught:
        run_kernel(musimd("spin_lock.musimd", "spin_lock"),
                   LaunchConfig(8, 4, reconvergence=policy))
    message = str(caught.value)
    assert DEADLOCK.match(message), message
    assert "lanes 1-3 spin in the loop at line 15 waiting for lane 0" in message
    assert message.endswith("to reconverge at line 20")


def test_musimd_spin_lock_finishes_under_mimd_like_the_fixed_lock():
    config = LaunchConfig(8, 4, reconvergence="mimd")
    reference = run_kernel(musimd("spin_lock.musimd", "spin_lock"), config).shared
    assert reference[0] == 0 and reference[1] == sum(range(8))
    for policy in ("ipdom", "frontier", "mimd"):
        fixed = run_kernel(musimd("spin_lock.musimd", "spin_lock_safe"),
                           LaunchConfig(8, 4, reconvergence=policy))
        assert fixed.shared == reference


@pytest.mark.parametrize("variant", ["O3", "G"])
def test_cuda_spin_lock_deadlocks_under_ipdom_and_finishes_under_mimd(variant):
    path = CUDA / f"spin_deadlock.{variant}.ptx"
    naive = program(path).kernel("naive_lock_sum")
    args = {0: np.zeros(1, np.int32), 1: np.zeros(1, np.int32)}
    for policy in ("ipdom", "frontier"):
        with pytest.raises(DeadlockError) as caught:
            run_ptx_kernel(naive, PtxLaunch((1, 1, 1), (40, 1, 1), dict(args),
                                            reconvergence=policy))
        assert DEADLOCK.match(str(caught.value)), str(caught.value)
        assert "waiting for lane 0, which waits" in str(caught.value)
    mimd = run_ptx_kernel(naive, PtxLaunch((1, 1, 1), (40, 1, 1), dict(args),
                                           reconvergence="mimd"))
    assert list(mimd.buffers[naive.params[1]]) == [sum(range(40))]
    safe = program(path).kernel("safe_lock_sum")
    for policy in ("ipdom", "frontier", "mimd"):
        fixed = run_ptx_kernel(safe, PtxLaunch((1, 1, 1), (40, 1, 1), dict(args),
                                               reconvergence=policy))
        assert {k: v.tolist() for k, v in fixed.buffers.items()} == {
            k.replace("naive", "safe"): v.tolist() for k, v in mimd.buffers.items()}


def test_a_lock_nobody_releases_is_an_infinite_loop_not_a_simt_deadlock():
    naive = program(CUDA / "spin_deadlock.O3.ptx").kernel("naive_lock_sum")
    taken = {0: np.ones(1, np.int32), 1: np.zeros(1, np.int32)}
    with pytest.raises(DeadlockError, match=r"^infinite loop in kernel naive_lock_sum at "
                                            r"line 40: lanes 0-7 repeat the loop at line 35"):
        run_ptx_kernel(naive, PtxLaunch((1, 1, 1), (8, 1, 1), taken))
    # Thread 0 spins while lanes 1-31 wait at the if's end, but they cannot help either.
    lock = program(CUDA / "locks_spin.O3.ptx").kernel("lock_block_counter")
    args = {0: np.ones(1, np.int32), 1: np.zeros(1, np.int32), 2: np.zeros(1, np.int32)}
    with pytest.raises(DeadlockError, match=r"^infinite loop in kernel lock_block_counter at "
                                            r"line \d+: lane 0 spins in the loop at line \d+ "
                                            r"forever, also under --reconvergence mimd"):
        run_ptx_kernel(lock, PtxLaunch((1, 1, 1), (32, 1, 1), args))


def test_step_budget_is_distinct_from_deadlock():
    body = "kernel k()\nL: x = 1\n jump L\n"
    kernel = parse_musimd(body).kernels[0]
    with pytest.raises(Exception, match="did not finish within 500 warp steps") as caught:
        run_kernel(kernel, LaunchConfig(4, 4, max_steps=500))
    assert not isinstance(caught.value, DeadlockError)
    with pytest.raises(DeadlockError, match=r"^infinite loop in kernel k at line 3: "
                                            r"lanes 0-3 repeat the loop at line 2"):
        run_kernel(kernel, LaunchConfig(4, 4))


@pytest.mark.slow
def test_long_terminating_loops_are_not_deadlocks():
    """A uniform loop of 100,000 iterations changes its counter every time: it finishes."""
    body = """kernel k(n)
      i = 0
L:    i = i + 1
      p = i < n
      bnz p, L
      shared[tid] = i
      stop
"""
    kernel = parse_musimd(body).kernels[0]
    for policy in ("ipdom", "frontier", "mimd"):
        result = run_kernel(kernel, LaunchConfig(2, 2, {"n": 30000}, reconvergence=policy,
                                                 max_steps=10**6))
        assert result.shared == {0: 30000, 1: 30000}


@pytest.mark.slow
def test_check_reports_deadlock_and_mimd_executes():
    analysed = api.analyze(CUDA / "spin_deadlock.O3.ptx")
    ipdom = {r.name: r for r in api.check(analysed)}
    assert ipdom["naive_lock_sum"].status == "not-executed"
    assert ipdom["naive_lock_sum"].reason.startswith("SIMT deadlock in kernel naive_lock_sum")
    mimd = {r.name: r for r in api.check(analysed, reconvergence="mimd")}
    assert mimd["naive_lock_sum"].status == "checked" and mimd["naive_lock_sum"].runs >= 2
    assert mimd["naive_lock_sum"].violations == []


def test_cycle_detector_finds_a_repeat_after_a_prefix():
    detector = CycleDetector()
    states = [bytes([k]) for k in range(5)] + [bytes([5 + k % 3]) for k in range(30)]
    first = next(n for n, s in enumerate(states) if detector.seen(s))
    assert 8 <= first < 20
    assert not any(CycleDetector().seen(bytes([k])) for k in range(100))


# ---------------------------------------------------------------------------------------
# Outputs that do not depend on the policy (race-free CUDA samples)
# ---------------------------------------------------------------------------------------

DETERMINISTIC = [("vector_ops", "vec_add"), ("reductions", "reduce_sum_tree"),
                 ("warp_primitives", "warp_sum_shfl_down"),
                 ("warp_primitives", "warp_ballot_count"), ("scan", "scan_warp_shfl"),
                 ("control_flow", "collatz_steps"),
                 pytest.param("sorting", "bitonic_sort_block", marks=pytest.mark.slow),  # 1 s
                 pytest.param("irreducible", None, marks=pytest.mark.slow)]  # 1 s


@pytest.mark.parametrize("source,kernel", DETERMINISTIC)
def test_policies_agree_on_race_free_kernels(source, kernel):
    p = program(CUDA / f"{source}.O3.ptx")
    kernels = [p.kernel(kernel)] if kernel else p.kernels
    for k in kernels:
        for launch in synthesize_launches(k, 3)[:3]:
            outputs = {}
            for policy in ("ipdom", "frontier", "mimd", "aware"):
                launch.reconvergence = policy
                try:
                    result = run_ptx_kernel(k, launch)
                except PtxExecutionError:
                    outputs[policy] = None
                    continue
                outputs[policy] = {n: b.tobytes() for n, b in result.buffers.items()}
            assert outputs["ipdom"] == outputs["frontier"] == outputs["mimd"] \
                == outputs["aware"], k.name


def test_counters_in_run_json(capsys):
    import json

    from gpudiv.cli import main
    main(["run", str(MUSIMD / "wu_fig3.musimd"), "--threads", "7", "--warp", "7",
          "--reconvergence", "frontier", "--format", "json"])
    counters = json.loads(capsys.readouterr().out)["counters"]
    assert counters["reconvergences"] == 4 and counters["max_stack_depth"] == 4
    assert counters["warp_instructions"] == 15


# ---------------------------------------------------------------------------------------
# aware: AWARE's FIFO warp splits, timed-out reconvergence and divergent barriers
# ---------------------------------------------------------------------------------------

BARRIER_FOR_ONE = """kernel k(out)
      t = tid == 0
      bz t, END
      barrier
      shared[out] = 7
END:  stop
"""


def test_aware_runs_divergent_barriers():
    """T9's two barriers on the two sides of a branch: each split blocks at its own, the
    warp goes on when every lane is at one (per-thread counting; the not-taken side
    first); the stack stops."""
    kernel = musimd("deadlock_t9_divergent_barrier.musimd")
    config = LaunchConfig(4, 4, {"out": 0}, reconvergence="aware", aware_timeout=None)
    result = run_kernel(kernel, config, trace=True)
    assert [(s.label, s.active) for s in result.trace if s.text == "barrier"] == [
        ("THEN", [1, 3]), ("ELSE", [0, 2])]
    with pytest.raises(Exception, match="barrier in divergent code"):
        run_kernel(kernel, LaunchConfig(4, 4, {"out": 0}, reconvergence="ipdom"))


def test_aware_barrier_waiting_for_lanes_that_wait_to_reconverge():
    """Lane 0 at a barrier, lanes 1-3 waiting for it where the branch reconverges: an
    error without a timeout; with one they go on, finish, and lane 0 passes alone."""
    (kernel,) = parse_musimd(BARRIER_FOR_ONE, "t.musimd").kernels
    config = LaunchConfig(4, 4, {"out": 3}, reconvergence="aware", aware_timeout=None)
    with pytest.raises(Exception, match="lanes wait at it for lanes of the warp that "
                                        "wait to reconverge"):
        run_kernel(kernel, config)
    config.aware_timeout = 5
    assert run_kernel(kernel, config).shared == {3: 7}
    config.aware_timeout = 0
    with pytest.raises(ValueError, match="aware_timeout"):
        run_kernel(kernel, config)
