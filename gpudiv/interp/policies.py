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
- `Groups`: entries `[pc, lanes, sel, parked]`, one group of lanes per pc: `frontier`
  runs the lowest pc and merges groups that meet, `mimd` one thread at a time.
"""

from __future__ import annotations

import numpy as np

from gpudiv.interp.simt import Counters

EMPTY = np.zeros(0, dtype=np.int64)
EMPTY.flags.writeable = False


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


class SyncStack:
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
    """Groups of lanes, each at its own pc: entries [pc, lanes, sel, parked] where parked
    is False, "barrier" or "collective". The frontier policy runs the group with the
    lowest pc (the fixed block priority is the layout order) and merges groups that meet;
    the mimd policy keeps one group per thread and takes them in turn, one instruction
    each, and joins them at warp collectives (`shfl`, `vote`: every live lane takes part)."""

    grouped = True

    def __init__(self, lanes: np.ndarray, counters: Counters, mimd: bool) -> None:
        self.counters = counters
        self.mimd = mimd
        if mimd:
            self.groups = [entry(0, lanes[k:k + 1].copy(), False) for k in range(len(lanes))]
        else:
            self.groups = [entry(0, lanes, False)]
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
            if not group[3] and (best is None or group[0] < groups[best][0]):
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
            return entry(0, EMPTY, False)
        runnable = [g for g in self.groups if not g[3]] or self.groups
        if self.mimd:
            return runnable[0]
        return min(runnable, key=lambda g: g[0])

    def moved(self) -> None:
        """After the running group moved: mimd splits a group the engine ran as one
        (after a barrier or collective) into threads; frontier merges groups at one pc."""
        if self.mimd:
            group = self.groups[self.k] if self.k < len(self.groups) else None
            if group is not None and len(group[1]) > 1:
                self._scatter(self.k)
            return
        first: dict[int, list] = {}
        keep = []
        for group in self.groups:
            other = None if group[3] else first.get(group[0])
            if other is None:
                if not group[3]:
                    first[group[0]] = group
                keep.append(group)
                continue
            lanes = frozen(np.union1d(other[1], group[1]))
            other[1], other[2] = lanes, selector(lanes)
            self.counters.reconvergences += 1
        self.groups = keep

    def _scatter(self, k: int) -> None:
        """Mimd: the lanes of group k go on one by one."""
        pc, lanes = self.groups[k][0], self.groups[k][1]
        self.groups[k:k + 1] = [entry(pc, lanes[j:j + 1].copy(), False)
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
        self.groups.insert(self.k + 1, entry(target, lanes[jumps], False))
        self.counters.max_stack_depth = max(self.counters.max_stack_depth, len(self.groups))

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
        pcs = {g[0] for g in self.groups}
        if len(pcs) > 1:
            raise PolicyFault("lanes of the warp wait at different barriers", self.unfinished())
        if len(self.groups) > 1:
            self.counters.reconvergences += 1
        self.groups = [entry(pcs.pop(), self.unfinished(), "barrier")]
        self.k = 0
        return True

    def blocked(self) -> tuple[str, list] | None:
        """No group can run: ("collective", the joined group that runs the collective
        now), ("barrier", the group that waits at the barrier), or None (all stopped)."""
        if not self.groups:
            return None
        gathered = [g for g in self.groups if g[3] == "collective"]
        if gathered:
            pc = min(g[0] for g in gathered)
            meet = [g for g in gathered if g[0] == pc]
            lanes = frozen(np.sort(np.concatenate([g[1] for g in meet])))
            rest = [g for g in self.groups if not any(g is m for m in meet)]
            self.groups = [entry(pc, lanes, False), *rest]
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
        return b";".join(str((g[0], g[3])).encode() + g[1].tobytes() for g in self.groups) \
            + str(self.cursor if self.mimd else 0).encode()

    def waiting(self) -> list[tuple[np.ndarray, int]]:
        """Frontier: the groups that do not run, lowest pc first; mimd: none."""
        if self.mimd or len(self.groups) < 2:
            return []
        running = self.running()
        others = sorted((g for g in self.groups if g is not running), key=lambda g: g[0])
        return [(g[1], g[0]) for g in others]


def control_for(policy: str, lanes: np.ndarray, counters: Counters):
    """The control object of one warp under a policy ("sync": the `sync` stack; "ipdom"
    and "marked": the PDOM stack)."""
    if policy == "sync":
        return SyncStack(frozen(lanes), counters)
    if policy in ("frontier", "mimd"):
        return Groups(frozen(lanes), counters, mimd=policy == "mimd")
    return IpdomStack(frozen(lanes), counters)
