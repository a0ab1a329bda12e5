"""Reconvergence policies: how the lanes of one warp that took different paths run and
meet again (`gpudiv.interp.simt` describes them). One control object per warp, shared by
the μ-SIMD and the PTX semantics through `gpudiv.interp.engine`.

Every control object hands the engine *entries*: lists whose first three items are
`[pc, lanes, sel]` — the next pc, the active lanes (a sorted read-only int64 array of
thread ids) and `sel`, a selector for those lanes (a slice when they are contiguous,
else the array itself; cheaper to index registers with). The engine moves an entry by
writing its pc; branches, `sync`, stops and barriers go through the control object,
which raises `PolicyFault` for a misuse the policy cannot run (the engine locates it).

- `IpdomStack`: entries `[pc, lanes, sel, rpc]`, GPGPU-Sim's PDOM stack; a divergent
  branch reconverges at its `rpc` (the immediate post-dominator, or the reconvergence
  point written on the branch, `gpudiv.interp.engine.RECONVERGE_ATTR`);
- `SyncStack`: the seed's explicit `sync` stack (Sampaio 2013, Tables 3.3-3.5);
- `Groups`: entries `[pc, lanes, sel, parked, frames]`, one group of lanes per pc (and
  calls it is in): `frontier` runs the lowest pc and merges groups that meet, `mimd`
  one thread at a time;
- `Aware`: entries `[pc, lanes, sel, meeting, blocked, frames]`, AWARE's warp splits in
  a FIFO with a reconvergence table (`Meeting`) and timed-out reconvergence.

PTX calls run as calls (`gpudiv.interp.ptx_calls`) go through `call` and `ret`: the PDOM
stack runs a callee in an entry of its own, `Groups` and `Aware`'s splits keep the calls
they are in (`Aware` opens a meeting per call); `SyncStack` (μ-SIMD only) refuses.
"""

from __future__ import annotations

import numpy as np

from gpudiv.interp.simt import Counters

EMPTY = np.zeros(0, dtype=np.int64)
EMPTY.flags.writeable = False


CALLS_REFUSED = "the sync stack (μ-SIMD `sync`) runs no calls"


class PolicyFault(Exception):
    """A control operation the policy cannot perform (the engine adds kernel and line)."""

    def __init__(self, message: str, lanes: np.ndarray) -> None:
        super().__init__(message)
        self.message = message
        self.lanes = [int(t) for t in lanes]


def frozen(lanes: np.ndarray) -> np.ndarray:
    """Make a lane set read-only: it is shared with observers and kept on stacks."""
    lanes.flags.writeable = False
    return lanes


def selector(lanes: np.ndarray):
    """A slice when the lanes are contiguous (cheaper to index with), else the array."""
    n = len(lanes)
    if n and int(lanes[-1]) - int(lanes[0]) + 1 == n:
        return slice(int(lanes[0]), int(lanes[-1]) + 1)
    return lanes


def entry(pc: int, lanes: np.ndarray, extra) -> list:
    """A control entry [pc, lanes, sel, extra]."""
    lanes = frozen(lanes)
    return [pc, lanes, selector(lanes), extra]


def _callers(lanes: np.ndarray, calls: list[tuple]) -> tuple[list[tuple], np.ndarray]:
    """The lanes of each call (`calls`: (mask of `lanes`, None for all; the callee's
    entry pc; the activation)) as (its lanes, the entry pc, the activation), and the
    lanes that call nothing."""
    if len(calls) == 1 and calls[0][0] is None:
        return [(lanes, calls[0][1], calls[0][2])], EMPTY
    called = np.zeros(len(lanes), dtype=bool)
    found = []
    for entering, target, activation in calls:
        mask = np.ones(len(lanes), dtype=bool) if entering is None else entering
        called |= mask
        found.append((lanes[mask], target, activation))
    return found, lanes[~called]


class _NoCalls:
    """A policy that cannot run calls as calls (the PTX policies can)."""

    def call(self, top: list, pc: int, calls: list[tuple]) -> None:
        raise PolicyFault(CALLS_REFUSED, top[1])

    def ret(self, top: list):
        raise PolicyFault(CALLS_REFUSED, top[1])


