"""The soundness oracle: run a kernel on the interpreter and check every analysis claim.

A claim is checked at every dynamic use of an SSA variable, over the lanes active at that
use (docs/design.md, "Verification"): uniform ⇒ all values equal; constant k ⇒ all equal k;
uniform branch ⇒ never splits the warp. Affine analyses also claim polynomials in the
thread id: (a2, a1, k) with known a2, a1 ⇒ value = a2·tid² + a1·tid + k (mod 2^32) in each
lane; (a2, a1, ⊥) ⇒ value − a2·tid² − a1·tid is the same in all active lanes (mod 2^32).
One violation is a bug in the analysis.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from gpudiv import ir
from gpudiv.analyses.launch_shape import BlockShape, special_values
from gpudiv.analyses.results import KernelResult
from gpudiv.analyses.stack_slots import original
from gpudiv.interp.musimd import ExecutionError, LaunchConfig, run_kernel
from gpudiv.interp.ptx import PtxLaunch
from gpudiv.interp.ptx_synthesis import CHECK_SHAPES, synthesize_launches

# Warp steps a μ-SIMD launch of `gpudiv check` may take (the samples need at most about
# 6,000): a kernel that never ends is given up in seconds, with the reason.
CHECK_MAX_STEPS = 20_000

# Launch shapes of `gpudiv check`: (threads, warp width).
DEFAULT_SHAPES = ((1, 4), (5, 4), (32, 4), (64, 4), (100, 4),
                  (1, 32), (5, 32), (32, 32), (64, 32), (100, 32))


@dataclass
class Violation:
    """A claim contradicted by an execution."""

    kernel: str
    claim: str
    variable: str | None
    source: str | None
    line: int
    lanes: list[int]
    values: list[int]
    threads: int
    warp_width: int
    params: dict[str, int]

    def __str__(self) -> str:
        what = f"variable {self.variable} ({self.source})" if self.variable else "branch"
        shown = ", ".join(f"t{t}={v}" for t, v in zip(self.lanes[:8], self.values[:8],
                                                       strict=False))
        return (f"kernel {self.kernel}, line {self.line}: {what} claimed {self.claim} but "
                f"lanes differ: {shown} (threads={self.threads}, warp={self.warp_width}, "
                f"params={self.params})")


@dataclass
class CheckReport:
    """Outcome of checking one kernel over several runs."""

    name: str
    status: str = "checked"
    reason: str = ""
    runs: int = 0
    uses_checked: int = 0
    violations: list[Violation] = field(default_factory=list)
    reconvergence: str = ""  # the policy the runs used
    # how the runs executed calls to functions of the file: "inline", or "call" (the
    # kernel recurses or calls through pointers: `gpudiv.verify.call_runs`)
    calls: str = "inline"
    # Counters of the finished runs, summed (max_stack_depth: the largest; simd_efficiency
    # over all the lane slots issued): `add_counters`.
    counters: dict[str, float] = field(default_factory=dict)


def add_counters(total: dict[str, float], counters) -> None:
    """Add one run's `simt.Counters` to a check report's totals."""
    for key in ("warp_instructions", "lane_instructions", "divergent_branches",
                "reconvergences"):
        total[key] = total.get(key, 0) + getattr(counters, key)
    total["lane_slots"] = total.get("lane_slots", 0) + (counters.warp_instructions
                                                        * counters.warp_width)
    total["max_stack_depth"] = max(total.get("max_stack_depth", 0), counters.max_stack_depth)
    total["simd_efficiency"] = round(total["lane_instructions"] / total["lane_slots"], 4) \
        if total["lane_slots"] else 0.0


# (ssa name, source name, claim, constant value; for "affine": (a2, a1, a0 or None))
_Check = tuple[str, str, str, int | None | tuple[int, int, int | None]]


def _wrap(value: int) -> int:
    return ((value + 2**31) & 0xFFFFFFFF) - 2**31


def _differs_from(values: np.ndarray, constant: int) -> bool:
    """Whether a lane's value is not the claimed constant modulo the register's width, as
    the interpreter's dtype tells it (bool: a 1-bit predicate, intN: N bits), at most 32."""
    if values.dtype == np.bool_:
        return bool(np.any(values != bool(constant & 1)))
    mask = (1 << min(values.dtype.itemsize * 8, 32)) - 1
    return bool(np.any((values.astype(np.int64) & mask) != (constant & mask)))


