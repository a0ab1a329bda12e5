"""Speed of the SIMT machines per reconvergence policy (gpudiv.interp.simt).

For a few μ-SIMD and PTX sample kernels on fixed launches, every policy that applies:
warp and lane instructions, SIMD efficiency, seconds (median of --repeat runs) and
lane-instructions per second.

    python benchmarks/bench_policies.py [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from gpudiv.interp.musimd import LaunchConfig, reconvergence_for, run_kernel
from gpudiv.interp.ptx import PtxLaunch, run_ptx_kernel
from gpudiv.lang.load import load

ROOT = Path(__file__).resolve().parents[1]


def _musimd_cases():
    triangle = load(ROOT / "samples/musimd/sumTriangle.musimd").kernels[0]
    shared = {k: k % 7 for k in range(64 * 64)}
    yield ("sumTriangle (μ-SIMD, 256 threads)", triangle,
           LaunchConfig(256, 32, {"c": 64, "m": 0, "v": 5000}, shared, max_steps=10**7))
    wu = load(ROOT / "samples/musimd/wu_fig3.musimd").kernels[0]
    yield "wu_fig3 (μ-SIMD, 7 threads)", wu, LaunchConfig(7, 7)


def _ptx_cases():
    rng = np.random.default_rng(0)
    collatz = load(ROOT / "samples/cuda/control_flow.O3.ptx").kernel("collatz_steps")
    values = rng.integers(1, 200, 512).astype(np.int32)
    yield ("collatz_steps (PTX -O3, 2x256)", collatz,
           PtxLaunch((2, 1, 1), (256, 1, 1), {0: values, 1: np.zeros(512, np.int32), 2: 512,
                                              3: 1000}))
    sort = load(ROOT / "samples/cuda/sorting.O3.ptx").kernel("bitonic_sort_block")
    yield ("bitonic_sort_block (PTX -O3, 256)", sort,
           PtxLaunch((1, 1, 1), (256, 1, 1), {0: rng.integers(0, 1000, 256).astype(np.int32)},
                     dynamic_shared=1024))


def measure(repeat: int) -> list[dict]:
    rows = []
    for name, kernel, launch in _musimd_cases():
        policies = ["ipdom", "frontier", "mimd"]
        if reconvergence_for(kernel) == "sync":
            policies.insert(0, "sync")
        for policy in policies:
            config = replace(launch, reconvergence=policy)
            rows.append(_time(name, policy, repeat,
                              lambda k=kernel, c=config: run_kernel(k, c).counters))
    for name, kernel, launch in _ptx_cases():
        for policy in ("ipdom", "frontier", "mimd"):
            config = replace(launch, reconvergence=policy)
            rows.append(_time(name, policy, repeat,
                              lambda k=kernel, c=config: run_ptx_kernel(k, c).counters))
    return rows


def _time(name: str, policy: str, repeat: int, run) -> dict:
    times = []
    counters = None
    for _ in range(repeat):
        start = time.perf_counter()
        try:
            counters = run()
        except Exception as error:  # noqa: BLE001 - a policy that cannot run this kernel
            return {"kernel": name, "policy": policy, "error": str(error)[:80]}
        times.append(time.perf_counter() - start)
    seconds = statistics.median(times)
    return {"kernel": name, "policy": policy, "warp_instr": counters.warp_instructions,
            "lane_instr": counters.lane_instructions,
            "simd_eff": round(counters.simd_efficiency, 3), "seconds": round(seconds, 4),
            "lane_instr_per_s": int(counters.lane_instructions / seconds)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = measure(args.repeat)
    if args.json:
        json.dump(rows, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    print("| kernel | policy | warp instr | lane instr | SIMD eff | seconds | lane instr/s |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        if "error" in r:
            print(f"| {r['kernel']} | {r['policy']} | – | – | – | – | {r['error']} |")
        else:
            print(f"| {r['kernel']} | {r['policy']} | {r['warp_instr']} | {r['lane_instr']} | "
                  f"{r['simd_eff']} | {r['seconds']} | {r['lane_instr_per_s']:,} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
