"""Findings: what gpudiv warns a developer about, as data (diagnostics as data, pyflakes).

Each finding kind is a class with a stable rule id, a name, short and full descriptions,
help text, a level (SARIF's `error`/`warning`/`note`) and a message format.
`kernel_findings` computes the findings of one analysed kernel from its `KernelResult`;
the reporters (text, JSON, SARIF, HTML) only format them.

Locations: every finding has a place in the analysed file (μ-SIMD or PTX line and column)
and, when the instruction carries `attrs["origin"]` (a PTX `.loc` line), the CUDA source
place it was compiled from. Reports point at the CUDA place when there is one and show the
PTX place beside it.
"""

from __future__ import annotations

import os
from collections import deque

from gpudiv.analyses.results import KernelResult
from gpudiv.ir.perf import paused_gc
from gpudiv.ir.record import Record
from gpudiv.lang.load import path_text

# SHA-256 from the interpreter's built-in module when it has one, as the standard library's
# `random` takes SHA-512: `hashlib` loads OpenSSL first, 2.5 ms of every start-up (issue 16).
try:
    from _sha2 import sha256  # Python 3.12 and later
except ImportError:
    try:
        from _sha256 import sha256  # Python 3.11
    except ImportError:
        from hashlib import sha256

TYPE_CHECKING = False  # (typing is not imported: an analysis never needs it)
if TYPE_CHECKING:  # the deadlock analysis loads when its findings are asked for
    from collections.abc import Iterable
    from typing import ClassVar

    from gpudiv.analyses.deadlock import KernelDeadlocks, Place
    from gpudiv.ir import Instruction


class FindingKind:
    """A kind of finding; subclasses fill in the class attributes, never instances."""

    id: ClassVar[str]
    name: ClassVar[str]
    short_description: ClassVar[str]
    full_description: ClassVar[str]
    help: ClassVar[str]
    level: ClassVar[str] = "warning"
    message_format: ClassVar[str]

    @classmethod
    def message(cls, explanation: str = "", **args: str) -> str:
        """The message of one finding of this kind, then `: explanation` if there is one."""
        text = cls.message_format.format(**args)
        return f"{text}: {explanation}" if explanation else text


class DivergentBranch(FindingKind):
    """A conditional branch whose condition may differ between the lanes of a warp."""

    id = "gpudiv-divergent-branch"
    name = "DivergentBranch"
    short_description = "Conditional branch that may split a warp"
    full_description = (
        "The condition of this branch may hold different values in the lanes of one warp, "
        "so the warp may split: the lanes that take one side wait while the others run "
        "the other side, and both sides are executed one after the other.")
    help = (
        "A divergent branch costs the time of both paths. If the condition really depends "
        "on the thread (thread id, per-thread data), consider reorganising the work so "
        "that the lanes of a warp agree (e.g. sort or bucket the data, or branch on "
        "warp-granular indices). The message names the chain of values through which the "
        "condition depends on a source of divergence.")
    message_format = "divergent branch on '{condition}' in kernel {kernel}"


class BraUniDivergent(FindingKind):
    """A branch the code marks uniform (PTX `bra.uni`) that the analysis finds divergent."""

    id = "gpudiv-bra-uni-divergent"
    name = "UniformMarkedBranchMayDiverge"
    short_description = "Branch marked uniform (bra.uni) that the analysis finds divergent"
    full_description = (
        "The branch is marked uniform (PTX `bra.uni`: the compiler promises that all "
        "active lanes of the warp take the same direction), but its condition may differ "
        "between the lanes of a warp according to the divergence analysis.")
    help = (
        "Either the uniformity promise is wrong (a miscompilation or hand-written PTX "
        "with a wrong `.uni`: the hardware may then execute the branch incorrectly), or "
        "the analysis is less precise than the compiler here. Check the chain of values "
        "in the message; `gpudiv check` can run the kernel to look for a counterexample.")
    message_format = ("branch marked uniform (bra.uni) on '{condition}' in kernel {kernel} "
                      "may diverge")


class DivergentBranchInFunction(DivergentBranch):
    """A divergent branch of a `.func` analysed in one calling context (call summaries)."""

    message_format = "divergent branch on '{condition}' in function {kernel}"


class BraUniDivergentInFunction(BraUniDivergent):
    """A `bra.uni` of a `.func` analysed in one calling context that may diverge."""

    message_format = ("branch marked uniform (bra.uni) on '{condition}' in function {kernel} "
                      "may diverge")


