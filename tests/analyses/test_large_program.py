"""The large program of the corpus, samples/cuda_large/particle_library (issue 16): 33
device functions called from 310 places (-G) by 7 kernels; its -G build is 16,600 lines.

Every test here reads or runs the whole file, so all of them are slow (full suite only).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpudiv.api import analyze, check
from gpudiv.lang.load import load

LARGE = Path(__file__).resolve().parents[2] / "samples" / "cuda_large"
SOURCE = LARGE / "particle_library.cu"

pytestmark = pytest.mark.slow


def source_lines(pattern: str) -> set[int]:
    """The lines of the CUDA source that match `pattern`."""
    return {n for n, text in enumerate(SOURCE.read_text().splitlines(), 1)
            if re.search(pattern, text)}


@pytest.mark.parametrize("build", ["O3", "G"])
def test_every_global_function_is_a_kernel_and_every_call_is_inlined(build):
    written = re.findall(r"^extern \"C\" __global__ void (\w+)", SOURCE.read_text(), re.M)
    program = load(LARGE / f"particle_library.{build}.ptx")
    assert [k.name for k in program.kernels] == written
    assert not program.errors
    raw = load(LARGE / f"particle_library.{build}.ptx", canonical=False)
    assert sum(k.instruction_count for k in program.kernels) > \
        4 * sum(k.instruction_count for k in raw.kernels)


def test_helpers_called_with_uniform_arguments_give_uniform_results():
    """library_selftest calls every helper with kernel parameters only: the one divergent
    branch is the lane test; the other kernels' findings include their bounds checks."""
    findings: dict[str, set[int]] = {}
    for finding in analyze(LARGE / "particle_library.O3.ptx", "simple").findings():
        assert finding.location.path.endswith("particle_library.cu")
        findings.setdefault(finding.kernel, set()).add(finding.location.line)
    lane_test = source_lines(r"if \(threadIdx.x == 0\)")
    assert len(lane_test) == 1 and findings["library_selftest"] == lane_test
    bounds = source_lines(r"if \(i >= n\) return;")
    for kernel in ("hash_grid", "integrate", "collide", "shade"):
        assert findings[kernel] & bounds, kernel


def test_every_claim_holds_on_the_interpreter():
    reports = check(analyze(LARGE / "particle_library.O3.ptx", "affine2"))
    assert [r.status for r in reports] == ["checked"] * 7
    assert sum(r.uses_checked for r in reports) > 10_000
    assert not [v for r in reports for v in r.violations]