class IpdomStack:
    """GPGPU-Sim's PDOM stack; entries [next pc, lanes, sel, reconvergence pc]."""

    grouped = False
    mimd = False

    def __init__(self, lanes: np.ndarray, counters: Counters) -> None:
        self.counters = counters
        self.stack: list[list] = [entry(0, lanes, -1)]

    def current(self) -> list | None:
        """Pop entries that reached their reconvergence point; the top entry, or None
        once every lane stopped."""
        stack = self.stack
        while stack:
            top = stack[-1]
            if top[0] != top[3]:
                return top
            stack.pop()
            self.counters.reconvergences += 1
        return None

    def running(self) -> list:
        """The entry that runs (or waits at a barrier)."""
        return self.stack[-1]

    def alive(self) -> bool:
        """Whether some lane has not stopped."""
        return bool(self.stack)

    def branch(self, top: list, pc: int, target: int, jumps: np.ndarray, taken: int,
               rpc: int) -> None:
        """On divergence wait at rpc and push the target side, then the fall-through side
        (`taken` lanes jump)."""
        lanes = top[1]
        if taken == len(lanes):
            top[0] = target
            return
        if not taken:
            top[0] = pc + 1
            return
        top[0] = rpc
        # An entry starting at its reconvergence point has nothing to run: its lanes
        # just wait in the entry below.
        if target != rpc:
            self.stack.append(entry(target, lanes[jumps], rpc))
        if pc + 1 != rpc:
            self.stack.append(entry(pc + 1, lanes[~jumps], rpc))
        depth = len(self.stack)
        if depth > self.counters.max_stack_depth:
            self.counters.max_stack_depth = depth

    def sync(self, top: list, pc: int) -> None:
        """Reconvergence is automatic: `sync` does nothing."""
        top[0] = pc + 1

    def call(self, top: list, pc: int, calls: list[tuple]) -> None:
        """A call: the lanes of `top` wait after it; the lanes of each call (`calls`:
        (mask of `top`'s lanes, None for all; the callee's entry pc; the activation))
        run their callee in an entry of their own, one after the other, whose
        reconvergence point is the activation (never a pc: only `ret` ends it, so no
        pc of a recursive activation can be taken for an outer one's)."""
        top[0] = pc + 1
        for lanes, target, activation in reversed(_callers(top[1], calls)[0]):
            self.stack.append(entry(target, lanes, activation))
        depth = len(self.stack)
        if depth > self.counters.max_stack_depth:
            self.counters.max_stack_depth = depth

    def ret(self, top: list) -> tuple:
        """A return: end the callee's entry; its lanes go on after the call. Returns the
        activations they return from (the one `call` was given)."""
        if self.stack[-1] is not top or isinstance(top[3], int):
            raise PolicyFault("return from a function whose lanes have not reconverged",
                              top[1])
        self.stack.pop()
        return (top[3],)

    def stop(self, top: list) -> None:
        """Retire the active lanes from every entry; drop entries left without lanes."""
        gone = top[1]
        keep = []
        for item in self.stack:
            rest = np.setdiff1d(item[1], gone, assume_unique=True)
            if len(rest):
                if len(rest) != len(item[1]):
                    item[1] = frozen(rest)
                    item[2] = selector(rest)
                keep.append(item)
        self.stack = keep

    def arrive(self, top: list, pc: int) -> bool:
        """A barrier: every live lane must be active."""
        if len(top[1]) != len(self.stack[0][1]):
            raise PolicyFault("barrier in divergent code (not all live lanes of the warp "
                              "reach it)", top[1])
        return True

    def resume(self, pc: int) -> None:
        """Go on at pc after a barrier released the warp."""
        self.stack[-1][0] = pc

    def unfinished(self) -> np.ndarray:
        """Lanes that have not stopped: the bottom entry holds every live lane."""
        return self.stack[0][1] if self.stack else EMPTY

    def state(self) -> bytes:
        """The control state as bytes (for cycle detection)."""
        return b";".join(str((e[0], e[3])).encode() + e[1].tobytes() for e in self.stack)

    def waiting(self) -> list[tuple[np.ndarray, int]]:
        """Lanes of lower entries that wait, with the pc where they wait, nearest first."""
        out = []
        above = self.stack[-1][1] if self.stack else EMPTY
        for item in reversed(self.stack[:-1]):
            rest = np.setdiff1d(item[1], above, assume_unique=True)
            if len(rest):
                out.append((rest, item[0]))
            above = np.union1d(above, item[1])
        return out


