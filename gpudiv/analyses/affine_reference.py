"""Reference solver of the affine equations: a plain worklist over the lattice (test oracle).

The same equations as rules/affine.lp (Sampaio 2013 §3.5, Fig 3.8 and Table 3.6, with the
completions documented there), solved the way the thesis describes (§3.1): every
coefficient starts at ⊤, a definition is recomputed whenever something it reads changes,
until nothing changes. Because every transfer function is monotone and the lattice has
finite height, the result is the maximal fixed point whatever the order of the worklist
(`order_seed` shuffles it). It reads the SSA form directly, not the facts, and computes
join points and divergent loop exits itself; it shares only the operator normalisation
(`gpudiv.ir.operators`), the rejoin points of the CFG and the invariant φs
(`gpudiv.analyses.invariants`) with the fact generator. Used by the differential tests; shipped so
that anyone can check a rule variant against it.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Mapping

from gpudiv import ir
from gpudiv.analyses.facts import THREAD_ID_NAMES, back_edges, fits
from gpudiv.analyses.invariants import invariant_values
from gpudiv.analyses.launch_shape import BlockShape, derived_values, special_values
from gpudiv.ir.cfg import EXIT, ControlFlowGraph
from gpudiv.ir.operators import integer_bits, normalise, zero_extended_bits
from gpudiv.ir.ssa import SSAForm, SSAVar


class _Top:
    """The lattice top: not computed yet."""

    def __repr__(self) -> str:
        return "⊤"


class _Bottom:
    """The lattice bottom: not known statically."""

    def __repr__(self) -> str:
        return "⊥"


TOP = _Top()
BOT = _Bottom()
LIMIT = 2**30
OPTIONS = ("sub_linear", "cmp_difference", "shl_linear", "neg_linear", "fold")
COMPARISONS = ("lt", "le", "gt", "ge", "eq", "ne", "cmp")

Coef = int | _Top | _Bottom
Value = tuple[Coef, ...]


# -- component arithmetic (Table 3.6, every operation clamped to |x| < 2^30) ------------

def clamp(x: int) -> Coef:
    """An integer, or ⊥ when it does not lie strictly inside ±2^30."""
    return x if -LIMIT < x < LIMIT else BOT


def c_add(a: Coef, b: Coef) -> Coef:
    if a is BOT or b is BOT:
        return BOT
    return clamp(a + b)


def c_sub(a: Coef, b: Coef) -> Coef:
    if a is BOT or b is BOT:
        return BOT
    return clamp(a - b)


def c_mul(a: Coef, b: Coef) -> Coef:
    if a == 0 or b == 0:
        return 0
    if a is BOT or b is BOT:
        return BOT
    return clamp(a * b)


def c_meet(a: Coef, b: Coef) -> Coef:
    if a is TOP:
        return b
    if b is TOP:
        return a
    return a if a == b and a is not BOT else BOT


def _tdiv(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return -q if (a < 0) != (b < 0) else q


def fold(op: str, args: list[int], bits: int | None = None) -> Coef:
    """The value of a foldable operator on constants (as the interpreter computes it);
    `bits`: the width of a PTX integer opcode (a 64-bit shl shifts by up to 63)."""
    if len(args) not in (1, 2):  # PTX: no operands (activemask), or three and more
        return BOT
    if len(args) == 1:
        (a,) = args
        table1 = {"neg": lambda: -a, "not": lambda: int(a == 0), "inv": lambda: ~a}
        return clamp(table1[op]()) if op in table1 else BOT
    a, b = args
    if op in ("div", "rem") and b == 0:
        return BOT
    if op == "shl":
        return clamp(a << b) if 0 <= b < shift_limit(bits) else 0
    if op == "shr":
        return a >> (b if 0 <= b <= 31 else 31)
    table2 = {
        "lt": lambda: int(a < b), "le": lambda: int(a <= b), "gt": lambda: int(a > b),
        "ge": lambda: int(a >= b), "eq": lambda: int(a == b), "ne": lambda: int(a != b),
        "div": lambda: _tdiv(a, b), "rem": lambda: a - _tdiv(a, b) * b,
        "and": lambda: a & b, "or": lambda: a | b, "xor": lambda: a ^ b,
        "min": lambda: min(a, b), "max": lambda: max(a, b), "sub": lambda: a - b,
    }
    return clamp(table2[op]()) if op in table2 else BOT


def shift_limit(bits: int | None) -> int:
    """The smallest left shift that yields 0: PTX clamps the amount at the operand width
    (64 for 64-bit opcodes, 32 for narrower ones and for μ-SIMD)."""
    return 64 if bits is not None and bits > 32 else 32


# -- values ---------------------------------------------------------------------------

class Domain:
    """Polynomials of one degree: coefficient i multiplies tid^i."""

    def __init__(self, degree: int) -> None:
        self.degree = degree
        self.size = degree + 1

    def top(self) -> Value:
        return (TOP,) * self.size

    def bottom(self) -> Value:
        return (BOT,) * self.size

    def const(self, k: Coef) -> Value:
        return (k,) + (0,) * self.degree

    def uniform(self) -> Value:
        return self.const(BOT)

    def tid(self) -> Value:
        return (0, 1) + (0,) * (self.degree - 1)

    @staticmethod
    def is_uniform(v: Value) -> bool:
        return all(c == 0 for c in v[1:])

    @staticmethod
    def may_diverge(v: Value) -> bool:
        """A tid coefficient that is ⊥ or a non-zero integer (⊤ is still optimistic)."""
        return any(c is BOT or (isinstance(c, int) and c != 0) for c in v[1:])

    def add(self, a: Value, b: Value) -> Value:
        return tuple(c_add(x, y) for x, y in zip(a, b, strict=True))

    def sub(self, a: Value, b: Value) -> Value:
        return tuple(c_sub(x, y) for x, y in zip(a, b, strict=True))

    def neg(self, a: Value) -> Value:
        return tuple(BOT if x is BOT else -x for x in a)

    def mul(self, a: Value, b: Value) -> Value:
        """Polynomial product; ⊥ everywhere if a coefficient above the degree may be ≠ 0."""
        coefficients: list[Coef] = []
        for k in range(2 * self.degree + 1):
            low, high = max(0, k - self.degree), min(k, self.degree)
            total: Coef = c_mul(a[low], b[k - low])
            for i in range(low + 1, high + 1):
                total = c_add(total, c_mul(a[i], b[k - i]))
            coefficients.append(total)
        if any(c != 0 for c in coefficients[self.size:]):
            return self.bottom()
        return tuple(coefficients[:self.size])

    @staticmethod
    def meet(a: Value, b: Value) -> Value:
        return tuple(c_meet(x, y) for x, y in zip(a, b, strict=True))


# -- control: join points and divergent loop exits (as rules/cfg.lp derives them) -------

def join_points(cfg: ControlFlowGraph, branch_blocks: list[str]) -> dict[str, set[str]]:
    """For each branch block B, the blocks J entered over two different edges from two
    different successors of B before the paths reach sync_ipdom(B)."""
    joins: dict[str, set[str]] = {}
    for b in branch_blocks:
        stop = cfg.sync_ipdom.get(b)
        entered: dict[str, set[tuple[str, str]]] = {}
        for s in cfg.graph.successors(b):
            entered.setdefault(s, set()).add((s, b))
            seen, work = {s}, [s]
            while work:
                x = work.pop()
                if x == stop or x == EXIT:
                    continue
                for y in cfg.graph.successors(x):
                    entered.setdefault(y, set()).add((s, x))
                    if y not in seen:
                        seen.add(y)
                        work.append(y)
        joins[b] = {j for j, pairs in entered.items() if j != EXIT and any(
            s1 != s2 and q1 != q2 for s1, q1 in pairs for s2, q2 in pairs)}
    return joins


# -- the solver -----------------------------------------------------------------------

class AffineReference:
    """Worklist solver of the affine equations for one kernel."""

    def __init__(self, ssa: SSAForm, degree: int = 1,
                 options: Mapping[str, bool] | None = None,
                 shape: BlockShape | None = None) -> None:
        options = options or {}
        unknown = set(options) - set(OPTIONS)
        if unknown:
            raise ValueError(f"unknown option {sorted(unknown)[0]}")
        self.on = {name: options.get(name, True) for name in OPTIONS}
        self.ssa = ssa
        self.cfg = ssa.cfg
        self.dom = Domain(degree)
        self.instrs = ssa.cfg.kernel.by_id()
        self.specials = ssa.cfg.kernel.specials
        self.shaped = special_values(shape, self.specials)
        self.derived = derived_values(ssa, shape)
        self.back = set(back_edges(self.cfg))
        self.branch_cond = {br.block: br.condition for br in ssa.branches}
        self.joins = join_points(self.cfg, [br.block for br in ssa.branches])
        self.invariant = invariant_values(ssa)
        self.values: dict[str, Value] = {name: self.dom.top() for name in ssa.variables}

    # operands -------------------------------------------------------------------------
    def operand(self, instruction: int, index: int) -> Value:
        name = self.ssa.uses[instruction][index]
        if name is not None:
            return self.values[name]
        arg = self.instrs[instruction].args[index]
        if isinstance(arg, ir.Const) and fits(arg.value):
            return self.dom.const(arg.value)
        return self.dom.const(BOT)

    # gating -----------------------------------------------------------------------------
    def branch_divergent(self, block: str) -> bool:
        cond = self.branch_cond.get(block)
        return cond is not None and self.dom.may_diverge(self.values[cond])

    def loop_exit_divergent(self, loop_name: str, at: str) -> bool:
        """Lanes may leave the loop in different iterations and read a value at block `at`
        (in a doomed block, lanes that go on to abort: there ipdom decides, else sync_ipdom)."""
        blocks = self.cfg.loops[loop_name].blocks
        meet = self.cfg.ipdom if at in self.cfg.doomed else self.cfg.sync_ipdom
        return any(self.branch_divergent(b) and meet.get(b) not in blocks
                   for b in blocks if b in self.branch_cond)

    # transfer functions -------------------------------------------------------------------
    def transfer(self, var: SSAVar) -> Value:
        dom = self.dom
        kind = var.kind
        if kind == "param":
            return dom.uniform()
        if kind == "special":
            if var.name in THREAD_ID_NAMES:
                return dom.tid()
            known = self.shaped.get(var.name)
            if known is not None:
                if known.kind == "lane":  # %tid.x minus a value common to the warp
                    return dom.add(dom.tid(), dom.uniform())
                return dom.const(known.value) if known.kind == "constant" else dom.uniform()
            return dom.uniform() if self.specials.get(var.name) == "uniform" else dom.bottom()
        if kind in ("undef", "atomic", ir.OPAQUE):
            return dom.bottom()
        derived = self.derived.get(var.name)
        if derived is not None:  # the warp index, or %tid.x & (2^k − 1)
            return dom.uniform() if derived.kind == "uniform" else dom.add(dom.tid(),
                                                                           dom.uniform())
        if kind == "phi":
            value = dom.top()
            for u in var.operands:
                value = dom.meet(value, self.values[u])
            gated = any(self.branch_divergent(b) for b, joins in self.joins.items()
                        if var.block in joins)
            return dom.bottom() if gated and var.name not in self.invariant else value
        if kind == "eta":
            if (self.loop_exit_divergent(var.loop, var.block)
                    and var.name not in self.invariant):
                return dom.bottom()
            return self.values[var.operands[0]]
        if kind == "rejoin":
            gates = self.cfg.rejoins[var.block].branches
            if any(self.branch_divergent(b) for b in gates) and var.name not in self.invariant:
                return dom.bottom()
            return self.values[var.operands[0]]
        n = var.instruction
        args = [self.operand(n, i) for i in range(len(self.instrs[n].args))]
        if any(c is TOP for a in args for c in a):
            return dom.top()
        if kind == "load":
            # Every operand counts: the address, and a texture fetch's coordinates.
            if self.instrs[n].space == "local" or not all(dom.is_uniform(a) for a in args):
                return dom.bottom()
            return dom.uniform()
        instr = self.instrs[n]
        op = normalise(instr)
        width = zero_extended_bits(instr)
        if width is not None:
            extended = (0,) if op == "copy" else (0, 1)
            args = [self.zero_extend(a, width) if i in extended else a
                    for i, a in enumerate(args)]
        return self.assign(op, args, _literal_shift(instr), integer_bits(instr))

    def zero_extend(self, value: Value, width: int) -> Value:
        """A `width`-bit unsigned operand widened with zeros (rules/affine.lp, af_xo): the
        value when it is uniform (its constant only when known and in range) or provably
        in 0..2^width − 1 for every tid in 0..1023 (no tid² term); ⊥ otherwise."""
        dom = self.dom
        limit = 2**31 - 1 if width >= 32 else 2**width - 1
        in_range = isinstance(value[0], int) and 0 <= value[0] <= limit
        if dom.is_uniform(value):
            return (value[0] if in_range else BOT,) + value[1:]
        if not in_range or any(c != 0 for c in value[2:]) or not isinstance(value[1], int):
            return dom.bottom()
        a, b = value[1], value[0]
        ok = a <= (limit - b) // 1023 if a >= 0 else -a <= b // 1023
        return value if ok else dom.bottom()

    def assign(self, op: str, args: list[Value], literal_shift: bool,
               bits: int | None = None) -> Value:
        """An assignment with normalised operator `op` (see rules/affine.lp for the rules)."""
        dom, on = self.dom, self.on
        if op == "copy":
            return args[0]
        if op == "add":
            return dom.add(*args)
        if op == "sub" and on["sub_linear"]:
            return dom.sub(*args)
        if op == "neg" and on["neg_linear"]:
            return dom.neg(args[0])
        if op == "mul":
            return dom.mul(*args)
        if op == "mad":
            return dom.add(dom.mul(args[0], args[1]), args[2])
        if op == "shl" and on["shl_linear"] and literal_shift:
            shift = args[1][0]
            factor = clamp(1 << shift) if 0 <= shift < shift_limit(bits) else 0
            return dom.mul(args[0], dom.const(factor))
        if op in COMPARISONS and on["cmp_difference"]:
            if not dom.is_uniform(dom.sub(args[0], args[1])):
                return dom.bottom()
            return dom.const(self._folded(op, args, bits))
        if not all(dom.is_uniform(a) for a in args):
            return dom.bottom()
        return dom.const(self._folded(op, args, bits))

    def _folded(self, op: str, args: list[Value], bits: int | None = None) -> Coef:
        """GBZA/GUZA: the folded constant when every operand is one, else ⊥."""
        if not self.on["fold"] or not all(self.dom.is_uniform(a) and a[0] is not BOT
                                           for a in args):
            return BOT
        return fold(op, [a[0] for a in args], bits)

    # the worklist -----------------------------------------------------------------------
    def solve(self, order_seed: int | None = None) -> dict[str, Value]:
        """Iterate to the fixed point; returns every SSA variable's coefficients."""
        users: dict[str, set[str]] = {name: set() for name in self.ssa.variables}
        for var in self.ssa.variables.values():
            for u in var.operands:
                users[u].add(var.name)
        for block, cond in self.branch_cond.items():
            if cond is None:
                continue
            for var in self.ssa.variables.values():
                if var.kind == "phi" and var.block in self.joins.get(block, ()):
                    users[cond].add(var.name)
                if var.kind == "eta" and block in self.cfg.loops[var.loop].blocks:
                    users[cond].add(var.name)
                if var.kind == "rejoin" and block in self.cfg.rejoins[var.block].branches:
                    users[cond].add(var.name)
        names = list(self.ssa.variables)
        if order_seed is not None:
            random.Random(order_seed).shuffle(names)
        work = deque(names)
        queued = set(names)
        while work:
            name = work.popleft()
            queued.discard(name)
            var = self.ssa.variables[name]
            new = self.transfer(var)
            old = self.values[name]
            if new == old:
                continue
            assert all(o is TOP or n is BOT or n == o for o, n in zip(old, new, strict=True)), (
                f"{name}: {old} → {new} is not a descent")
            self.values[name] = new
            for user in users[name]:
                if user not in queued:
                    queued.add(user)
                    work.append(user)
        return self.values


def _literal_shift(instr: ir.Instruction) -> bool:
    """Whether the second operand is an integer literal that fits (`x << k`, rule af_lin)."""
    return (len(instr.args) == 2 and isinstance(instr.args[1], ir.Const)
            and fits(instr.args[1].value))


def solve_reference(ssa: SSAForm, degree: int = 1, options: Mapping[str, bool] | None = None,
                    order_seed: int | None = None,
                    shape: BlockShape | None = None) -> dict[str, tuple[int | None, ...]]:
    """The maximal fixed point, with ⊥ as None, coefficients indexed by power of tid (for
    launches with block `shape`, when given)."""
    values = AffineReference(ssa, degree, options, shape).solve(order_seed)
    out = {}
    for name, value in values.items():
        assert not any(c is TOP for c in value), f"{name} was never computed"
        out[name] = tuple(None if c is BOT else c for c in value)
    return out
