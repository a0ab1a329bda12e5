"""Speed of the unstructured-control-flow detection (issue 14: "no slower than
`analyze --analysis simple`"): over the same loaded kernels, seconds for the Python
structural analysis (`gpudiv structure`), for rules/structure.lp (clingo), and for the
simple divergence analysis, wall and CPU time; loading (parsing) is timed apart, as all
three share it.

    python benchmarks/bench_structure.py                    # samples/musimd, samples/cuda
    python benchmarks/bench_structure.py FILE|DIR... [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from gpudiv.analyses import get_analysis
from gpudiv.analyses.structure import analyze_kernel
from gpudiv.analyses.structure_rules import solve_kernel
from gpudiv.lang.load import load
from gpudiv.report.corpus import collect_inputs

ROOT = Path(__file__).resolve().parents[1]


def _seconds(work, repeat: int) -> tuple[float, float]:
    """Median wall time and median CPU time of `repeat` runs of `work()` (CPU time is
    steadier on a shared machine)."""
    walls, cpus = [], []
    for _ in range(repeat):
        start, cpu = time.perf_counter(), time.process_time()
        work()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return round(statistics.median(walls), 3), round(statistics.median(cpus), 3)


def measure(paths: list[str], repeat: int) -> dict[str, object]:
    """Seconds (wall, CPU) per method over every kernel of the inputs."""
    start = time.perf_counter()
    programs = [p for p in (load(path) for path in collect_inputs(paths)) if not p.errors]
    loading = time.perf_counter() - start
    kernels = [k for p in programs for k in p.kernels]
    simple = get_analysis("simple")
    return {
        "files": len(programs), "kernels": len(kernels), "load_s": round(loading, 3),
        "structure_python_s": _seconds(lambda: [analyze_kernel(k) for k in kernels], repeat),
        "structure_rules_s": _seconds(lambda: [solve_kernel(k) for k in kernels], repeat),
        "analyze_simple_s": _seconds(lambda: [simple.run(p.kernels) for p in programs],
                                     repeat)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*",
                        default=[str(ROOT / "samples/musimd"), str(ROOT / "samples/cuda")])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    row = measure(args.paths, args.repeat)
    if args.json:
        print(json.dumps(row))
    else:
        print(f"{row['files']} files, {row['kernels']} kernels (loading {row['load_s']} s)")
        for key, name in (("structure_python_s", "gpudiv structure (Python)"),
                          ("structure_rules_s", "rules/structure.lp (clingo)"),
                          ("analyze_simple_s", "analyze --analysis simple")):
            wall, cpu = row[key]
            print(f"  {name:30} {wall:8.3f} s wall {cpu:8.3f} s CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