class SimtDeadlock(FindingKind):
    """A loop that may hang under stack-based reconvergence (MICRO 2016, Algorithm 1)."""

    id = "gpudiv-simt-deadlock"
    name = "SimtInducedDeadlock"
    short_description = "Loop that may never end under SIMT reconvergence"
    full_description = (
        "The loop's exit depends on memory that other threads write, and a write that "
        "could release the waiting lanes is only reached by lanes of the same warp that "
        "wait at a reconvergence point (after the loop, or on the other side of a "
        "divergent branch) until the looping lanes leave: the warp may spin forever "
        "although every thread would finish on a MIMD machine (ElTantawy & Aamodt, "
        "MICRO 2016).")
    help = (
        "Move the release into the loop body (acquire and release in the same iteration, "
        "Fig. 3 of the paper), or let the loop's lanes reconverge at the safe point the "
        "message names. Code that relies on lockstep execution can be opted out with a "
        "`gpudiv: warp-synchronous KERNEL` comment or `--assume-safe KERNEL`.")
    message_format = "loop at {header} in kernel {kernel} may deadlock under SIMT execution"


class DivergentBarrierFinding(FindingKind):
    """A block-wide barrier that only some lanes of a warp may reach."""

    id = "gpudiv-divergent-barrier"
    name = "DivergentBarrier"
    short_description = "Barrier inside code that may run with a split warp"
    full_description = (
        "The barrier lies between a branch that may diverge and the point where the "
        "branch's lanes meet again, so only some lanes of a warp may arrive at it: "
        "undefined behaviour in CUDA, a hang on hardware that counts barrier arrivals "
        "per thread.")
    help = "Move the barrier out of the divergent region, where every lane reaches it."
    message_format = "barrier in kernel {kernel} may be reached by only some lanes of a warp"


# What `analyze` reports; what `deadlock` reports.
KINDS: tuple[type[FindingKind], ...] = (DivergentBranch, BraUniDivergent)
DEADLOCK_KINDS: tuple[type[FindingKind], ...] = (SimtDeadlock, DivergentBarrierFinding)


def kind_by_id(rule_id: str) -> type[FindingKind]:
    """The finding kind with this rule id."""
    for kind in KINDS + DEADLOCK_KINDS:
        if kind.id == rule_id:
            return kind
    raise KeyError(rule_id)


class SourceLocation(Record, frozen=True):
    """A place in a file (1-based line and column)."""

    path: str
    line: int
    column: int

    def __init__(self, path: str, line: int, column: int = 1) -> None:
        object.__setattr__(self, "path", path)
        object.__setattr__(self, "line", line)
        object.__setattr__(self, "column", column)

    def __str__(self) -> str:
        return f"{shown_path(self.path)}:{self.line}:{self.column}"

    def as_dict(self) -> dict:
        """JSON form."""
        return {"path": self.path, "line": self.line, "column": self.column}


class Finding(Record, frozen=True):
    """One finding: its kind, kernel, block, locations and message arguments."""

    kind: type[FindingKind]
    kernel: str
    block: str
    input_location: SourceLocation
    origin: SourceLocation | None
    arguments: tuple[tuple[str, str], ...]
    fingerprint: str

    def __init__(self, kind: type[FindingKind], kernel: str, block: str,
                       input_location: SourceLocation, origin: SourceLocation | None,
                       arguments: tuple[tuple[str, str], ...], fingerprint: str) -> None:
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "kernel", kernel)
        object.__setattr__(self, "block", block)
        object.__setattr__(self, "input_location", input_location)
        object.__setattr__(self, "origin", origin)
        object.__setattr__(self, "arguments", arguments)
        object.__setattr__(self, "fingerprint", fingerprint)

    @property
    def rule_id(self) -> str:
        """The stable rule id, e.g. `gpudiv-divergent-branch`."""
        return self.kind.id

    @property
    def level(self) -> str:
        """`error`, `warning` or `note`."""
        return self.kind.level

    @property
    def message(self) -> str:
        """The message, without location or rule id."""
        return self.kind.message(**dict(self.arguments))

    @property
    def location(self) -> SourceLocation:
        """Where a developer should look: the CUDA source when known, else the input."""
        return self.origin or self.input_location

    def compiler_style(self) -> str:
        """`FILE:LINE:COL: warning: message [rule-id]` (the input place too, if different)."""
        extra = f" (at {self.input_location})" if self.origin else ""
        return f"{self.location}: {self.level}: {self.message}{extra} [{self.rule_id}]"

    def as_dict(self) -> dict:
        """JSON form (the `findings` entries of `analyze --format json`)."""
        return {"rule": self.rule_id, "level": self.level, "message": self.message,
                "kernel": self.kernel, "block": self.block,
                "location": self.location.as_dict(),
                "input_location": self.input_location.as_dict(),
                "origin": self.origin.as_dict() if self.origin else None,
                "arguments": dict(self.arguments), "fingerprint": self.fingerprint}


