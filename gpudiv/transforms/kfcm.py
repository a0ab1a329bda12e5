"""KFCM and KF_trad on host programs (Fukuhara 2023 ch. 5; shared/notes §5, §5.6).

The host CFG has one statement per node (`gpudiv.ir.host`); its critical edges are split
with empty nodes before every analysis (§5.6 item 4). Python computes the local
predicates — `launch/2` and the kill set `transp/2` of §5.6 item 6 — and which pairs of
launches may not fuse (`refused/2`, `gpudiv.transforms.fusion`); rules/bkf.lp,
rules/fkf.lp and rules/kf_trad.lp decide the rest.

Driver (§5.5): the launches are visited in reverse postorder, repeatedly until nothing
changes. For each launch K, BKF runs first: if some fusion point XFusible(n, K, K2) is
latest, K is inserted at every XLatest exit (the exit of a branch node is just before
its condition: launches do not change host scalars), fused with K2 where n holds K2,
and removed from its node unless NLatest holds there. Otherwise FKF sinks K: it is
inserted at every NInsert entry and XInsert exit, fused with K2 where NFusable holds,
and removed from its node — even when nothing fuses, so that a later BKF can fuse
(the second-order effect of Fig 5.14); a sink that would leave K where it is counts as
no change. KF_trad fuses a launch into the one right before it on a straight path.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpudiv import ir
from gpudiv.analyses.solve import RuleError, shipped_rule, solve
from gpudiv.ir import host as h
from gpudiv.transforms.base import PassError
from gpudiv.transforms.fusion import fuse, fusion_problem

MAX_STEPS = 200  # fusions and sinks per program; a bound the fixpoint never nears here


@dataclass
class Step:
    """One change the driver made, with the predicate values that justify it."""

    phase: str  # bkf, fkf, kf-trad
    kernel: str  # the moved launch's kernel
    line: int  # its line in the input
    fused_with: str | None = None
    fused_name: str | None = None
    fused_line: int | None = None
    compensation: list[str] = field(default_factory=list)
    predicates: dict[str, list[str]] = field(default_factory=dict)
    forwarded: int = 0  # loads of the intermediate buffer now read from a register
    removed: int = 0  # stores of a buffer dead on the host, removed

    def to_json(self) -> dict:
        """The step as plain data."""
        return dict(self.__dict__)


@dataclass
class Refusal:
    """Two launches that the motion would make adjacent but that must not fuse."""

    first: str
    first_line: int
    second: str
    second_line: int
    reason: str

    def to_json(self) -> dict:
        """The refusal as plain data."""
        return dict(self.__dict__)


@dataclass
class FusionResult:
    """The transformed program, what was done, and what was refused."""

    program: h.HostProgram
    steps: list[Step]
    refusals: list[Refusal]
    fused: list[str]
    unfused: list[tuple[str, int, list[str]]] = field(default_factory=list)


# -- the CFG ---------------------------------------------------------------------------


def split_critical_edges(prog: h.HostProgram) -> None:
    """An empty node on every edge from a branch to a node with several predecessors."""
    preds = prog.preds()
    for u in list(prog.nodes):
        if len(prog.succ[u]) < 2:
            continue
        for i, v in enumerate(prog.succ[u]):
            if len(preds[v]) > 1:
                prog.succ[u][i] = prog.add(h.Nop(), prog.nodes[u].loc, [v])


def aliases(prog: h.HostProgram) -> dict[str, str]:
    """Buffer variables that may hold the same buffer (`a = b`), mapped to one name."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.get(x, x) != x:
            x = parent[x]
        return x
    for node in prog.nodes.values():
        stmt = node.stmt
        if isinstance(stmt, h.Assign) and isinstance(stmt.value, h.Name) \
                and prog.types.get(stmt.target) == h.BUFFER:
            parent[find(stmt.target)] = find(stmt.value.name)
    return {v: find(v) for v, t in prog.types.items() if t == h.BUFFER}


def _buffers(stmt: h.Launch | h.Call, prog: h.HostProgram, alias: dict[str, str]) -> set[str]:
    """The buffers (alias classes) a launch or a host call touches."""
    return {alias.get(a.name, a.name) for a in stmt.args
            if isinstance(a, h.Name) and prog.types.get(a.name) == h.BUFFER}


