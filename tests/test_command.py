"""The `gpudiv` console script (`gpudiv.command.run`): the process ends at once after the
command, with its status, its output flushed, and its `atexit` functions run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "samples" / "cuda" / "vector_ops.O3.ptx"


def _script(body: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run `body` (which ends by calling `gpudiv.command.run`) in a fresh interpreter
    without a daemon, in `cwd` (not the checkout, whose `gpudiv` folder would shadow the
    installed package)."""
    env = {**os.environ, "GPUDIV_NO_DAEMON": "1"}
    return subprocess.run([sys.executable, "-c", body, *args], capture_output=True,
                          text=True, env=env, timeout=120, check=False, cwd=cwd)


RUN = "import sys; from gpudiv.command import run; sys.argv[0] = 'gpudiv'; run()"


def test_the_whole_report_reaches_a_pipe_with_the_status(tmp_path):
    done = _script(RUN, "analyze", "--format", "json", str(SAMPLE), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)  # all of it: flushed before the process ended
    assert {k["name"] for k in document["inputs"][0]["kernels"]} >= {"vec_add"}


def test_an_error_keeps_its_status_and_its_line(tmp_path):
    done = _script(RUN, "analyze", "no/such/file.ptx", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == "no/such/file.ptx: error: no such file"


def test_atexit_functions_run_before_the_process_ends(tmp_path):
    body = "import atexit; atexit.register(print, 'goodbye'); " + RUN
    done = _script(body, "--version", cwd=tmp_path)
    assert done.returncode == 0
    assert done.stdout.splitlines()[-1] == "goodbye"


def test_a_live_thread_is_waited_for(tmp_path):
    body = ("import threading, time; threading.Thread(target=lambda: (time.sleep(0.3), "
            "print('thread done', flush=True))).start(); " + RUN)
    done = _script(body, "--version", cwd=tmp_path)
    assert done.returncode == 0
    assert "thread done" in done.stdout


def test_python_dash_m_runs_the_same_entry(tmp_path):
    done = subprocess.run([sys.executable, "-m", "gpudiv.cli", "analyze", "--brief",
                           str(SAMPLE)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "GPUDIV_NO_DAEMON": "1"}, check=False,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "divergent branch" in done.stdout


def test_the_command_modules_import_with_the_collector_paused(tmp_path):
    """Start-up (issue 16): importing the command modules only makes objects that live as
    long as the process; no collection rescans them on the way, and the collector is on
    again afterwards."""
    body = ("import gc, sys\nfrom gpudiv.command import _import_cli\ncollections = []\n"
            "gc.callbacks.append(lambda phase, info: phase == 'start' and "
            "collections.append(info['generation']))\nmain = _import_cli()\n"
            "print(gc.isenabled(), 'argparse' in sys.modules, collections)")
    done = _script(body, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "[]"]
