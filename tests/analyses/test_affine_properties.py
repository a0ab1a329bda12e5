"""Property tests of the affine analyses on random programs (hypothesis-drawn seeds).

For every program and both degrees:
- exactness: the clingo rules (rules/affine.lp) and the plain worklist solver
  (gpudiv/analyses/affine_reference.py, its worklist order shuffled) give identical
  coefficients for every SSA variable, and the same divergent branches;
- soundness: the oracle finds no violated claim (uniform, constant, and the affine
  claims (c, k) ⇒ value = c·tid + k, (c, ⊥) ⇒ value − c·tid equal across active lanes,
  mod 2^32) when the program runs on the interpreter;
- Corollary 1 (§3.5): whatever the simple analysis calls uniform, both affine analyses
  call uniform (checked on about half of the `randprog` programs, to save time, and on
  every affine-rich one);
- explanations: every ⊥ coefficient has a `because/4` cause (rules/affine_explain.lp).
The interpreter runs each launch once and checks both degrees' claims at the same time.
"""

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpudiv.analyses import affine, simple
from gpudiv.analyses.affine_reference import solve_reference
from gpudiv.analyses.solve import shipped_rule
from gpudiv.interp.musimd import ExecutionError, run_kernel
from gpudiv.lang.load import parse_text
from gpudiv.verify.oracle import ClaimObserver, random_launches
from gpudiv.verify.randprog import random_program