def shown_path(path: str) -> str:
    """An absolute path inside the working directory, made relative to it (for display)."""
    if not os.path.isabs(path):
        return path
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return path
    return path if relative.startswith("..") else relative


# Why a definition is a source of divergence, by its definition kind.
_SOURCE_WORDS = {
    "special": "{name} differs between lanes",
    "atomic": "{name} is the result of an atomic",
    "load": "{name} is loaded from thread-private memory",
    "undef": "{name} may be read before it is assigned",
    "opaque": "{name} comes from an instruction the analysis cannot see through",
}


def _reasons(result: KernelResult) -> dict[str, list[tuple[str, str]]]:
    """Every `reason(V, Why, From)` of the result, by V (grouped once per result,
    `KernelResult.reasons`); without that relation, each variable's shown reason."""
    reasons = result.reasons()
    if not reasons:
        reasons = {var.name: [var.reason] for var in result.variables
                   if var.reason is not None}
    return reasons


def shortest_chain(start: str, reasons: dict[str, list[tuple]], chained: str = "operand"
                   ) -> tuple[list[str], tuple | None]:
    """The shortest chain start → … → v over `chained` reasons ending at v's terminal one."""
    found = _search(start, reasons, chained, None)
    assert found is not None  # no budget, no giving up
    return found[0], found[1]


def _search(start: str, reasons: dict[str, list[tuple]], chained: str, budget: int | None
            ) -> tuple[list[str], tuple | None, int] | None:
    """`shortest_chain` and how many variables its breadth-first search visited; None when
    it would visit more than `budget`."""
    parent: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        if budget is not None and len(parent) > budget:
            return None
        var = queue.popleft()
        for reason in reasons.get(var, ()):
            if reason[0] == chained:
                origin = reason[1]
                if origin not in parent:
                    parent[origin] = var
                    queue.append(origin)
                continue
            path = [var]
            while parent[path[-1]] is not None:
                path.append(parent[path[-1]])
            return list(reversed(path)), reason, len(parent)
    return [start], None, len(parent)


# Variables a finding's explanation shows before it abbreviates a long chain (in a kernel
# that accumulates a value over thousands of statements, one chain per finding would make
# the report quadratic in the kernel).
CHAIN_SHOWN = 40

# The searches from the starts of `Chains` may visit this many times the variables with
# reasons, all together, before the one pass over what the starts reach takes over.
SEARCH_BUDGET = 2
# ... and one search this many times its share of that budget.
SEARCH_SHARE = 4


