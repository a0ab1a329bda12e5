"""The generic analysis driver: SSA and facts per kernel, clingo, typed results.

An analysis is its rule files, the option facts it adds, and a function that turns the
solved atoms of one kernel into a `KernelResult`. `Analysis.run` analyses all kernels of a
file in as few clingo runs as possible: each kernel's facts get their own namespace and up
to `JOINT_FACTS_LIMIT` characters of facts are grounded and solved together
(`gpudiv.solve.solve_together`). A clingo run has a fixed cost of several milliseconds
(loading and grounding the rule files, statistics, freeing), which dominated the analysis
of PTX files with many small kernels. Kernels that cannot share a run are solved one by
one: with a user's rule file, a name containing the namespace mark, atoms that name no
kernel, or a rule error (which is then reported against the kernel that causes it).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

from gpudiv import ir
from gpudiv.analyses.results import KernelResult
from gpudiv.cfg import build_cfg
from gpudiv.facts import RELATIONS, facts_text
from gpudiv.perf import paused_gc
from gpudiv.solve import (
    NAMESPACE_MARK,
    NotSeparable,
    RuleError,
    SolveResult,
    namespace,
    rules_dir,
    solve,
    solve_together,
)
from gpudiv.ssa import SSAForm, build_ssa

# Characters of facts grounded in one clingo run: large enough that the fixed cost of a run
# is spread over many kernels, small enough that a huge file never becomes one huge ground
# program (about 2,000 to 4,000 IR instructions of facts).
JOINT_FACTS_LIMIT = 400_000

# name, kernel, SSA form, solved atoms, timings (ms) → the kernel's result
BuildResult = Callable[[str, ir.Kernel, SSAForm, SolveResult, dict[str, float]], KernelResult]


def prepare(kernel: ir.Kernel) -> tuple[SSAForm, float]:
    """CFG and SSA of a kernel, and the milliseconds it took."""
    start = time.perf_counter()
    with paused_gc():
        ssa = build_ssa(build_cfg(kernel))
    return ssa, (time.perf_counter() - start) * 1000


def timed_facts(ssa: SSAForm, prefix: str = "",
                relations: frozenset[str] | None = None) -> tuple[str, float]:
    """The facts of an SSA form (names behind `prefix`, only `relations` when given) and
    the milliseconds it took."""
    start = time.perf_counter()
    with paused_gc():
        facts = facts_text(ssa, prefix, relations)
    return facts, (time.perf_counter() - start) * 1000


# An identifier followed by `(`: a use (or the definition) of a relation with arguments.
_APPLIED_NAME = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(")


def input_relations_read(rule_files: tuple[Path | str, ...]) -> frozenset[str] | None:
    """The input relations (`gpudiv.facts.RELATIONS`) whose names occur in the rule files,
    or None (all of them) when a file includes others or cannot be read.

    Facts of relations no rule mentions cannot change an answer set; leaving them out
    saves clingo parsing them (def_kind, def_line, idom, … were a third of the facts text
    of the shipped analyses). A name in a comment only keeps a relation in.
    """
    mentioned: set[str] = set()
    for path in rule_files:
        try:
            stat = Path(path).stat()
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
    text = Path(path).read_text(encoding="utf-8")
    if "#include" in text:
        return None
    return frozenset(_APPLIED_NAME.findall(text))


@dataclass
class _Prepared:
    """One kernel on its way through the driver."""

    kernel: ir.Kernel
    ssa: SSAForm
    timing: dict[str, float]
    facts: str = ""


@dataclass(frozen=True)
class Analysis:
    """A divergence analysis: rule files, option facts and how to read its atoms."""

    name: str
    rule_files: tuple[Path | str, ...]
    build: BuildResult
    extra: str = ""

    @cached_property
    def shares_runs(self) -> bool:
        """Whether kernels may share clingo runs: only with the shipped rule files, which
        never mention a name; a user's rule might (`:- block("bb3").`), and namespaced
        names would change its meaning."""
        shipped = rules_dir().resolve()
        return all(Path(path).resolve().parent == shipped for path in self.rule_files)

    @cached_property
    def relations(self) -> frozenset[str] | None:
        """The input relations the rules read (None: all)."""
        return input_relations_read(self.rule_files)

    def __call__(self, kernel: ir.Kernel) -> KernelResult:
        """Analyse one kernel (RuleError when the rules fail on it)."""
        (result,) = self.run([kernel])
        if isinstance(result, RuleError):
            raise result
        return result

    def run(self, kernels: list[ir.Kernel],
            on_progress: Callable[[str, int, int], None] | None = None
            ) -> list[KernelResult | RuleError]:
        """Analyse kernels (e.g. all of a file); per kernel its result or its rule error.
        `on_progress(stage, done, total)` hears of each kernel prepared (stage
        "preparing": CFG, SSA, facts) and solved ("solving")."""
        report = on_progress or (lambda _stage, _done, _total: None)
        prepared = []
        for kernel in kernels:
            ssa, ssa_ms = prepare(kernel)
            prepared.append(_Prepared(kernel, ssa, {"ssa": ssa_ms}))
            report("preparing", len(prepared), len(kernels))
        results: dict[int, KernelResult | RuleError] = {}
        if len(prepared) > 1 and self.shares_runs:
            for group in _groups(prepared, self.relations):
                solved = self._solve_together({i: prepared[i].facts for i in group})
                for i, own in (solved or {}).items():
                    results[i] = self._result(prepared[i], own)
                report("solving", len(results), len(kernels))
        out = []
        for i, p in enumerate(prepared):
            if i not in results:
                results[i] = self._solve_alone(p)
                report("solving", len(results), len(kernels))
            out.append(results[i])
        return out

    def _solve_together(self, facts: dict[int, str]) -> dict[int, SolveResult] | None:
        """One clingo run for a group of kernels; None when they must be solved alone."""
        try:
            return solve_together(list(self.rule_files), facts, self.extra)
        except (RuleError, NotSeparable):
            return None

    def _solve_alone(self, p: _Prepared) -> KernelResult | RuleError:
        """One clingo run for one kernel, with its names as they are."""
        p.facts, p.timing["facts"] = timed_facts(p.ssa, relations=self.relations)
        try:
            return self._result(p, solve(list(self.rule_files), p.facts, self.extra))
        except RuleError as error:
            return error

    def _result(self, p: _Prepared, solved: SolveResult) -> KernelResult:
        timing = {**p.timing, "ground": solved.ground_ms, "solve": solved.solve_ms}
        return self.build(self.name, p.kernel, p.ssa, solved, timing)


def _separable(ssa: SSAForm) -> bool:
    """Whether no name of the kernel contains the namespace mark (true for μ-SIMD and PTX)."""
    names = [*ssa.variables, *ssa.cfg.graph.nodes, *ssa.cfg.loops]
    return not any(NAMESPACE_MARK in name for name in names)


def _groups(prepared: list[_Prepared], relations: frozenset[str] | None) -> list[list[int]]:
    """Write the facts of every kernel that can share a run, with its index as namespace,
    and cut those kernels into groups of at most `JOINT_FACTS_LIMIT` characters of facts
    (a larger kernel is a group alone)."""
    groups: list[list[int]] = []
    size = 0
    for i, p in enumerate(prepared):
        if not _separable(p.ssa):
            continue
        p.facts, p.timing["facts"] = timed_facts(p.ssa, namespace(i), relations)
        if not groups or size + len(p.facts) > JOINT_FACTS_LIMIT:
            groups.append([])
            size = 0
        groups[-1].append(i)
        size += len(p.facts)
    return groups
