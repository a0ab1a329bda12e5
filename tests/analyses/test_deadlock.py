"""SIMT-induced deadlocks (rules/deadlock.lp, gpudiv.analyses.deadlock): the golden cases
T1-T9, T11 of ElTantawy & Aamodt (MICRO 2016) as μ-SIMD samples, their runtime outcome on
the interpreter, T10 (T1 on the `aware` policy), the parts of Algorithms 1 and 2 one at a
time, and the CUDA sample."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from gpudiv import api
from gpudiv.analyses.deadlock import pragma_kernels
from gpudiv.cli import main
from gpudiv.interp.musimd import ExecutionError, LaunchConfig, run_kernel
from gpudiv.lang.load import load

SAMPLES = Path(__file__).parents[2] / "samples"
GOLDEN = sorted((SAMPLES / "musimd").glob("deadlock_*.musimd"))
LOCKS = SAMPLES / "cuda" / "deadlock_locks"


def expectations(path: Path) -> tuple[dict, list, str]:
    """The `# expect-loop:`, `# expect-barrier:` and `# expect-run:` lines of a sample."""
    text = path.read_text()
    loops = {}
    for header, verdict, reason, *safe in re.findall(
            r"^# expect-loop: (\S+) (\S+) (\S+) ?(\S*)$", text, re.M):
        loops[header] = (verdict, reason, safe[0] or None)
    barriers = re.findall(r"^# expect-barrier: (\S+) (\S+)$", text, re.M)
    (run,) = re.findall(r"^# expect-run: (\S+)$", text, re.M)
    return loops, sorted(barriers), run


def test_there_are_golden_samples():
    names = {p.name.split("_")[1] for p in GOLDEN}
    assert names == {"t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9", "t11"}


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_golden_verdicts_and_safe_points(path):
    loops, barriers, _ = expectations(path)
    (report,) = api.deadlock(path).kernels
    found = {}
    for loop in report.loops:
        safe = loop.safe_reconvergence
        point = None
        if safe is not None:
            block = report.result.ssa.cfg.kernel.block(safe.block)
            index = next(i for i, ins in enumerate(block.instructions)
                         if ins.loc.line == safe.line)
            point = f"{safe.block}:{index}"
        found[loop.header] = (loop.verdict, loop.reason, point)
    assert found == loops
    assert sorted((b.barrier.block, b.branch.block) for b in report.barriers) == barriers


def _launch(path: Path, width: int) -> tuple:
    """The kernel of a sample and a launch: 4 threads, parameter i = 16·i, memory zero
    except cells 1-3 = -1 (T3's flags: cell 0 is ready, the others are not)."""
    (kernel,) = load(path).kernels
    params = {p: 16 * i for i, p in enumerate(kernel.params)}
    shared = dict.fromkeys(range(128), 0) | {1: -1, 2: -1, 3: -1}
    return kernel, LaunchConfig(threads=4, warp_width=width, params=params, shared=shared,
                                reconvergence="ipdom", max_steps=4000)


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_runtime_outcome_under_stack_reconvergence(path):
    """`deadlock` samples hang with one warp of 4 lanes (ipdom reconvergence) but finish
    with one lane per warp (warps take turns: the MIMD reference); the others finish."""
    _, _, outcome = expectations(path)
    kernel, config = _launch(path, 4)
    if outcome == "terminates":
        run_kernel(kernel, config)
    else:
        message = ("SIMT deadlock in kernel|did not finish" if outcome == "deadlock"
                   else "barrier in divergent")
        with pytest.raises(ExecutionError, match=message):
            run_kernel(kernel, config)
    if outcome == "deadlock":
        kernel, config = _launch(path, 1)
        run_kernel(kernel, config)


def test_mimd_result_of_the_spin_lock():
    kernel, config = _launch(SAMPLES / "musimd" / "deadlock_t1_spin_lock.musimd", 1)
    assert run_kernel(kernel, config).shared[16] == 4  # a = 16: every lane added one


def test_detected_samples_are_the_ones_that_hang_or_are_false_detections():
    """No false negative on the golden samples: each one that hangs is detected."""
    for path in GOLDEN:
        loops, _, outcome = expectations(path)
        if outcome == "deadlock":
            assert any(v == "may-deadlock" for v, _, _ in loops.values()), path


def analyse(text: str):
    """The deadlock report of the one kernel of a μ-SIMD text."""
    (report,) = api.deadlock(api.parse_text(text, "t.musimd", "musimd")).kernels
    return {lp.header: lp for lp in report.loops}


SPIN = """kernel k(m, a)
SPIN: t = atominc shared[m]
      p = t != 1
      bnz p, SPIN
      {after}
      stop
"""


def test_no_write_after_the_loop_is_safe():
    loop = analyse(SPIN.format(after="x = 1"))["SPIN"]
    assert (loop.verdict, loop.reason) == ("safe", "no-releasing-write")


def test_disjoint_constant_cells_do_not_alias():
    text = SPIN.replace("shared[m]", "shared[4]").format(after="shared[5] = 0")
    assert analyse(text)["SPIN"].reason == "no-releasing-write"
    text = SPIN.replace("shared[m]", "shared[4]").format(after="shared[4] = 0")
    assert analyse(text)["SPIN"].verdict == "may-deadlock"


def test_base_plus_offset_disjointness():
    text = SPIN.replace("shared[m]", "shared[b]").replace(
        "SPIN: t", "      b = m + 2\nSPIN: t").format(after="c = m + 3\n      shared[c] = 0")
    assert analyse(text)["SPIN"].reason == "no-releasing-write"
    text = text.replace("c = m + 3", "c = m + 2")
    assert analyse(text)["SPIN"].verdict == "may-deadlock"


def test_a_barrier_stops_reachability():
    loop = analyse(SPIN.format(after="barrier\n      shared[m] = 0"))["SPIN"]
    assert loop.reason == "no-releasing-write"


def test_exit_not_depending_on_memory_is_safe():
    text = """kernel k(n)
      i = tid
L:    i = i + 1
      shared[i] = i
      p = i < n
      bnz p, L
      shared[n] = 0
      stop
"""
    assert analyse(text)["L"].reason == "no-shared-read"


def test_control_dependence_and_phi_bring_a_read_into_the_slice():
    """T2's `done`: the exit tests a φ whose operand is chosen by a branch on an atomic."""
    (report,) = api.deadlock(SAMPLES / "musimd" / "deadlock_t2_safe_lock.musimd").kernels
    loop = report.loops[0]
    assert [r.text for r in loop.shared_reads] == ["t = atominc shared[m]"]


def test_uniform_exit_switch_reproduces_the_paper():
    """With dl_off("uniform_exit") (the paper's detector) T7 is reported."""
    from gpudiv.analyses import affine
    from gpudiv.analyses.solve import shipped_rule

    driver = affine.analysis("d", 2, extra_rules=(shipped_rule("deadlock.lp"),))
    driver = type(driver)(driver.name, driver.rule_files, driver.build,
                          driver.extra + 'dl_off("uniform_exit").\n')
    (kernel,) = load(SAMPLES / "musimd" / "deadlock_t7_all_controlled.musimd").kernels
    verdicts = driver(kernel).relations["dl_loop_verdict"]
    assert verdicts == [("LOOP", "may-deadlock", "redefining-write")]


def test_conflicting_safe_points_are_resolved():
    """OUT's own safe point is after its release (REL); IN's latch lies between OUT's exit
    and that point and IN's safe point is later (SKIP), so OUT's must follow it
    (resolve_SafePDom_conflicts)."""
    text = """kernel k(n)
OUT:  t = atominc shared[4]
      p = t != 1
      bnz p, OUT
IN:   u = atominc shared[8]
      q = u != 1
      bnz q, IN
REL:  shared[4] = 0
      x = tid < n
      bz x, SKIP
      y = 1
SKIP: shared[8] = 0
      stop
"""
    loops = analyse(text)
    assert [w.place.block for w in loops["OUT"].releasing_writes] == ["REL"]
    assert loops["IN"].safe_reconvergence.text == "stop"
    assert loops["OUT"].safe_reconvergence == loops["IN"].safe_reconvergence
    assert loops["OUT"].safe_reconvergence.block == "SKIP"


def test_pragma_parsing():
    assert pragma_kernels("// gpudiv: warp-synchronous histo\n") == ({"histo"}, False)
    assert pragma_kernels("# gpudiv: warp-synchronous\n") == (set(), True)
    assert pragma_kernels("nothing here") == (set(), False)


def test_assume_safe_suppresses_findings():
    path = SAMPLES / "musimd" / "deadlock_t1_spin_lock.musimd"
    assert api.deadlock(path).findings()
    trusted = api.deadlock(path, ("spinLock",))
    assert trusted.findings() == [] and trusted.kernels[0].assumed_safe


def test_cli_text_json_sarif(capsys):
    path = str(SAMPLES / "musimd" / "deadlock_t11_parallel_writer.musimd")
    assert main(["deadlock", path]) == 0
    out = capsys.readouterr().out
    assert "[gpudiv-simt-deadlock]" in out and "releasing write (parallel)" in out
    assert main(["deadlock", "--fail-on-detection", path]) == 1
    capsys.readouterr()
    assert main(["deadlock", "--format", "json", path]) == 0
    (kernel,) = json.loads(capsys.readouterr().out)["files"][0]["kernels"]
    (loop,) = kernel["loops"]
    assert kernel["name"] == "parallelWriter"
    assert {"header", "line", "verdict", "reason", "exit_branch", "shared_reads",
            "releasing_writes", "safe_reconvergence"} <= set(loop)
    assert loop["safe_reconvergence"]["block"] == "JOIN"
    assert main(["deadlock", "--format", "sarif", path]) == 0
    log = json.loads(capsys.readouterr().out)
    assert [r["ruleId"] for r in log["runs"][0]["results"]] == ["gpudiv-simt-deadlock"]


def test_cli_bad_input_is_one_line(capsys, tmp_path):
    bad = tmp_path / "bad.musimd"
    bad.write_text("kernel k(\n")
    assert main(["deadlock", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err and all(": error: " in line for line in err)


def test_thread_dependent_base_never_proves_disjointness():
    """Lane j's cell k + 1 is lane j+1's cell k: a base that differs between lanes (or
    iterations) cannot separate the read from the write."""
    text = """kernel k(start)
      a = start + tid
W:    s = shared[a]
      w = s < tid
      bnz w, W
      b = a + 1
      shared[b] = s
      stop
"""
    assert analyse(text)["W"].verdict == "may-deadlock"
    assert analyse(text.replace("start + tid", "start + 0"))["W"].reason == "no-releasing-write"


WAIT_THEN_JOIN = """kernel k(flag, out)
      w = tid == 0
      bz w, JOIN
WAIT: f = shared[flag]
      bz f, WAIT
JOIN: {join}
      stop
"""


def test_uniform_exit_still_waits_for_lanes_at_an_enclosing_meeting_point():
    """Lane 0 spins with a warp-uniform exit; the other lanes wait at JOIN, where the
    release is: the write reachable from JOIN counts (and the run hangs)."""
    text = WAIT_THEN_JOIN.format(join="shared[flag] = 1")
    loop = analyse(text)["WAIT"]
    assert loop.verdict == "may-deadlock"
    assert [w.place.block for w in loop.releasing_writes] == ["JOIN"]
    (kernel,) = api.parse_text(text, "t.musimd", "musimd").kernels
    config = LaunchConfig(threads=4, warp_width=4, params={"flag": 0, "out": 8},
                          shared=dict.fromkeys(range(16), 0), reconvergence="ipdom",
                          max_steps=2000)
    with pytest.raises(ExecutionError, match="SIMT deadlock in kernel|did not finish"):
        run_kernel(kernel, config)
    assert analyse(WAIT_THEN_JOIN.format(join="x = 1"))["WAIT"].reason == "uniform-exit"


VOTE_WAIT = """.version 9.0
.target sm_80
.address_size 64
.visible .entry vote_wait(.param .u64 vote_wait_param_0, .param .u64 vote_wait_param_1)
{
	.reg .pred %p<5>;
	.reg .b32 %r<7>;
	.reg .b64 %rd<7>;
	ld.param.u64 %rd4, [vote_wait_param_0];
	ld.param.u64 %rd3, [vote_wait_param_1];
	cvta.to.global.u64 %rd1, %rd4;
	mov.u32 %r1, %tid.x;
	setp.lt.u32 %p1, %r1, 16;
	@%p1 bra $L__BB0_2;
	bra.uni $L__BB0_1;
$L__BB0_2:
	cvta.to.global.u64 %rd2, %rd3;
$L__BB0_3:
	ld.volatile.global.u32 %r3, [%rd1];
	setp.ne.s32 %p2, %r3, 0;
	mov.u32 %r4, 65535;
	vote.sync.all.pred %p3, %p2, %r4;
	not.pred %p4, %p3;
	@%p4 bra $L__BB0_3;
	mul.wide.u32 %rd5, %r1, 4;
	add.s64 %rd6, %rd2, %rd5;
	mov.u32 %r6, 1;
	st.global.u32 [%rd6], %r6;
	bra.uni $L__BB0_5;
$L__BB0_1:
	mov.u32 %r2, 1;
	st.volatile.global.u32 [%rd1], %r2;
$L__BB0_5:
	ret;
}
"""


def test_a_vote_controlled_wait_reads_through_the_vote():
    """`if (tid < 16) while (!__all_sync(m, *flag)); else *flag = 1;`: the vote's operand
    is hidden from the operand facts; the slice still reaches the flag's load, and the
    writer on the other side of the divergent branch is parallel."""
    program = api.parse_text(VOTE_WAIT, "vote.ptx", "ptx")
    (report,) = api.deadlock(program).kernels
    (loop,) = report.loops
    assert loop.verdict == "may-deadlock"
    assert [(w.place.block, w.path) for w in loop.releasing_writes] == [("$L__BB0_1",
                                                                         "parallel")]


def test_sarif_of_deadlock_findings_is_valid(capsys, monkeypatch):
    import jsonschema

    schema = json.loads((Path(__file__).parents[1] / "data" / "sarif-schema-2.1.0.json")
                        .read_text(encoding="utf-8"))
    monkeypatch.chdir(SAMPLES.parent)
    assert main(["deadlock", "--format", "sarif", "samples/cuda/deadlock_locks.O3.ptx",
                 "samples/musimd/deadlock_t9_divergent_barrier.musimd"]) == 0
    log = json.loads(capsys.readouterr().out)
    jsonschema.Draft4Validator(schema).validate(log)
    (run,) = log["runs"]
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == [
        "gpudiv-simt-deadlock", "gpudiv-divergent-barrier"]
    results = run["results"]
    assert {r["ruleId"] for r in results} == {"gpudiv-simt-deadlock",
                                             "gpudiv-divergent-barrier"}
    cuda = [r for r in results if r["ruleId"] == "gpudiv-simt-deadlock"]
    assert len(cuda) == 4  # spin_lock_fig1, ready_flags, two_locks ×2
    for r in cuda:  # the CUDA line, the PTX line as a related location
        assert r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith(
            "deadlock_locks.cu")
        assert r["relatedLocations"][0]["physicalLocation"]["artifactLocation"]["uri"] \
            .endswith("deadlock_locks.O3.ptx")


def test_cuda_sample_verdicts_in_both_builds():
    expected = {"spin_lock_fig1": ["may-deadlock"], "safe_lock_fig3": ["safe"],
                "two_locks": ["may-deadlock", "may-deadlock"], "all_controlled": ["safe"]}
    for build in ("O3", "G"):
        report = api.deadlock(SAMPLES / "cuda" / f"deadlock_locks.{build}.ptx")
        for name, verdicts in expected.items():
            assert [lp.verdict for lp in report.kernel(name).loops] == verdicts, (build, name)
        flags = report.kernel("ready_flags")
        (spin,) = flags.detections
        assert spin.shared_reads and spin.shared_reads[0].origin[1] == 64  # while (ready[k]…)
        assert spin.safe_reconvergence.origin[1] == 69  # the end of the outer loop


def test_cuda_golden_cases_t6_t8_t9():
    """samples/cuda/deadlock_cases.cu in both builds: T6's per-thread locks and T8's
    tag-and-retry are (conservative, false) detections, T8's opt-out silences it, and
    T9's two barriers are divergent-barrier findings."""
    for build in ("O3", "G"):
        path = SAMPLES / "cuda" / f"deadlock_cases.{build}.ptx"
        report = api.deadlock(path)
        locks, retry, barrier = (report.kernel(k) for k in
                                 ("per_thread_locks", "tag_retry", "divergent_barrier"))
        assert [lp.verdict for lp in locks.loops] == ["may-deadlock"], build
        assert sorted(lp.verdict for lp in retry.loops) == ["may-deadlock", "safe"], build
        assert (barrier.loops, len(barrier.barriers)) == ([], 2), build
        trusted = api.deadlock(path, assume_safe=("tag_retry",)).kernel("tag_retry")
        assert trusted.assumed_safe and not trusted.detections  # verdicts kept, no finding
        assert "may-deadlock" in [lp.verdict for lp in trusted.loops]


def test_t9_cuda_divergent_barrier_on_aware():
    """T9 in CUDA: the stack stops at the first barrier, AWARE counts arrivals per lane
    (each side's split blocks at its own barrier) and the kernel finishes; every lane
    reads what its neighbour wrote before the barrier."""
    import numpy as np

    from gpudiv.interp.ptx import PtxLaunch, run_ptx_kernel
    kernel = load(SAMPLES / "cuda" / "deadlock_cases.O3.ptx").kernel("divergent_barrier")
    launch = PtxLaunch(args={0: np.zeros(32, np.int32)}, reconvergence="ipdom")
    with pytest.raises(ExecutionError, match="barrier in divergent code"):
        run_ptx_kernel(kernel, launch)
    (out,) = run_ptx_kernel(kernel, replace(launch, reconvergence="aware")).buffers.values()
    assert [int(out[t]) for t in range(0, 29)] == [
        2 * (t + 3) if t % 2 == 0 else -(t + 1) for t in range(0, 29)]


BOUNDED_RETRY = """kernel k(m, n)
      i = 0
L:    t = atominc shared[m]
      p = t == 1
      bnz p, GOT
      i = i + {step}
      q = i {cmp} n
      bnz q, L
GOT:  shared[m] = 0
      stop
"""


def test_a_counted_exit_bounds_the_loop():
    """A lock attempt retried at most n times: every lane leaves after n iterations."""
    text = BOUNDED_RETRY.format(step=1, cmp="<")
    loop = analyse(text)["L"]
    assert (loop.verdict, loop.reason) == ("safe", "counted-exit")
    (kernel,) = api.parse_text(text, "t.musimd", "musimd").kernels
    config = LaunchConfig(threads=4, warp_width=4, params={"m": 0, "n": 5},
                          shared=dict.fromkeys(range(8), 0), reconvergence="ipdom",
                          max_steps=4000)
    run_kernel(kernel, config)
    assert analyse(BOUNDED_RETRY.format(step=-1, cmp="!="))["L"].reason == "counted-exit"
    # i <= n never fails for n = MAX; a step of 2 may jump over n: not counted
    assert analyse(BOUNDED_RETRY.format(step=1, cmp="<="))["L"].verdict == "may-deadlock"
    assert analyse(BOUNDED_RETRY.format(step=2, cmp="!="))["L"].verdict == "may-deadlock"


RETRY_PTX = """.version 7.0
.target sm_80
.address_size 64
.visible .entry w(.param .u64 p, .param .u64 n)
{
	.reg .pred %p<3>;
	.reg .b32 %r<5>;
	.reg .b64 %rd<4>;
	ld.param.u64 %rd1, [p];
	ld.param.u64 %rd2, [n];
	cvt.u32.u64 %r4, %rd2;
	mov.u32 %r1, 0;
L:
	atom.global.cas.b32 %r2, [%rd1], 0, 1;
	setp.eq.s32 %p1, %r2, 0;
	@%p1 bra GOT;
	add.s32 %r1, %r1, 1;
	cvt.s64.s32 %rd3, %r1;
	{test}
	@{neg}%p2 bra L;
GOT:
	atom.global.exch.b32 %r3, [%rd1], 0;
	ret;
}
"""


@pytest.mark.parametrize("test, neg, verdict", [
    ("setp.ne.s32 %p2, %r1, %r4;", "", "safe"),           # i != n on the 32-bit counter
    ("setp.eq.s32 %p2, %r1, %r4;", "!", "safe"),          # the same, negated guard
    ("setp.lt.u32 %p2, %r1, %r4;", "", "safe"),           # exit when i >= n (unsigned)
    ("setp.le.s32 %p2, %r1, %r4;", "", "may-deadlock"),   # exit when i > n: never if n = MAX
    ("setp.ne.s64 %p2, %rd3, %rd2;", "", "may-deadlock"),  # widened: i may never equal n
])
def test_counted_exits_in_ptx(test, neg, verdict):
    program = api.parse_text(RETRY_PTX.replace("{test}", test).replace("{neg}", neg),
                             "retry.ptx", "ptx")
    (report,) = api.deadlock(program).kernels
    (loop,) = report.loops
    assert loop.verdict == verdict, loop.reason


# T1 with its loop's reconvergence point written on the branch at the safe point DONE
# (AWARE's delayed reconvergence, Fig. 6a: the IR marks, no CFG change).
DELAYED = """kernel spinLock(m, a)
SPIN: t = atominc shared[m]
      p = t != 1
      bnz p, SPIN  # gpudiv: reconverge DONE
      v = shared[a]
      v = v + 1
      shared[a] = v
      shared[m] = 0
DONE: stop
"""


def test_t10_aware_timed_out_reconvergence():
    """T10 (Fig. 6b): T1 on AWARE's FIFO warp splits with IPDOM reconvergence points
    hangs without a timeout; with timeout T the lock holder, waiting alone at the loop's
    reconvergence point, goes on once it has waited T warp steps, releases the lock and
    every lane finishes with the memory of the MIMD reference. Larger T, slower
    progress. Fig. 6a: with the reconvergence point delayed to SafePDom no timeout is
    needed."""
    path = SAMPLES / "musimd" / "deadlock_t1_spin_lock.musimd"
    kernel, config = _launch(path, 4)
    reference = run_kernel(kernel, replace(config, warp_width=1)).shared
    with pytest.raises(ExecutionError, match="SIMT deadlock|did not finish"):
        run_kernel(kernel, replace(config, reconvergence="aware", aware_timeout=None))
    steps = []
    for timeout in (10, 40, 160):
        run = run_kernel(kernel, replace(config, reconvergence="aware",
                                         aware_timeout=timeout), trace=True)
        assert run.shared == reference and run.shared[16] == 4
        crit = [s for s in run.trace if s.label == "CRIT"]
        assert crit[0].active == [0] and crit[0].step > timeout  # C_1000 after TimeOut
        steps.append(run.counters.warp_instructions)
    assert steps == sorted(steps) and len(set(steps)) == 3
    (delayed,) = api.parse_text(DELAYED, "t.musimd", "musimd").kernels
    (report,) = api.deadlock(api.parse_text(DELAYED, "t.musimd", "musimd")).kernels
    safe = report.loops[0].safe_reconvergence  # SafePDom: after the release (line 8), = DONE
    assert (safe.block, safe.line) == ("bb1", 8) and delayed.blocks[1].label == "bb1"
    run = run_kernel(delayed, replace(config, reconvergence="aware", aware_timeout=None))
    assert run.shared == reference
    with pytest.raises(ExecutionError, match="SIMT deadlock|did not finish"):
        run_kernel(delayed, config)  # ipdom ignores the mark


def test_t10_cuda_spin_lock_finishes_on_aware():
    """The CUDA Fig. 1 lock (-O3, a warp of 32) on AWARE: a SIMT deadlock without a
    timeout; with one it finishes like under mimd (sooner with a smaller timeout), its
    divergent `__syncthreads()` (lanes that timed out reach it first) supported."""
    import numpy as np

    from gpudiv.interp.ptx import PtxLaunch, run_ptx_kernel
    kernel = load(LOCKS.with_suffix(".O3.ptx")).kernel("spin_lock_fig1")
    launch = PtxLaunch(args={0: np.zeros(1, np.int32)}, max_steps=100_000)
    runs = [run_ptx_kernel(kernel, replace(launch, reconvergence=policy, aware_timeout=t))
            for policy, t in (("mimd", None), ("aware", 100), ("aware", 1000))]
    (want,), (fast,), (slow,) = (run.buffers.values() for run in runs)
    assert fast.tolist() == slow.tolist() == want.tolist() == [32]
    assert runs[1].counters.warp_instructions < runs[2].counters.warp_instructions
    with pytest.raises(ExecutionError, match="SIMT deadlock"):  # no timeout: Fig. 1 hangs
        run_ptx_kernel(kernel, replace(launch, reconvergence="aware", aware_timeout=None))