class SyncStack(_NoCalls):
    """The seed's sync stack; nodes are [branch pc, done lanes, resume pc, todo lanes]."""

    grouped = False
    mimd = False

    def __init__(self, lanes: np.ndarray, counters: Counters) -> None:
        self.counters = counters
        self.lanes = lanes
        self.top = entry(0, lanes, None)
        self.stack: list[list] = []
        self.finished = False

    def current(self) -> list | None:
        """The running entry, or None once the warp has stopped."""
        return None if self.finished else self.top

    def running(self) -> list:
        """The entry that runs (or waits at a barrier)."""
        return self.top

    def alive(self) -> bool:
        """Whether the warp has not stopped."""
        return not self.finished

    def _activate(self, lanes: np.ndarray) -> None:
        """Make `lanes` the active lanes."""
        self.top[1] = frozen(lanes)
        self.top[2] = selector(lanes)

    def _push(self, branch_pc: int, todo: np.ndarray, resume: int) -> None:
        """Table 3.3's push, generalised: merge only into a same-branch node with no done set."""
        if self.stack:
            node = self.stack[-1]
            if node[0] == branch_pc and len(node[1]) == 0:
                if len(todo):
                    node[3] = frozen(np.union1d(node[3], todo))
                return
        self.stack.append([branch_pc, EMPTY, resume, todo])
        self.counters.max_stack_depth = max(self.counters.max_stack_depth, len(self.stack) + 1)

    def branch(self, top: list, pc: int, target: int, jumps: np.ndarray, taken: int,
               rpc: int) -> None:
        """Rules BT, BF, BD: the fall-through group runs first, the jumping one waits."""
        active = top[1]
        if taken == len(active):
            self._push(pc, EMPTY, target)
            top[0] = target
        elif not taken:
            self._push(pc, EMPTY, target)
            top[0] = pc + 1
        else:
            self._push(pc, frozen(active[jumps]), target)
            self._activate(active[~jumps])
            top[0] = pc + 1

    def sync(self, top: list, pc: int) -> None:
        """Rule SS (run the deferred lanes) or rule SP (pop and reunite)."""
        if not self.stack:
            raise PolicyFault("sync with nothing to synchronise", top[1])
        node = self.stack[-1]
        if len(node[3]):
            node[1] = top[1]
            self._activate(node[3])
            node[3] = EMPTY
            top[0] = node[2]
        else:
            self.stack.pop()
            if len(node[1]):
                self.counters.reconvergences += 1
                self._activate(np.union1d(node[1], top[1]))
            top[0] = pc + 1

    def stop(self, top: list) -> None:
        """Rule SF: only legal with an empty stack; the whole warp finishes."""
        if self.stack:
            n = len(self.stack)
            raise PolicyFault(f"stop reached with {n} pending synchronisation node(s)", top[1])
        self.finished = True
        self._activate(EMPTY)

    def arrive(self, top: list, pc: int) -> bool:
        """A barrier: every live lane must be active."""
        if len(top[1]) != len(self.unfinished()):
            raise PolicyFault("barrier in divergent code", top[1])
        return True

    def resume(self, pc: int) -> None:
        """Go on at pc after a barrier released the warp."""
        self.top[0] = pc

    def unfinished(self) -> np.ndarray:
        """Lanes that have not stopped (all of them until the whole warp stops)."""
        return EMPTY if self.finished else self.lanes

    def state(self) -> bytes:
        """The control state as bytes (for cycle detection)."""
        parts = [str((self.top[0], self.finished)).encode(), self.top[1].tobytes()]
        for node in self.stack:
            parts += [str((node[0], node[2])).encode(), node[1].tobytes(), b"|",
                      node[3].tobytes()]
        return b";".join(parts)

    def waiting(self) -> list[tuple[np.ndarray, int]]:
        """Lanes that wait (deferred or done) with the pc where they will go on."""
        return [(np.union1d(n[1], n[3]), n[2]) for n in reversed(self.stack)
                if len(n[1]) or len(n[3])]


