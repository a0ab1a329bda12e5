"""Every benchmark script runs from the repository root in a tiny mode (issue 18, item 5).

They are run as the README and benchmarks/README.md say, `python benchmarks/NAME.py`, in
a fresh interpreter whose working directory is the repository root; the test checks that
they finish and print their table, never their timings.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

TINY = {
    "bench_analysis.py": ["--sizes", "50", "--repeat", "1"],
    "bench_affine.py": ["--sizes", "50", "--repeat", "1"],
    "bench_corpus.py": ["--programs", "2", "--statements", "5", "--repeat", "1",
                        "--skip-samples", "--json"],
    "bench_ptx_interp.py": ["--repeat", "1", "--grids", "1", "--skip-check", "--json"],
    "bench_ptx_frontend.py": ["--repeat", "1", "--sizes", "300", "--shapes", "many",
                              "--memory-mb", "--skip-samples", "--skip-analysis", "--json"],
    "bench_policies.py": ["--repeat", "1", "--json"],
    "bench_musimd_interp.py": ["--repeat", "1", "--cases", "1", "--json"],
    "bench_code_motion.py": ["tests/data/motion/fig4_1.musimd", "--passes", "lcm",
                             "--coalescing", "off"],
    "bench_sizes.py": ["--shape", "nested_ifs", "--sizes", "10", "20", "--json"],
    "bench_schemes.py": ["samples/musimd/wu_fig3.musimd", "--json"],
    "bench_structure.py": ["samples/musimd/wu_fig1_short_circuit.musimd", "--repeat", "1"],
    "bench_cache.py": ["--sizes", "100", "1000", "--repeat", "1"],
    "bench_scaling.py": ["--shapes", "calls", "--sizes", "60", "--min-ms", "0", "--counts"],
    "bench_vs_ptxas.py": ["--mode", "process", "daemon", "--analyses", "simple", "--repeat",
                          "1", "--no-compile", "samples/cuda/vector_ops.O3.ptx"],
    "bench_regalloc.py": ["samples/musimd/avgSquare.musimd", "--registers", "3"],
    "bench_srqp_size.py": ["60", "--passes", "lcm,ssrqp"],
    "bench_kfcm.py": ["samples/host/fig5_14.host"],
}


def test_every_script_has_a_tiny_mode():
    assert sorted(TINY) == sorted(p.name for p in (ROOT / "benchmarks").glob("bench_*.py"))


@pytest.mark.slow  # a fresh interpreter per script: full suite only
@pytest.mark.parametrize("script", sorted(TINY))
def test_benchmark_runs_from_the_repository_root(script):
    done = subprocess.run([sys.executable, f"benchmarks/{script}", *TINY[script]], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip(), done.stderr[-2000:]
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_deadlock_table_lists_hanging_kernels_and_whether_they_are_detected():
    """`benchmarks/deadlock_table.py --hangs` (the check for missed detections) on T1: it
    hangs under ipdom on some launches, and it is detected."""
    done = subprocess.run([sys.executable, "benchmarks/deadlock_table.py", "--hangs",
                           "--launches", "1", "--json",
                           "samples/musimd/deadlock_t1_spin_lock.musimd"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    (row,) = json.loads(done.stdout)
    assert row["kernel"] == "spinLock" and row["hang"] > 0 and row["detected"]


def test_scaling_fits_time_and_work_and_takes_medians_of_runs():
    """bench_scaling's fit: a linear stage fits 1, a quadratic one 2, times under the
    floor are left out, work counts are fitted without it; a size's row holds the median
    of its runs."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_scaling

    def run(n: int, noise: float) -> dict:
        row = {"shape": "s", "size": n, "instructions": n, "blocks": 1, "atoms": 40 * n}
        row.update({stage: n / 100 + noise for stage in bench_scaling.STAGES})
        row["ground"] = (n / 100) ** 2
        row["solve"] = 0.5  # under the floor at every size
        return row

    rows = [bench_scaling.median_row([run(n, 0.0), run(n, 5.0), run(n, -0.0)])
            for n in (1000, 10_000, 100_000)]
    assert [r["runs"] for r in rows] == [3, 3, 3] and rows[0]["parse"] == 10.0
    fits = bench_scaling.exponents(rows, 1.0)["s"]
    assert round(fits["parse"], 6) == 1.0 and round(fits["ground"], 6) == 2.0
    assert fits["solve"] is None and round(fits["atoms"], 6) == 1.0
    assert "calls_read" not in fits


