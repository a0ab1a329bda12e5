"""The fused-kernel builder: address polynomials, the per-thread rule, PTX fusion."""

from pathlib import Path

import pytest

from gpudiv.lang.host.parse import load_host
from gpudiv.transforms.fusion import _per_thread, accesses
from gpudiv.verify.host_check import transform_host
from tests.ptxas_tool import PTXAS, ptxas_errors

HOST = Path(__file__).parents[2] / "samples" / "host"


def test_addresses_are_traced_to_per_thread_polynomials():
    prog = load_host(HOST / "cuda_pipeline.host")
    scale = accesses(prog.kernels["kf_scale"].kernel)  # PTX: bytes, 4 per element
    assert [a.poly for a in scale] == [
        {("kf_scale_param_1",): 1, ("tid",): 4, ("ctaid", "ntid"): 4},
        {("kf_scale_param_0",): 1, ("tid",): 4, ("ctaid", "ntid"): 4}]
    neighbour = accesses(load_host(HOST / "neg_neighbour.host").kernels["Neighbour"].kernel)
    index = {k: v for k, v in neighbour[0].poly.items() if k != ("src",)}
    assert index == {("tid",): 1, ("ctaid", "ntid"): 1, (): 1} and _per_thread(index)
    assert not _per_thread({("tid",): 1, (): 1})  # every block touches the same element


def test_ptx_kernels_fuse_verified_and_ptxas_accepts(tmp_path):
    done = transform_host(HOST / "cuda_pipeline.host", "kfcm", verify=True)
    assert [r.status for r in done.runs] == ["equal", "equal"]
    assert [(r.before.launches, r.after.launches) for r in done.runs] == [(4, 1), (3, 1)]
    assert done.languages() == ["ptx"]
    target = tmp_path / "out.host"
    target.write_text(done.text(str(target)))
    fused = Path(done.fused_file(str(target), "ptx"))
    fused.write_text(done.kernels_text("ptx"))
    assert load_host(target).kernels.keys() >= set(done.result.fused)
    if PTXAS is None:
        pytest.skip("ptxas not installed")
    assert ptxas_errors(fused) is None
