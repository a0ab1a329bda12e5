"""Lazy code motion: the rules against the seed's worked examples (shared/notes §6),
against a Python worklist solver of the same equations on random CFGs, and the pass
verified on the interpreter."""

from __future__ import annotations

import random

import pytest

from gpudiv import ir
from gpudiv.analyses.solve import shipped_rule, solve
from gpudiv.lang.load import parse_text
from gpudiv.transforms import Pipeline
from gpudiv.verify.transform_check import transform

RELATIONS = ("ninsert", "xinsert", "nreplace", "xreplace")


def graph_facts(edges, comps, ends, xcomps=(), opaque=(0,), spec=()):
    """Facts of a one-expression graph: node 0 is the start; `opaque` nodes modify an
    operand (node 0 defines them, as in the note's rebuilds)."""
    nodes = sorted({a for a, _ in edges} | {b for _, b in edges} | {0})
    lines = [f"node({n})." for n in nodes] + ["start(0).", "expr(0)."]
    lines += [f"end({n})." for n in ends] + [f"succ({a},{b})." for a, b in edges]
    lines += [f"ncomp(0,{n})." for n in comps] + [f"xcomp(0,{n})." for n in xcomps]
    lines += [f"transp(0,{n})." for n in nodes if n not in opaque]
    lines += [f"speculate({n})." for n in spec]
    return "\n".join(lines)


def solve_lcm_facts(text, rules=("safety.lp", "lcm.lp")):
    """Shown relations as {name: sorted nodes} for expression 0."""
    result = solve([shipped_rule(r) for r in rules], text)
    return {name: sorted(t[1] for t in tuples) for name, tuples in result.atoms.items()}


FIG_4_1 = [(0, 1), (1, 2), (1, 6), (2, 3), (2, 4), (3, 5), (4, 5), (5, 7), (6, 7)]
FIG_4_4 = [(0, 1), (1, 2), (1, 6), (2, 4), (4, 3), (4, 5), (3, 10), (5, 10), (6, 7), (6, 8),
           (7, 9), (8, 9), (9, 10)]


def test_fig_4_1_lcm_inserts_into_both_sides_of_the_divergent_branch():
    got = solve_lcm_facts(graph_facts(FIG_4_1, comps=[3, 7], ends=[7]))
    assert got.get("ninsert") == [3]
    assert got.get("xinsert") == [4, 6]
    assert got.get("nreplace") == [3, 7]
    assert "xreplace" not in got


def test_fig_4_4a_lcm_gives_fig_4_4b_occurrences_3_7_8():
    got = solve_lcm_facts(graph_facts(FIG_4_4, comps=[3, 7, 9], ends=[10]))
    assert got.get("ninsert") == [7] and got.get("xinsert") == [8]
    assert got.get("nreplace") == [7, 9]
    # occurrences after LCM: 3 (kept), 7 (inserted), 8 (inserted); 9 reads t
    assert sorted({3} | set(got["ninsert"]) | set(got["xinsert"])) == [3, 7, 8]


def test_fig_4_4b_is_an_lcm_fixpoint_with_the_notes_down_safety():
    got = solve_lcm_facts(graph_facts(FIG_4_4, comps=[3, 7, 8], ends=[10]))
    assert not any(got.get(name) for name in RELATIONS)
    assert sorted(set(got["ndsafe"]) | set(got["xdsafe"])) == [3, 6, 7, 8]


def test_fig_4_9_preqp_and_lcm_insert_into_node_2():
    edges = [(0, 1), (1, 2), (1, 3), (2, 4), (3, 4)]
    got = solve_lcm_facts(graph_facts(edges, comps=[3, 4], ends=[4], opaque=(0, 1)))
    assert got.get("xinsert") == [2]
    assert got.get("nreplace") == [3, 4] and got.get("ninsert") == [3]


# -- the same equations by a Python worklist solver (greatest fixpoints from true) ------