def kill_reason(prog: h.HostProgram, k: int, n: int, alias: dict[str, str]) -> str | None:
    """Why node n is not transparent for the launch at node k (§5.6 item 6; None: it is)."""
    stmt, launch = prog.nodes[n].stmt, prog.nodes[k].stmt
    if n == prog.end:
        return "the program ends"
    if isinstance(stmt, h.Launch):
        return None if n == k else f"another launch ({stmt.kernel})"
    if isinstance(stmt, h.Assign) and stmt.target in launch.reads():
        return f"it assigns '{stmt.target}', which the launch reads"
    if isinstance(stmt, h.Call) and stmt.name == "sync":
        return "it synchronises with the device"
    if isinstance(stmt, h.Call):
        shared = _buffers(stmt, prog, alias) & _buffers(launch, prog, alias)
        if shared:
            return f"{stmt.name} touches buffer '{sorted(shared)[0]}' of the launch"
    return None


def kills(prog: h.HostProgram, k: int, n: int, alias: dict[str, str]) -> bool:
    """Whether node n is not transparent for the launch at node k (§5.6 item 6)."""
    return kill_reason(prog, k, n, alias) is not None


def dead_buffers(prog: h.HostProgram, n: int, gone: int, alias: dict[str, str]) -> set[str]:
    """Buffers (alias classes) that nothing reads after node n before they are freed or
    overwritten, the launch at `gone` ignored (it is being fused). A launch reads all its
    buffers; the end reads every buffer (its final contents are the program's result)."""
    every = set(alias.values())
    live: dict[int, set[str]] = {m: set() for m in prog.nodes}
    changed = True
    while changed:
        changed = False
        for m in prog.nodes:
            out = every if m == prog.end else set().union(*(live[s] for s in prog.succ[m]))
            stmt = prog.nodes[m].stmt
            if m == gone:
                stmt = h.Nop()
            if isinstance(stmt, h.Launch):
                out = out | _buffers(stmt, prog, alias)
            elif isinstance(stmt, h.Call) and stmt.name in ("free", "memset"):
                out = out - _buffers(stmt, prog, alias)
            elif isinstance(stmt, h.Call) and stmt.name == "memcpy":
                dst, src = (_buffers(h.Call("", (x,)), prog, alias) for x in stmt.args)
                out = (out - dst) | src
            if out != live[m]:
                live[m], changed = out, True
    after = set().union(*(live[s] for s in prog.succ[n])) if n != prog.end else every
    return every - after


# -- facts and solving ------------------------------------------------------------------


class _Session:
    """One program being transformed: refusal cache and the steps taken."""

    def __init__(self, prog: h.HostProgram) -> None:
        self.prog = prog
        self.alias = aliases(prog)
        self.problems: dict[tuple[int, int], str | None] = {}
        self.refusals: dict[tuple[str, str, str], Refusal] = {}
        self.steps: list[Step] = []
        self.fused: dict[str, tuple] = {}

    def problem(self, a: int, b: int) -> str | None:
        """Why the launch at a then the launch at b must not fuse (cached per node pair
        and statements)."""
        sa, sb = self.prog.nodes[a].stmt, self.prog.nodes[b].stmt
        key = (a, b, str(sa), str(sb))
        if key not in self.problems:
            self.problems[key] = fusion_problem(self.prog.kernels[sa.kernel], sa,
                                                self.prog.kernels[sb.kernel], sb, self.alias)
        return self.problems[key]

    def facts(self, cands: list[int], pairs: str) -> str:
        """The facts of rules/SCHEMA.md "Kernel fusion" for the candidate launches;
        `pairs`: "before" (refusals of X then K), "after" (K then X) or "all"."""
        prog = self.prog
        launches = [n for n in prog.nodes if isinstance(prog.nodes[n].stmt, h.Launch)]
        lines = [f"node({n})." for n in prog.nodes]
        lines += [f"start({prog.start}).", f"end({prog.end})."]
        lines += [f"succ({n},{m})." for n in prog.nodes for m in prog.succ[n]]
        lines += [f"launch({n},{n})." for n in launches]
        for k in cands:
            lines.append(f"cand({k}).")
            lines += [f"transp({k},{n})." for n in prog.nodes if not kills(prog, k, n, self.alias)]
            for x in launches:
                if x == k:
                    continue
                for a, b in ((x, k), (k, x)):
                    wanted = pairs == "all" or (pairs == "before") == (b == k)
                    if wanted and self.problem(a, b) is not None:
                        lines.append(f"refused({a},{b}).")
        return "\n".join(lines) + "\n"

    def refuse(self, a: int, b: int) -> None:
        """Remember a refused fusion for the report."""
        sa, sb = self.prog.nodes[a].stmt, self.prog.nodes[b].stmt
        reason = self.problem(a, b)
        la, lb = self.prog.nodes[a].loc.line, self.prog.nodes[b].loc.line
        self.refusals.setdefault((sa.kernel, sb.kernel, reason),
                                 Refusal(sa.kernel, la, sb.kernel, lb, reason))

    def fused_kernel(self, a: int, b: int, at: int, gone: int, step: Step) -> h.Launch:
        """Fuse the launch at a with the launch at b into one at node `at` (the launch at
        `gone` is removed); register the kernel; record the savings in `step`."""
        prog = self.prog
        sa, sb = prog.nodes[a].stmt, prog.nodes[b].stmt
        base = f"Fused_{sa.kernel}_{sb.kernel}"
        name, k = base, 2
        while name in prog.kernels:
            name, k = f"{base}_{k}", k + 1
        dead = dead_buffers(prog, at, gone, self.alias)
        result = fuse(prog.kernels[sa.kernel], sa, prog.kernels[sb.kernel], sb, name,
                      self.alias, dead)
        prog.kernels[name] = result.ref
        step.forwarded += result.forwarded
        step.removed += result.removed
        return result.launch


