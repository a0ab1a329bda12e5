"""Pausing the cyclic garbage collector (gpudiv.ir.perf)."""

import gc
import subprocess
import sys

from gpudiv.ir.perf import paused_gc


def test_paused_gc_nests_and_restores():
    assert gc.isenabled()
    with paused_gc():
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_start_up_freezes_only_during_the_first_command():
    """The first command's start-up is frozen out of the collector's sight; a later one in
    the same process (tests call `main` again and again) only pauses the collector."""
    code = ("import gc\nfrom gpudiv.ir import perf\n"
            "with perf.start_up():\n    paused = not gc.isenabled()\n"
            "    made = [[] for _ in range(9)]\n"
            "first = gc.get_freeze_count()\nperf.started()\n"
            "with perf.start_up():\n    more = [[] for _ in range(9)]\n"
            "print(paused, first > 0, gc.get_freeze_count() == first, gc.isenabled())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.split() == ["True"] * 4, done.stdout + done.stderr
