"""`gpudiv transform --pass regalloc --allocator A --registers N`: report lines, JSON
statistics, one-line errors."""

import json
from pathlib import Path

from gpudiv.cli import main

ROOT = Path(__file__).resolve().parents[2] / "samples"


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_regalloc_verify_text_and_json(capsys):
    path = str(ROOT / "musimd/avgSquare.musimd")
    code, out, _ = run(capsys, "transform", path, "--pass", "regalloc", "--allocator",
                       "affine", "--registers", "3", "--verify")
    assert code == 0, out
    assert "kernel avgSquare: verified" in out
    assert "affine, 3 registers: 3 spilled (local 1, (i) constant 0, (ii) shared 1, " \
        "(iii) remat 0, (iv) shared+mad 1)" in out
    code, out, _ = run(capsys, "transform", path, "--pass", "regalloc", "--registers", "3",
                       "--json")
    assert code == 0
    (kernel,) = json.loads(out)["files"][0]["kernels"]
    assert kernel["static"]["allocator"] == "linear"
    assert kernel["static"]["local_slots_per_thread"] == 3


def test_regalloc_prints_allocated_musimd(capsys):
    code, out, _ = run(capsys, "transform", str(ROOT / "musimd/avgSquare.musimd"),
                       "--pass", "regalloc", "--registers", "2")
    assert code == 0 and "local[268435456] =" in out and "r1 = " in out


def test_regalloc_errors_are_one_line(capsys):
    ptx = str(ROOT / "cuda/scan.O3.ptx")
    code, _, err = run(capsys, "transform", ptx, "--pass", "regalloc", "--registers", "1")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "error: kernel " in err and "registers of class ." in err and "too few" in err
    code, _, err = run(capsys, "transform", str(ROOT / "musimd/avgSquare.musimd"),
                       "--pass", "regalloc", "--registers", "0")
    assert code == 2 and err.strip().endswith("the register budget must be at least 1")