def solve_rules(rule: str, facts: str) -> dict[str, list[tuple]]:
    """The shown atoms of a shipped KFCM rule file on the facts."""
    try:
        return dict(solve([shipped_rule(rule)], facts).atoms)
    except RuleError as error:
        raise PassError(f"kernel fusion rules failed: {error}") from error


def _sets(atoms: dict[str, list[tuple]]) -> dict[str, set]:
    """Node sets of the unary-per-launch relations; tuples for the others."""
    out: dict[str, set] = {}
    for name, tuples in atoms.items():
        out[name] = {t[1] if len(t) == 2 else t for t in tuples}
    return out


# -- rewriting --------------------------------------------------------------------------


def _insert_after(prog: h.HostProgram, n: int, stmt: h.Stmt, loc: ir.Loc) -> int:
    """A node with `stmt` (from `loc`) at the exit of n (before n when n branches)."""
    if len(prog.succ[n]) > 1:
        return _insert_before(prog, n, stmt, loc)
    m = prog.add(stmt, loc, prog.succ[n])
    prog.succ[n] = [m]
    return m


def _insert_before(prog: h.HostProgram, n: int, stmt: h.Stmt, loc: ir.Loc) -> int:
    """A node with `stmt` (from `loc`) at the entry of n."""
    m = prog.add(stmt, loc, [n])
    for p in list(prog.nodes):
        if p != m:
            prog.succ[p] = [m if x == n else x for x in prog.succ[p]]
    if prog.start == n:
        prog.start = m
    return m


def _describe(prog: h.HostProgram, n: int) -> str:
    """A node for reports: its number, line and statement (an empty node on a split edge
    by the edge)."""
    node = prog.nodes[n]
    preds = prog.preds()[n]
    if isinstance(node.stmt, h.Nop) and len(preds) == 1 and len(prog.succ[n]) == 1:
        a, b = prog.nodes[preds[0]], prog.nodes[prog.succ[n][0]]
        into = "the end" if prog.succ[n][0] == prog.end else f"line {b.loc.line}"
        return f"n{n} (on the edge from line {a.loc.line} ({a.stmt}) to {into})"
    return f"n{n} (line {node.loc.line}: {node.stmt})"


def _predicates(prog: h.HostProgram, sets: dict[str, set], names: tuple[str, ...]) -> dict:
    """The node sets of some predicates, as `n<id>` names."""
    return {name: [f"n{n}" for n in sorted(x for x in sets.get(name, set())
                                            if isinstance(x, int))] for name in names}


