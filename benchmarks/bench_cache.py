"""What a linear program's time does as its data grows on this machine (issue 16, item 2).

Two reference workloads whose work is exactly linear in N, timed in processor time at
each size (a fresh process per size and repeat), with the fitted exponent of their time,
as `bench_scaling.py` fits gpudiv's stages:

- `python`: a dict of N string-keyed nodes with two successors each, walked depth-first
  with a `seen` set, then one small dict per node: the dict, set and string traffic of
  the CFG, SSA and findings stages, without gpudiv;
- `clingo_join`: grounding `q(Y) :- e(X,Y), f(X).` over N `e/2` and N `f/1` facts (one
  indexed lookup per fact, as the joins of the rule files);
- `clingo_chain`: grounding `p(Y) :- p(X), e(X,Y).` from `p("v0")` along N edges (a
  recursive component, as the propagation along a chain of instructions).

When the time per element of these rises with N, the same operations cost more on a
larger working set (cache and TLB misses), and an exponent above 1 of a gpudiv stage
whose operation counts are linear is that machine effect, not the algorithm
(benchmarks/README.md, `bench_scaling.py`).

    python benchmarks/bench_cache.py                               # 1e3 .. 1e6, both
    python benchmarks/bench_cache.py --workloads python --sizes 10000 100000 --repeat 3
    python benchmarks/bench_cache.py --once python 100000           # one run (for valgrind)
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import statistics
import subprocess
import sys
import time

WORKLOADS = ("python", "clingo_join", "clingo_chain")
DEFAULT_SIZES = (1000, 10_000, 100_000, 1_000_000)


def python_walk(n: int) -> int:
    """Dict, set and string work linear in `n`; returns the nodes walked."""
    succ: dict[str, list[str]] = {}
    for i in range(n):
        succ[f"bb{i}"] = [f"bb{i + 1}", f"bb{(i * 7) % n}"]
    seen: set[str] = set()
    order: list[str] = []
    stack = ["bb0"]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        order.append(node)
        stack.extend(succ.get(node, ()))
    records = [{"name": node, "ops": [node, node + "a"]} for node in order]
    return len(records)


def clingo_program(workload: str, n: int) -> str:
    """The facts and rule of a clingo workload of size `n`."""
    edges = "".join(f'e("v{i}","v{i + 1}").\n' for i in range(n))
    if workload == "clingo_join":
        return edges + "".join(f'f("v{i}").\n' for i in range(n)) + "q(Y) :- e(X,Y), f(X).\n"
    return edges + 'p("v0").\np(Y) :- p(X), e(X,Y).\n'


def once(workload: str, n: int) -> float:
    """Processor milliseconds of one run of the workload (clingo: grounding only)."""
    gc.disable()
    if workload == "python":
        start = time.process_time()
        python_walk(n)
        return (time.process_time() - start) * 1000
    import clingo

    control = clingo.Control(["--warn=none"])
    control.add("base", [], clingo_program(workload, n))
    start = time.process_time()
    control.ground([("base", [])])
    return (time.process_time() - start) * 1000


def measure(workload: str, n: int, repeat: int) -> float:
    """Median milliseconds over `repeat` fresh processes."""
    runs = []
    for _ in range(repeat):
        done = subprocess.run([sys.executable, __file__, "--once", workload, str(n)],
                              capture_output=True, text=True, check=True)
        runs.append(float(done.stdout))
    return statistics.median(runs)


def slope(points: list[tuple[int, float]]) -> float | None:
    """Least-squares slope of log(ms) on log(n)."""
    kept = [(math.log(n), math.log(t)) for n, t in points if t > 0]
    if len(kept) < 2:
        return None
    mean_x = sum(x for x, _ in kept) / len(kept)
    mean_y = sum(y for _, y in kept) / len(kept)
    spread = sum((x - mean_x) ** 2 for x, _ in kept)
    return sum((x - mean_x) * (y - mean_y) for x, y in kept) / spread if spread else None


def main(argv: list[str] | None = None) -> int:
    """Time each workload at each size; print ns per element and the fitted exponents."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", nargs="+", choices=WORKLOADS, default=list(WORKLOADS))
    parser.add_argument("--sizes", nargs="+", type=int, default=list(DEFAULT_SIZES))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--once", nargs=2, metavar=("WORKLOAD", "N"),
                        help="one run in this process; prints its milliseconds")
    args = parser.parse_args(argv)
    if args.once:
        print(once(args.once[0], int(args.once[1])))
        return 0
    rows = []
    for workload in args.workloads:
        for n in args.sizes:
            ms = measure(workload, n, args.repeat)
            rows.append({"workload": workload, "n": n, "ms": ms, "ns_per_element": ms * 1e6 / n})
            print(f"{workload} {n}: {ms:.1f} ms", file=sys.stderr, flush=True)
    fits = {w: slope([(r["n"], r["ms"]) for r in rows if r["workload"] == w])
            for w in args.workloads}
    if args.json:
        print(json.dumps({"rows": rows, "exponents": fits}, indent=1))
        return 0
    print(f"{'workload':<13} {'n':>9} {'ms':>10} {'ns/element':>11}")
    for r in rows:
        print(f"{r['workload']:<13} {r['n']:>9} {r['ms']:>10.1f} {r['ns_per_element']:>11.0f}")
    print("\nfitted exponents (log-log least squares): "
          + ", ".join(f"{w} {'-' if e is None else f'{e:.2f}'}" for w, e in fits.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