class Chains:
    """Every variable's explanation chain in work linear in the reasons.

    `chain(v)` equals `shortest_chain(v, reasons)`: a breadth-first search from each
    variable would make a report with one finding per branch quadratic. Given `starts`
    (the variables whose chains a report shows: its divergent branches' conditions), each
    start is first searched on its own: a condition sits a few steps from its sources, so
    these searches visit a small part of a large kernel, in less memory than a pass over
    it. When they visit more than `SEARCH_BUDGET` times the variables with reasons in all,
    or one of them more than `SEARCH_SHARE` times its share of that (long chains shared by
    many starts), or without `starts`, one pass answers instead:
    the distance of every variable to its nearest terminal (non-`chained`) reason comes
    from one search backwards from all terminals, and a chain follows, from each
    variable, its first `chained` reason one step closer, which is the path the search
    from it finds first. Given `starts`, that pass covers only the variables their
    `chained` reasons reach: every chain from a start stays among them.
    """

    def __init__(self, reasons: dict[str, list[tuple]], chained: str = "operand",
                 starts: Iterable[str] | None = None) -> None:
        self.reasons = reasons
        self.chained = chained
        self.distance: dict[str, int] = {}
        self._ends: dict[str, str] = {}
        # Chains found by a search of their own, by start; what the one pass measured
        # (None: it did not run).
        self.searched: dict[str, tuple[list[str], tuple | None]] = {}
        self.measured: set[str] | None = None
        searched = None if starts is None else self._search_each(starts := list(starts))
        if searched is None:
            self._measure(reasons if starts is None else starts)
        else:
            self.searched = searched

    def _search_each(self, starts: list[str]) -> dict | None:
        """Each start's chain from its own search; None once they visit more than the
        budget in all, or one of them more than `SEARCH_SHARE` times its share of it (a
        chain that grows with the kernel, which would make the searches quadratic: giving
        up at the end of the budget took twice the time of the pass on a kernel of 4,249
        variables with reasons, 218 conditions and such a chain)."""
        budget = SEARCH_BUDGET * len(self.reasons)
        most = SEARCH_SHARE * budget // max(1, len(starts))
        searched: dict[str, tuple[list[str], tuple | None]] = {}
        for start in starts:
            if start in searched:
                continue
            found = _search(start, self.reasons, self.chained, min(budget, most))
            if found is None:
                return None
            searched[start] = found[0], found[1]
            budget -= found[2]
        return searched

    def _measure(self, starts: Iterable[str]) -> None:
        """The distance to the nearest terminal of every variable the starts reach."""
        reasons, chained = self.reasons, self.chained
        users: dict[str, list[str]] = {}
        queue: deque[str] = deque()
        stack = [var for var in starts if var in reasons]
        visited: set[str] = set()
        while stack:
            var = stack.pop()
            if var in visited:
                continue
            visited.add(var)
            terminal = False
            for reason in reasons[var]:
                if reason[0] != chained:
                    terminal = True
                    continue
                users.setdefault(reason[1], []).append(var)
                if reason[1] in reasons and reason[1] not in visited:
                    stack.append(reason[1])
            if terminal:
                self.distance[var] = 0
                queue.append(var)
        self.measured = visited
        while queue:
            var = queue.popleft()
            for user in users.get(var, ()):
                if user not in self.distance:
                    self.distance[user] = self.distance[var] + 1
                    queue.append(user)

    def _next(self, var: str) -> str:
        """The first `chained` origin of `var` one step closer to a terminal."""
        closer = self.distance[var] - 1
        return next(reason[1] for reason in self.reasons[var]
                    if reason[0] == self.chained and self.distance.get(reason[1]) == closer)

    def _by_search(self, start: str) -> bool:
        """Whether `start`'s chain comes from a search of its own: the starts' searches
        answered, or it is a variable with reasons that the one pass did not measure."""
        return self.measured is None or (start not in self.measured and start in self.reasons)

    def _searched(self, start: str) -> tuple[list[str], tuple | None]:
        """`start`'s chain from its own search (done now if it was not a start)."""
        if start not in self.searched:
            self.searched[start] = shortest_chain(start, self.reasons, self.chained)
        return self.searched[start]

    def chain(self, start: str) -> tuple[list[str], tuple | None]:
        """The shortest chain start → … → v and v's terminal reason (None: no terminal)."""
        if self._by_search(start):
            path, terminal = self._searched(start)
            return list(path), terminal
        if start not in self.distance:
            return [start], None
        path = [start]
        while self.distance[path[-1]] > 0:
            path.append(self._next(path[-1]))
        terminal = next(r for r in self.reasons[path[-1]] if r[0] != self.chained)
        return path, terminal

    def end(self, start: str) -> str:
        """The last variable of `chain(start)` (memoised: linear over all variables)."""
        if self._by_search(start):
            return self._searched(start)[0][-1]
        walked = []
        var = start
        while var not in self._ends and self.distance.get(var, 0) > 0:
            walked.append(var)
            var = self._next(var)
        last = self._ends.get(var, var)
        for member in walked:
            self._ends[member] = last
        self._ends[var] = last
        return last

    def shown(self, start: str, limit: int) -> tuple[list[str], int, tuple | None]:
        """At most `limit` leading variables of `chain(start)`, how many more it has before
        its last variable (which ends the list), and the terminal reason (None: none)."""
        if self._by_search(start):
            path, terminal = self._searched(start)
            if len(path) <= limit + 1:
                return list(path), 0, terminal
            return [*path[:limit], path[-1]], len(path) - limit - 1, terminal
        if start not in self.distance:
            return [start], 0, None
        length = self.distance[start] + 1
        if length <= limit + 1:
            path, terminal = self.chain(start)
            return path, 0, terminal
        path = [start]
        while len(path) < limit:
            path.append(self._next(path[-1]))
        last = self.end(start)
        terminal = next(r for r in self.reasons[last] if r[0] != self.chained)
        return [*path, last], length - limit - 1, terminal


