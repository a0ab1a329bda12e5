"""`gpudiv fuse`, `gpudiv host` and `gpudiv transform HOSTFILE --pass kfcm|kf-trad`."""

import json
from pathlib import Path

from gpudiv.cli import main

HOST = Path(__file__).parents[2] / "samples" / "host"


def test_fuse_report_names_fusion_compensation_predicates(capsys):
    assert main(["fuse", "--report", str(HOST / "fig5_2.host")]) == 0
    out = capsys.readouterr().out
    assert "bkf: Kernel2 (line 19) fused with Kernel1 (line 17) as Fused_Kernel1_Kernel2" in out
    assert "Kernel2 placed unfused at the exit of" in out
    assert "    xfusible: n4" in out and "    xlatest: " in out


def test_fuse_report_gives_the_reason_of_a_refusal(capsys):
    assert main(["fuse", str(HOST / "neg_shapes.host"), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (refusal,) = report["refusals"]
    assert refusal["reason"].startswith("different launch shapes <<<2, 32>>> and <<<4, 16>>>")
    assert report["fused_kernels"] == []


def test_transform_verify_reports_launches_per_input(capsys):
    assert main(["transform", str(HOST / "fig5_2.host"), "--pass", "kfcm", "--verify"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [f"{HOST / 'fig5_2.host'}: inputs {{'c': 1}}: verified; launches 2 -> 1, "
                   "transactions 8 -> 6, warp instructions 32 -> 34",
                   f"{HOST / 'fig5_2.host'}: inputs {{'c': 0}}: verified; launches 1 -> 1, "
                   "transactions 4 -> 4, warp instructions 16 -> 16"]


def test_transform_writes_program_and_fused_kernels(tmp_path, capsys):
    target = tmp_path / "out.host"
    assert main(["transform", str(HOST / "fig5_2.host"), "--pass", "kfcm", "-o",
                 str(target)]) == 0
    assert "Fused_Kernel1_Kernel2<<<2, 32>>>" in target.read_text()
    assert "kernel Fused_Kernel1_Kernel2(" in (tmp_path / "out.fused.musimd").read_text()
    assert main(["host", str(target), "--input", "c=1", "--format", "json"]) == 0
    run = json.loads(capsys.readouterr().out)
    assert run["counters"]["per_kernel"] == {"Fused_Kernel1_Kernel2": 1}


def test_bad_host_program_is_one_line_and_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.host"
    bad.write_text(f'import "{HOST / "fig5_2.musimd"}"\nd = malloc(4)\nfree(d)\n'
                   "Kernel1<<<1, 4>>>(d)\n")
    assert main(["transform", str(bad), "--pass", "kfcm"]) == 2
    err = capsys.readouterr().err
    assert err == f"{bad}:4:1: error: kernel 'Kernel1' takes 2 arguments (out1, in1), got 1\n"
    bad.write_text(f'import "{HOST / "fig5_2.musimd"}"\nd = malloc(4)\nfree(d)\n'
                   "memset(d, 0)\n")
    assert main(["host", str(bad)]) == 2
    assert capsys.readouterr().err == f"{bad}:4:8: error: use of freed buffer 'd'\n"
    assert main(["transform", str(HOST / "fig5_2.host"), "--pass", "lcm"]) == 2
    assert "unknown host pass 'lcm'" in capsys.readouterr().err