SHAPES = ((7, 4), (45, 32))  # a partial warp of 4, and two warps of 32 (one partial)
SCALE = settings.default.max_examples / 100  # 1 under the ci profile (tests/conftest.py)
PROPERTY = settings(max_examples=int(1000 * SCALE), deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
EXPLAIN = (shipped_rule("affine_explain.lp"),)
# Programs each property test compared in this process, and how many it must compare: a
# test runs whole in one pytest-xdist worker, so each worker checks the tests it ran.
RAN: dict[str, int] = {"structured": 0, "unstructured": 0, "affine_rich": 0}
QUOTA = {"structured": int(1000 * SCALE), "unstructured": int(1000 * SCALE),
         "affine_rich": int(250 * SCALE)}


# ---------------------------------------------------------------------------------------
# Random kernels rich in affine arithmetic. `gpudiv.verify.randprog` programs mostly mix thread
# ids through non-linear operators, so few of their values keep known tid coefficients.
# These kernels compute with +, −, ×, <<, unary minus and comparisons on tid, parameters
# and literals (some at the edge of the 2^30 bound), branch on affine comparisons, run
# loops with uniform and divergent trip counts that carry affine counters (the avgSquare
# pattern), and load from affine addresses. They are structured (one `sync` at the
# immediate post-dominator of every branch), and the values they compare stay far from
# 2^31 (comparisons as differences assume no wrap-around).
# ---------------------------------------------------------------------------------------

EDGE_LITERALS = (2**29, 2**30 - 1, 2**30, -(2**30) + 1, -(2**30), 3 * 2**29)
SHIFTS = (0, 1, 3, 5, 29, 30, 31, 33, -1)


class _Affine:
    def __init__(self, seed: int, statements: int) -> None:
        self.rng = random.Random(seed)
        self.budget = statements
        self.lines: list[str] = []
        self.names = ["a", "b", "c", "d"]
        self.ids = 0

    def emit(self, text: str, label: str | None = None) -> None:
        self.lines.append(f"{label}: {text}".rstrip() if label else f"      {text}")

    def fresh(self) -> int:
        self.ids += 1
        return self.ids

    def literal(self) -> str:
        if self.rng.random() < 0.05:
            return str(self.rng.choice(EDGE_LITERALS))
        return str(self.rng.randint(-6, 9))

    def operand(self) -> str:
        r = self.rng.random()
        if r < 0.2:
            return self.literal()
        if r < 0.35:
            return self.rng.choice(("tid", "n", "k", "ntid", "warpid", "laneid"))
        return self.rng.choice(self.names)

    def small(self, name: str) -> str:
        """A copy of `name` kept small (the oracle's comparisons must not wrap)."""
        t = f"s{self.fresh()}"
        self.emit(f"{t} = {name} % 64")
        return t

    def statement(self, depth: int) -> None:
        self.budget -= 1
        dest = self.rng.choice(self.names)
        r = self.rng.random()
        if r < 0.45:
            op = self.rng.choice(("+", "+", "-", "-", "*", "*", "<<", "/", "%", "&", "min"))
            left, right = self.operand(), self.operand()
            if op == "*" and self.rng.random() < 0.6:
                right = self.literal()
            if op == "<<":
                right = str(self.rng.choice(SHIFTS))
            if op in ("/", "%"):
                right = str(self.rng.choice((2, 3, -4, 7)))
            self.emit(f"{dest} = {left} {op} {right}")
        elif r < 0.52:
            self.emit(f"{dest} = - {self.operand()}")
        elif r < 0.62:
            op = self.rng.choice(("<", "<=", ">", ">=", "==", "!="))
            left, right = self.small(self.operand()), self.small(self.operand())
            self.emit(f"{dest} = {left} {op} {right}")
        elif r < 0.68:
            self.emit(f"{dest} = shared[{self.operand()}]")
        elif r < 0.72:
            self.emit(f"shared[{self.operand()}] = {self.operand()}")
        elif r < 0.84 and depth < 2:
            self.if_else(depth)
        elif depth < 2:
            self.loop(depth)
        else:
            self.emit(f"{dest} = {self.operand()}")

    def body(self, depth: int, count: int) -> None:
        for _ in range(count):
            if self.budget <= 0:
                return
            self.statement(depth)

    def if_else(self, depth: int) -> None:
        i = self.fresh()
        if self.rng.random() < 0.5:
            # Two affine values with the same tid coefficient: a uniform comparison.
            self.emit(f"l{i} = tid * {self.rng.choice(('1', '-2', 'n'))}")
            self.emit(f"r{i} = l{i} + {self.rng.randint(-3, 3)}")
            self.emit(f"l{i} = l{i} + {self.rng.choice(('n', 'k', '1'))}")
            left, right = f"l{i}", f"r{i}"
        else:
            left, right = self.small(self.operand()), self.small(self.operand())
        self.emit(f"p{i} = {left} < {right}")
        self.emit(f"bz p{i}, ELSE{i}")
        self.body(depth + 1, self.rng.randint(1, 3))
        self.emit(f"jump JOIN{i}")
        self.emit("", f"ELSE{i}")
        self.body(depth + 1, self.rng.randint(0, 3))
        self.emit("sync", f"JOIN{i}")

    def loop(self, depth: int) -> None:
        """A loop with an affine counter: `i = s·tid + x; N = i + t·step; while i < N`."""
        i = self.fresh()
        stride = self.rng.choice(("1", "2", "-3", "n", "0"))
        step = self.rng.choice(("1", "2", "3"))
        trips = self.rng.choice(("3", "k % 4", "tid % 3", "laneid % 2"))
        self.emit(f"t{i} = {trips}")
        self.emit(f"t{i} = t{i} * {step}")
        self.emit(f"i{i} = tid * {stride}")
        self.emit(f"i{i} = i{i} + {self.rng.choice(('0', 'n', '5'))}")
        self.emit(f"N{i} = i{i} + t{i}")
        self.emit(f"q{i} = i{i} < N{i}", f"HEAD{i}")
        self.emit(f"bz q{i}, EXIT{i}")
        self.body(depth + 1, self.rng.randint(1, 3))
        self.emit(f"i{i} = i{i} + {step}")
        self.emit(f"jump HEAD{i}")
        self.emit("sync", f"EXIT{i}")
        self.names.append(f"i{i}")
        self.emit(f"shared[{i}] = i{i}")

    def program(self, name: str) -> str:
        self.lines.append(f"kernel {name}(n, k)")
        self.emit("a = tid")
        self.emit(f"b = tid * {self.rng.choice(('2', '-1', '3', 'n'))}")
        self.emit("c = n + k")
        self.emit(f"d = tid + {self.literal()}")
        while self.budget > 0:
            self.statement(0)
        for name_ in self.names:
            self.emit(f"shared[{self.fresh() % 16}] = {name_}")
        self.emit("stop")
        return "\n".join(self.lines) + "\n"


def affine_program(seed: int, statements: int = 12, name: str = "aff") -> str:
    """The text of one random structured kernel `NAME(n, k)` rich in affine values."""
    return _Affine(seed, statements).program(name)


class _Both:
    """Interpreter observer that lets several claim observers watch one run."""

    def __init__(self, observers: list[ClaimObserver]) -> None:
        self.observers = observers

    def before(self, *args) -> None:
        for observer in self.observers:
            observer.before(*args)

    def branch(self, *args) -> None:
        for observer in self.observers:
            observer.branch(*args)


def solved_coefficients(result, degree: int) -> dict[str, tuple]:
    coefficients: dict[str, dict[int, int | None]] = {}
    for var, power, value in result.relations["affine_coef"]:
        coefficients.setdefault(var, {})[power] = value
    for var, power in result.relations["affine_bot"]:
        coefficients.setdefault(var, {})[power] = None
    return {var: tuple(c[p] for p in range(degree + 1)) for var, c in coefficients.items()}


def check_program(text: str, seed: int, corollary: bool = True) -> int:
    """All four properties on one program; returns the number of variables compared."""
    program = parse_text(text, "random.musimd")
    assert not program.errors, program.errors
    kernel = program.kernels[0]
    results = {1: affine.analyze_kernel(kernel),
               2: affine.analyze_kernel(kernel, "affine2", 2, extra_rules=EXPLAIN)}
    compared = 0
    for degree, result in results.items():
        expected = solve_reference(result.ssa, degree, order_seed=seed)
        assert solved_coefficients(result, degree) == expected, (degree, text)
        compared += len(expected)
    bottoms = set(results[2].relations["affine_bot"])
    explained = {(v, n) for v, n, _, _ in results[2].relations["because"]}
    assert bottoms <= explained, (sorted(bottoms - explained)[:5], text)
    if corollary:
        uniform = {v.name for v in simple.analyze_kernel(kernel).variables if v.uniform}
        for result in results.values():
            assert uniform <= {v.name for v in result.variables if v.uniform}, text
    runs = 0
    for config in random_launches(kernel, seed, SHAPES):
        observers = [ClaimObserver(r, config) for r in results.values()]
        try:
            run_kernel(kernel, config, observer=_Both(observers))
        except ExecutionError:
            continue
        runs += 1
        for observer in observers:
            assert observer.violations == [], (str(observer.violations[0]), text)
    assert runs > 0, text
    return compared


@pytest.mark.slow
@PROPERTY
@given(seed=st.integers(0, 2**31 - 1), statements=st.integers(3, 30))
def test_affine_exact_sound_structured(seed, statements):
    RAN["structured"] += 1
    check_program(random_program(seed, statements, barriers=seed % 3 == 0), seed,
                  corollary=seed % 2 == 0)


@pytest.mark.slow
@PROPERTY
@given(seed=st.integers(0, 2**31 - 1), statements=st.integers(3, 30))
def test_affine_exact_sound_unstructured(seed, statements):
    RAN["unstructured"] += 1
    check_program(random_program(seed, statements, unstructured=True), seed,
                  corollary=seed % 2 == 1)


@pytest.mark.slow
@settings(PROPERTY, max_examples=int(250 * SCALE))
@given(seed=st.integers(0, 2**31 - 1), statements=st.integers(2, 20))
def test_affine_exact_sound_affine_rich(seed, statements):
    """Programs built from +, −, ×, <<, comparisons of affine values and affine loops."""
    RAN["affine_rich"] += 1
    check_program(affine_program(seed, statements), seed)


@pytest.mark.slow
def test_reference_is_order_independent_and_checks_samples():
    from pathlib import Path

    from gpudiv.api import analyze, check
    folder = Path(__file__).parents[2] / "samples" / "musimd"
    # the SIMT-deadlock samples spin on random memory: tests/analyses/test_deadlock.py
    samples = sorted(set(folder.glob("*.musimd")) - set(folder.glob("deadlock_*.musimd")))
    for path in samples:
        for analysis in ("affine", "affine2"):
            analysed = analyze(path, analysis)
            degree = 2 if analysis == "affine2" else 1
            for kernel in analysed.kernels:
                orders = [solve_reference(kernel.ssa, degree, order_seed=s) for s in (None, 1, 2)]
                assert orders[0] == orders[1] == orders[2]
                assert solved_coefficients(kernel, degree) == orders[0], (path, kernel.name)
            for report in check(analysed):
                assert report.status == "checked" and report.violations == [], (path, report)


EDGES = (0, 1, -1, 2, -7, 31, 33, 2**29, 2**30 - 1, -(2**30) + 1)


@pytest.mark.slow
def test_folding_every_operator_on_edge_constants():
    """GBZA/GUZA folding: rules, reference and interpreter agree on every operator."""
    from gpudiv.ir import BINARY_OPERATORS, UNARY_OPERATORS

    lines, count = ["kernel fold(n)"], 0
    for op in BINARY_OPERATORS:
        for a in EDGES:
            for b in EDGES:
                if op in ("/", "%") and b == 0:
                    continue
                lines += [f"  x{count} = {a} {op} {b}", f"  shared[{count}] = x{count}"]
                count += 1
    for op in UNARY_OPERATORS:
        for a in EDGES:
            lines += [f"  x{count} = {op} {a}", f"  shared[{count}] = x{count}"]
            count += 1
    text = "\n".join(lines + ["  stop", ""])
    check_program(text, 0)
    result = affine.analyze_kernel(parse_text(text, "fold.musimd").kernels[0])
    folded = sum(1 for v in result.variables if v.klass == "constant")
    assert folded > 0.9 * count


@pytest.fixture(scope="module", autouse=True)
def every_property_test_compared_its_quota():
    """After this module's tests in a process: each property test that ran here compared
    as many programs as hypothesis was asked for (2,000 of the two main ones together,
    times the profile's scale), wherever pytest-xdist put it."""
    yield
    short = {name: count for name, count in RAN.items() if 0 < count < QUOTA[name]}
    assert not short, f"property tests that compared fewer programs than asked: {short}"
