"""Speed of the PTX reference interpreter (gpudiv.interp.ptx) and of `gpudiv check` on PTX.

Three tables:

1. kernels: sample kernels on fixed launches — warp and lane instructions executed,
   seconds (median of --repeat runs, launch set-up included) and lane-instructions/second;
2. grid scaling: `vec_add` (-O3 and -G) over 1 … 256 blocks of 256 threads;
3. check: `gpudiv check` per sample kernel (analysis + 5 launches with the oracle), seconds.

    python benchmarks/bench_ptx_interp.py [--repeat 3] [--grids 1 4 16 64 256] [--json]
    python benchmarks/bench_ptx_interp.py --skip-check      # tables 1 and 2 only
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from gpudiv import api
from gpudiv.interp.ptx import PtxLaunch, run_ptx_kernel
from gpudiv.lang.load import load

ROOT = Path(__file__).resolve().parents[1]
CUDA = ROOT / "samples" / "cuda"
F32 = np.float32


def _vec_add(grid: int):
    n = grid * 256
    rng = np.random.default_rng(0)
    return ((grid, 1, 1), (256, 1, 1),
            [rng.random(n, dtype=F32), rng.random(n, dtype=F32), np.zeros(n, F32), n])


def _cases():
    """(file stem, kernel, grid, block, args) of table 1."""
    rng = np.random.default_rng(1)
    n = 64
    a, b = rng.random((n, n), dtype=F32), rng.random((n, n), dtype=F32)
    x = rng.standard_normal(4096).astype(F32)
    ints = rng.integers(0, 256, 4096).astype(np.int32)
    return [
        ("vector_ops", "vec_add", *_vec_add(16)),
        ("vector_ops", "saxpy", (16, 1, 1), (256, 1, 1), [4096, 2.0, x, x.copy()]),
        ("reductions", "reduce_sum_tree", (16, 1, 1), (256, 1, 1),
         [x, np.zeros(16, F32), 4096]),
        ("warp_primitives", "warp_sum_shfl_down", (16, 1, 1), (256, 1, 1),
         [x, np.zeros(1, F32), 4096]),
        ("matmul_tiled", "matmul_tiled", (4, 4, 1), (16, 16, 1),
         [a, b, np.zeros((n, n), F32), n]),
        ("atomics_histogram", "histogram_shared", (8, 1, 1), (256, 1, 1),
         [ints.astype(np.uint8), 4096, np.zeros(64, np.uint32)]),
        ("stencils", "stencil_1d", (16, 1, 1), (256, 1, 1), [x, np.zeros(4096, F32), 4096]),
        ("scan", "scan_hillis_steele", (8, 1, 1), (512, 1, 1),
         [ints, np.zeros(4096, np.int32), 4096]),
        ("control_flow", "collatz_steps", (16, 1, 1), (256, 1, 1),
         [(ints + 1).astype(np.uint32), np.zeros(4096, np.uint32), 4096, 100]),
        ("sorting", "bitonic_sort_block", (1, 1, 1), (1024, 1, 1), [ints[:1024].copy()]),
        ("local_arrays", "median9", (16, 1, 1), (256, 1, 1), [x, np.zeros(4096, F32), 4096]),
    ]


def _time(kernel, grid, block, args, repeat: int) -> tuple[float, object]:
    times = []
    result = None
    for _ in range(repeat):
        launch = PtxLaunch(grid, block, {k: (v.copy() if isinstance(v, np.ndarray) else v)
                                         for k, v in enumerate(args)})
        start = time.perf_counter()
        result = run_ptx_kernel(kernel, launch)
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def _row(name: str, seconds: float, result) -> dict:
    c = result.counters
    return {"kernel": name, "warp_instr": c.warp_instructions, "lane_instr": c.lane_instructions,
            "simd_eff": round(c.simd_efficiency, 3), "seconds": round(seconds, 4),
            "lane_instr_per_s": int(c.lane_instructions / seconds)}


def bench_kernels(repeat: int) -> list[dict]:
    rows = []
    for stem, name, grid, block, args in _cases():
        for variant in ("O3", "G"):
            kernel = load(CUDA / f"{stem}.{variant}.ptx").kernel(name)
            seconds, result = _time(kernel, grid, block, args, repeat)
            rows.append(_row(f"{name} ({variant})", seconds, result))
            print(f"{name} {variant}: {seconds:.3f} s", file=sys.stderr)
    return rows


def bench_grids(grids: list[int], repeat: int) -> list[dict]:
    rows = []
    for variant in ("O3", "G"):
        kernel = load(CUDA / f"vector_ops.{variant}.ptx").kernel("vec_add")
        for grid in grids:
            seconds, result = _time(kernel, *_vec_add(grid), repeat)
            row = _row(f"vec_add ({variant})", seconds, result)
            rows.append({"blocks": grid, "threads": grid * 256, **row})
            print(f"vec_add {variant} grid {grid}: {seconds:.3f} s", file=sys.stderr)
    return rows


def bench_check() -> list[dict]:
    rows = []
    files = sorted([*CUDA.glob("*.ptx"), *ROOT.glob("samples/ptx_legacy/*.ptx")])
    for path in files:
        start = time.perf_counter()
        analysed = api.analyze(path)
        analyse_s = (time.perf_counter() - start) / max(len(analysed.kernels), 1)
        for index, kernel in enumerate(analysed.kernels):
            one = api.FileAnalysis(analysed.path, analysed.language, [kernel])
            start = time.perf_counter()
            (report,) = api.check(one, seed=index)
            seconds = time.perf_counter() - start
            rows.append({"file": path.name, "kernel": kernel.name, "status": report.status,
                         "runs": report.runs, "uses": report.uses_checked,
                         "violations": len(report.violations),
                         "check_s": round(seconds + analyse_s, 3)})
        print(f"{path.name}: done", file=sys.stderr)
    return rows


def _print(title: str, rows: list[dict]) -> None:
    if not rows:
        return
    print(f"\n{title}")
    heads = list(rows[0])
    widths = [max(len(h), *(len(str(r[h])) for r in rows)) for h in heads]
    print("  ".join(h.rjust(w) for h, w in zip(heads, widths, strict=True)))
    for r in rows:
        print("  ".join(str(r[h]).rjust(w) for h, w in zip(heads, widths, strict=True)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--grids", type=int, nargs="+", default=[1, 4, 16, 64, 256])
    parser.add_argument("--skip-check", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    kernels = bench_kernels(args.repeat)
    grids = bench_grids(args.grids, args.repeat)
    checks = [] if args.skip_check else bench_check()
    if args.json:
        json.dump({"kernels": kernels, "grids": grids, "check": checks}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    _print("Kernels (median seconds per launch, set-up included)", kernels)
    _print("vec_add: scaling with the grid (256 threads per block)", grids)
    if checks:
        _print("gpudiv check per sample kernel (analysis + 5 checked launches)", checks)
        total = sum(r["check_s"] for r in checks)
        worst = max(checks, key=lambda r: r["check_s"])
        print(f"\n{len(checks)} kernels, {total:.1f} s in all, median "
              f"{statistics.median(r['check_s'] for r in checks):.2f} s, slowest "
              f"{worst['kernel']} ({worst['file']}) {worst['check_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