def test_scaling_rounds_measure_every_size_in_each_round_and_keep_the_least(monkeypatch):
    """`--rounds 3 --statistic min`: every size is measured once per round, the first
    round in order and the later ones shuffled; a round's value is the median of its
    runs, and a stage keeps its least round."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import argparse

    import bench_scaling

    measured: list[str] = []

    def fake_size(what: list[str], _args) -> list[dict]:
        measured.append(what[2])
        size = int(what[2])
        slow = 3.0 if len(measured) <= 3 else 1.0  # a slow spell during the first round
        row = {"shape": "s", "size": size, "instructions": size, "blocks": 1, "atoms": size}
        row.update({stage: slow * size / 100 for stage in bench_scaling.STAGES})
        # the small size runs 20 times, its runs spread: their least would be lower
        spread = [0.5, 1.0, 1.5] * 6 + [1.0, 1.0] if size == 1000 else [1.0]
        return [{**row, **{stage: row[stage] * f for stage in bench_scaling.STAGES}}
                for f in spread]

    monkeypatch.setattr(bench_scaling, "measure_size", fake_size)
    jobs = [["--child", "s", str(n)] for n in (1000, 10_000, 100_000)]
    args = argparse.Namespace(rounds=3, statistic="min")
    rounds = bench_scaling.measure_rounds(jobs, args)
    rows = [bench_scaling.combined_rounds(job, "min") for job in rounds]
    assert measured[:3] == ["1000", "10000", "100000"] and len(measured) == 9
    assert sorted(measured[3:6]) == sorted(measured[:3])  # each size once per round
    assert [r["runs"] for r in rows] == [60, 3, 3]
    assert [r["parse"] for r in rows] == [10.0, 100.0, 1000.0]  # the slow spell left out
    # Each round fitted on its own: the slow spell fell on all sizes of the first round
    # alike, so every round fits 1; a round where only the largest size is slow fits more.
    ranges = bench_scaling.exponent_ranges(bench_scaling.round_exponents(rounds, 1.0))
    assert [round(x, 6) for x in ranges["s"]["parse"]] == [1.0, 1.0]
    rounds[2][2] = {**rounds[2][2], "parse": 2 * rounds[2][2]["parse"]}
    least, greatest = bench_scaling.exponent_ranges(
        bench_scaling.round_exponents(rounds, 1.0))["s"]["parse"]
    assert round(least, 6) == 1.0 and greatest > 1.1
    assert round(bench_scaling.exponents(rows, 1.0)["s"]["parse"], 6) == 1.0


@pytest.mark.slow
def test_scaling_on_samples_sums_each_files_kernels_and_fits_per_build():
    """`bench_scaling.py --samples FILE…`: one row per file, its stages summed over its
    kernels, the exponents fitted over the files of each build."""
    files = ["samples/cuda/vector_ops.O3.ptx", "samples/cuda/scan.O3.ptx",
             "samples/cuda/scan.G.ptx"]
    done = subprocess.run([sys.executable, "benchmarks/bench_scaling.py", "--samples", *files,
                           "--min-ms", "0", "--json"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    document = json.loads(done.stdout)
    assert sorted(document["exponents"]) == ["samples -G", "samples -O3"]
    rows = {r["shape"]: r for r in document["rows"]}
    assert sorted(rows) == ["scan.G", "scan.O3", "vector_ops.O3"]
    from gpudiv.lang.load import load
    scan = load(ROOT / "samples" / "cuda" / "scan.O3.ptx")
    assert rows["scan.O3"]["instructions"] == sum(k.instruction_count for k in scan.kernels)
    assert len(scan.kernels) > 1 and rows["scan.O3"]["group"] == "samples -O3"
    assert document["exponents"]["samples -O3"]["atoms"] is not None