def explain(result: KernelResult, name: str, chains: Chains | None = None,
            instructions: dict[int, Instruction] | None = None) -> str:
    """Why a variable is divergent: the shortest chain of reasons to its origin, in words.

    `p#1 ← i#2 ← tid (tid differs between lanes)`; empty when nothing is known. A chain
    of more than `CHAIN_SHOWN` + 1 variables shows its first `CHAIN_SHOWN`, `… (N more)`
    and its last (`gpudiv explain` shows every step). Pass the kernel's `Chains` and its
    instructions by id (`Kernel.by_id`) when explaining many variables of one kernel: each
    is a pass over the whole kernel.
    """
    chain, more, terminal = (chains or Chains(_reasons(result), starts=[name])
                             ).shown(name, CHAIN_SHOWN)
    if terminal is None:
        return ""
    why, origin = terminal
    words = " ← ".join(chain) if not more else \
        f"{' ← '.join(chain[:-1])} ← … ({more} more) ← {chain[-1]}"
    return f"{words} ({_terminal(result, chain[-1], why, origin, instructions)})"


def _terminal(result: KernelResult, var: str, why: str, origin: str,
              instructions: dict[int, Instruction] | None = None) -> str:
    """The end of an explanation chain in words."""
    if why == "join":
        return f"{var} merges values after the divergent branch at {origin}"
    if why == "loop_exit":
        return f"{var} is read after loop {origin}, which lanes leave in different iterations"
    if why == "rejoin":
        return (f"{var} is read where lanes split by the divergent branch at {origin} meet "
                "again after different numbers of trips around a cycle")
    ssa_var = result.ssa.variables.get(var)
    kind = ssa_var.kind if ssa_var else ""
    if ssa_var is not None and ssa_var.instruction is not None and \
            (instructions if instructions is not None else result.ssa.cfg.kernel.by_id()
             )[ssa_var.instruction].operator == "call.input":
        return f"{var} is an argument that differs between lanes at the calls of this context"
    return _SOURCE_WORDS.get(kind, "{name} is a source of divergence").format(name=var)


def _origin(value: object, input_path: str, resolved: dict[str, str]
            ) -> SourceLocation | None:
    """The CUDA place of an `attrs["origin"] = (file, line, column)`, if well formed;
    `resolved` remembers the source paths already looked up, by the path recorded (a
    kernel's places name the same few files hundreds of times, and each lookup asks the
    file system)."""
    if not (isinstance(value, tuple | list) and len(value) == 3):
        return None
    recorded, line, column = value
    if not isinstance(line, int) or line < 1:
        return None
    recorded = str(recorded)
    if recorded not in resolved:
        resolved[recorded] = resolve_source_path(recorded, input_path)
    return SourceLocation(resolved[recorded], line,
                          column if isinstance(column, int) and column > 0 else 1)


def resolve_source_path(path: str, input_path: str) -> str:
    """Where the CUDA file a `.file` directive names is now, seen from the analysed file.

    A relative name is relative to the analysed file's folder. nvcc records absolute paths
    of the machine that compiled; when such a path no longer exists (the checkout moved,
    the PTX came from elsewhere) but a file of that name sits beside the PTX, that is the
    source. Otherwise the recorded path is kept as it is.
    """
    folder = os.path.dirname(path_text(input_path))  # `Path(input_path).parent`, "" for "."
    if not os.path.isabs(path):
        candidate = path_text(os.path.join(folder, path))
        return candidate if os.path.exists(candidate) else path
    if os.path.exists(path):
        return path
    beside = path_text(os.path.join(folder, os.path.basename(path_text(path))))
    return beside if os.path.exists(beside) else path


def branch_origins(path: str, result: KernelResult) -> list[SourceLocation | None]:
    """Per branch of `result`, the CUDA place it comes from (a PTX `.loc`), if known."""
    resolved: dict[str, str] = {}
    return [_origin(b.origin, path, resolved) for b in result.branches]


