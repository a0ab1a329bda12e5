"""Proof by running: a kernel and its rewrite run on the same synthesized launches and
must leave the same memory, bit for bit.

Launches are those of `gpudiv check` for the original kernel (μ-SIMD: several block
sizes and warp widths with random parameters and shared memory; PTX: several grid and
block shapes with generous buffers and random scalars), so both programs see identical
inputs. Compared after each launch: μ-SIMD shared memory and every thread's local
memory; PTX every buffer argument. A launch that stops with an error in both programs
proves nothing and is skipped; one that stops in only one of them is a difference.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

from gpudiv import ir
from gpudiv.analyses.launch_shape import declared_shape
from gpudiv.interp.musimd import ExecutionError, LaunchConfig, run_kernel
from gpudiv.verify.call_runs import run_ptx_any
from gpudiv.verify.oracle import ptx_launches, random_launches

VERIFIED, DIFFERS, NOT_EXECUTED = "verified", "differs", "not-executed"


@dataclass
class Difference:
    """The first place where two runs disagree."""

    launch: str
    memory: str
    index: int | None
    before: object
    after: object

    def __str__(self) -> str:
        where = self.memory if self.index is None else f"{self.memory}[{self.index}]"
        return f"{where}: {self.before} before, {self.after} after ({self.launch})"

    def to_json(self) -> dict[str, object]:
        """The difference as plain JSON values."""
        return {"launch": self.launch, "buffer": self.memory, "index": self.index,
                "before": _plain(self.before), "after": _plain(self.after)}


@dataclass
class Equivalence:
    """The outcome for one kernel: status, launches compared, first difference and the
    dynamic counts of both programs over the compared launches."""

    name: str
    status: str = NOT_EXECUTED
    runs: int = 0
    difference: Difference | None = None
    reason: str = ""
    counts: dict[str, int] = field(default_factory=dict)

    def dynamic(self) -> dict[str, float | int]:
        """Warp instructions and SIMD efficiency before and after."""
        c = {k: self.counts.get(k, 0) for k in ("warp_before", "warp_after", "lane_before",
                                               "lane_after", "slots_before", "slots_after")}
        return {
            "warp_instructions_before": c["warp_before"],
            "warp_instructions_after": c["warp_after"],
            "simd_efficiency_before": c["lane_before"] / c["slots_before"]
            if c["slots_before"] else 0.0,
            "simd_efficiency_after": c["lane_after"] / c["slots_after"]
            if c["slots_after"] else 0.0,
        }


def _plain(value: object) -> object:
    if isinstance(value, np.generic):
        return value.item()
    return value


def _describe(launch: object) -> str:
    if isinstance(launch, LaunchConfig):
        return (f"threads={launch.threads}, warp={launch.warp_width}, "
                f"params={dict(launch.params)}")
    grid, block = getattr(launch, "grid", None), getattr(launch, "block", None)
    return f"grid={grid}, block={block}"


def _memories(language: str, result) -> dict[str, object]:
    """Name → contents of everything a run leaves in memory."""
    if language == "ptx":
        return dict(result.buffers)
    memories: dict[str, object] = {"shared": dict(result.shared)}
    for thread, local in enumerate(result.local):
        memories[f"local[t{thread}]"] = dict(local)
    return memories


Scratch = dict[str, tuple[int, int]]


def _without_scratch(before: dict[str, object], after: dict[str, object],
                     scratch: Scratch) -> dict[str, object]:
    """`after` without the words of its scratch areas (a pass's own spill space: memory
    space → [low, high)) that the original left untouched; a word the original wrote
    there is still compared, so a collision shows as a difference."""
    kept: dict[str, object] = {}
    for name, memory in after.items():
        space = name.split("[", 1)[0]
        if space not in scratch or not isinstance(memory, dict):
            kept[name] = memory
            continue
        low, high = scratch[space]
        original = before.get(name) or {}
        kept[name] = {k: v for k, v in memory.items()
                      if not (low <= k < high) or k in original}  # type: ignore[operator]
    return kept


def _first_difference(before: dict[str, object], after: dict[str, object],
                      launch: str) -> Difference | None:
    for name in sorted(set(before) | set(after)):
        a, b = before.get(name), after.get(name)
        if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
            left, right = a.view(np.uint8), b.view(np.uint8)
            if left.shape != right.shape:
                return Difference(launch, name, None, f"{a.nbytes} bytes", f"{b.nbytes} bytes")
            where = np.flatnonzero(left != right)
            if where.size:
                element = int(where[0]) // a.itemsize
                return Difference(launch, name, element, a.reshape(-1)[element],
                                  b.reshape(-1)[element])
            continue
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b)):
                if a.get(key, 0) != b.get(key, 0):
                    return Difference(launch, name, key, a.get(key, 0), b.get(key, 0))
            continue
        if a != b:
            return Difference(launch, name, None, a, b)
    return None


def _run(language: str, kernel: ir.Kernel, launch: object, policy: str | None = None):
    runner = run_ptx_any if language == "ptx" else run_kernel
    launch = copy.deepcopy(launch)
    if policy is not None:
        launch.reconvergence = policy  # type: ignore[attr-defined]
    return runner(kernel, launch)


def launches_for(language: str, kernel: ir.Kernel, seed: int) -> list:
    """The launches `gpudiv check` uses for the kernel (PTX: with the block shape its
    `.reqntid` requires, as a launch of another shape fails)."""
    if language == "ptx":
        return ptx_launches(kernel, seed, declared_shape(kernel))
    return random_launches(kernel, seed)


def compare_kernels(before: ir.Kernel, after: ir.Kernel, language: str,
                    seed: int = 0, reconvergence: str = "auto",
                    policies: tuple[str | None, str | None] = (None, None),
                    launches: list | None = None,
                    scratch: Scratch | None = None) -> Equivalence:
    """Run both kernels on the same launches (`launches`, else those of `gpudiv check`),
    under the reconvergence policy (`gpudiv.interp.simt`) or, where `policies` names one,
    under each kernel's own, and compare their memory (`scratch`: the spill areas of the
    result, see `_without_scratch`)."""
    report = Equivalence(before.name)
    failures: list[str] = []
    for launch in launches_for(language, before, seed) if launches is None else launches:
        launch.reconvergence = reconvergence
        shown = _describe(launch)
        outcomes = []
        for kernel, policy in zip((before, after), policies, strict=True):
            try:
                outcomes.append(_run(language, kernel, launch, policy))
            except ExecutionError as error:
                outcomes.append(error)
        old, new = outcomes
        if isinstance(old, ExecutionError) and isinstance(new, ExecutionError):
            failures.append(str(old))
            continue
        if isinstance(old, ExecutionError) or isinstance(new, ExecutionError):
            report.status = DIFFERS
            report.difference = Difference(
                shown, "outcome", None, old.message if isinstance(old, ExecutionError) else
                "finished", new.message if isinstance(new, ExecutionError) else "finished")
            return report
        report.runs += 1
        for side, result in (("before", old), ("after", new)):
            counters = result.counters
            for key, value in (("warp", counters.warp_instructions),
                               ("lane", counters.lane_instructions),
                               ("slots", counters.warp_instructions * counters.warp_width)):
                report.counts[f"{key}_{side}"] = report.counts.get(f"{key}_{side}", 0) + value
        memories = _memories(language, old)
        changed = _memories(language, new)
        if scratch:
            changed = _without_scratch(memories, changed, scratch)
        difference = _first_difference(memories, changed, shown)
        if difference is not None:
            report.status, report.difference = DIFFERS, difference
            return report
    if report.runs:
        report.status = VERIFIED
    else:
        report.reason = failures[0] if failures else "no launch"
    return report