class ClaimObserver:
    """Interpreter observer that checks uniformity claims at each dynamic use."""

    def __init__(self, result: KernelResult, config: LaunchConfig, limit: int = 50):
        self.result = result
        self.config = config
        self.limit = limit
        self.uses_checked = 0
        self.violations: list[Violation] = []
        self._seen: set[tuple[int, str]] = set()
        self.checks = _checks_per_instruction(result)
        self.uniform_branches = {b.instruction: b for b in result.branches if not b.divergent}
        self.lines = {i.id: i.loc.line for i in result.ssa.cfg.kernel.instructions()}
        # What "tid" means in affine claims: the lane's thread id, or for PTX `%tid.x`.
        self.tid_register = getattr(config, "thread_index", None)

    def before(self, warp: int, instruction: int, active: np.ndarray,
               read: Callable[[str], np.ndarray]) -> None:
        """Check the claims on the variables this instruction reads."""
        for ssa_name, source, claim, value in self.checks.get(instruction, ()):
            values = read(source)
            self.uses_checked += 1
            if claim == "constant":
                bad = _differs_from(values, value)
            elif claim == "affine":
                tids = read(self.tid_register) if self.tid_register else active
                bad = _affine_violated(values, tids, value)
            else:
                bad = bool(np.any(values != values[0]))
            if bad:
                self._record(instruction, claim, ssa_name, source, active, values)

    def branch(self, warp: int, instruction: int, active: np.ndarray,
               jumps: np.ndarray) -> None:
        """Check that a branch claimed uniform does not split the warp."""
        if instruction in self.uniform_branches:
            self.uses_checked += 1
            if bool(np.any(jumps != jumps[0])):
                self._record(instruction, "uniform branch", None, None, active,
                             jumps.astype(int))

    def _record(self, instruction: int, claim: str, ssa_name: str | None,
                source: str | None, active: np.ndarray, values: np.ndarray) -> None:
        key = (instruction, ssa_name or "")
        if key in self._seen or len(self.violations) >= self.limit:
            return
        self._seen.add(key)
        self.violations.append(Violation(
            self.result.name, claim, ssa_name, source, self.lines[instruction],
            [int(t) for t in active], [int(v) for v in values], self.config.threads,
            self.config.warp_width, dict(self.config.params)))


def _affine_violated(values: np.ndarray, tids: np.ndarray,
                     coefficients: tuple[int, int, int | None]) -> bool:
    """Whether lane values contradict a2·tid² + a1·tid + a0 (a0 None: any common value)."""
    a2, a1, a0 = coefficients
    tids = tids.astype(np.int64)
    residue = _wrap(values - _wrap(a2 * tids * tids + a1 * tids))
    if a0 is not None:
        return bool(np.any(residue != _wrap(a0)))
    return bool(np.any(residue != residue[0]))


def _affine_claim(var) -> tuple[int, int, int | None] | None:
    """The polynomial an affine analysis claims for a non-uniform variable, if any."""
    if var.affine is None or var.uniform:
        return None
    a2, a1, a0 = var.affine
    if a2 is None or a1 is None:
        return None
    return a2, a1, a0


def _checks_per_instruction(result: KernelResult) -> dict[int, list[_Check]]:
    """For each instruction, the claims on the SSA variables it reads."""
    claims = {v.name: v for v in result.variables if v.uniform}
    affine = {v.name: (v, c) for v in result.variables if (c := _affine_claim(v)) is not None}
    specials = result.ssa.cfg.kernel.specials
    shaped = _shape_claims(result)
    # Promoted stack slots live in memory, not in registers the interpreter can show; the
    # registers loaded from them are checked at their own uses.
    slots = set(result.ssa.cfg.kernel.attrs.get("stack_slots", ()))
    checks: dict[int, list[_Check]] = {}
    for n, names in result.ssa.uses.items():
        for name in dict.fromkeys(n_ for n_ in names if n_ is not None):
            if name in result.ssa.variables and result.ssa.variables[name].source in slots:
                continue
            var = claims.get(name)
            if name in affine:
                var, coefficients = affine[name]
                checks.setdefault(n, []).append((name, var.source, "affine", coefficients))
            elif var is not None:
                checks.setdefault(n, []).append((name, var.source, var.klass, var.value))
            elif name in shaped:
                checks.setdefault(n, []).append((name, name, *shaped[name]))
            elif specials.get(name) == "uniform":
                checks.setdefault(n, []).append((name, name, "uniform", None))
    return checks


