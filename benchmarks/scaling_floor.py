"""Linear reference workloads for the scaling benchmark: the machine's own floor.

`bench_scaling.py --reference` times these at the benchmark's sizes and fits their
exponents as it fits gpudiv's stages. Each does a fixed amount of work per unit and nothing
that grows faster, so an exponent above 1 is what the memory hierarchy (caches, TLB, page
faults of a growing heap) adds on this machine; a stage's exponent is best read against
the floor of the same kind of work:

- `python`: per unit, an object with a few attributes and a small dict, filed in a dict
  under a string name, then one pass that looks up two other units by name and writes a
  line of text, as the IR, SSA and fact stages do (about 1 KB of heap per unit);
- `clingo`: clingo grounding a program of a few facts and rules per unit (about 50 ground
  atoms per unit, as many as `affine2` grounds per instruction): joins, a recursive
  chain and a negation, every rule linear.

    python benchmarks/scaling_floor.py python 100000    # milliseconds, then atoms
"""

from __future__ import annotations

import sys
import time

# Per unit: facts e/2 (two edges), v/1 and w/1; derived relations that are each linear.
CLINGO_RULES = """
r(X,Y) :- e(X,Y).
s(X) :- r(X,Y), v(Y).
t(X,Z) :- e(X,Y), e(Y,Z).
c(X) :- e(X,Y), w(X).
c(Y) :- c(X), e(X,Y), Y > X.
u(X) :- s(X), not c(X).
k(X,0..7) :- v(X).
m(X,Y,I) :- k(X,I), r(X,Y).
n(X,I) :- m(X,_,I), not u(X).
"""


class _Unit:
    """One unit of the Python workload."""

    __slots__ = ("name", "uses", "attrs")

    def __init__(self, name: str, uses: tuple[str, str], attrs: dict[str, object]):
        self.name, self.uses, self.attrs = name, uses, attrs


def python_floor(units: int) -> float:
    """Milliseconds of the Python workload on `units` units (`time.perf_counter`, which
    the benchmark's child makes processor time)."""
    start = time.perf_counter()
    table: dict[str, _Unit] = {}
    for i in range(units):
        name = f"%r{i}"
        table[name] = _Unit(name, (f"%r{i - 1}", f"%r{(i * 7919) % (i + 1)}"),
                            {"opcode": "add.s32", "line": i, "group": i // 3})
    lines = []
    for unit in table.values():
        for used in unit.uses:
            other = table.get(used)
            if other is not None:
                lines.append(f'use("{unit.name}","{other.name}",{other.attrs["line"]}).')
    text = "\n".join(lines)
    assert len(text) > 0 or units < 2
    return (time.perf_counter() - start) * 1000


def clingo_facts(units: int) -> str:
    """The facts of the clingo workload on `units` units."""
    return "".join(f"e({i},{i + 1}).e({i},{(i * 7919) % units}).v({i}).w({i})."
                   if i % 5 == 0 else f"e({i},{i + 1}).e({i},{(i * 7919) % units}).v({i})."
                   for i in range(units))


def clingo_floor(units: int) -> tuple[float, int]:
    """Milliseconds clingo takes to ground the workload on `units` units (facts already
    added; `time.perf_counter`, as above), and the ground atoms."""
    import clingo

    control = clingo.Control(["--warn=none"])
    control.add("base", [], CLINGO_RULES + clingo_facts(units))
    start = time.perf_counter()
    control.ground([("base", [])])
    elapsed = (time.perf_counter() - start) * 1000
    return elapsed, len(control.symbolic_atoms)


WORKLOADS = ("python", "clingo")


def measure(kind: str, units: int) -> dict[str, float | int]:
    """One run of a workload: its milliseconds and (clingo) its ground atoms."""
    if kind == "python":
        return {"ms": python_floor(units), "atoms": 0}
    ms, atoms = clingo_floor(units)
    return {"ms": ms, "atoms": atoms}


if __name__ == "__main__":
    print(measure(sys.argv[1], int(sys.argv[2])))
