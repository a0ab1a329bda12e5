"""Seeded random μ-SIMD programs for property tests and benchmarks.

`random_program(seed, ...)` returns the text of one kernel `kernel NAME(n, k)`. Programs
always terminate for any parameter values and any number of threads: every loop counts a
counter up by one towards a bound clamped to at most 6, and there are no other backward
jumps. Divisors are non-zero constants or `x | 1`; shift amounts are in 0..7; memory
addresses stay in `shared[0..15]` and `local[0..7]`.

Structured mode (the default) is well synchronised for the seed semantics: every
conditional branch has exactly one `sync`, at its immediate post-dominator:

    if/else:  bz c, ELSE_i / then / jump JOIN_i / ELSE_i: else / JOIN_i: sync
    if:       bz c, JOIN_i / then / JOIN_i: sync
    while:    HEAD_i: p = i < b / bz p, EXIT_i / body / i = i + 1 / jump HEAD_i / EXIT_i: sync

(`bnz` variants too). Unstructured mode emits no `sync` at all (it is meant for the
interpreter's ipdom mode) and adds joins that are not post-dominators: a jump from the
then-part into the tail of the else-part, and early exits out of loops. `barrier` is only
ever emitted at the top nesting level.

Cycles mode (`cycles=True`, unstructured as well) adds cycles that are not natural loops,
the shapes of gpudiv issue 19 (temporal divergence where lanes of different iterations
meet):

          i = 0 / x = .. / r = ..        (the cycle's counter and its live values)
          e = SRC % m / c = e == 1 / bnz c, CY_1 / ...   (entry choice: n, k, tid, ...)
    CY_0: x = i * 3 + .. / body / jump MID      (one to three entry blocks: several
    CY_1: x = i * 5 + .. / body / jump MID       headers when more than one is reached)
    MID:  r = x + i / body / i = i + 1 / g = i < b / q = SELECTOR % m
          c = q == 0 / c = c & g / bnz c, CY_1   (a switch lowered as a chain of branches:
    SW_1: y = r * 7 / c = q == 1 / bnz c, X_1     a case goes back to an entry or MID,
          ...                                     only while g holds, or out through
    X_0:  y = r + .. / jump OUT                   one of several exits)
    X_1:  y = r - .. / body
    OUT:  y = r + i

Bodies are nested statements (loops and cycles among them: nested cycles inside
irreducible ones); early exits from them may leave for the cycle's exit blocks. Every
backward branch is a loop latch or a switch case gated by `g = i < b` with `i` counted up
once per trip through MID (which every path round the cycle crosses) and `b` <= 6, so
programs still terminate for any inputs.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

BINARY = ("+", "-", "*", "/", "%", "<", "<=", ">", ">=", "==", "!=",
          "&", "|", "^", "<<", ">>", "min", "max")
UNARY = ("-", "!", "~")
SPECIALS = ("tid", "laneid", "warpid", "ntid")
PARAMS = ("n", "k")
POOL = tuple(f"v{i}" for i in range(8))
DIVISORS = (2, 3, 4, 5, 7, -2, -3, 9)
UNIFORM_SOURCES = ("n", "k", "warpid", "ntid")
DIVERGENT_SOURCES = ("tid", "laneid")
MAX_TRIPS = 6
ONE_PATH = 16


@dataclass
class _Cycle:
    """The names of one generated cycle (see the module doc's picture)."""

    ident: int
    depth: int
    bound: str
    carried: str
    live: str
    before: set[str]
    entries: list[str]
    exits: list[str]

    @property
    def counter(self) -> str:
        """Counted up once per trip through MID."""
        return f"i{self.depth}"

    @property
    def guard(self) -> str:
        """`counter < bound`: the cases back into the cycle are taken only while it holds."""
        return f"g{self.depth}"

    @property
    def select(self) -> str:
        """The value the switch at the bottom chooses on."""
        return f"q{self.depth}"

    @property
    def mid(self) -> str:
        """The merge block every trip goes through."""
        return f"MID_{self.ident}"

    @property
    def out(self) -> str:
        """Where the exit blocks meet."""
        return f"OUT_{self.ident}"


class _Generator:
    """Emits the lines of one kernel; all choices come from one seeded `random.Random`."""

    def __init__(self, seed: int, statements: int, max_depth: int, unstructured: bool,
                 barriers: bool, cycles: bool = False) -> None:
        self.rng = random.Random(seed)
        self.budget = max(statements, 1)
        self.max_depth = max(max_depth, 0)
        self.unstructured = unstructured or cycles
        self.cycles = cycles
        self.barriers = barriers
        self.lines: list[str] = []
        self.ids = 0
        self.defined: set[str] = set()
        self.maybe: set[str] = set()
        self.counters: list[str] = []
        self.exits: list[str] = []
        self.written: set[str] = set()

    # -- small helpers -------------------------------------------------------------------

    def emit(self, text: str, label: str | None = None) -> None:
        """Append one line, optionally labelled."""
        self.lines.append(f"{label}: {text}".rstrip() if label else f"      {text}")

    def fresh_id(self) -> int:
        """A new number for labels and loop variables."""
        self.ids += 1
        return self.ids

    def pick(self, items) -> str:
        """A deterministic choice from any collection."""
        return self.rng.choice(sorted(items))

    def const(self) -> str:
        """A small integer literal, possibly negative."""
        return str(self.rng.randint(-8, 20))

    def operand(self) -> str:
        """An operand: a variable that is (usually) defined, a special, a param or a literal."""
        r = self.rng.random()
        if r < 0.15:
            return self.const()
        if r < 0.32:
            return self.pick(SPECIALS + PARAMS)
        if r < 0.328 and self.maybe:
            return self.pick(self.maybe)
        readable = self.defined | set(self.counters)
        return self.pick(readable) if readable else self.pick(SPECIALS + PARAMS)

    def target(self, depth: int) -> str:
        """A variable to write: a pool variable, or (in branches) a fresh one-path name."""
        if depth > 0 and self.rng.random() < 0.1:
            return f"w{self.fresh_id() % ONE_PATH}"
        return self.pick(POOL)

    def define(self, name: str) -> None:
        """Record a definition on the current path."""
        self.defined.add(name)
        self.maybe.discard(name)
        self.written.add(name)

    # -- simple statements ---------------------------------------------------------------

    def arith(self, depth: int) -> None:
        """`v = x OP y` with a safe divisor or shift amount."""
        op = self.pick(BINARY)
        left, right = self.operand(), self.operand()
        if op in ("/", "%"):
            if self.rng.random() < 0.5:
                right = str(self.rng.choice(DIVISORS))
            else:
                self.emit(f"t = {right} | 1")
                right = "t"
        elif op in ("<<", ">>"):
            if self.rng.random() < 0.5:
                right = str(self.rng.randint(0, 5))
            else:
                self.emit(f"t = {right} & 7")
                right = "t"
        dest = self.target(depth)
        self.emit(f"{dest} = {left} {op} {right}")
        self.define(dest)

    def unary(self, depth: int) -> None:
        """`v = OP x` with OP one of - ! ~."""
        dest = self.target(depth)
        self.emit(f"{dest} = {self.pick(UNARY)} {self.operand()}")
        self.define(dest)

    def copy(self, depth: int) -> None:
        """`v = 5` or `v = x`."""
        dest = self.target(depth)
        value = self.const() if self.rng.random() < 0.6 else self.operand()
        self.emit(f"{dest} = {value}")
        self.define(dest)

    def address(self, space: str) -> str:
        """An address in range: a literal or `s = x & mask`."""
        mask = 15 if space == "shared" else 7
        if self.rng.random() < 0.3:
            return str(self.rng.randint(0, mask))
        self.emit(f"s = {self.operand()} & {mask}")
        return "s"

    def memory(self, depth: int) -> None:
        """A load or store on shared or local memory."""
        space = self.rng.choice(("shared", "local"))
        addr = self.address(space)
        if self.rng.random() < 0.5:
            self.emit(f"{space}[{addr}] = {self.operand()}")
            return
        dest = self.target(depth)
        self.emit(f"{dest} = {space}[{addr}]")
        self.define(dest)

    def atomic(self, depth: int) -> None:
        """`atominc` or `atomadd` on a shared address."""
        addr = self.address("shared")
        dest = self.target(depth)
        if self.rng.random() < 0.5:
            self.emit(f"{dest} = atominc shared[{addr}]")
        else:
            self.emit(f"{dest} = atomadd shared[{addr}], {self.operand()}")
        self.define(dest)

    # -- control flow --------------------------------------------------------------------

    def condition(self, divergent: bool) -> str:
        """A branch condition variable: an existing variable or a fresh comparison."""
        if self.rng.random() < 0.2 and self.defined:
            return self.pick(self.defined)
        source = self.pick(DIVERGENT_SOURCES if divergent else UNIFORM_SOURCES)
        op = self.rng.choice(("<", "<=", ">", ">=", "==", "!=", "&", "%", "^", "-"))
        right = str(self.rng.randint(1, 4)) if op == "%" else self.operand() \
            if self.rng.random() < 0.3 else self.const()
        if op == "%" and right == "0":
            right = "3"
        self.emit(f"c = {source} {op} {right}")
        return "c"

    def join_label(self, label: str) -> None:
        """The join of a conditional branch: `sync` in structured mode, nothing otherwise."""
        self.emit("" if self.unstructured else "sync", label)

    def branch_op(self) -> str:
        """`bz` or `bnz`."""
        return "bz" if self.rng.random() < 0.7 else "bnz"

    def nested(self, depth: int, at_least: int = 0) -> set[str]:
        """A nested block of statements; returns the variables it defined on all paths."""
        saved = set(self.defined)
        count = max(at_least, self.rng.randint(0, 4))
        for index in range(count):
            if self.budget <= 0 and index >= at_least:
                break
            self.statement(depth)
        defined, self.defined = self.defined, saved
        return defined

    def merge(self, before: set[str], paths: list[set[str]]) -> None:
        """After a join: defined on all paths stays defined, on some paths is `maybe`."""
        common = set.intersection(*paths) if paths else set()
        some = set.union(*paths) if paths else set()
        self.defined = before | common
        self.maybe |= some - self.defined

    def if_else(self, depth: int) -> None:
        """if/else or if-without-else, uniform or divergent condition."""
        i = self.fresh_id()
        cond = self.condition(self.rng.random() < 0.5)
        before = set(self.defined)
        with_else = self.rng.random() < 0.5
        target = f"ELSE_{i}" if with_else else f"JOIN_{i}"
        self.emit(f"{self.branch_op()} {cond}, {target}")
        paths = [self.nested(depth + 1, at_least=1)]
        if with_else:
            self.emit(f"jump JOIN_{i}")
            self.emit("", f"ELSE_{i}")
            paths.append(self.nested(depth + 1))
        else:
            paths.append(before)
        self.join_label(f"JOIN_{i}")
        self.merge(before, paths)

    def unstructured_if(self, depth: int) -> None:
        """A then-part that jumps into the tail of the else-part (a join that is not ipdom)."""
        i = self.fresh_id()
        cond = self.condition(self.rng.random() < 0.5)
        before = set(self.defined)
        self.emit(f"{self.branch_op()} {cond}, ELSE_{i}")
        then = self.nested(depth + 1, at_least=1)
        self.defined = before | then
        inner = self.condition(self.rng.random() < 0.5)
        self.emit(f"{self.branch_op()} {inner}, TAIL_{i}")
        then2 = self.nested(depth + 1)
        self.defined = before
        self.emit(f"jump JOIN_{i}")
        self.emit("", f"ELSE_{i}")
        else1 = self.nested(depth + 1)
        self.emit("", f"TAIL_{i}")
        self.defined = before
        tail = self.nested(depth + 1)
        self.emit("", f"JOIN_{i}")
        self.merge(before, [then | then2, (else1 & then) | tail])

    def bound(self, depth: int, divergent: bool) -> str:
        """`b<depth>` <= 6 (negative: no iteration), from uniform or divergent sources."""
        name = f"b{depth}"
        if divergent:
            source = self.pick(DIVERGENT_SOURCES)
            if self.rng.random() < 0.5:
                self.emit(f"{name} = {source} + {self.pick(UNIFORM_SOURCES)}")
                source = name
        elif self.counters and self.rng.random() < 0.2:
            source = self.counters[-1]
        else:
            source = self.pick(UNIFORM_SOURCES) if self.rng.random() < 0.8 else self.const()
        modulus = self.rng.randint(2, MAX_TRIPS + 1)
        self.emit(f"{name} = {source} % {modulus}")
        clamp = self.rng.choice(("&", "max", "min", "*", "none"))
        if clamp == "&":
            self.emit(f"{name} = {name} & 3")
        elif clamp == "max":
            self.emit(f"{name} = {name} max 0")
        elif clamp == "min":
            self.emit(f"{name} = {name} min {MAX_TRIPS}")
        elif clamp == "*" and modulus <= 3:
            self.emit(f"{name} = {name} * {name}")
        return name

    def loop(self, depth: int) -> None:
        """A counted loop with a uniform or divergent exit; values are used after it."""
        i = self.fresh_id()
        counter, cond = f"i{depth}", f"p{depth}"
        bound = self.bound(depth, self.rng.random() < 0.5)
        self.emit(f"{counter} = 0")
        before = set(self.defined)
        if self.rng.random() < 0.5:
            self.emit(f"{cond} = {counter} < {bound}", f"HEAD_{i}")
            self.emit(f"bz {cond}, EXIT_{i}")
        else:
            self.emit(f"{cond} = {counter} >= {bound}", f"HEAD_{i}")
            self.emit(f"bnz {cond}, EXIT_{i}")
        self.counters.append(counter)
        self.exits.append(f"EXIT_{i}")
        written, self.written = self.written, set()
        body = self.nested(depth + 1, at_least=1)
        self.emit(f"{counter} = {counter} + 1")
        self.emit(f"jump HEAD_{i}")
        self.join_label(f"EXIT_{i}")
        self.counters.pop()
        self.exits.pop()
        self.defined = before | {counter, bound}
        self.maybe |= body - self.defined
        inside, self.written = self.written, written | self.written
        self.use_after_loop(depth, counter, inside)

    def use_after_loop(self, depth: int, counter: str, inside: set[str]) -> None:
        """Read the counter or a value written in the loop after the loop (η)."""
        if self.rng.random() < 0.6:
            candidates = sorted((inside & (self.defined | self.maybe)) | {counter})
            value = self.rng.choice(candidates)
            dest = self.target(depth)
            self.emit(f"{dest} = {value} + {self.operand()}")
            self.define(dest)

    def early_exit(self, depth: int) -> None:
        """Unstructured only: leave an enclosing loop from inside its body."""
        cond = self.condition(self.rng.random() < 0.5)
        self.emit(f"{self.branch_op()} {cond}, {self.rng.choice(self.exits)}")

    # -- cycles (cycles mode) ------------------------------------------------------------

    def selector(self, name: str, cases: int, divergent: bool, extra: str | None) -> str:
        """`name = SOURCE % cases` from uniform or thread-dependent sources (or `& 3`)."""
        sources = DIVERGENT_SOURCES if divergent else UNIFORM_SOURCES
        source = self.pick(sources) if self.rng.random() < 0.8 else self.operand()
        if extra is not None and self.rng.random() < 0.5:
            self.emit(f"{name} = {source} + {extra}")
            source = name
        if cases == 4 and self.rng.random() < 0.3:
            self.emit(f"{name} = {source} & 3")
        else:
            self.emit(f"{name} = {source} % {cases}")
        return name

    def choose_entry(self, targets: list[str]) -> None:
        """Branch to one of `targets` (or fall through to the first entry) on a selector."""
        if not targets:
            return
        select = self.selector("e", len(targets) + 1, self.rng.random() < 0.5, None)
        for index, label in enumerate(targets, 1):
            self.emit(f"c = {select} == {index}")
            self.emit(f"bnz c, {label}")

    def switch(self, cases: list[str], inside: set[str], shape: _Cycle) -> None:
        """The switch as a chain of branches; cases back into the cycle need the guard."""
        for index, label in enumerate(cases):
            if index > 0:
                self.emit("", f"SW{shape.ident}_{index}")
                self.read_live(shape.live, shape.depth)
                if self.rng.random() < 0.3:
                    self.nested(shape.depth + 1)
            back = label in inside
            if back and self.rng.random() < 0.2:
                self.emit(f"bnz {shape.guard}, {label}")  # `default: back while g holds`
                continue
            compare = self.rng.choice(("==", "==", "==", "<=", "!="))
            self.emit(f"c = {shape.select} {compare} {index}")
            if back:
                self.emit(f"c = c & {shape.guard}")
            self.emit(f"bnz c, {label}")

    def read_live(self, live: str, depth: int) -> None:
        """Read a value of the cycle where lanes of different trips may meet."""
        if self.rng.random() < 0.75:
            dest = self.target(depth)
            op = self.rng.choice(("+", "-", "*", "^", "max"))
            right = str(self.rng.randint(2, 9)) if self.rng.random() < 0.5 else self.operand()
            self.emit(f"{dest} = {live} {op} {right}")
            self.define(dest)

    def cycle(self, depth: int) -> None:
        """A cycle: entry choice, entry blocks, MID with its switch, exits (module doc)."""
        ident = self.fresh_id()
        bound = self.bound(depth, self.rng.random() < 0.5)
        self.emit(f"i{depth} = 0")
        carried, live = self.rng.sample(POOL, 2)
        for name in (carried, live):
            self.emit(f"{name} = {self.operand()}")
            self.define(name)
        shape = _Cycle(
            ident, depth, bound, carried, live, set(self.defined),
            [f"CY{ident}_{j}" for j in range(self.rng.choice((1, 2, 2, 2, 3)))],
            [f"X{ident}_{j}" for j in range(self.rng.choice((1, 2, 2, 3)))])
        into = shape.entries[1:] + ([shape.mid] if self.rng.random() < 0.25 else [])
        self.choose_entry(into)
        written, self.written = self.written, set()
        self.counters.append(shape.counter)
        self.exits.extend(shape.exits)
        paths = self.cycle_entries(shape)
        self.merge(shape.before, paths + ([shape.before] if shape.mid in into else []))
        self.cycle_bottom(shape)
        self.counters.pop()
        del self.exits[-len(shape.exits):]
        self.cycle_exits(shape)
        inside, self.written = self.written, written | self.written
        self.maybe |= inside - self.defined
        self.read_live(self.rng.choice((live, carried, shape.counter)), depth)

    def cycle_entries(self, shape: _Cycle) -> list[set[str]]:
        """The entry blocks, each with its own value of `carried`, all going on to MID."""
        paths = []
        for index, label in enumerate(shape.entries):
            self.emit("", label)
            self.defined = set(shape.before)
            self.emit(f"{shape.carried} = {shape.counter} * {self.rng.randint(1, 7)}")
            if self.rng.random() < 0.5:
                self.emit(f"{shape.carried} = {shape.carried} + {self.operand()}")
            paths.append(self.nested(shape.depth + 1))
            if index < len(shape.entries) - 1 or self.rng.random() < 0.2:
                self.emit(f"jump {shape.mid}")
        return paths

    def cycle_bottom(self, shape: _Cycle) -> None:
        """MID: `live` from `carried`, the counter and guard, the switch at the bottom."""
        self.emit("", shape.mid)
        operator = self.rng.choice(("+", "-", "*", "^"))
        self.emit(f"{shape.live} = {shape.carried} {operator} {shape.counter}")
        if self.rng.random() < 0.5:
            self.nested(shape.depth + 1)
        self.emit(f"{shape.counter} = {shape.counter} + 1")
        self.emit(f"{shape.guard} = {shape.counter} < {shape.bound}")
        self.selector(shape.select, self.rng.randint(2, 4), self.rng.random() < 0.6,
                      shape.counter)
        inside = [*shape.entries, shape.mid]
        cases = [self.rng.choice(inside)]
        cases += [self.rng.choice(inside + shape.exits) for _ in range(self.rng.randint(0, 3))]
        cases += [label for label in shape.exits[1:] if label not in cases]
        self.rng.shuffle(cases)
        self.switch(cases, set(inside), shape)

    def cycle_exits(self, shape: _Cycle) -> None:
        """The exit blocks (the first is the switch's default), each reading `live`."""
        for index, label in enumerate(shape.exits):
            self.emit("", label)
            self.defined = shape.before | {shape.counter, shape.bound}
            self.read_live(shape.live, shape.depth)
            if self.rng.random() < 0.3:
                self.nested(shape.depth + 1)
            if index < len(shape.exits) - 1:
                self.emit(f"jump {shape.out}")
        self.emit("", shape.out)
        self.defined = shape.before | {shape.counter, shape.bound}

    # -- dispatch ------------------------------------------------------------------------

    def statement(self, depth: int) -> None:
        """One statement, simple or compound, chosen by weight."""
        self.budget -= 1
        kinds = [(self.arith, 30), (self.unary, 6), (self.copy, 8), (self.memory, 10),
                 (self.atomic, 4)]
        if depth < self.max_depth:
            kinds += [(self.if_else, 12), (self.loop, 8)]
            if self.unstructured:
                kinds.append((self.unstructured_if, 6))
            if self.cycles:
                kinds.append((self.cycle, 14))
        if self.unstructured and self.exits:
            kinds.append((self.early_exit, 3))
        if self.barriers and depth == 0:
            kinds.append((self.barrier, 3))
        actions, weights = zip(*kinds, strict=True)
        self.rng.choices(actions, weights)[0](depth)

    def barrier(self, depth: int) -> None:
        """A block-wide barrier (top level only)."""
        self.emit("barrier")

    def prologue(self) -> None:
        """Define the first few pool variables so most reads see a definition."""
        for name in POOL[:4]:
            self.emit(f"{name} = {self.operand()}")
            self.define(name)

    def program(self, name: str) -> str:
        """The whole kernel text."""
        self.lines.append(f"kernel {name}(n, k)")
        self.prologue()
        while self.budget > 0:
            self.statement(0)
        self.emit("stop")
        return "\n".join(self.lines) + "\n"


def random_program(seed: int, statements: int = 20, *, max_depth: int = 3,
                   unstructured: bool = False, barriers: bool = False, cycles: bool = False,
                   name: str = "rand") -> str:
    """The text of one random terminating μ-SIMD kernel `NAME(n, k)` (see module doc)."""
    return _Generator(seed, statements, max_depth, unstructured, barriers,
                      cycles).program(name)