class Groups:
    """Groups of lanes, each at its own pc: entries [pc, lanes, sel, parked, frames]
    where parked is False, "barrier" or "collective", and frames the calls the group is
    in (calls run as calls), outermost first: (return pc, the activations) each. The
    frontier policy runs the group with the lowest pc (the fixed block priority is the
    layout order; in a callee, the pc of the call first, as if inlined there) and merges
    groups that meet at one pc in the same calls; the mimd policy keeps one group per
    thread and takes them in turn, one instruction each, and joins them at warp
    collectives (`shfl`, `vote`: every live lane takes part)."""

    grouped = True

    def __init__(self, lanes: np.ndarray, counters: Counters, mimd: bool) -> None:
        self.counters = counters
        self.mimd = mimd
        if mimd:
            self.groups = [_group(0, lanes[k:k + 1].copy()) for k in range(len(lanes))]
        else:
            self.groups = [_group(0, lanes)]
        counters.max_stack_depth = max(counters.max_stack_depth, len(self.groups))
        self.k = 0  # the index of the running group
        self.cursor = 0  # mimd: the next thread to consider

    def current(self) -> list | None:
        """The group that runs next; None when none can run."""
        groups = self.groups
        if self.mimd:
            first = None
            for k in range(len(groups)):
                if not groups[k][3]:
                    if k >= self.cursor:
                        first = k
                        break
                    if first is None:
                        first = k
            if first is None:
                return None
            self.k = first
            self.cursor = first + 1
            return groups[first]
        best = None
        for k, group in enumerate(groups):
            if not group[3] and (best is None or _place(group) < _place(groups[best])):
                best = k
        if best is None:
            return None
        self.k = best
        return groups[best]

    def alive(self) -> bool:
        """Whether some lane has not stopped."""
        return bool(self.groups)

    def running(self) -> list:
        """The entry that runs (or waits at a barrier)."""
        if not self.groups:
            return _group(0, EMPTY)
        runnable = [g for g in self.groups if not g[3]] or self.groups
        if self.mimd:
            return runnable[0]
        return min(runnable, key=_place)

    def moved(self) -> None:
        """After the running group moved: mimd splits a group the engine ran as one
        (after a barrier or collective) into threads; frontier merges groups at one pc
        in the same calls."""
        if self.mimd:
            group = self.groups[self.k] if self.k < len(self.groups) else None
            if group is not None and len(group[1]) > 1:
                self._scatter(self.k)
            return
        first: dict[tuple, list] = {}
        keep = []
        for group in self.groups:
            where = (group[0], _returns(group))
            other = None if group[3] else first.get(where)
            if other is None:
                if not group[3]:
                    first[where] = group
                keep.append(group)
                continue
            _merge(other, group)
            self.counters.reconvergences += 1
        self.groups = keep

    def _scatter(self, k: int) -> None:
        """Mimd: the lanes of group k go on one by one."""
        pc, lanes, frames = self.groups[k][0], self.groups[k][1], self.groups[k][4]
        self.groups[k:k + 1] = [_group(pc, lanes[j:j + 1].copy(), False, frames)
                                for j in range(len(lanes))]

    def branch(self, top: list, pc: int, target: int, jumps: np.ndarray, taken: int,
               rpc: int) -> None:
        """Split the running group into the lanes that jump and those that fall through."""
        lanes = top[1]
        if taken == len(lanes):
            top[0] = target
            return
        if not taken:
            top[0] = pc + 1
            return
        side = lanes[~jumps]
        top[0], top[1] = pc + 1, frozen(side)
        top[2] = selector(side)
        self.groups.insert(self.k + 1, _group(target, lanes[jumps], False, top[4]))
        self.counters.max_stack_depth = max(self.counters.max_stack_depth, len(self.groups))

    def call(self, top: list, pc: int, calls: list[tuple]) -> None:
        """A call: the lanes of each call (`calls`: (mask of `top`'s lanes, None for all;
        the callee's entry pc; the activation)) go to their callee in a group with one
        more frame, returning after the call; the lanes that do not call go on after it."""
        lanes = top[1]
        callers, rest = _callers(lanes, calls)
        groups = [_group(target, some, False, (*top[4], (pc + 1, (activation,))))
                  for some, target, activation in callers]
        top[0] = pc + 1
        if len(rest) < len(lanes):
            if len(rest):
                top[1], top[2] = frozen(rest), selector(rest)
                self.groups[self.k + 1:self.k + 1] = groups
            else:
                top[:] = groups[0]
                self.groups[self.k + 1:self.k + 1] = groups[1:]
        self.counters.max_stack_depth = max(self.counters.max_stack_depth, len(self.groups))

    def ret(self, top: list) -> tuple:
        """A return: the running group leaves its innermost call. Returns the
        activations it returns from."""
        if not top[4]:
            raise PolicyFault("return outside a call", top[1])
        (back, activations), top[4] = top[4][-1], top[4][:-1]
        top[0] = back
        return activations

    def sync(self, top: list, pc: int) -> None:
        """Reconvergence is implicit: `sync` does nothing."""
        top[0] = pc + 1

    def stop(self, top: list) -> None:
        """The running group's lanes stop."""
        del self.groups[self.k]
        self.cursor = self.k

    def park(self, top: list, why: str) -> None:
        """The running group waits (at a barrier or a collective)."""
        top[3] = why

    def arrive(self, top: list, pc: int) -> bool:
        """Park the running group at a barrier; True once every group waits there (then
        they are one group, at pc)."""
        top[3] = "barrier"
        if any(not g[3] for g in self.groups):
            return False
        return self._join_at_barrier()

    def _join_at_barrier(self) -> bool:
        """Every group waits at a barrier: make them one group (they must wait at one)."""
        places = {(g[0], _returns(g)) for g in self.groups}
        if len(places) > 1:
            raise PolicyFault("lanes of the warp wait at different barriers", self.unfinished())
        if len(self.groups) > 1:
            self.counters.reconvergences += 1
        joined = self.groups[0]
        for group in self.groups[1:]:
            _merge(joined, group)
        joined[3] = "barrier"
        self.groups = [joined]
        self.k = 0
        return True

    def blocked(self) -> tuple[str, list] | None:
        """No group can run: ("collective", the joined group that runs the collective
        now), ("barrier", the group that waits at the barrier), or None (all stopped)."""
        if not self.groups:
            return None
        gathered = [g for g in self.groups if g[3] == "collective"]
        if gathered:
            first = min(gathered, key=_place)
            where = (first[0], _returns(first))
            meet = [g for g in gathered if (g[0], _returns(g)) == where]
            joined = _group(first[0], first[1], False, first[4])
            for group in meet[1:]:
                _merge(joined, group)
            rest = [g for g in self.groups if not any(g is m for m in meet)]
            self.groups = [joined, *rest]
            self.counters.reconvergences += len(meet) > 1
            self.k = self.cursor = 0
            return "collective", self.groups[0]
        self._join_at_barrier()
        return "barrier", self.groups[0]

    def collective_done(self, pc: int) -> None:
        """After the joined group ran its collective: its threads go on alone, and the
        groups parked at other collectives try again."""
        self._scatter(0)
        for group in self.groups:
            if group[3] == "collective" and group[0] != pc:
                group[3] = False

    def resume(self, pc: int) -> None:
        """Go on at pc after a barrier released the warp (mimd: thread by thread)."""
        group = self.groups[0]
        group[0], group[3] = pc, False
        if self.mimd:
            self._scatter(0)
        self.k = self.cursor = 0

    def unfinished(self) -> np.ndarray:
        """Every lane that has not stopped."""
        if not self.groups:
            return EMPTY
        return frozen(np.sort(np.concatenate([g[1] for g in self.groups])))

    def state(self) -> bytes:
        """The control state as bytes (for cycle detection)."""
        return b";".join(str((g[0], g[3], g[4])).encode() + g[1].tobytes()
                         for g in self.groups) + str(self.cursor if self.mimd else 0).encode()

    def waiting(self) -> list[tuple[np.ndarray, int]]:
        """Frontier: the groups that do not run, lowest pc first; mimd: none."""
        if self.mimd or len(self.groups) < 2:
            return []
        running = self.running()
        others = sorted((g for g in self.groups if g is not running), key=_place)
        return [(g[1], g[0]) for g in others]


