"""Tests of the μ-SIMD reference SIMD interpreter (gpudiv.interp.musimd)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpudiv import ir
from gpudiv.interp import ExecutionError, LaunchConfig, format_trace, run_kernel
from gpudiv.lang.musimd.parse import parse_musimd
from gpudiv.verify.randprog import random_program

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "musimd"
MATRIX = {k: k + 1 for k in range(16)}  # the 4×4 matrix at m = 0 used by the thesis examples


def kernel_from(text: str) -> ir.Kernel:
    """Parse one μ-SIMD kernel from a string, failing on diagnostics."""
    program = parse_musimd(text, "<test>")
    assert not program.diagnostics, [str(d) for d in program.diagnostics]
    return program.kernels[0]


def sample(name: str) -> ir.Kernel:
    """Parse the first kernel of a sample file."""
    path = SAMPLES / name
    program = parse_musimd(path.read_text(), str(path))
    assert not program.diagnostics, [str(d) for d in program.diagnostics]
    return program.kernels[0]


def run(text: str, threads: int = 4, width: int = 4, **kwargs):
    """Run a kernel given as text (the seed's sync semantics unless told otherwise)."""
    kwargs.setdefault("reconvergence", "sync")
    return run_kernel(kernel_from(text), LaunchConfig(threads, width, **kwargs))


def error_of(text: str, threads: int = 4, width: int = 4, **kwargs) -> ExecutionError:
    """The ExecutionError a kernel raises."""
    with pytest.raises(ExecutionError) as info:
        run(text, threads, width, **kwargs)
    return info.value


class Recorder:
    """An observer that records every callback."""

    def __init__(self) -> None:
        self.steps: list[tuple[int, int, list[int], dict[str, list[int]]]] = []
        self.branches: list[tuple[int, int, list[int], list[bool]]] = []

    def before(self, warp, instruction, active, read) -> None:
        """Record the step and the values of a few variables."""
        values = {name: read(name).tolist() for name in ("tid", "p", "never")}
        self.steps.append((warp, instruction, active.tolist(), values))

    def branch(self, warp, instruction, active, jumps) -> None:
        """Record a branch outcome."""
        self.branches.append((warp, instruction, active.tolist(), jumps.tolist()))


# ---------------------------------------------------------------------------------------
# The thesis examples
# ---------------------------------------------------------------------------------------


def test_fig_3_4_sum_triangle_trace():
    """The reconstruction of Fig 3.4 reproduces the thesis' trace and results."""
    kernel = sample("sumTriangle.musimd")
    config = LaunchConfig(4, 4, {"c": 4, "m": 0, "v": 100}, dict(MATRIX))
    result = run_kernel(kernel, config, trace=True)
    assert [result.shared[100 + t] for t in range(4)] == [0, 6, 7, 24]
    assert result.registers["d"] == [1, 2, 3, 4]
    assert result.counters.warp_instructions == 54
    assert len(result.trace) == 54
    loop_branch = [s.active for s in result.trace if s.line == 16]
    assert all(s.text == "bz p, EXIT" for s in result.trace if s.line == 16)
    assert loop_branch == [[0, 1, 2, 3], [0, 1, 2, 3], [1, 2, 3], [2, 3], [3]]
    # All threads reunite at the post-loop sync and run the tail in lock-step.
    assert [s.active for s in result.trace[-5:]] == [[0, 1, 2, 3]] * 5


def test_avg_square_averages_columns_without_loop_divergence():
    """avgSquare: v[t] = column average; the loop branch never diverges (notes §5.5)."""
    kernel = sample("avgSquare.musimd")
    loop_branch = next(i for i, instr in enumerate(kernel.instructions())
                       if instr.text == "bz p, EXIT")
    observer = Recorder()
    config = LaunchConfig(4, 4, {"c": 4, "m": 0, "v": 100}, dict(MATRIX))
    result = run_kernel(kernel, config, observer)
    for t in range(4):
        assert result.shared[100 + t] == sum(MATRIX[t + 4 * k] for k in range(4)) // 4
    outcomes = [jumps for _, i, _, jumps in observer.branches if i == loop_branch]
    assert len(outcomes) == 5
    assert all(len(set(jumps)) == 1 for jumps in outcomes)
    assert result.counters.divergent_branches == 0
    assert result.counters.simd_efficiency == 1.0


# ---------------------------------------------------------------------------------------
# Arithmetic
# ---------------------------------------------------------------------------------------


def test_wraparound_32_bit():
    """Additions and multiplications wrap to signed 32 bits."""
    result = run("""kernel w()
      a = 2147483647
      b = a + 1
      c = b - 1
      d = 65536 * 65536
      e = - b
      f = 4294967295
      stop
""", threads=1, width=1)
    regs = {name: values[0] for name, values in result.registers.items()}
    assert regs["b"] == -2147483648
    assert regs["c"] == 2147483647
    assert regs["d"] == 0
    assert regs["e"] == -2147483648
    assert regs["f"] == -1


def test_division_truncates_toward_zero():
    """/ and % follow C: truncation toward zero, remainder has the dividend's sign."""
    result = run("""kernel d()
      a = -7 / 2
      b = -7 % 2
      c = 7 / -2
      e = 7 % -2
      f = -2147483648 / -1
      stop
""", threads=1, width=1)
    regs = {name: values[0] for name, values in result.registers.items()}
    assert (regs["a"], regs["b"], regs["c"], regs["e"]) == (-3, -1, -3, 1)
    assert regs["f"] == -2147483648


@pytest.mark.parametrize(("op", "x", "y", "expected"), [
    ("<", 1, 2, 1), ("<=", 2, 2, 1), (">", 1, 2, 0), (">=", -1, 2, 0),
    ("==", 3, 3, 1), ("!=", 3, 3, 0), ("&", 12, 10, 8), ("|", 12, 10, 14), ("^", 12, 10, 6),
    ("<<", 1, 31, -2147483648), ("<<", 1, 32, 0), ("<<", 1, -1, 0), (">>", -8, 1, -4),
    (">>", -8, 40, -1), (">>", 8, 40, 0), ("min", -3, 2, -3), ("max", -3, 2, 2),
])
def test_binary_operators(op, x, y, expected):
    """Each binary operator on one lane."""
    result = run(f"kernel b(x, y)\n  r = x {op} y\n  stop\n", threads=1, width=1,
                 params={"x": x, "y": y})
    assert result.registers["r"] == [expected]


def test_unary_operators_and_specials():
    """! ~ - and the special registers, per lane."""
    result = run("""kernel u()
      a = laneid - 1
      n = ! a
      c = ~ a
      w = warpid
      k = ntid
      stop
""", threads=6, width=4)
    assert result.registers["a"] == [-1, 0, 1, 2, -1, 0]
    assert result.registers["n"] == [0, 1, 0, 0, 0, 1]
    assert result.registers["c"] == [0, -1, -2, -3, 0, -1]
    assert result.registers["w"] == [0, 0, 0, 0, 1, 1]
    assert result.registers["k"] == [6] * 6


def test_division_by_zero_names_kernel_line_label_and_lane():
    """The error message is one line naming where and which lanes."""
    error = error_of("""kernel divz()
      z = tid - 2
BODY: q = 10 / z
      stop
""")
    message = str(error)
    assert "\n" not in message
    assert message == "kernel divz, line 3 (label BODY), lane 2: division by zero"
    assert (error.kernel, error.line, error.label, error.lanes) == ("divz", 3, "BODY", [2])


# ---------------------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------------------


def test_atomics_apply_lanes_in_tid_order():
    """atominc returns 1..n in tid order; atomadd returns running sums."""
    result = run("""kernel at()
      x = atominc shared[7]
      y = atomadd shared[8], tid
      stop
""", threads=8, width=4)
    assert result.registers["x"] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert result.registers["y"] == [0, 1, 3, 6, 10, 15, 21, 28]
    assert result.shared == {7: 8, 8: 28}


def test_local_memory_is_private_and_parameters_default_to_zero():
    """local[] is per thread; a missing parameter reads 0; unwritten cells read 0."""
    result = run("""kernel loc(p, q)
      local[0] = tid
      u = local[1]
      y = local[0]
      z = y + q
      shared[tid] = z
      stop
""", params={"q": 5})
    assert result.registers["y"] == [0, 1, 2, 3]
    assert result.registers["u"] == [0] * 4
    assert result.registers["p"] == [0] * 4
    assert result.shared == {0: 5, 1: 6, 2: 7, 3: 8}
    assert result.local == [{0: t} for t in range(4)]


def test_barrier_exchange_between_two_warps():
    """Warps exchange data through shared memory across a block-wide barrier."""
    kernel = sample("barrier_exchange.musimd")
    for mode in ("sync", "ipdom"):
        result = run_kernel(kernel, LaunchConfig(8, 4, {"out": 100}, reconvergence=mode))
        assert [result.shared[100 + t] for t in range(8)] == \
            [10 * ((t + 4) % 8) + 1 for t in range(8)]
    # Without the barrier warps run back to back and warp 0 reads unwritten cells.
    text = (SAMPLES / "barrier_exchange.musimd").read_text().replace("barrier\n", "sync\n")
    unsynchronised = kernel_from(text.replace("      sync\n", ""))
    result = run_kernel(unsynchronised, LaunchConfig(8, 4, {"out": 100}))
    assert [result.shared[100 + t] for t in range(4)] == [0, 0, 0, 0]


# ---------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------


def test_endless_loop_exhausts_step_budget():
    """An endless loop is reported, naming the line where the budget ran out."""
    error = error_of("""kernel spin()
      i = 0
L:    i = i + 1
      jump L
""", max_steps=1000)
    assert "did not finish within 1000 warp steps" in str(error)
    assert str(error).startswith("kernel spin, line ")
    assert error.line in (3, 4)


def test_sync_with_empty_stack():
    """A sync without a preceding branch is an error."""
    error = error_of("kernel s()\n  x = 1\n  sync\n  stop\n")
    assert "sync with nothing to synchronise" in str(error)
    assert error.line == 3


def test_stop_with_pending_nodes():
    """A branch without a matching sync leaves a node on the stack at stop."""
    error = error_of("""kernel p()
      g = tid < 2
      bz g, X
X:    stop
""")
    assert "stop reached with 1 pending synchronisation node(s)" in str(error)
    assert error.lanes == [0, 1]


def test_falling_off_the_end_acts_like_stop():
    """A kernel without stop finishes; in sync mode pending nodes are still an error."""
    result = run("kernel f()\n  x = tid\n")
    assert result.registers["x"] == [0, 1, 2, 3]
    error = error_of("kernel f()\n  g = tid < 2\n  bz g, X\nX:\n")
    assert "pending synchronisation" in str(error)


def test_barrier_not_reached_by_all_warps():
    """A warp that finishes while another waits at a barrier is an error."""
    error = error_of("""kernel b()
      bnz warpid, END
      barrier
END:  sync
      stop
""", threads=8)
    assert "barrier not reached by all warps" in str(error)
    assert error.line == 3
    assert error.lanes == [0, 1, 2, 3]


def test_barrier_in_divergent_code():
    """A barrier reached by part of a warp is an error."""
    error = error_of("""kernel b()
      g = tid < 2
      bz g, X
      barrier
X:    sync
      stop
""")
    assert "barrier in divergent code" in str(error)
    assert error.lanes == [0, 1]


def test_bad_launch_configuration():
    """Configurations that cannot run are rejected up front."""
    kernel = kernel_from("kernel k()\n  stop\n")
    with pytest.raises(ValueError):
        run_kernel(kernel, LaunchConfig(0))
    with pytest.raises(ValueError):
        run_kernel(kernel, LaunchConfig(4, reconvergence="earliest"))


# ---------------------------------------------------------------------------------------
# Reconvergence schemes
# ---------------------------------------------------------------------------------------


def test_unstructured_join_in_ipdom_mode():
    """Two branches jumping into one block run correctly with PDOM reconvergence."""
    kernel = sample("unstructured_join.musimd")
    result = run_kernel(kernel, LaunchConfig(12, 4, {"out": 100}, reconvergence="ipdom"))
    expected = [2 if t % 3 == 0 else 22 if t % 2 else 110 for t in range(12)]
    assert [result.shared[100 + t] for t in range(12)] == expected
    assert result.counters.divergent_branches > 0
    with pytest.raises(ExecutionError, match="pending synchronisation"):
        run_kernel(kernel, LaunchConfig(12, 4, {"out": 100}, reconvergence="sync"))


def test_loop_break_and_stop_in_divergent_code_ipdom():
    """A second loop exit and lanes stopping inside divergent code (ipdom mode)."""
    kernel = sample("break_and_stop.musimd")
    result = run_kernel(kernel, LaunchConfig(12, 4, {"out": 100}, reconvergence="ipdom"))
    expected = {100 + t: t * (t - 1) // 2 for t in range(8) if t % 3}
    expected |= {100 + t: 28 for t in range(8, 12)}
    assert result.shared == expected


def test_ipdom_reunites_at_post_dominator():
    """After an if/else the whole warp runs the join in one step, without any sync."""
    result = run_kernel(kernel_from("""kernel ifelse()
      g = tid & 1
      bz g, ELSE
      r = 1
      jump JOIN
ELSE: r = 2
JOIN: r = r * 10
      stop
"""), LaunchConfig(4, 4, reconvergence="ipdom"), trace=True)
    assert result.registers["r"] == [20, 10, 20, 10]
    texts = [(s.text, s.active) for s in result.trace]
    assert texts[2:] == [("r = 1", [1, 3]), ("jump JOIN", [1, 3]), ("r = 2", [0, 2]),
                         ("r = r * 10", [0, 1, 2, 3]), ("stop", [0, 1, 2, 3])]


@pytest.mark.parametrize(("name", "threads", "width"), [
    ("sumTriangle.musimd", 4, 4), ("sumTriangle.musimd", 8, 4), ("sumTriangle.musimd", 6, 2),
    ("avgSquare.musimd", 4, 4), ("avgSquare.musimd", 8, 3),
])
def test_sync_and_ipdom_agree_on_structured_programs(name, threads, width):
    """Structured programs give identical memory and registers under both schemes."""
    kernel = sample(name)
    results = [run_kernel(kernel, LaunchConfig(threads, width, {"c": 4, "m": 0, "v": 100},
                                               dict(MATRIX), reconvergence=mode))
               for mode in ("sync", "ipdom")]
    assert results[0].shared == results[1].shared
    assert results[0].registers == results[1].registers
    assert results[0].local == results[1].local


def test_sync_mode_nested_divergence():
    """Nested divergent ifs, each closed by a sync, in the seed's scheme."""
    result = run("""kernel nest()
      r = 0
      a = tid & 1
      bz a, J1
      b = tid & 2
      bz b, J2
      r = r + 4
J2:   sync
      r = r + 2
J1:   sync
      r = r + 1
      stop
""", threads=8, width=8)
    assert result.registers["r"] == [1 + (2 if t & 1 else 0) + (4 if t & 3 == 3 else 0)
                                     for t in range(8)]
    assert result.counters.divergent_branches == 2


# ---------------------------------------------------------------------------------------
# Observer, counters, trace
# ---------------------------------------------------------------------------------------


def test_observer_sees_every_instruction_and_branch():
    """before() fires per executed instruction with correct reads; branch() per bz/bnz."""
    kernel = kernel_from("""kernel obs()
      p = tid < 5
      bz p, X
      y = 1
X:    sync
      stop
""")
    observer = Recorder()
    result = run_kernel(kernel, LaunchConfig(8, 4), observer)
    assert len(observer.steps) == result.counters.warp_instructions
    first = observer.steps[0]
    assert first[:3] == (0, 0, [0, 1, 2, 3])
    assert first[3]["tid"] == [0, 1, 2, 3]
    assert first[3]["never"] == [0, 0, 0, 0]
    assert observer.branches == [(0, 1, [0, 1, 2, 3], [False] * 4),
                                 (1, 1, [4, 5, 6, 7], [False, True, True, True])]
    at_branch = [values["p"] for w, i, _, values in observer.steps if i == 1]
    assert at_branch == [[1, 1, 1, 1], [1, 0, 0, 0]]
    assert result.counters.divergent_branches == 1


def test_counters_and_simd_efficiency():
    """Lane instructions count active lanes only."""
    result = run("""kernel c()
      p = tid < 1
      bz p, X
      y = 1
X:    sync
      stop
""")
    counters = result.counters
    # 2 full steps, `y = 1` on one lane, sync twice (SS then SP), stop.
    assert counters.warp_instructions == 6
    assert counters.lane_instructions == 4 + 4 + 1 + 1 + 3 + 4
    assert counters.simd_efficiency == pytest.approx(17 / 24)


def test_format_trace_has_one_row_per_step():
    """The trace table: a header, then one row per step with one ✓/• cell per thread."""
    kernel = sample("sumTriangle.musimd")
    result = run_kernel(kernel, LaunchConfig(4, 4, {"c": 4, "m": 0, "v": 100}, dict(MATRIX)),
                        trace=True)
    lines = format_trace(result, 4).splitlines()
    header, rows = lines[0], lines[1:]
    assert header.split()[:5] == ["step", "warp", "line", "label", "instruction"]
    assert header.split()[-4:] == ["t0", "t1", "t2", "t3"]
    assert len(rows) == 54
    for step, row in zip(result.trace, rows, strict=True):
        cells = row.split()[-4:]
        assert cells == ["✓" if t in step.active else "•" for t in range(4)]
        assert row.split()[0] == str(step.step)
    assert "bz p, EXIT" in rows[16]
    assert rows[17].split()[-4:] == ["•", "✓", "✓", "✓"]


def test_trace_is_empty_unless_requested():
    """trace=False records nothing."""
    result = run("kernel t()\n  stop\n")
    assert result.trace == []
    # Registers are numpy arrays inside; results are plain Python ints.
    assert all(type(v) is int for values in result.registers.values() for v in values)


def test_ipdom_through_split_loop_exit():
    """A loop exit whose target is also reached from outside (a synthetic CFG block)."""
    result = run_kernel(kernel_from("""kernel split()
      g = tid < 6
      bz g, AFTER
      i = 0
L:    p = i < tid
      bz p, AFTER
      i = i + 1
      jump L
AFTER: r = tid * 3
      stop
"""), LaunchConfig(8, 8, reconvergence="ipdom"), trace=True)
    assert result.registers["i"] == [0, 1, 2, 3, 4, 5, 0, 0]
    assert result.trace[-2].active == list(range(8))  # everyone reunited at AFTER


@pytest.mark.parametrize("seed", range(20))
def test_random_programs_run_in_both_schemes(seed):
    """Random structured programs agree across schemes; unstructured ones run in ipdom."""
    structured = kernel_from(random_program(seed, 25))
    config = {"threads": 1 + seed % 13, "warp_width": 1 + seed % 5,
              "params": {"n": seed % 7 - 2, "k": seed % 5}}
    results = [run_kernel(structured, LaunchConfig(**config, reconvergence=mode))
               for mode in ("sync", "ipdom")]
    assert results[0].shared == results[1].shared
    assert results[0].registers == results[1].registers
    unstructured = kernel_from(random_program(seed, 25, unstructured=True))
    run_kernel(unstructured, LaunchConfig(**config, reconvergence="ipdom"))