def _fingerprint(rule_id: str, kernel: str, subject: str, seen: dict[str, int]) -> str:
    """A stable hash of what a finding is about (not of its line), unique in its kernel."""
    key = f"{rule_id}|{kernel}|{subject}"
    seen[key] = seen.get(key, 0) + 1
    return sha256(f"{key}|{seen[key]}".encode()).hexdigest()[:32]


def kernel_findings(path: str, result: KernelResult) -> list[Finding]:
    """The findings of one analysed kernel of the file at `path`, in program order."""
    findings = []
    seen: dict[str, int] = {}
    chains: Chains | None = None
    instructions: dict = {}
    resolved: dict[str, str] = {}
    for branch in result.branches:
        if not branch.divergent:
            continue
        if chains is None:  # built at the first divergent branch: none, no work
            chains = Chains(_reasons(result), starts=[
                b.condition for b in result.branches if b.divergent and b.condition])
            instructions = result.ssa.cfg.kernel.by_id()
        instr = instructions[branch.instruction]
        kind = BraUniDivergent if instr.attrs.get("uniform_hint") else DivergentBranch
        if result.calling_context is not None:
            kind = BraUniDivergentInFunction if kind is BraUniDivergent \
                else DivergentBranchInFunction
        condition = branch.condition or "?"
        why = explain(result, condition, chains, instructions) if branch.condition else ""
        ssa_var = result.ssa.variables.get(condition)
        subject = ssa_var.source if ssa_var else condition
        findings.append(Finding(
            kind, result.name, branch.label,
            SourceLocation(path, branch.line, branch.column),
            _origin(branch.origin, path, resolved),
            (("condition", condition), ("kernel", result.name), ("explanation", why)),
            _fingerprint(kind.id, result.name, subject, seen)))
    return findings


def _place_locations(path: str, place: Place, resolved: dict[str, str]
                     ) -> tuple[SourceLocation, SourceLocation | None]:
    """The analysed-file and CUDA locations of a deadlock report's place (`resolved`: as
    `_origin` takes it)."""
    return (SourceLocation(path, place.line or 1, place.column),
            _origin(place.origin, path, resolved) if place.origin else None)


def deadlock_findings(path: str, report: KernelDeadlocks) -> list[Finding]:
    """The findings of one kernel's deadlock report: each loop that may deadlock (at its
    exit branch) and each divergent barrier; none for a kernel assumed safe."""
    from gpudiv.analyses.deadlock import Place

    if report.assumed_safe:
        return []
    findings = []
    seen: dict[str, int] = {}
    resolved: dict[str, str] = {}
    for loop in report.detections:
        place = loop.exit_branches[0] if loop.exit_branches else Place(loop.header, loop.line)
        where, origin = _place_locations(path, place, resolved)
        reads = ", ".join(f"'{r.text}' ({r.block})" for r in loop.shared_reads)
        writes = ", ".join(f"'{w.place.text}' ({w.place.block}, {w.path})"
                           for w in loop.releasing_writes)
        safe = loop.safe_reconvergence
        point = "end of kernel" if safe is None or safe.line is None else \
            f"{safe.block}, line {safe.line}"
        why = (f"the exit depends on {reads}; {writes} may release it; safe "
               f"reconvergence point: {point}")
        findings.append(Finding(
            SimtDeadlock, report.name, place.block, where, origin,
            (("header", loop.header), ("kernel", report.name), ("explanation", why)),
            _fingerprint(SimtDeadlock.id, report.name, loop.header, seen)))
    for barrier in report.barriers:
        where, origin = _place_locations(path, barrier.barrier, resolved)
        why = f"inside the region of the branch at {barrier.branch.block}, which may diverge"
        findings.append(Finding(
            DivergentBarrierFinding, report.name, barrier.barrier.block, where, origin,
            (("kernel", report.name), ("explanation", why)),
            _fingerprint(DivergentBarrierFinding.id, report.name, barrier.barrier.block,
                         seen)))
    return sorted(findings, key=lambda f: (f.input_location.line, f.rule_id))


def file_findings(path: str, kernels: list[KernelResult]) -> list[Finding]:
    """The findings of every kernel of one file (the cyclic collector paused: its rescans
    of a large analysed kernel cost more than the findings, see gpudiv.ir.perf)."""
    with paused_gc():
        return [f for kernel in kernels for f in kernel_findings(path, kernel)]