def _group(pc: int, lanes: np.ndarray, parked=False, frames: tuple = ()) -> list:
    """A `Groups` entry [pc, lanes, sel, parked, frames]."""
    group = entry(pc, lanes, parked)
    group.append(frames)
    return group


def _returns(group: list) -> tuple[int, ...]:
    """The return pcs of the calls a group is in: groups meet only within the same."""
    return tuple(back for back, _ in group[4])


def _place(group: list) -> tuple[int, ...]:
    """Where a group is in layout order, as if its calls were inlined at their sites:
    the pcs of its calls, outermost first, then its own."""
    return (*(back - 1 for back, _ in group[4]), group[0])


def _merge(into: list, group: list) -> None:
    """Add the lanes of `group` to `into` (at the same pc, in the same calls), and the
    activations of each of their calls."""
    lanes = frozen(np.union1d(into[1], group[1]))
    into[1], into[2] = lanes, selector(lanes)
    if into[4]:
        into[4] = tuple((back, tuple(dict.fromkeys((*mine, *theirs))))
                        for (back, mine), (_, theirs) in zip(into[4], group[4], strict=True))


class Meeting:
    """A reconvergence-table entry of `Aware`: lanes of one warp meet at `rpc`; `pending`
    have not arrived, `arrived` wait there since the warp's clock read `since`;
    `parent` is the entry the lanes go on in once they met (None: the whole warp);
    `frames` the calls its lanes are in (calls run as calls). A call opens one whose
    `rpc` is `CALLED` (never a pc: no lane arrives there) as the parent of what meets
    inside the callee, and which the return closes."""

    __slots__ = ("rpc", "parent", "pending", "arrived", "since", "frames")

    def __init__(self, rpc: int, parent: Meeting | None, pending: np.ndarray,
                 frames: tuple = ()) -> None:
        self.rpc = rpc
        self.parent = parent
        self.pending = pending
        self.arrived = EMPTY
        self.since: int | None = None
        self.frames = frames


