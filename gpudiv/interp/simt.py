"""What the SIMT machines of gpudiv share (μ-SIMD: `interp.musimd`, PTX: `interp.ptx`):
the reconvergence policies, the counters of a run, and SIMT-deadlock detection.

Policies (how the lanes of a warp that took different paths run and meet again):

- `ipdom`: a per-warp stack; divergent lanes reconverge at the immediate post-dominator
  of the branch (GPU hardware before Volta, GPGPU-Sim's PDOM stack);
- `sync`: reconverge where the program says (μ-SIMD `sync`, Sampaio's semantics);
- `frontier`: earliest reconvergence (thread frontiers, Wu et al. 2011 Fig 3(d), Diamos
  et al.): a warp keeps one group of lanes per pc, always runs the group with the lowest
  pc (the fixed block priority is the layout order) and merges groups that meet;
- `mimd`: every thread runs on its own (fair round-robin over the threads of a warp, one
  instruction each; barriers respected; PTX warp collectives such as `shfl` and `vote`
  wait until every live lane of the warp reaches them, as on Volta): the reference
  behaviour for outputs;
- `aware`: AWARE (ElTantawy & Aamodt 2016, §IV-B): warp splits scheduled in FIFO order
  (breadth-first: every conditional branch sends the running split to the back), each
  reconverging at its branch's immediate post-dominator or the point written on the
  branch (delayed reconvergence), and lanes that wait there longer than a timeout (warp
  steps of their warp) go on without the others (timed-out reconvergence);
- `auto`: `sync` for a μ-SIMD kernel with `sync` instructions, else `ipdom`.

A machine is deterministic, so when its whole state (control state of every warp,
registers, memories) repeats, it runs forever. The machines fingerprint their state at
scheduling points once a run is long (`DETECT_AFTER` warp steps) and look for a repeat
with Brent's algorithm; the run then stops with a `SIMT deadlock` when some lanes of a
warp loop while others wait for them to reconverge (the spin-lock pattern), or with an
`infinite loop` otherwise — both distinct from an exhausted step budget.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

POLICIES = ("ipdom", "sync", "frontier", "mimd", "aware")
RECONVERGENCE_MODES = ("auto", *POLICIES)
DETECT_AFTER = 2000


@dataclass
class Counters:
    """Dynamic counts of one run.

    `reconvergences` counts the times lanes of a warp that had split joined again (an
    ipdom stack entry popped at its reconvergence point, a `sync` reuniting lanes, two
    frontier groups merging, lanes of a mimd warp joining at a collective);
    `max_stack_depth` is the largest number of control entries a warp held at once (ipdom
    stack entries, `sync` nodes plus one, frontier groups, live mimd threads)."""

    warp_instructions: int = 0
    lane_instructions: int = 0
    divergent_branches: int = 0
    warp_width: int = 32
    reconvergences: int = 0
    max_stack_depth: int = 1

    @property
    def simd_efficiency(self) -> float:
        """Fraction of issued lane slots that did useful work (0 if nothing ran)."""
        slots = self.warp_instructions * self.warp_width
        return self.lane_instructions / slots if slots else 0.0

    def as_dict(self) -> dict[str, int | float]:
        """The counters as `run`/`check` JSON shows them."""
        return {"warp_instructions": self.warp_instructions,
                "lane_instructions": self.lane_instructions,
                "simd_efficiency": round(self.simd_efficiency, 4),
                "divergent_branches": self.divergent_branches,
                "reconvergences": self.reconvergences,
                "max_stack_depth": self.max_stack_depth}


class ExecutionError(Exception):
    """A runtime error tied to a kernel, a source line, its label and the lanes involved."""

    def __init__(self, kernel: str, line: int, label: str | None, lanes: list[int],
                 message: str) -> None:
        self.kernel = kernel
        self.line = line
        self.label = label
        self.lanes = list(lanes)
        self.message = message
        self.trace: list = []  # the steps up to the fault, when tracing
        super().__init__(self._render())

    def _render(self) -> str:
        """One line: where, which lanes, what."""
        where = f"kernel {self.kernel}, line {self.line}"
        if self.label:
            where += f" (label {self.label})"
        if self.lanes:
            noun = "lane" if len(self.lanes) == 1 else "lanes"
            where += f", {noun} {format_lanes(self.lanes)}"
        return f"{where}: {self.message}"

    def __str__(self) -> str:
        return self._render()


class DeadlockError(ExecutionError):
    """A run that can never finish: its state repeats (see the module docstring). The
    message names kernel and lines itself, and starts with `SIMT deadlock` or `infinite
    loop`."""

    def _render(self) -> str:
        return self.message


def format_lanes(lanes: list[int]) -> str:
    """Compact lane list: '3', '0-31', '1, 4-6'."""
    parts: list[str] = []
    start = prev = None
    for lane in sorted(lanes):
        if prev is not None and lane == prev + 1:
            prev = lane
            continue
        if start is not None:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = lane
    if start is not None:
        parts.append(str(start) if start == prev else f"{start}-{prev}")
    return ", ".join(parts)



def fingerprint(parts: list[bytes]) -> bytes:
    """A 16-byte digest of a machine state given as byte strings."""
    digest = hashlib.blake2b(digest_size=16)
    for part in parts:
        digest.update(len(part).to_bytes(8, "little"))
        digest.update(part)
    return digest.digest()


class CycleDetector:
    """Brent's cycle detection over the fingerprints of successive scheduling points of a
    deterministic machine: `seen` is True once a fingerprint repeats an earlier one."""

    def __init__(self) -> None:
        self.saved: bytes | None = None
        self.power = 1
        self.length = 0

    def seen(self, state: bytes) -> bool:
        """Record a state; True if the machine has been in it before (it cycles)."""
        if state == self.saved:
            return True
        self.length += 1
        if self.length >= self.power:
            self.saved = state
            self.power *= 2
            self.length = 0
        return False


def deadlock_message(kernel: str, at_line: int, spinning: list[int], loop_line: int,
                     waiting: list[int] | None, wait_line: int | None) -> str:
    """The one-line diagnosis of a state that repeats forever."""
    if waiting:
        return (f"SIMT deadlock in kernel {kernel} at line {at_line}: {_lanes(spinning)} "
                f"{_verb(spinning, 'spin')} in the loop at line {loop_line} waiting for "
                f"{_lanes(waiting)}, which {_verb(waiting, 'wait')} to reconverge at line "
                f"{wait_line}")
    return (f"infinite loop in kernel {kernel} at line {at_line}: {_lanes(spinning)} "
            f"{_verb(spinning, 'repeat')} the loop at line {loop_line} and the state of the "
            f"machine repeats")


def never_released(message: str) -> str:
    """A SIMT-deadlock message turned into an infinite loop: the spinning lanes also
    spin forever when every thread runs on its own (nothing would release them)."""
    head, _, rest = message.partition(": ")
    what = rest.split(" waiting for ", 1)[0]
    where = rest[rest.rfind(" (block"):] if " (block" in rest else ""
    return (f"{head.replace('SIMT deadlock', 'infinite loop', 1)}: {what} forever, also "
            f"under --reconvergence mimd (no thread releases them){where}")


def _lanes(lanes: list[int]) -> str:
    return f"{'lane' if len(lanes) == 1 else 'lanes'} {format_lanes(lanes)}"


def _verb(lanes: list[int], verb: str) -> str:
    return f"{verb}s" if len(lanes) == 1 else verb
