"""Every sample host program: KFCM and KF_trad results run equal to the original on
every input, launches after KFCM ≤ after KF_trad ≤ original, and KFCM fuses what KF_trad
cannot somewhere; the printed result parses and runs to the same values."""

from pathlib import Path

import pytest

from gpudiv.interp.host import run_host
from gpudiv.lang.host.parse import load_host
from gpudiv.verify.host_check import first_difference, transform_host

HOST = Path(__file__).parents[2] / "samples" / "host"
pytestmark = pytest.mark.slow  # every sample, both passes, every input: about 5 s in all
SAMPLES = sorted(HOST.glob("*.host"))


@pytest.fixture(scope="module")
def outcomes():
    return {p.stem: {name: transform_host(p, name, verify=True) for name in ("kf-trad", "kfcm")}
            for p in SAMPLES}


@pytest.mark.parametrize("sample", [p.stem for p in SAMPLES])
def test_fusion_keeps_results_and_never_adds_launches(outcomes, sample):
    trad, kfcm = outcomes[sample]["kf-trad"], outcomes[sample]["kfcm"]
    assert trad.runs and kfcm.runs
    for t, k in zip(trad.runs, kfcm.runs, strict=True):
        assert t.status == k.status == "equal", (t.difference, k.difference)
        assert k.after.launches <= t.after.launches <= t.before.launches
        assert k.after.transactions <= k.before.transactions


def test_kfcm_fuses_what_kf_trad_cannot(outcomes):
    better = [s for s, o in outcomes.items()
              if any(k.after.launches < t.after.launches
                     for t, k in zip(o["kf-trad"].runs, o["kfcm"].runs, strict=True))]
    assert {"fig5_2", "fig5_3", "solver", "pipeline", "loop_extra"} <= set(better)


def test_fig5_1_forwarding_and_dead_store_save_the_intermediate_traffic(outcomes):
    (run,) = outcomes["fig5_1"]["kfcm"].runs
    (step,) = outcomes["fig5_1"]["kfcm"].result.steps
    assert (step.forwarded, step.removed) == (1, 1)
    assert (run.before.transactions, run.after.transactions) == (8, 4)  # 2 of 4 per block


def test_printed_result_parses_and_runs_the_same(outcomes, tmp_path):
    done = outcomes["solver"]["kfcm"]
    target = tmp_path / "solver.host"
    target.write_text(done.text(str(target)))
    Path(done.fused_file(str(target))).write_text(done.kernels_text())
    again = load_host(target)
    for inputs in ({"max_it": 6, "tol": 100}, {"max_it": 2, "tol": 0}):
        a, b = run_host(load_host(HOST / "solver.host"), inputs), run_host(again, inputs)
        assert first_difference(a, b) is None
        (run,) = [r for r in done.runs if r.inputs == inputs]
        assert b.counters.launches == run.after.launches < a.counters.launches