CALLED = -1  # the rpc of the meeting a call opens


class Aware:
    """AWARE's warp splits (ElTantawy & Aamodt, MICRO 2016, §IV-B): entries [pc, lanes, sel,
    meeting, blocked, frames] in a FIFO (frames: the calls the split is in, calls run as
    calls: (return pc, activations, the meeting the call opened)); the first one that is
    not blocked at a barrier runs. Every conditional branch sends the running split to
    the tail (a divergent one as two splits, the not-taken side first) and opens a
    `Meeting` at its reconvergence pc unless the split already belongs to one there (a
    loop branch again). A split that reaches its meeting's pc waits in it; when no lane
    is pending the lanes go on as one split. Timed-out reconvergence (Fig. 6b): lanes
    that have waited `timeout` warp steps of their warp (None: never) go on without the
    others, as a split of the enclosing meeting. A split that reaches a barrier without
    the rest of the warp is blocked there (its pc stays at the barrier) and goes to the
    tail; once every live lane is blocked at a barrier the warp waits, and each split
    goes on after its own."""

    grouped = True  # `current` may find no split to run while lanes wait (`blocked`)
    mimd = False

    def __init__(self, lanes: np.ndarray, counters: Counters, timeout: int | None) -> None:
        self.counters = counters
        self.timeout = timeout
        self.live = lanes
        self.fifo: list[list] = [self._split(0, lanes, None)]
        self.meetings: list[Meeting] = []
        self.clock = 0
        self.due: int | None = None  # the earliest clock at which a timeout may fire
        self.timeouts = 0

    @staticmethod
    def _split(pc: int, lanes: np.ndarray, meeting: Meeting | None,
               frames: tuple = ()) -> list:
        """A split [pc, lanes, sel, meeting, blocked, frames] not blocked at a barrier."""
        split = entry(pc, lanes, meeting)
        split += [None, frames]
        return split

    def current(self) -> list | None:
        """Fire due timeouts, let splits that reached their meeting wait there; the first
        split not blocked at a barrier (moved to the head), or None when there is none."""
        self.clock += 1
        if self.due is not None and self.clock >= self.due:
            self._time_out()
        fifo = self.fifo
        while True:
            k = next((k for k, split in enumerate(fifo) if split[4] is None), None)
            if k is None:
                if self.due is None or not self._waits():
                    return None
                self.clock = max(self.clock, self.due)  # nothing runs until a timeout
                self._time_out()
                continue
            if k:
                fifo[:] = fifo[k:] + fifo[:k]
            head = fifo[0]
            meeting = head[3]
            if meeting is None or head[0] != meeting.rpc:
                return head
            fifo.pop(0)
            self._arrive(meeting, head[1])

    def _waits(self) -> bool:
        """Whether lanes wait at a meeting."""
        return any(len(m.arrived) for m in self.meetings)

    def _arrive(self, meeting: Meeting, lanes: np.ndarray) -> None:
        """Lanes reach their meeting point: wait, or go on with everyone if they were the
        last ones pending."""
        meeting.pending = frozen(np.setdiff1d(meeting.pending, lanes, assume_unique=True))
        meeting.arrived = frozen(np.union1d(meeting.arrived, lanes))
        if meeting.since is None:
            meeting.since = self.clock
            self._schedule(meeting)
        if not len(meeting.pending):
            self._leave(meeting, reconverged=True)

    def _leave(self, meeting: Meeting, reconverged: bool) -> None:
        """The arrived lanes go on from the meeting's pc as one split of its parent."""
        if len(meeting.arrived):
            self.fifo.append(self._split(meeting.rpc, meeting.arrived, meeting.parent,
                                         meeting.frames))
            if reconverged:
                self.counters.reconvergences += 1
        meeting.arrived, meeting.since = EMPTY, None
        if not len(meeting.pending):
            self.meetings.remove(meeting)

    def _schedule(self, meeting: Meeting) -> None:
        """Remember when the lanes that wait at a meeting time out."""
        if self.timeout is not None and meeting.since is not None:
            when = meeting.since + self.timeout
            self.due = when if self.due is None else min(self.due, when)

    def _time_out(self) -> None:
        """Fig. 6b: lanes that waited too long go on without the pending ones."""
        self.due = None
        for meeting in list(self.meetings):
            if meeting.since is not None and self.clock - meeting.since >= self.timeout:
                self.timeouts += 1
                self._leave(meeting, reconverged=False)
            else:
                self._schedule(meeting)

    def running(self) -> list:
        """The entry that runs (or waits at a barrier)."""
        return self.fifo[0] if self.fifo else self._split(0, EMPTY, None)

    def alive(self) -> bool:
        """Whether some lane has not stopped."""
        return bool(len(self.live))

    def moved(self) -> None:
        """Nothing to do after a step (splits change only at branches and meetings)."""

    def branch(self, top: list, pc: int, target: int, jumps: np.ndarray, taken: int,
               rpc: int) -> None:
        """The split goes to the FIFO's tail, as two splits (not-taken first) meeting at
        rpc when it diverges."""
        fifo = self.fifo
        fifo.pop(0)
        lanes = top[1]
        if taken == len(lanes) or not taken:
            top[0] = target if taken else pc + 1
            fifo.append(top)
            return
        meeting = top[3]
        if meeting is None or meeting.rpc != rpc:
            meeting = Meeting(rpc, meeting, lanes, top[5])
            self.meetings.append(meeting)
        for side_pc, side in ((pc + 1, lanes[~jumps]), (target, lanes[jumps])):
            if side_pc == rpc:
                self._arrive(meeting, side)
            else:
                fifo.append(self._split(side_pc, side, meeting, top[5]))
        depth = len(fifo) + len(self.meetings)
        if depth > self.counters.max_stack_depth:
            self.counters.max_stack_depth = depth

    def sync(self, top: list, pc: int) -> None:
        """Reconvergence is automatic: `sync` does nothing."""
        top[0] = pc + 1

    def call(self, top: list, pc: int, calls: list[tuple]) -> None:
        """A call: the lanes of each call (`calls`: (mask of `top`'s lanes, None for all;
        the callee's entry pc; the activation)) run their callee as a split in a meeting
        the call opens, the first in place of the running split, the others at the tail.
        When not all lanes call the same function, all of them meet again after the call
        (the lanes that do not call wait there)."""
        if not calls:
            top[0] = pc + 1
            return
        callers, rest = _callers(top[1], calls)
        parent = top[3]
        if len(callers) > 1 or len(rest):
            parent = Meeting(pc + 1, top[3], top[1], top[5])
            self.meetings.append(parent)
        splits = []
        for some, target, activation in callers:
            opened = Meeting(CALLED, parent, some, top[5])
            splits.append(self._split(target, some, opened,
                                      (*top[5], (pc + 1, (activation,), opened))))
        self.fifo.pop(0)
        if len(rest):
            self._arrive(parent, rest)
        self.fifo[0:0] = splits[:1]
        self.fifo += splits[1:]
        depth = len(self.fifo) + len(self.meetings)
        if depth > self.counters.max_stack_depth:
            self.counters.max_stack_depth = depth

    def ret(self, top: list) -> tuple:
        """A return: the split leaves its innermost call and goes on after it, in the
        meeting it was in when it called. Returns the activations it returns from."""
        if not top[5] or top[3] is not top[5][-1][2]:
            raise PolicyFault("return from a function whose lanes have not reconverged",
                              top[1])
        back, activations, opened = top[5][-1]
        top[0], top[3], top[5] = back, opened.parent, top[5][:-1]
        return activations

    def stop(self, top: list) -> None:
        """The running split's lanes stop: no meeting waits for them any more."""
        gone = top[1]
        self.fifo.pop(0)
        self.live = frozen(np.setdiff1d(self.live, gone, assume_unique=True))
        for meeting in list(self.meetings):
            rest = np.setdiff1d(meeting.pending, gone, assume_unique=True)
            if len(rest) != len(meeting.pending):
                meeting.pending = frozen(rest)
                if not len(rest):
                    self._leave(meeting, reconverged=True)

    def arrive(self, top: list, pc: int) -> bool:
        """A barrier: the warp waits there when the split holds every live lane; else
        the split is blocked at it and goes to the tail (False)."""
        if len(top[1]) == len(self.live):
            return True
        top[4] = True
        self.fifo.append(self.fifo.pop(0))
        return False

    def blocked(self) -> tuple[str, list] | None:
        """No split can run: ("barrier", a split) when every live lane is blocked at a
        barrier, ("stuck", a split) when lanes blocked at a barrier wait for lanes that
        wait to reconverge with them (and no timeout frees those), None when all stopped."""
        if not self.fifo:
            waiting = self.waiting()
            if not waiting:
                return None
            lanes, pc = waiting[0]  # cannot happen: a meeting's pending lanes are in splits
            return "stuck", self._split(pc, lanes, None)
        held = sum(len(split[1]) for split in self.fifo)
        return ("barrier" if held == len(self.live) else "stuck"), self.fifo[0]

    def resume(self, pc: int) -> None:
        """Go on after a barrier released the warp: each split after its own barrier."""
        blocked = [split for split in self.fifo if split[4] is not None]
        for split in blocked:
            split[0], split[4] = split[0] + 1, None
        if not blocked:
            self.fifo[0][0] = pc

    def unfinished(self) -> np.ndarray:
        """Lanes that have not stopped."""
        return self.live

    def state(self) -> bytes:
        """The control state as bytes (for cycle detection): splits, meetings and how
        long lanes have waited (which only matters with a timeout)."""
        index = {id(m): n for n, m in enumerate(self.meetings)}
        parts = [str((e[0], index.get(id(e[3]), -1), e[4],
                      [(back, called) for back, called, _ in e[5]])).encode()
                 + e[1].tobytes() for e in self.fifo]
        for m in self.meetings:
            waited = -1 if self.timeout is None or m.since is None else self.clock - m.since
            parts.append(str((m.rpc, index.get(id(m.parent), -1), waited)).encode()
                         + m.pending.tobytes() + b"|" + m.arrived.tobytes())
        return b";".join(parts)

    def waiting(self) -> list[tuple[np.ndarray, int]]:
        """Lanes that wait at a meeting, with its pc, innermost first."""
        return [(m.arrived, m.rpc) for m in reversed(self.meetings) if len(m.arrived)]


AWARE_TIMEOUT = 1000  # warp steps; the paper: large, a backstop for undetected deadlocks


def control_for(policy: str, lanes: np.ndarray, counters: Counters,
                timeout: int | None = AWARE_TIMEOUT):
    """The control object of one warp under a policy ("sync": the `sync` stack; "ipdom"
    and "marked": the PDOM stack; "aware": AWARE's splits with `timeout`)."""
    if policy == "sync":
        return SyncStack(frozen(lanes), counters)
    if policy in ("frontier", "mimd"):
        return Groups(frozen(lanes), counters, mimd=policy == "mimd")
    if policy == "aware":
        return Aware(frozen(lanes), counters, timeout)
    return IpdomStack(frozen(lanes), counters)
