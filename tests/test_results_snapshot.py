"""Analysis results on every sample equal a committed snapshot (issue 16: optimisations
must not change what an analysis concludes).

`tests/data/results_snapshot.json` holds, per sample file, analysis and kernel, the class
of every variable and branch as letters (`CODES`) and a digest of the whole JSON report of
the kernel (names, lines, reasons, affine forms, findings and their explanations) without
its timings and solver statistics. A change that gains precision soundly regenerates it
(`python tests/test_results_snapshot.py`) and says so in its commit.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = ROOT / "tests" / "data" / "results_snapshot.json"
ANALYSES = ("simple", "affine2")
CODES = {"constant": "k", "uniform": "u", "constaffine": "c", "affine": "a", "divergent": "d"}
# Fields of a kernel's JSON report that measure the run, not its conclusions.
VOLATILE = ("timing_ms", "solver")


def sample_files() -> list[str]:
    """Every analysable sample, relative to the repository root."""
    found = [p for suffix in ("*.ptx", "*.musimd") for p in (ROOT / "samples").rglob(suffix)]
    return sorted(str(p.relative_to(ROOT)) for p in found)


def kernel_entry(kernel: dict) -> dict:
    """The snapshot of one kernel's JSON report: class letters and a digest of the rest."""
    stable = {key: value for key, value in kernel.items() if key not in VOLATILE}
    digest = hashlib.sha256(json.dumps(stable, sort_keys=True).encode()).hexdigest()[:20]
    return {"variables": "".join(CODES[v["class"]] for v in kernel["variables"]),
            "branches": "".join("d" if b["divergent"] else "u" for b in kernel["branches"]),
            "digest": digest}


def file_snapshot(path: str, analyses: tuple[str, ...] = ANALYSES) -> dict:
    """{analysis: {kernel: entry}} for one sample, read once, every analysis run on it."""
    from gpudiv.api import analyze
    from gpudiv.lang.load import load
    from gpudiv.report.documents import analysis_json

    program = load(path)
    result = {}
    for name in analyses:
        (document,) = analysis_json([analyze(program, name)])["inputs"]
        result[name] = {k["name"]: kernel_entry(k) for k in document["kernels"]}
    return result


def current_snapshot() -> dict:
    """The snapshot of every sample as the analyses compute it now (run from ROOT)."""
    return {path: file_snapshot(path) for path in sample_files()}


@pytest.mark.slow
def test_every_sample_matches_the_committed_snapshot(monkeypatch):
    monkeypatch.chdir(ROOT)
    expected = json.loads(SNAPSHOT.read_text())
    assert sorted(expected) == sample_files(), "samples added or removed: regenerate"
    differences = []
    for path in sample_files():
        now = file_snapshot(path)
        for analysis in ANALYSES:
            before, after = expected[path][analysis], now[analysis]
            if before != after:
                kernels = sorted(k for k in set(before) | set(after)
                                 if before.get(k) != after.get(k))
                differences.append(f"{path} {analysis}: {', '.join(kernels)}")
    assert not differences, "\n".join(differences)


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT))
    SNAPSHOT.write_text(json.dumps(current_snapshot(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {SNAPSHOT.relative_to(ROOT)}")
