"""rules/srqp.lp against a Python worklist solver of the same equations on random
statement graphs (anticipability, isReal, availability with insertion, ESRQP's gate, the
rewrite relations), and the scalar-replacement passes on random μ-SIMD programs."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpudiv.analyses.solve import shipped_rule, solve
from gpudiv.lang.load import parse_text
from gpudiv.lang.printing import print_program
from gpudiv.transforms import Pipeline
from gpudiv.verify.equivalence import compare_kernels
from gpudiv.verify.randprog import random_program

SCALE = settings.default.max_examples / 100  # 1 under the ci profile (tests/conftest.py)
PROPERTY = settings(max_examples=max(int(25 * SCALE), 3), deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
BEHAVIOUR = settings(PROPERTY, max_examples=max(int(8 * SCALE), 2))
FORMS = (0, 1, 2)


def random_graph(seed: int):
    """A random statement graph: edges, ends, occurrences, modifications, conversions
    (form 0 after = form 1 before, the `i = i + 1` of Fig 4.11) and CDRND nodes."""
    rng = random.Random(seed)
    n = rng.randint(2, 12)
    edges = {(a, a + 1) for a in range(n - 1) if rng.random() < 0.8}
    edges |= {(rng.randrange(n), rng.randrange(n)) for _ in range(rng.randint(0, n))}
    ends = {n - 1} | {a for a in range(n) if rng.random() < 0.1}
    occ = {(a, f) for a in range(n) for f in FORMS if rng.random() < 0.2}
    occ = {(a, f) for a, f in occ if not any(b == a and g != f for b, g in occ)}
    mods = {(a, f) for a in range(n) for f in FORMS if rng.random() < 0.15}
    convs = {(a, 0, 1) for a in range(n) if rng.random() < 0.15 and
             not any(b == a for b, _ in occ)}
    mods |= {(a, f) for a, _, _ in convs for f in (0, 1)}
    cdrnd = {a for a in range(n) if rng.random() < 0.7}
    return n, edges, ends, occ, mods, convs, cdrnd


def facts(graph, gate: bool) -> str:
    n, edges, ends, occ, mods, convs, cdrnd = graph
    lines = [f"snode({a})." for a in range(n)] + ["sstart(0)."]
    lines += [f"send({a})." for a in ends] + [f"ssucc({a},{b})." for a, b in edges]
    lines += [f"form({f})." for f in FORMS] + [f"occ({a},{f})." for a, f in occ]
    lines += [f"mod({a},{f})." for a, f in mods] + [f"conv({a},{f},{g})." for a, f, g in convs]
    lines += [f"cdrnd({a})." for a in cdrnd] + (["gate."] if gate else [])
    return "\n".join(lines) + "\n"


def reference(graph, gate: bool) -> dict[str, set]:
    """The srqp.lp equations solved by round-robin iteration."""
    n, edges, ends, occ, mods, convs, cdrnd = graph
    nodes = range(n)
    succ = {a: [b for x, b in edges if x == a] for a in nodes}
    pred = {a: [x for x, b in edges if b == a] for a in nodes}
    conv_after = {(a, f): g for a, f, g in convs}  # F after -> G before
    conv_before = {(a, g): f for a, f, g in convs}
    transparent = {(a, f) for a in nodes for f in FORMS if (a, f) not in mods}
    killsown = occ & mods

    def fixpoint(init: bool, step):
        value = {(a, f): init for a in nodes for f in FORMS}
        while True:
            new = {key: step(value, *key) for key in value}
            if new == value:
                return value
            value = new

    def antout(ant, a, f):
        return a not in ends and all(ant[(b, f)] for b in succ[a])

    def antin_step(ant, a, f):
        if (a, f) in occ:
            return True
        if (a, f) in transparent:
            return antout(ant, a, f)
        after = conv_before.get((a, f))
        return after is not None and antout(ant, a, after)
    antin = fixpoint(True, antin_step)

    def realout(real, a, f):
        if (a, f) in occ:
            return (a, f) not in killsown
        if (a, f) in transparent:
            return real[(a, f)]
        before = conv_after.get((a, f))
        return before is not None and real[(a, before)]
    realin = fixpoint(False, lambda r, a, f: any(realout(r, p, f) for p in pred[a]))

    def avout(av, a, f):
        if (a, f) in occ:
            return (a, f) not in killsown
        if (a, f) in transparent:
            return av[(a, f)]
        before = conv_after.get((a, f))
        return before is not None and av[(a, before)]

    def avin_step(av, a, f):
        if a == 0:
            return False
        outs = [avout(av, p, f) for p in pred[a]]
        if all(outs):
            return True
        real = any(o and realout(realin, p, f) for o, p in zip(outs, pred[a], strict=True))
        allowed = not gate or all(p in cdrnd for o, p in zip(outs, pred[a], strict=True)
                                  if not o)
        return antin[(a, f)] and real and allowed
    avin = fixpoint(True, avin_step)
    replace = {(a, f) for a, f in occ if avin[(a, f)]}
    need, changed = set(replace), True
    while changed:
        changed = False
        for a, f in list(need):
            for p in pred[a]:
                if not avout(avin, p, f) or (p, f) in occ:
                    continue
                more = (p, f) if (p, f) in transparent else (p, conv_after.get((p, f)))
                if more[1] is not None and more not in need:
                    need.add(more)
                    changed = True
    insert = {(p, f) for a, f in need for p in pred[a] if not avout(avin, p, f)}
    return {"antin": {k for k, v in antin.items() if v}, "realin": {k for k, v in realin.items()
                                                                     if v},
            "avin": {k for k, v in avin.items() if v}, "replace": replace, "insert": insert}


@settings(PROPERTY)
@given(seed=st.integers(0, 2**31 - 1), gate=st.booleans())
def test_rules_match_the_worklist_solver(seed, gate):
    graph = random_graph(seed)
    got = solve([shipped_rule("srqp.lp")], facts(graph, gate) + "#defined cdrnd/1.\n").atoms
    want = reference(graph, gate)
    for name, expected in want.items():
        assert {tuple(t) for t in got.get(name, [])} == expected, (name, graph)


@pytest.mark.slow
@pytest.mark.parametrize("spec", ["srqp", "ssrqp-s"])
@settings(BEHAVIOUR)
@given(seed=st.integers(0, 2**31 - 1), statements=st.integers(4, 25))
def test_scalar_replacement_preserves_behaviour(spec, seed, statements):
    text = random_program(seed, statements, unstructured=False, barriers=seed % 3 == 0)
    program = parse_text(text, "rand.musimd")
    assert program.errors == [], text
    result = Pipeline.parse(spec).run(program)
    again = parse_text(print_program(result), "rand.musimd")
    assert again.errors == []
    outcome = compare_kernels(program.kernels[0], again.kernels[0], "musimd", seed % 1000)
    assert outcome.status in ("verified", "not-executed"), (outcome.difference, text)
