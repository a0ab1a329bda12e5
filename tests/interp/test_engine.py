"""The shared SIMT engine (gpudiv.interp.engine, interp.policies): explicit reconvergence
points written on branches (`ir.RECONVERGE`) are honoured by both machines under `sync`
(and `auto`), and moving one can remove a SIMT deadlock, as SSDE does."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from gpudiv import ir
from gpudiv.interp.engine import has_marks, reconvergence_pcs
from gpudiv.interp.musimd import LaunchConfig, reconvergence_for, run_kernel
from gpudiv.interp.ptx import PtxLaunch, run_ptx_kernel
from gpudiv.interp.ptx_launch import machine_policy
from gpudiv.interp.simt import DeadlockError
from gpudiv.lang.musimd.parse import parse_musimd
from gpudiv.lang.musimd.printer import print_musimd
from gpudiv.lang.ptx.parse import parse_ptx
from gpudiv.lang.ptx.printer import print_ptx

ROOT = Path(__file__).resolve().parents[2] / "samples"
SPIN = (ROOT / "musimd" / "spin_lock.musimd").read_text()
# The lock loop's exit branch reconverges at the loop header (SPIN) instead of the exit:
# the spinning lanes wait there while the lock holder runs its critical section.
MARKED = SPIN.replace("bnz g, CRIT             # while (!try_lock()) ;",
                      "bnz g, CRIT  # gpudiv: reconverge SPIN")


def spin(text: str) -> ir.Kernel:
    return parse_musimd(text).kernel("spin_lock")


def test_a_moved_reconvergence_point_removes_the_musimd_spin_lock_deadlock():
    marked = spin(MARKED)
    (branch,) = [i for i in marked.instructions() if i.kind == ir.BRANCH and i.operator == "bnz"]
    assert branch.attrs[ir.RECONVERGE] == "SPIN" and has_marks(marked)
    assert reconvergence_for(marked) == "sync"
    config = LaunchConfig(8, 4)
    reference = run_kernel(spin(SPIN), LaunchConfig(8, 4, reconvergence="mimd")).shared
    for policy in ("auto", "sync"):
        result = run_kernel(marked, LaunchConfig(8, 4, reconvergence=policy))
        assert result.shared == reference and reference[1] == sum(range(8))
    with pytest.raises(DeadlockError, match="^SIMT deadlock in kernel spin_lock"):
        run_kernel(marked, LaunchConfig(8, 4, reconvergence="ipdom"))  # hardware ignores it
    with pytest.raises(DeadlockError, match="^SIMT deadlock in kernel spin_lock"):
        run_kernel(spin(SPIN), config)  # unmarked: auto is ipdom


def test_reconvergence_pcs_take_the_mark_only_when_asked():
    marked = spin(MARKED)
    start, count = {}, 0
    for block in marked.blocks:
        start[block.label] = count
        count += len(block.instructions)
    plain = reconvergence_pcs(marked, start, count, marked=False)
    moved = reconvergence_pcs(marked, start, count, marked=True)
    assert plain["SPIN"] == start["CRIT"] and moved["SPIN"] == start["SPIN"]
    assert {k: v for k, v in moved.items() if k != "SPIN"} == \
        {k: v for k, v in plain.items() if k != "SPIN"}


def test_musimd_printer_keeps_the_mark():
    program = parse_musimd(MARKED)
    again = parse_musimd(print_musimd(program))
    assert not again.errors
    (branch,) = [i for i in again.kernel("spin_lock").instructions()
                 if i.kind == ir.BRANCH and i.operator == "bnz"]
    assert branch.attrs[ir.RECONVERGE] == "SPIN"


def test_a_mark_naming_no_label_is_an_error_at_its_place():
    program = parse_musimd("kernel k()\n  p = tid < 2\n  bz p, L  # gpudiv: reconverge NOPE\n"
                           "  x = 1\nL: stop\n", "k.musimd")
    (error,) = program.errors
    assert str(error).startswith("k.musimd:3:33: error: reconvergence point 'NOPE'")


PTX_TEXT = (ROOT / "cuda" / "spin_deadlock.O3.ptx").read_text()
# naive_lock_sum: the lanes that fail the compare-and-swap reconverge with the winner at
# the loop header instead of after the loop.
PTX_MARKED = re.sub(r"(@%p1 bra \t\$L__BB0_1;)", r"\1 // gpudiv: reconverge $L__BB0_1",
                    PTX_TEXT, count=1)


def test_a_moved_reconvergence_point_removes_the_ptx_spin_lock_deadlock():
    assert PTX_MARKED != PTX_TEXT
    kernel = parse_ptx(PTX_MARKED).kernel("naive_lock_sum")
    assert machine_policy(kernel, "auto") == "marked"
    args = {0: np.zeros(1, np.int32), 1: np.zeros(1, np.int32)}
    result = run_ptx_kernel(kernel, PtxLaunch((1, 1, 1), (40, 1, 1), dict(args)))
    assert list(result.buffers[kernel.params[1]]) == [sum(range(40))]
    with pytest.raises(DeadlockError, match="^SIMT deadlock"):
        run_ptx_kernel(kernel, PtxLaunch((1, 1, 1), (40, 1, 1), dict(args),
                                         reconvergence="ipdom"))
    printed = print_ptx(parse_ptx(PTX_MARKED))
    assert "// gpudiv: reconverge $L__BB0_1" in printed
    again = parse_ptx(printed).kernel("naive_lock_sum")
    assert [i.attrs[ir.RECONVERGE] for i in again.instructions() if ir.RECONVERGE in i.attrs] \
        == ["$L__BB0_1"]
