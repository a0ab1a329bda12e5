"""The generic analysis driver: SSA and facts per kernel, clingo, typed results.

An analysis is its rule files, the option facts it adds, and a function that turns the
solved atoms of one kernel into a `KernelResult`. `Analysis.run` analyses all kernels of a
file in as few clingo runs as possible: each kernel's facts get their own namespace and up
to `JOINT_FACTS_LIMIT` facts are grounded and solved together
(`gpudiv.analyses.solve.solve_together`). A clingo run has a fixed cost of several milliseconds
(loading and grounding the rule files, statistics, freeing), which dominated the analysis
of PTX files with many small kernels. Kernels that cannot share a run are solved one by
one: with a user's rule file, a name containing the namespace mark, atoms that name no
kernel, or a rule error (which is then reported against the kernel that causes it).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from functools import cached_property, lru_cache

from gpudiv import ir
from gpudiv.analyses.copies import Folding, plain_copies, unfold
from gpudiv.analyses.facts import RELATIONS, facts_of
from gpudiv.analyses.launch_shape import BlockShape, kernel_shape
from gpudiv.analyses.partition import may_cut, partitioned, plan, solve_in_parts
from gpudiv.analyses.results import KernelResult
from gpudiv.analyses.solve import (
    NAMESPACE_MARK,
    Budget,
    NotSeparable,
    RuleError,
    SolveResult,
    is_shipped,
    namespace,
    solve,
    solve_together,
)
from gpudiv.ir.cfg import MAX_REJOIN_WALK, build_cfg, region_walk, region_work
from gpudiv.ir.perf import paused_gc
from gpudiv.ir.record import Record
from gpudiv.ir.ssa import SSAForm, build_ssa
from gpudiv.lang.ptx.kernel import local_objects
from gpudiv.lang.regex_cache import RegexCache

TYPE_CHECKING = False  # (typing is not imported: an analysis never needs it)
if TYPE_CHECKING:  # (nor pathlib: paths are strings on the way to an analysis)
    from pathlib import Path

# Facts grounded in one clingo run: large enough that the fixed cost of a run is spread
# over many kernels, small enough that a huge file never becomes one huge ground program
# (about 2,000 to 4,000 IR instructions of facts).
JOINT_FACTS_LIMIT = 11_000

# Relations rules/cfg.lp shows for users (`gpudiv solve`, `gpudiv facts --derived`) that no
# analysis reads: a deep nest of branches has quadratically many of them, and turning each
# into a Python object took most of the analysis time (issue 17, item 8).
UNREAD_RELATIONS: frozenset[tuple[str, int]] = frozenset({("region", 2),
                                                          ("control_dependent", 2)})

# name, kernel, SSA form, solved atoms, timings (ms) → the kernel's result
BuildResult = Callable[[str, ir.Kernel, SSAForm, SolveResult, dict[str, float]], KernelResult]


# Kernels the analysis gives up on, before building anything that grows with them
# (issue 17, item 8): more IR instructions than this (a 200,000-instruction kernel took
# 2 GB), or a `region_work` above this (a nest of 2,000 `if`s, 8 million, took 3.2 GB).
MAX_KERNEL_INSTRUCTIONS = 250_000
MAX_REGION_WORK = 4_000_000
# Above that bound, what the rules really walk (`region_walk`: blocks and their edges),
# with the same limit: a nest of 1,000 `if`s walks 2.5 million (about 700 MB), one of
# 1,500 walks 5.6 million (refused, as by the bound; admitted it took 134 s and 1.5 GB).
# It admits long sequences of small branches, whose bound is quadratic and walk linear
# (1,250 if/else diamonds: bound 4.7 million, walk 7,500). The CFG's search for rejoin
# points stops at the same number (its walks are part of this one).
MAX_REGION_WALK = MAX_REJOIN_WALK


class SizeLimit(RuleError):
    """A kernel too large to analyse within the memory gpudiv allows itself."""


def size_problem(kernel: ir.Kernel, cfg=None) -> SizeLimit | None:
    """Why the kernel is too large to analyse (without its CFG: only its length), or None."""
    if kernel.instruction_count > MAX_KERNEL_INSTRUCTIONS:
        return SizeLimit(f"too large to analyse: {kernel.instruction_count} instructions "
                         f"(at most {MAX_KERNEL_INSTRUCTIONS}); the kernel is skipped")
    if cfg is not None and cfg.incomplete:
        return SizeLimit(f"too large to analyse: {cfg.incomplete}; the kernel is skipped")
    work = region_work(cfg) if cfg is not None else 0
    # `work` is a bound; above the limit, count what the rules would walk (up to a limit)
    if work > MAX_REGION_WORK and region_walk(cfg, MAX_REGION_WALK) > MAX_REGION_WALK:
        return SizeLimit(f"too large to analyse: its branches' influence regions add up to "
                         f"{work} blocks (at most {MAX_REGION_WORK}: join points of deeply "
                         "nested branches take memory quadratic in the depth); the kernel "
                         "is skipped")
    return None


def prepare_within_limits(kernel: ir.Kernel) -> tuple[SSAForm, float] | SizeLimit:
    """`prepare` (stack slots promoted), or the `SizeLimit` the kernel exceeds (checked
    before SSA is built)."""
    problem = size_problem(kernel)
    if problem is not None:
        return problem
    start = time.perf_counter()
    with paused_gc():
        cfg = build_cfg(kernel)
        problem = size_problem(kernel, cfg)
        if problem is not None:
            return problem
        ssa = _promoted(build_ssa(cfg))
    return ssa, (time.perf_counter() - start) * 1000


def prepare(kernel: ir.Kernel) -> tuple[SSAForm, float]:
    """CFG and SSA of a kernel, and the milliseconds it took. Stack-frame slots that can
    be promoted become variables (`gpudiv.analyses.stack_slots`): the SSA is then that of the
    promoted copy, whose `attrs["unpromoted"]` is the kernel as written."""
    start = time.perf_counter()
    with paused_gc():
        ssa = _promoted(build_ssa(build_cfg(kernel)))
    return ssa, (time.perf_counter() - start) * 1000


def _promoted(ssa: SSAForm) -> SSAForm:
    """`ssa` with its promotable stack slots promoted (`stack_slots.promote_ssa`); that
    module is imported only for a kernel with `.local` objects (an `-O3` build seldom has
    one), as it was 1.5 ms of every command's start."""
    if not local_objects(ssa.cfg.kernel):
        return ssa
    from gpudiv.analyses.stack_slots import promote_ssa

    return promote_ssa(ssa) or ssa


