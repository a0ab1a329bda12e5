"""Speed of the μ-SIMD interpreter (the shared SIMT engine with the μ-SIMD semantics) in
lane-instructions per second.

For a few μ-SIMD kernels on fixed launches (sumTriangle of the thesis at 256 and 1024
threads, a nested loop, a gather through shared memory) under their default policy:
lane instructions, the wall-clock seconds and the CPU seconds of one run (minimum of
--repeat runs), and lane-instructions per second by both. On a shared machine the CPU
figure is the steadier one: the wall clock also counts the time other processes held
the cores.

    python benchmarks/bench_musimd_interp.py [--repeat 5] [--cases N] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from gpudiv.interp.musimd import LaunchConfig, run_kernel
from gpudiv.lang.load import load
from gpudiv.lang.musimd.parse import parse_musimd

ROOT = Path(__file__).resolve().parents[1]

NESTED = """kernel nested(n)
      i = 0
      s = 0
OUTER: p = i < n
      bz p, DONE
      j = tid & 7
INNER: q = j < i
      bz q, NEXT
      s = s + j
      j = j + 1
      jump INNER
NEXT: i = i + 1
      jump OUTER
DONE: local[0] = s
      shared[tid] = s
      stop
"""


def cases():
    """(name, kernel, launch) of every measured run."""
    triangle = load(ROOT / "samples/musimd/sumTriangle.musimd").kernels[0]
    matrix = {k: k % 7 for k in range(64 * 64)}
    yield ("sumTriangle, 256 threads", triangle,
           LaunchConfig(256, 32, {"c": 64, "m": 0, "v": 5000}, matrix, max_steps=10**7))
    big = {k: k % 7 for k in range(128 * 128)}
    yield ("sumTriangle, 1024 threads", triangle,
           LaunchConfig(1024, 32, {"c": 128, "m": 0, "v": 20000}, big, max_steps=10**7))
    nested = parse_musimd(NESTED).kernels[0]
    yield "nested loops, 512 threads", nested, LaunchConfig(512, 32, {"n": 24}, max_steps=10**7)
    gather = load(ROOT / "samples/musimd/gather.musimd").kernels[0]
    table = {k: k * 3 for k in range(1024)} | {2000: 255}
    yield ("gather, 1024 threads", gather,
           LaunchConfig(1024, 32, {"table": 0, "n": 2000, "out": 4096}, table))


def measure(repeat: int, limit: int | None = None) -> list[dict]:
    """One row per case (the first `limit` ones): counts, best wall and CPU seconds,
    lane-instructions/s."""
    rows = []
    for name, kernel, launch in list(cases())[:limit]:
        wall, cpu = [], []
        for _ in range(repeat):
            start, start_cpu = time.perf_counter(), time.process_time()
            counters = run_kernel(kernel, launch).counters
            wall.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
        lanes = counters.lane_instructions
        rows.append({"kernel": name, "warp_instr": counters.warp_instructions,
                     "lane_instr": lanes, "wall_s": round(min(wall), 4),
                     "cpu_s": round(min(cpu), 4),
                     "lane_instr_per_s_wall": int(lanes / max(min(wall), 1e-9)),
                     "lane_instr_per_s_cpu": int(lanes / max(min(cpu), 1e-9))})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cases", type=int, default=None, help="only the first N kernels")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = measure(args.repeat, args.cases)
    if args.json:
        json.dump(rows, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    print("| kernel | warp instr | lane instr | wall s | CPU s | lane instr/s (wall) | "
          "lane instr/s (CPU) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['kernel']} | {r['warp_instr']} | {r['lane_instr']} | {r['wall_s']} | "
              f"{r['cpu_s']} | {r['lane_instr_per_s_wall']:,} | {r['lane_instr_per_s_cpu']:,} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