def _shape_claims(result: KernelResult) -> dict[str, tuple[str, int | None | tuple]]:
    """What the kernel's block shape says about special registers, as claims: a constant
    (`%ntid.x`), warp-uniform (`%tid.y` when X % 32 = 0), or `%laneid` = `%tid.x` − a value
    common to the warp."""
    claims: dict[str, tuple[str, int | None | tuple]] = {}
    for name, known in special_values(result.block, result.ssa.cfg.kernel.specials).items():
        if known.kind == "constant":
            claims[name] = ("constant", known.value)
        elif known.kind == "uniform":
            claims[name] = ("uniform", None)
        else:
            claims[name] = ("affine", (0, 1, None))
    return claims


def random_launches(kernel: ir.Kernel, seed: int,
                    shapes: Iterable[tuple[int, int]] = DEFAULT_SHAPES,
                    reconvergence: str = "auto",
                    max_steps: int | None = None) -> list[LaunchConfig]:
    """Launch configurations with random parameter values and random shared memory (and
    a step budget per launch: `max_steps`, else the interpreter's default)."""
    budget = {} if max_steps is None else {"max_steps": max_steps}
    rng = random.Random(seed)
    launches = []
    for threads, width in shapes:
        params = {p: rng.choice([0, 1, 2, 3, 5, 7, 10, -1, rng.randint(-20, 40)])
                  for p in kernel.params}
        shared = {a: rng.randint(-50, 50) for a in range(64)}
        launches.append(LaunchConfig(threads=threads, warp_width=width, params=params,
                                     shared=shared, reconvergence=reconvergence,
                                     **budget))
    return launches


def ptx_launches(kernel: ir.Kernel, seed: int, block: BlockShape | None = None,
                 max_steps: int | None = None) -> list[PtxLaunch]:
    """Launches of `gpudiv check` for a PTX kernel: several grid/block shapes (a partial
    last warp, 2-D and 3-D blocks), generous buffers, small random scalars. With a block
    shape, every launch has exactly that shape (the claims assume it) and the grids vary;
    `max_steps` warp steps per launch (None: the interpreter's check default)."""
    steps = {} if max_steps is None else {"max_steps": max_steps}
    if block is None:
        return synthesize_launches(kernel, seed, **steps)
    shapes = tuple((grid, block.dims, fill) for grid, _, fill in CHECK_SHAPES)
    return synthesize_launches(kernel, seed, shapes=shapes, **steps)


def check_kernel(result: KernelResult, launches: list[LaunchConfig],
                 run: Callable = run_kernel) -> CheckReport:
    """Run the kernel under every launch and check all claims of `result` (`run` is the
    interpreter: μ-SIMD's `run_kernel`, or `run_ptx_growing` with `ptx_launches`)."""
    kernel = original(result.ssa.cfg.kernel)  # promoted stack slots are for analysis only
    report = CheckReport(result.name)
    failures: list[str] = []
    for config in launches:
        observer = ClaimObserver(result, config)
        try:
            outcome = run(kernel, config, observer=observer)
        except ExecutionError as error:
            failures.append(str(error))
            continue
        finally:
            # A violation seen before a run stopped is still a violation; its uses are
            # not counted as checked (the totals count finished runs only).
            report.violations.extend(observer.violations)
        report.uses_checked += observer.uses_checked
        report.runs += 1
        add_counters(report.counters, outcome.counters)
    if report.runs == 0:
        report.status = "not-executed"
        report.reason = failures[0] if failures else "no launch configuration"
    elif failures:
        report.reason = f"{len(failures)} of {len(launches)} runs stopped: {failures[0]}"
    return report
