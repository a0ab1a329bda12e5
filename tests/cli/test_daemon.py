"""`gpudiv daemon`: commands run by a warm process give what they give in their own
process (output, files, exit status, errors), and the daemon steps aside when it is
stale, stopped or gone."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import gpudiv.cli.daemon as daemon_module

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = str(ROOT / "samples" / "cuda" / "vector_ops.O3.ptx")
LARGE = str(ROOT / "samples" / "cuda_large" / "particle_library.G.ptx")
# What the `gpudiv` script runs.
COMMAND = "import sys; from gpudiv.command import main; sys.argv[0] = 'gpudiv'; sys.exit(main())"


@pytest.fixture
def socket_folder():
    # A short folder of its own: a Unix socket path has at most 107 bytes.
    folder = tempfile.mkdtemp(prefix="gd", dir="/tmp")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def gpudiv(args: list[str], cwd: Path | str, socket: str | None, **env: str
           ) -> subprocess.CompletedProcess:
    """`gpudiv ARGS` as the script runs it, with the daemon at `socket` (None: none)."""
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("GPUDIV_DAEMON_SOCKET", "GPUDIV_NO_DAEMON")}
    if socket is None:
        environment["GPUDIV_NO_DAEMON"] = "1"
    else:
        environment["GPUDIV_DAEMON_SOCKET"] = socket
    environment.update(env)
    return subprocess.run([sys.executable, "-c", COMMAND, *args], cwd=cwd, env=environment,
                          capture_output=True, text=True, timeout=120, check=False)


def served(socket: str) -> int:
    """How many commands the daemon at `socket` has forked so far."""
    status = gpudiv(["daemon", "status", "--socket", socket], "/", None)
    assert status.returncode == 0, Path(socket + ".log").read_text()
    return int(status.stdout.split("commands served: ")[1].split(",")[0])


@pytest.fixture
def package_lock():
    """Shared while a test's daemon runs; the stale test edits the package's time stamps,
    which stops every daemon of this installation, so it takes the lock alone (the tests
    may run in parallel workers)."""
    with open(os.path.join(tempfile.gettempdir(), "gpudiv-daemon-tests.lock"), "a") as lock:
        yield lock


@pytest.fixture
def running(socket_folder, package_lock):
    """A daemon listening at a fresh socket; stopped afterwards."""
    fcntl.flock(package_lock, fcntl.LOCK_SH)
    socket = os.path.join(socket_folder, "d.sock")
    started = gpudiv(["daemon", "start", "--socket", socket, "--idle-timeout", "300"], "/",
                     None)
    assert started.returncode == 0, started.stdout + started.stderr
    assert started.stdout.startswith("gpudiv daemon: running, pid ")
    yield socket
    gpudiv(["daemon", "stop", "--socket", socket], "/", None)


def without_timing(text: str) -> dict:
    """A JSON report without what differs between two runs (times, clingo counts)."""
    document = json.loads(text)
    for entry in document["inputs"]:
        for kernel in entry["kernels"]:
            kernel.pop("timing_ms", None)
    return document


@pytest.mark.parametrize("args", [
    ["analyze", "--analysis", "simple", SAMPLE],
    ["analyze", "missing.ptx"],
    ["analyze", "--no-such-option", SAMPLE],
    ["--help"],
    ["rules"],
], ids=["report", "missing-file", "usage-error", "help", "rules"])
def test_same_output_and_status_as_its_own_process(running, tmp_path, args):
    before = served(running)
    here = gpudiv(args, tmp_path, None)
    there = gpudiv(args, tmp_path, running)
    assert (there.returncode, there.stdout, there.stderr) == \
        (here.returncode, here.stdout, here.stderr)
    assert "Traceback" not in there.stderr
    assert served(running) == before + 1


def test_files_are_written_in_the_clients_folder(running, tmp_path):
    args = ["analyze", "--analysis", "affine2", SAMPLE, "--format", "json", "-o"]
    assert gpudiv([*args, "here.json"], tmp_path, None).returncode == 0
    there = gpudiv([*args, "there.json"], tmp_path, running)
    assert there.returncode == 0, there.stderr
    assert without_timing((tmp_path / "there.json").read_text()) == \
        without_timing((tmp_path / "here.json").read_text())


def test_the_clients_environment_reaches_the_command(running, tmp_path):
    rules = tmp_path / "mine.lp"
    rules.write_text("seen(V) :- var(V, _).\n#show seen/1.\n")
    args = ["solve", SAMPLE, "--rules", "mine.lp"]
    here = gpudiv(args, tmp_path, None, COLUMNS="50")
    there = gpudiv(args, tmp_path, running, COLUMNS="50")
    assert there.returncode == here.returncode == 0, there.stderr
    assert there.stdout == here.stdout


def test_a_stale_daemon_steps_aside_and_stops(running, tmp_path, package_lock):
    fcntl.flock(package_lock, fcntl.LOCK_EX)  # no other test's daemon runs from here on
    module = Path(daemon_module.__file__)
    before = module.stat()
    os.utime(module, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
    try:
        there = gpudiv(["analyze", "--analysis", "simple", SAMPLE], tmp_path, running)
    finally:
        os.utime(module, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert there.returncode == 0 and "kernel vec_add" in there.stdout
    assert not os.path.exists(running)  # ran in its own process; the daemon went away
    status = gpudiv(["daemon", "status", "--socket", running], "/", None)
    assert status.returncode == 2 and "not running" in status.stdout


def test_stop_then_commands_run_in_their_own_process(running, tmp_path):
    stopped = gpudiv(["daemon", "stop", "--socket", running], "/", None)
    assert stopped.returncode == 0 and stopped.stdout.startswith("gpudiv daemon: stopped")
    assert not os.path.exists(running)
    done = gpudiv(["analyze", "--analysis", "simple", SAMPLE], tmp_path, running)
    assert done.returncode == 0 and "kernel vec_add" in done.stdout


def test_a_socket_nobody_listens_on_is_ignored(socket_folder, tmp_path):
    import socket as sockets

    path = os.path.join(socket_folder, "dead.sock")
    dead = sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM)
    dead.bind(path)
    dead.close()  # the file stays, nothing listens
    done = gpudiv(["analyze", "--analysis", "simple", SAMPLE], tmp_path, path)
    assert done.returncode == 0 and "kernel vec_add" in done.stdout


def test_start_twice_and_status(running):
    again = gpudiv(["daemon", "start", "--socket", running], "/", None)
    assert again.returncode == 0 and "already running" in again.stdout
    status = gpudiv(["daemon", "status", "--socket", running], "/", None)
    assert status.stdout.strip().endswith("commands served: 0, running now: 0")


def test_idle_daemon_stops_by_itself(socket_folder):
    socket = os.path.join(socket_folder, "idle.sock")
    started = gpudiv(["daemon", "start", "--socket", socket, "--idle-timeout", "0.5"], "/",
                     None)
    assert started.returncode == 0, started.stderr
    deadline = time.monotonic() + 20
    while os.path.exists(socket) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not os.path.exists(socket)


def test_an_unbindable_socket_is_one_line(tmp_path):
    path = str(tmp_path / "missing-folder" / "d.sock")
    done = gpudiv(["daemon", "start", "--socket", path], "/", None)
    assert done.returncode == 2
    assert done.stderr.strip().startswith(f"gpudiv daemon: {path}:")
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


@pytest.mark.slow
def test_ctrl_c_reaches_the_command(running, tmp_path):
    environment = {**os.environ, "GPUDIV_DAEMON_SOCKET": running}
    environment.pop("GPUDIV_NO_DAEMON", None)
    client = subprocess.Popen(
        [sys.executable, "-c", COMMAND, "analyze", "--analysis", "affine2", LARGE, "--format",
         "json", "-o", os.devnull], cwd=tmp_path, env=environment, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        status = gpudiv(["daemon", "status", "--socket", running], "/", None).stdout
        if "running now: 1" in status:
            break
        time.sleep(0.05)
    time.sleep(0.3)
    client.send_signal(signal.SIGINT)
    out, err = client.communicate(timeout=60)
    assert client.returncode == 130, err
    assert err.strip() == "gpudiv: interrupted"
