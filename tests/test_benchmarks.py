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
    "bench_scaling.py": ["--shapes", "calls", "--sizes", "60"],
    "bench_vs_ptxas.py": ["--analyses", "simple", "--repeat", "1", "--no-compile",
                          "samples/cuda/vector_ops.O3.ptx"],
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