def timed_facts(ssa: SSAForm, prefix: str = "", relations: frozenset[str] | None = None,
                shape: BlockShape | None = None, folding: Folding | None = None
                ) -> tuple[list[tuple], float]:
    """The facts of an SSA form (names behind `prefix`, only `relations` when given, for
    a launch with block `shape`, plain copies of `folding` folded) and the milliseconds
    it took."""
    start = time.perf_counter()
    with paused_gc():
        facts = facts_of(ssa, prefix, relations, shape, folding.root if folding else None)
    return facts, (time.perf_counter() - start) * 1000


# An identifier followed by `(`: a use (or the definition) of a relation with arguments.
# (From the cache: every analysis reads its rule files' names, and compiling took 0.2 ms.)
_APPLIED_NAME = RegexCache("driver", {"applied_name": r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\("}
                           ).compile("applied_name")


def input_relations_read(rule_files: tuple[Path | str, ...]) -> frozenset[str] | None:
    """The input relations (`gpudiv.analyses.facts.RELATIONS`) whose names occur in the rule files,
    or None (all of them) when a file includes others or cannot be read.

    Facts of relations no rule mentions cannot change an answer set; leaving them out
    saves clingo parsing them (def_kind, def_line, idom, … were a third of the facts text
    of the shipped analyses). A name in a comment only keeps a relation in.
    """
    mentioned: set[str] = set()
    for path in rule_files:
        try:
            stat = os.stat(path)
            names = _applied_names(str(path), stat.st_mtime_ns, stat.st_size)
        except (OSError, UnicodeDecodeError):
            return None
        if names is None:
            return None
        mentioned |= names
    return frozenset(mentioned & RELATIONS.keys())


@lru_cache(maxsize=64)
def _applied_names(path: str, mtime_ns: int, size: int) -> frozenset[str] | None:
    """The names applied to arguments in one rule file, None when it includes others;
    cached by modification time and size, since every `affine.analyze_kernel` call
    builds an `Analysis` (one search per relation over the shipped files took 12 ms)."""
    with open(path, encoding="utf-8") as file:
        text = file.read()
    if "#include" in text:
        return None
    return frozenset(_APPLIED_NAME.findall(text))


class _Prepared(Record):
    """One kernel on its way through the driver."""

    kernel: ir.Kernel
    ssa: SSAForm
    timing: dict[str, float]
    facts: list[tuple]
    shape: BlockShape | None
    shape_warning: str | None
    folding: Folding | None

    def __init__(self, kernel: ir.Kernel, ssa: SSAForm, timing: dict[str, float],
                       facts: list[tuple] | None = None, shape: BlockShape | None = None,
                       shape_warning: str | None = None, folding: Folding | None = None) -> None:
        self.kernel = kernel
        self.ssa = ssa
        self.timing = timing
        self.facts = [] if facts is None else facts
        self.shape = shape
        self.shape_warning = shape_warning
        self.folding = folding


class Analysis(Record, frozen=True):
    """A divergence analysis: rule files, option facts and how to read its atoms."""

    name: str
    rule_files: tuple[Path | str, ...]
    build: BuildResult
    extra: str
    # Limits on clingo runs (None: gpudiv.analyses.solve's default, which limits only users' rules).
    budget: Budget | None
    # Whether plain copies are solved as their roots (`gpudiv.analyses.copies`): only for
    # rule files that treat a copy as its operand, as the shipped analyses do.
    fold_copies: bool
    # Shown relations left out of the model: those `build` never reads.
    hidden: frozenset[tuple[str, int]]

    def __init__(self, name: str, rule_files: tuple[Path | str, ...], build: BuildResult,
                       extra: str = "", budget: Budget | None = None,
                       fold_copies: bool = False,
                       hidden: frozenset[tuple[str, int]] = UNREAD_RELATIONS) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "rule_files", rule_files)
        object.__setattr__(self, "build", build)
        object.__setattr__(self, "extra", extra)
        object.__setattr__(self, "budget", budget)
        object.__setattr__(self, "fold_copies", fold_copies)
        object.__setattr__(self, "hidden", hidden)

    @cached_property
    def shares_runs(self) -> bool:
        """Whether kernels may share clingo runs: only with the shipped rule files, which
        never mention a name; a user's rule might (`:- block("bb3").`), and namespaced
        names would change its meaning."""
        return all(is_shipped(path) for path in self.rule_files)

    @cached_property
    def grounds_in_parts(self) -> bool:
        """Whether a large kernel may be grounded in parts: shipped divergence rules only,
        with clingo's default budget (`gpudiv.analyses.partition`)."""
        return self.budget is None and partitioned(self.rule_files)

    @cached_property
    def relations(self) -> frozenset[str] | None:
        """The input relations the rules read (None: all)."""
        return input_relations_read(self.rule_files)

    def __call__(self, kernel: ir.Kernel, block: BlockShape | None = None) -> KernelResult:
        """Analyse one kernel (RuleError when the rules fail on it), for launches with
        the given block shape (None: any shape, unless the kernel has `.reqntid`)."""
        (result,) = self.run([kernel], block)
        if isinstance(result, RuleError):
            raise result
        return result

    def run(self, kernels: list[ir.Kernel],
            block: BlockShape | None = None,
            on_progress: Callable[[str, int, int], None] | None = None,
            kernel_timeout: float | None = None) -> list[KernelResult | RuleError]:
        """Analyse kernels (e.g. all of a file); per kernel its result or its rule error
        (a `SizeLimit` for a kernel too large to analyse). `block`: the block shape of
        every launch (a kernel's `.reqntid` wins). `on_progress(stage, done, total)` hears
        of each kernel prepared (stage "preparing": CFG, SSA, facts) and solved
        ("solving").

        With the cyclic garbage collector paused throughout: turning hundreds of thousands
        of atoms into tuples and results made it rescan every live IR object again and
        again (a 50,000-instruction kernel spent about half its time there).

        `kernel_timeout`: seconds each kernel may take (CFG to results); a kernel that
        overruns is a `KernelTimeout` (`gpudiv.analyses.isolation`: the kernels are then
        analysed one by one in a forked child, without sharing clingo runs)."""
        with paused_gc():
            if kernel_timeout:
                return self._run_limited(kernels, block, on_progress, kernel_timeout)
            return self._run(kernels, block, on_progress)

    def _run_limited(self, kernels: list[ir.Kernel], block: BlockShape | None,
                     on_progress: Callable[[str, int, int], None] | None,
                     seconds: float) -> list[KernelResult | RuleError]:
        """`run` with every kernel alone in a child process under a deadline."""
        from gpudiv.analyses.isolation import each_in_child

        def one(i: int) -> KernelResult | RuleError:
            return self._run([kernels[i]], block, None)[0]

        def solved(done: int) -> None:
            if on_progress is not None:
                on_progress("solving", done, len(kernels))

        return each_in_child(len(kernels), one, seconds, solved)

    def _run(self, kernels: list[ir.Kernel], block: BlockShape | None,
             on_progress: Callable[[str, int, int], None] | None
             ) -> list[KernelResult | RuleError]:
        """`run` without the garbage-collector pause."""
        report = on_progress or (lambda _stage, _done, _total: None)
        prepared: dict[int, _Prepared] = {}
        results: dict[int, KernelResult | RuleError] = {}
        for i, kernel in enumerate(kernels):
            outcome = prepare_within_limits(kernel)
            if isinstance(outcome, SizeLimit):
                results[i] = outcome
                continue
            ssa, ssa_ms = outcome
            shape, warning = kernel_shape(kernel, block)
            prepared[i] = _Prepared(kernel, ssa, {"ssa": ssa_ms}, shape=shape,
                                    shape_warning=warning,
                                    folding=plain_copies(ssa) if self.fold_copies else None)
            report("preparing", i + 1, len(kernels))
        if len(prepared) > 1 and self.shares_runs:
            for group in _groups(prepared, self.relations, self.grounds_in_parts):
                solved = self._solve_together({i: prepared[i].facts for i in group})
                for i, own in (solved or {}).items():
                    results[i] = self._result(prepared[i], own)
                report("solving", len(results), len(kernels))
        for i in range(len(kernels)):
            if i not in results:
                results[i] = self._solve_alone(prepared[i])
                report("solving", len(results), len(kernels))
        return [results[i] for i in range(len(kernels))]

    def _solve_together(self, facts: dict[int, list[tuple]]) -> dict[int, SolveResult] | None:
        """One clingo run for a group of kernels; None when they must be solved alone."""
        try:
            return solve_together(list(self.rule_files), facts, self.extra, self.hidden)
        except (RuleError, NotSeparable):
            return None

    def _solve_alone(self, p: _Prepared) -> KernelResult | RuleError:
        """One clingo run for one kernel, with its names as they are."""
        p.facts, p.timing["facts"] = timed_facts(p.ssa, relations=self.relations,
                                                 shape=p.shape, folding=p.folding)
        try:
            return self._result(p, self._in_parts(p) or solve(
                list(self.rule_files), p.facts, self.extra, budget=self.budget,
                hide=self.hidden))
        except RuleError as error:
            return error

    def _in_parts(self, p: _Prepared) -> SolveResult | None:
        """The kernel grounded in parts (`gpudiv.analyses.partition`); None when it is
        small or its rules or its shape do not allow it."""
        if not self.grounds_in_parts:
            return None
        the_plan = plan(p.ssa, p.facts)
        if the_plan is None:
            return None
        return solve_in_parts(list(self.rule_files), the_plan, self.extra, self.hidden)

    def _result(self, p: _Prepared, solved: SolveResult) -> KernelResult:
        if p.folding:
            unfold(solved.atoms, p.folding, p.ssa)
        timing = {**p.timing, "ground": solved.ground_ms, "solve": solved.solve_ms}
        result = self.build(self.name, p.kernel, p.ssa, solved, timing)
        result.block = p.shape
        if p.shape_warning:
            result.warnings.append((p.shape_warning, p.kernel.loc))
        return result


def _separable(ssa: SSAForm) -> bool:
    """Whether no name of the kernel contains the namespace mark (true for μ-SIMD and PTX)."""
    names = [*ssa.variables, *ssa.cfg.graph.nodes, *ssa.cfg.loops]
    return not any(NAMESPACE_MARK in name for name in names)


def _groups(prepared: dict[int, _Prepared], relations: frozenset[str] | None,
            in_parts: bool = False) -> list[list[int]]:
    """Write the facts of every kernel that can share a run, with its index as namespace,
    and cut those kernels into groups of at most `JOINT_FACTS_LIMIT` facts
    (a larger kernel is a group alone; with `in_parts`, one that may be grounded in parts
    is left to be solved alone)."""
    groups: list[list[int]] = []
    size = 0
    for i, p in prepared.items():
        if not _separable(p.ssa) or (in_parts and may_cut(p.ssa)):
            continue
        p.facts, p.timing["facts"] = timed_facts(p.ssa, namespace(i), relations, p.shape,
                                                 p.folding)
        if not groups or size + len(p.facts) > JOINT_FACTS_LIMIT:
            groups.append([])
            size = 0
        groups[-1].append(i)
        size += len(p.facts)
    return groups
