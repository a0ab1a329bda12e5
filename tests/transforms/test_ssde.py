"""The `ssde` pass (ElTantawy & Aamodt, MICRO 2016, Algorithm 3): Fig. 5's rewrite of the
Fig. 1 spin lock, one switch block per safe point, and the golden cases T1-T11 before
and after on the interpreter (a warp of 4 lanes under `ipdom` against the original under
`mimd`), with `gpudiv deadlock` finding nothing in the results."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from gpudiv import ir
from gpudiv.analyses.deadlock import analysis, kernel_deadlocks
from gpudiv.cli import main
from gpudiv.interp.engine import reconvergence_pcs
from gpudiv.interp.musimd import ExecutionError, LaunchConfig, run_kernel
from gpudiv.interp.ptx import PtxLaunch, run_ptx_kernel
from gpudiv.ir.cfg import build_cfg
from gpudiv.lang.load import load, parse_text
from gpudiv.lang.printing import print_program
from gpudiv.transforms import Pipeline

SAMPLES = Path(__file__).parents[2] / "samples"
MUSIMD = SAMPLES / "musimd"
DATA = Path(__file__).parents[1] / "data" / "ssde"


def _rewrite(path: Path):
    """The program of a sample and its ssde rewrite, printed and read back."""
    program = load(path)
    result = Pipeline.parse("ssde").run(program)
    return program, parse_text(print_program(result), str(path), program.language), result


def _launch(kernel, policy: str) -> LaunchConfig:
    """The launch of tests/analyses/test_deadlock.py: one warp of 4 lanes, parameter i
    = 16·i, memory zero but cells 1-3 = -1 (T3's flags: cell 0 is ready)."""
    params = {p: 16 * i for i, p in enumerate(kernel.params)}
    shared = dict.fromkeys(range(128), 0) | {1: -1, 2: -1, 3: -1}
    return LaunchConfig(threads=4, warp_width=4, params=params, shared=shared,
                        reconvergence=policy, max_steps=4000)


def _detections(kernel) -> int:
    (result,) = analysis().run([kernel])
    return len(kernel_deadlocks(result).detections)


def test_fig5_rewrite_of_the_fig1_spin_lock():
    """Fig. 5: C is split after the release into C1 and C2, BB_S between them; the loop
    branch goes to BB_S (through the block that sets the flag) and BB_S goes on to C2
    or back to B."""
    _, _, result = _rewrite(MUSIMD / "deadlock_t1_spin_lock.musimd")
    (kernel,) = result.kernels
    stats = kernel.attrs["transform_stats"]
    assert (stats["flagged_loops"], stats["switch_blocks"], stats["registers_added"]) == \
        (1, 1, 1)
    (point,) = stats["safe_points"]
    switch = point["switch"]
    cfg = build_cfg(kernel)
    latch = next(b.label for b in kernel.blocks if b.label.startswith("ssde_latch"))
    assert set(cfg.successors("SPIN")) == {latch, "CRIT"}          # B -> BB_S, B -> C1
    assert cfg.successors(latch) == [switch]
    assert cfg.successors("CRIT") == [switch]                      # C1 -> BB_S
    (c2,) = [s for s in cfg.successors(switch) if s != "SPIN"]     # BB_S -> C2, BB_S -> B
    assert [i.kind for i in kernel.block(c2).instructions] == ["stop"]
    assert kernel.block("CRIT").instructions[-1].text.startswith("shared[m] = 0")
    assert cfg.ipdom["SPIN"] == switch                             # the new RPC


def test_one_switch_block_per_safe_point():
    """T5: both spin loops have the same safe point, so they share one BB_S with two
    cases (tested in loop order)."""
    _, _, result = _rewrite(MUSIMD / "deadlock_t5_two_locks.musimd")
    stats = result.kernels[0].attrs["transform_stats"]
    assert (stats["flagged_loops"], stats["switch_blocks"]) == (2, 1)
    assert stats["safe_points"][0]["loops"] == ["SPIN1", "SPIN2"]
    assert stats["instructions_added"] == 10


@pytest.mark.parametrize("name, hangs", [
    ("deadlock_t1_spin_lock", True), ("deadlock_t3_ready_flags", True),
    ("deadlock_t4_lock_across_exit", True), ("deadlock_t5_two_locks", True),
    ("deadlock_t6_per_thread_locks", False), ("deadlock_t11_parallel_writer", True)])
def test_golden_before_and_after(name, hangs):
    """The flagged golden cases: the original hangs under ipdom (T6 does not: its locks
    never contend), the rewrite finishes under ipdom with the memory of the original
    under mimd, and `gpudiv deadlock` finds no loop that may deadlock in it."""
    program, printed, result = _rewrite(MUSIMD / f"{name}.musimd")
    (old,), (new,) = program.kernels, printed.kernels
    if hangs:
        with pytest.raises(ExecutionError, match="SIMT deadlock|did not finish"):
            run_kernel(old, _launch(old, "ipdom"))
    reference = run_kernel(old, _launch(old, "mimd"))
    for policy in ("ipdom", "sync"):  # sync: at the reconvergence points written below
        after = run_kernel(new, _launch(new, policy))
        assert after.shared == reference.shared, policy
    assert _detections(new) == 0
    switches = {p["switch"] for p in result.kernels[0].attrs["transform_stats"]["safe_points"]}
    assert set(_marks(new).values()) == switches
    assert _marks(new) == _marks(result.kernels[0])  # through the μ-SIMD printer and back


def _marks(kernel) -> dict[str, str]:
    """Per block, the reconvergence point its branch names (`ir.RECONVERGE`)."""
    return {b.label: b.terminator.attrs[ir.RECONVERGE] for b in kernel.blocks
            if b.terminator is not None and ir.RECONVERGE in b.terminator.attrs}


def test_reconvergence_points_are_written_and_honoured():
    """T1: the loop's exit branch names BB_S (the paper's new RPC); the `sync` machine
    reconverges there (its pc), and the mark moved back to the loop's old reconvergence
    point C (now C1, before the release) makes the rewrite hang again under `sync`: the
    mark, not the CFG alone, decides where `sync` reconverges."""
    _, printed, _ = _rewrite(MUSIMD / "deadlock_t1_spin_lock.musimd")
    (kernel,) = printed.kernels
    (switch,) = set(_marks(kernel).values())
    start, count = {}, 0
    for block in kernel.blocks:
        start[block.label] = count
        count += len(block.instructions)
    assert reconvergence_pcs(kernel, start, count, True)["SPIN"] == start[switch]
    kernel.block("SPIN").terminator.attrs[ir.RECONVERGE] = "CRIT"
    with pytest.raises(ExecutionError, match="SIMT deadlock|did not finish"):
        run_kernel(kernel, _launch(kernel, "sync"))
    run_kernel(kernel, _launch(kernel, "ipdom"))  # ipdom ignores the mark


@pytest.mark.parametrize("name", ["deadlock_t2_safe_lock", "deadlock_t7_all_controlled",
                                  "deadlock_t8_tag_retry", "deadlock_t9_divergent_barrier"])
def test_unflagged_kernels_are_left_alone(name):
    """T2, T7 (safe), T8 (flagged, but its pragma vouches for it) and T9 (barriers
    only) are not rewritten."""
    program, _, result = _rewrite(MUSIMD / f"{name}.musimd")
    assert print_program(result) == print_program(program)
    assert result.kernels[0].attrs["transform_stats"]["flagged_loops"] == 0


@pytest.mark.slow
def test_ptx_rewrite_runs_and_ptxas_accepts_it(tmp_path):
    """CUDA sample (nvcc -O3): the Fig. 1 lock and the two ordered locks hang under ipdom;
    rewritten, they finish under ipdom and sync with the memory of the original under
    mimd, their reconvergence marks name the switch blocks and survive the PTX printer,
    and ptxas accepts the printed PTX."""
    program, printed, result = _rewrite(SAMPLES / "cuda" / "deadlock_locks.O3.ptx")
    for name in ("spin_lock_fig1", "two_locks"):
        old, new = program.kernel(name), printed.kernel(name)
        launch = {"block": (32, 1, 1), "max_steps": 200_000}
        with pytest.raises(ExecutionError, match="SIMT deadlock"):
            run_ptx_kernel(old, PtxLaunch(args={0: _buffer()}, **launch))
        reference = run_ptx_kernel(old, PtxLaunch(args={0: _buffer()}, reconvergence="mimd",
                                                  **launch))
        for policy in ("ipdom", "sync"):  # sync: at the marks the PTX printer wrote
            after = run_ptx_kernel(new, PtxLaunch(args={0: _buffer()}, reconvergence=policy,
                                                  **launch))
            (want,), (got,) = reference.buffers.values(), after.buffers.values()
            assert (got == want).all() and want[0] > 0
        assert _detections(new) == 0
        marks = _marks(result.kernel(name))
        assert marks and set(marks.values()) <= {b.label for b in new.blocks
                                                 if b.label.startswith("ssde_switch")}
        assert _marks(new) == marks
    if shutil.which("ptxas"):
        out = tmp_path / "ssde.ptx"
        out.write_text(print_program(result))
        subprocess.run(["ptxas", "-arch=sm_80", str(out), "-o", str(tmp_path / "o.cubin")],
                       check=True, capture_output=True)


def _buffer() -> np.ndarray:
    return np.zeros(4, dtype=np.int32)


@pytest.mark.slow
def test_transform_verify_cli(capsys):
    """`gpudiv transform FILE --pass ssde --verify --format json`: verified, with the
    evidence of issue 11 per kernel."""
    code = main(["transform", str(MUSIMD / "deadlock_t11_parallel_writer.musimd"),
                 "--pass", "ssde", "--verify", "--format", "json"])
    (kernel,) = json.loads(capsys.readouterr().out)["files"][0]["kernels"]
    assert code == 0 and kernel["status"] == "verified" and kernel["problems"] == []
    assert kernel["ssde"]["original_hangs_under_ipdom"] > 0
    assert kernel["ssde"]["detections_after"] == 0
    assert kernel["ssde"]["compared_runs"] == kernel["runs"] > 0


def _finish_like_mimd(path: Path, policies: tuple[str, ...]) -> object:
    """The rewrite of a test kernel run under each policy, against the original under
    mimd (8 threads in warps of 4, lock free); the rewritten kernel."""
    program, printed, _ = _rewrite(path)
    (old,), (new,) = program.kernels, printed.kernels
    launch = LaunchConfig(threads=8, warp_width=4, params={"m": 0, "a": 8},
                          shared=dict.fromkeys(range(24), 0), max_steps=4000)
    reference = run_kernel(old, LaunchConfig(**{**launch.__dict__, "reconvergence": "mimd"}))
    for policy in policies:
        with pytest.raises(ExecutionError, match="SIMT deadlock|did not finish"):
            run_kernel(old, LaunchConfig(**{**launch.__dict__, "reconvergence": policy}))
        after = run_kernel(new, LaunchConfig(**{**launch.__dict__, "reconvergence": policy}))
        assert after.shared == reference.shared
    assert _detections(new) == 0
    return new


def test_safe_point_at_the_kernel_end():
    """A release followed by writes on paths that end in two stops: SafePDom is the
    kernel's end, so both stops jump to one exit block with the switch before it."""
    new = _finish_like_mimd(DATA / "exit_safe_point.musimd", ("ipdom",))
    stops = [b for b in new.blocks if b.terminator and b.terminator.kind == "stop"]
    assert len(stops) == 1


def test_sync_points_are_rewritten_for_the_sync_policy():
    """A kernel written for the `sync` policy gets its `sync`s at the new reconvergence
    points (the switch block and its continuation); it finishes under sync and ipdom."""
    new = _finish_like_mimd(DATA / "spin_lock_sync.musimd", ("sync", "ipdom"))
    assert new.attrs.get("transform_stats") is None  # read back from the printed text
    syncs = [b.label for b in new.blocks for i in b.instructions if i.kind == "sync"]
    assert len(syncs) == 2 and syncs[0].startswith("ssde_switch")


def test_rewritten_ready_flags_need_the_absorbed_exit_rule():
    """T3 rewritten: the spin loop becomes a cycle through the switch block, which every
    iteration passes and where its exit branch reconverges. Walking from every exit
    (`dl_off("absorbed_exit")`) still sees the flag store after the exit; by default the
    lanes that leave there wait for nobody, and nothing is reported."""
    from gpudiv.analyses import affine
    from gpudiv.analyses.solve import shipped_rule

    _, printed, _ = _rewrite(MUSIMD / "deadlock_t3_ready_flags.musimd")
    (kernel,) = printed.kernels
    assert _detections(kernel) == 0
    driver = affine.analysis("d", 2, extra_rules=(shipped_rule("deadlock.lp"),))
    driver = type(driver)(driver.name, driver.rule_files, driver.build,
                          driver.extra + 'dl_off("absorbed_exit").\n')
    verdicts = dict((loop, verdict) for loop, verdict, _ in
                    driver(kernel).relations["dl_loop_verdict"])
    assert verdicts == {"OUTER": "safe", "WAIT": "may-deadlock"}


def test_transform_assume_safe_leaves_a_kernel_alone(capsys):
    """`gpudiv transform --pass ssde --assume-safe K` (warp-synchronous code such as
    T8's tag-and-retry, which the rewrite must not touch) leaves K as it is."""
    path = MUSIMD / "deadlock_t1_spin_lock.musimd"
    assert main(["transform", str(path), "--pass", "ssde", "--assume-safe", "spinLock"]) == 0
    assert capsys.readouterr().out == print_program(load(path))