def reference(nodes, edges, ends, ncomp, xcomp, transp, spec=frozenset()):
    """N/X insert and replace of the equations in rules/safety.lp and rules/lcm.lp."""
    succ = {n: [b for a, b in edges if a == n] for n in nodes}
    pred = {n: [a for a, b in edges if b == n] for n in nodes}

    def gfp(update, names):
        value = {(k, n): True for k in names for n in nodes}
        changed = True
        while changed:
            changed = False
            for key in list(value):
                new = update(value, *key)
                if new != value[key]:
                    value[key], changed = new, True
        return value

    def dsafe(v, k, n):
        if k == "n":
            return n in ncomp or (n in transp and v[("x", n)])
        if n in xcomp:
            return True
        if n in spec:
            return any(v[("n", s)] for s in succ[n])
        return n not in ends and all(v[("n", s)] for s in succ[n])

    def usafe(v, k, n):
        if k == "n":
            return n != 0 and all(p in xcomp or v[("x", p)] for p in pred[n])
        return n in transp and (n in ncomp or v[("n", n)])

    d, u = gfp(dsafe, "nx"), gfp(usafe, "nx")
    nearliest = {n for n in nodes if d[("n", n)] and (
        n == 0 or all(not (u[("x", m)] or d[("x", m)]) for m in pred[n]))}
    xearliest = {n for n in nodes if d[("x", n)] and n not in transp}

    def delayed(v, k, n):
        if k == "n":
            return n in nearliest or (n != 0 and all(v[("x", m)] and m not in xcomp
                                                       for m in pred[n]))
        return n in xearliest or (v[("n", n)] and n not in ncomp)

    dl = gfp(delayed, "nx")
    nlatest = {n for n in nodes if dl[("n", n)] and n in ncomp}
    xlatest = {n for n in nodes if dl[("x", n)] and (
        n in xcomp or any(not dl[("n", s)] for s in succ[n]))}
    xlive, nlive = set(), set()
    changed = True
    while changed:  # least fixpoint
        changed = False
        for n in nodes:
            if n not in xlive and any((s in ncomp or s in nlive) and s not in nlatest
                                      for s in succ[n]):
                xlive.add(n)
                changed = True
            if n not in nlive and n in transp and n in xlive:
                nlive.add(n)
                changed = True
    ninsert, xinsert = nlatest & nlive, xlatest & xlive
    return {"ninsert": sorted(ninsert), "xinsert": sorted(xinsert),
            "nreplace": sorted(n for n in ncomp if n in ninsert or n not in nlatest),
            "xreplace": sorted(n for n in xcomp if n in xinsert or n not in xlatest)}


def random_graph(rng):
    """A random CFG from node 0 with its critical edges split and random predicates."""
    size = rng.randint(2, 9)
    edges = {(n, n + 1) for n in range(size - 1)}
    for _ in range(rng.randint(0, size)):
        edges.add((rng.randrange(size), rng.randrange(1, size)))
    nodes = list(range(size))
    extra = size
    for a, b in sorted(edges):
        outs = sum(1 for x, _ in edges if x == a)
        ins = sum(1 for _, y in edges if y == b)
        if outs > 1 and ins > 1:
            edges = (edges - {(a, b)}) | {(a, extra), (extra, b)}
            nodes.append(extra)
            extra += 1
    ends = [n for n in nodes if not any(a == n for a, _ in edges)] or [size - 1]
    transp = {n for n in nodes if n != 0 and rng.random() < 0.7}
    ncomp = {n for n in nodes if rng.random() < 0.3}
    xcomp = {n for n in nodes if n not in transp and rng.random() < 0.3}
    return nodes, sorted(edges), ends, ncomp, xcomp, transp


@pytest.mark.parametrize("seed", range(60))
@pytest.mark.parametrize("speculative", [False, True])
def test_rules_equal_a_worklist_solver_on_random_cfgs(seed, speculative):
    rng = random.Random(seed)
    nodes, edges, ends, ncomp, xcomp, transp = random_graph(rng)
    spec = {n for n in nodes if rng.random() < 0.4} if speculative else set()
    text = "\n".join([f"node({n})." for n in nodes] + ["start(0).", "expr(0)."]
                     + [f"end({n})." for n in ends] + [f"succ({a},{b})." for a, b in edges]
                     + [f"ncomp(0,{n})." for n in ncomp] + [f"xcomp(0,{n})." for n in xcomp]
                     + [f"transp(0,{n})." for n in transp]
                     + [f"speculate({n})." for n in spec])
    got = solve_lcm_facts(text)
    want = reference(nodes, edges, set(ends), ncomp, xcomp, transp, spec)
    assert {k: got.get(k, []) for k in want} == want


# -- the pass -------------------------------------------------------------------------

PARTIAL = """kernel pre(a, b, v)
      p = tid < 4
      bz p, ELSE
      x = a + b
      shared[tid] = x
      jump JOIN
ELSE: shared[tid] = 1
JOIN: y = a + b
      z = tid + y
      shared[z] = y
"""


def occurrences(kernel: ir.Kernel, operator: str) -> int:
    """Static computations of `a <operator> b`."""
    return sum(1 for i in kernel.instructions() if i.kind == ir.ASSIGN
               and i.operator == operator and i.args == (ir.Var("a"), ir.Var("b")))


def test_lcm_pass_removes_the_partial_redundancy_and_verifies():
    program = parse_text(PARTIAL, "pre.musimd", "musimd")
    out = transform(program, "lcm", verify=True)
    (kernel,) = out.kernels
    assert kernel.status == "verified" and not kernel.oracle_violations
    after = out.program.kernels[0]
    assert occurrences(after, "+") == 2  # one per path (then-side and else-side)
    join = after.block("JOIN").instructions[0]
    assert join.operator == "copy"


def test_lcm_leaves_a_kernel_without_redundancy_alone():
    text = "kernel k(a, b)\n  x = a + b\n  shared[tid] = x\n"
    program = parse_text(text, "k.musimd", "musimd")
    out = Pipeline.parse("lcm").run(program)
    assert [i.form() for i in out.kernels[0].instructions()] == \
        [i.form() for i in program.kernels[0].instructions()]
