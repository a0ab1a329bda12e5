"""Every code-motion pass over the samples: each kernel it changes verifies on the
interpreter (same memory bit for bit) with no oracle violation, and printed PTX is
accepted by ptxas."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpudiv.lang.load import load
from gpudiv.verify.transform_check import transform
from tests.ptxas_tool import PTXAS, ptxas_errors

ROOT = Path(__file__).parents[2] / "samples"
# The samples written to hang (SIMT deadlocks) are left out: they cannot verify, and each
# of their launches runs until the interpreter sees its state repeat.
MUSIMD = sorted(p for p in (ROOT / "musimd").glob("*.musimd")
                if not p.name.startswith(("deadlock_", "spin_lock")))
GOLDEN = sorted((Path(__file__).parents[1] / "data" / "motion").glob("*.musimd"))
PTX = sorted((ROOT / "cuda").glob("*.O3.ptx"))
PASSES = ["lcm", "scm", "sscm"]


def changed_and_verified(path: Path, name: str) -> tuple[int, int, str]:
    """(changed kernels, changed kernels verified, printed result) of one pass on a file."""
    original = load(path)
    out = transform(original, name, verify=True)
    changed = verified = 0
    for report, before, after in zip(out.kernels, original.kernels, out.program.kernels,
                                     strict=True):
        assert report.status in ("verified", "not-executed"), report.difference
        assert not report.oracle_violations
        if report.status == "not-executed":
            continue  # the original cannot run either (a SIMT deadlock sample)
        if [i.form() for i in before.instructions()] != [i.form() for i in after.instructions()]:
            changed += 1
            verified += report.status == "verified"
    return changed, verified, out.text


@pytest.mark.slow
@pytest.mark.parametrize("name", PASSES)
def test_musimd_samples_verify_after_code_motion(name):
    counts = [changed_and_verified(path, name)[:2] for path in [*MUSIMD, *GOLDEN]]
    changed = sum(c for c, _ in counts)
    assert changed == sum(v for _, v in counts)
    assert changed >= 1  # at least the golden Fig 4.4/4.6 kernel


@pytest.mark.slow
@pytest.mark.parametrize("name", PASSES)
@pytest.mark.parametrize("path", PTX, ids=lambda p: p.name)
def test_ptx_samples_verify_after_code_motion(name, path, tmp_path):
    changed, verified, text = changed_and_verified(path, name)
    assert changed == verified
    if PTXAS is not None:
        out = tmp_path / path.name
        out.write_text(text)
        assert ptxas_errors(out) is None, ptxas_errors(out)