BKF_SHOWN = ("ndsafe", "xdsafe", "ndnearliest", "xdnearliest", "ndelayed", "xdelayed",
             "nlatest", "xlatest")
FKF_SHOWN = ("nsinkable", "xsinkable", "ninsert", "xinsert")


def _fuse_at(session: _Session, step: Step, n: int, order: tuple[int, int], k: int) -> None:
    """Replace the launch at node n by the fusion of the launches at `order` (first runs
    first), recording it in step."""
    node = session.prog.nodes[n]
    step.fused_with, step.fused_line = node.stmt.kernel, node.loc.line
    fused = session.fused_kernel(order[0], order[1], n, k, step)
    step.fused_name = fused.kernel
    node.stmt = fused


def bkf(session: _Session, k: int) -> Step | None:
    """Hoist and fuse the launch at k by BKF; None when no fusion point is latest."""
    prog = session.prog
    sets = _sets(solve_rules("bkf.lp", session.facts([k], "before")))
    for _, _, k2 in sets.get("xfusible_refused", set()):
        session.refuse(k2, k)
    latest = sets.get("xlatest", set())
    points = {n: k2 for n, _, k2 in sets.get("xfusible", set()) if n in latest}
    if not points:
        return None
    launch = prog.nodes[k].stmt
    step = Step("bkf", launch.kernel, prog.nodes[k].loc.line,
                predicates=_predicates(prog, sets, BKF_SHOWN))
    step.predicates["xfusible"] = [f"n{n}" for n in sorted(points)]
    for n in sorted(latest):
        if n in points:
            _fuse_at(session, step, n, (n, k), k)
        else:
            m = _insert_after(prog, n, launch, prog.nodes[k].loc)
            step.compensation.append(f"exit of {_describe(prog, n)} as n{m}")
    if k not in sets.get("nlatest", set()):
        prog.nodes[k].stmt = h.Nop()
    return step


def fkf(session: _Session, k: int) -> Step | None:
    """Sink (and fuse) the launch at k by FKF; None when it would stay where it is."""
    prog = session.prog
    sets = _sets(solve_rules("fkf.lp", session.facts([k], "after")))
    for _, _, k2 in sets.get("nfusable_refused", set()):
        session.refuse(k, k2)
    ninsert, xinsert = sets.get("ninsert", set()), sets.get("xinsert", set())
    points = {n: k2 for n, _, k2 in sets.get("nfusable", set()) if n in ninsert}
    preds = prog.preds()
    after = prog.succ[k][0] if len(prog.succ[k]) == 1 else None
    stays = (xinsert == {k} and not ninsert) or (
        not xinsert and ninsert == {after} and preds.get(after) == [k])
    if stays and not points:
        return None
    launch = prog.nodes[k].stmt
    step = Step("fkf", launch.kernel, prog.nodes[k].loc.line,
                predicates=_predicates(prog, sets, FKF_SHOWN))
    step.predicates["nfusable"] = [f"n{n}" for n in sorted(points)]
    for n in sorted(ninsert):
        if n in points:
            _fuse_at(session, step, n, (k, n), k)
        else:
            m = _insert_before(prog, n, launch, prog.nodes[k].loc)
            step.compensation.append(f"entry of {_describe(prog, n)} as n{m}")
    for n in sorted(xinsert):
        if n == k:
            continue
        m = _insert_after(prog, n, launch, prog.nodes[k].loc)
        step.compensation.append(f"exit of {_describe(prog, n)} as n{m}")
    if k not in xinsert:
        prog.nodes[k].stmt = h.Nop()
    return step


def predicates(prog: h.HostProgram, k: int, phase: str = "bkf") -> dict[str, set]:
    """The BKF (or FKF) predicate values for the launch at node k on the program with its
    critical edges split (which this splits in place): unary ones as node sets,
    xfusible/nfusable as (node, other launch) pairs."""
    split_critical_edges(prog)
    session = _Session(prog)
    rule, pairs = ("bkf.lp", "before") if phase == "bkf" else ("fkf.lp", "after")
    sets = _sets(solve_rules(rule, session.facts([k], pairs)))
    for name in ("xfusible", "nfusable", "xfusible_refused", "nfusable_refused"):
        if name in sets:
            sets[name] = {(n, k2) for n, _, k2 in sets[name]}
    return sets


