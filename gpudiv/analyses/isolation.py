"""Per-kernel time limits: analyse kernels one by one in a forked child, each under a deadline.

`gpudiv analyze --kernel-timeout S` runs here. A child process (`os.fork`) analyses the
kernels in order and sends each result back as soon as it has it; the parent gives every
kernel `S` seconds from the moment the previous one arrived. When a kernel overruns, the
child is killed, the kernel becomes a `KernelTimeout` (a kernel not analysed, with the
reason) and a fresh child goes on with the next kernel. Every stage of a kernel's analysis
(CFG, SSA, facts, grounding, solving, results) counts; reading the file does not. Where
processes cannot fork the kernels are analysed in this process without a limit. The fork
and the pipe are `gpudiv.analyses.forked`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from gpudiv.analyses.forked import can_fork, run_in_child
from gpudiv.analyses.solve import RuleError

T = TypeVar("T")

# How the reason of every kernel this module gives up on begins.
NOT_ANALYSED = "not analysed: "


class KernelTimeout(RuleError):
    """A kernel whose analysis did not finish within the per-kernel time limit."""


class KernelCrash(RuleError):
    """A kernel whose analysis ended the process analysing it (e.g. out of memory)."""


def timeout_error(seconds: float) -> KernelTimeout:
    """The reason given for a kernel that overran `seconds`."""
    return KernelTimeout(f"{NOT_ANALYSED}its analysis took more than {seconds:g} s (the "
                         "limit of --kernel-timeout); the kernel is skipped")


def each_in_child(count: int, work: Callable[[int], T], seconds: float,
                  on_item: Callable[[int], None] | None = None) -> list[T | RuleError]:
    """`[work(i) for i in range(count)]`, computed in forked children with `seconds` per
    item; an item that overruns is a `KernelTimeout`, one that kills its child a
    `KernelCrash`. `work` returns picklable data (a RuleError counts as data).
    `on_item(done)` hears how many items have an outcome, after each one."""
    if not can_fork():
        return [work(i) for i in range(count)]
    results: dict[int, T | RuleError] = {}

    def arrived(index: int, outcome) -> None:
        results[index] = outcome
        if on_item is not None:
            on_item(len(results))

    start = 0
    while start < count:
        end = run_in_child(start, count, work, seconds, arrived)
        start = end.next_item
        if start < count:
            results[start] = (timeout_error(seconds) if end.timed_out else
                              KernelCrash(f"{NOT_ANALYSED}the process analysing it stopped "
                                          f"(status {end.status}); the kernel is skipped"))
            start += 1
            if on_item is not None:
                on_item(len(results))
    return [results[i] for i in range(count)]