def blocked(session: _Session, k: int) -> list[str]:
    """Where hoisting (XDnEarliest) and sinking (NInsert) of an unfused launch stop, and
    what kills it there."""
    prog = session.prog
    split_critical_edges(prog)
    up = _sets(solve_rules("bkf.lp", session.facts([k], "before")))
    down = _sets(solve_rules("fkf.lp", session.facts([k], "after")))
    lines = []
    line = lambda n: prog.nodes[n].loc.line  # noqa: E731
    for n in sorted(up.get("xdnearliest", set()) | down.get("ninsert", set()), key=line):
        verb = "hoisting" if n in up.get("xdnearliest", set()) else "sinking"
        where = "the end" if n == prog.end else f"line {line(n)} ({prog.nodes[n].stmt})"
        lines.append(f"{verb} stops at {where}: {kill_reason(prog, k, n, session.alias)}")
    for n in sorted(up.get("ndnearliest", set()) - {prog.start}, key=line):
        lines.append(f"hoisting stops above line {line(n)}: some path into it does not "
                     "launch the kernel")
    for n in sorted(down.get("xinsert", set()), key=line):
        lines.append(f"sinking stops below line {line(n)}: a path that did not launch the "
                     "kernel joins after it")
    return lines


def _launch_at(prog: h.HostProgram, n: int) -> bool:
    return n in prog.nodes and isinstance(prog.nodes[n].stmt, h.Launch)


def kfcm(prog: h.HostProgram) -> FusionResult:
    """KFCM: BKF then FKF per launch, in reverse postorder, to a fixpoint (in place)."""
    session = _Session(prog)
    changed = True
    while changed and len(session.steps) < MAX_STEPS:
        changed = False
        split_critical_edges(prog)
        for k in prog.launches():
            if not _launch_at(prog, k):
                continue
            split_critical_edges(prog)
            step = bkf(session, k)
            if step is None:
                split_critical_edges(prog)
                step = fkf(session, k)
            if step is not None:
                session.steps.append(step)
                changed = True
    return _finish(session)


def kf_trad(prog: h.HostProgram) -> FusionResult:
    """KF_trad: fuse originally consecutive launches, pair by pair (in place)."""
    session = _Session(prog)
    split_critical_edges(prog)
    while len(session.steps) < MAX_STEPS:
        launches = prog.launches()
        atoms = solve_rules("kf_trad.lp", session.facts(launches, "all"))
        for a, b in atoms.get("trad_refused", []):
            session.refuse(a, b)
        order = {n: i for i, n in enumerate(launches)}
        pairs = sorted(atoms.get("trad_fusible", set()), key=lambda p: order[p[0]])
        if not pairs:
            break
        a, b = pairs[0]
        step = Step("kf-trad", prog.nodes[b].stmt.kernel, prog.nodes[b].loc.line,
                    fused_with=prog.nodes[a].stmt.kernel, fused_line=prog.nodes[a].loc.line)
        fused = session.fused_kernel(a, b, a, b, step)
        step.fused_name = fused.kernel
        prog.nodes[a].stmt = fused
        prog.nodes[b].stmt = h.Nop()
        session.steps.append(step)
    return _finish(session)


def _finish(session: _Session) -> FusionResult:
    """Drop the empty nodes left behind; collect the result."""
    prog = session.prog
    for n in list(prog.nodes):
        if (isinstance(prog.nodes[n].stmt, h.Nop) and n not in (prog.start, prog.end)
                and len(prog.succ[n]) == 1 and prog.succ[n][0] != n):
            target = prog.succ[n][0]
            for p in prog.nodes:
                prog.succ[p] = [target if x == n else x for x in prog.succ[p]]
            del prog.nodes[n], prog.succ[n]
    used = {prog.nodes[n].stmt.kernel for n in prog.launches()}
    fused = [name for name, ref in prog.kernels.items() if ref.fused and name in used]
    unfused = [(prog.nodes[k].stmt.kernel, prog.nodes[k].loc.line, blocked(session, k))
               for k in prog.launches() if prog.nodes[k].stmt.kernel not in fused]
    return FusionResult(prog, session.steps, list(session.refusals.values()), fused, unfused)


PASSES = {"kfcm": kfcm, "kf-trad": kf_trad}
