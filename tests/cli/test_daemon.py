"""`gpudiv daemon`: commands run by a warm process give what they give in their own
process (output, files, exit status, errors), and the daemon steps aside when it is
stale, stopped or gone."""

from __future__ import annotations

import contextlib
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
from gpudiv.analyses.solve import rules_dir

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


def environment(socket: str | None, **env: str) -> dict[str, str]:
    """This environment with the daemon at `socket` (None: none) and `env` added."""
    chosen = {k: v for k, v in os.environ.items()
              if k not in ("GPUDIV_DAEMON_SOCKET", "GPUDIV_NO_DAEMON")}
    chosen.update({"GPUDIV_NO_DAEMON": "1"} if socket is None
                  else {"GPUDIV_DAEMON_SOCKET": socket})
    return {**chosen, **env}


def gpudiv(args: list[str], cwd: Path | str, socket: str | None, **env: str
           ) -> subprocess.CompletedProcess:
    """`gpudiv ARGS` as the script runs it, with the daemon at `socket` (None: none)."""
    return subprocess.run([sys.executable, "-c", COMMAND, *args], cwd=cwd,
                          env=environment(socket, **env), capture_output=True, text=True,
                          timeout=120, check=False)


def served(socket: str) -> int:
    """How many commands the daemon at `socket` has forked so far."""
    status = gpudiv(["daemon", "status", "--socket", socket], "/", None)
    assert status.returncode == 0, Path(socket + ".log").read_text()
    return int(status.stdout.split("commands served: ")[1].split(",")[0])


@contextlib.contextmanager
def daemon_in(folder: str, *options: str, **env: str):
    """A daemon listening in `folder` (started with `options` and with `env` added to the
    environment), stopped afterwards."""
    socket = os.path.join(folder, "d.sock")
    started = gpudiv(["daemon", "start", "--socket", socket, "--idle-timeout", "300",
                      *options], "/", None, **env)
    assert started.returncode == 0, started.stdout + started.stderr
    assert started.stdout.startswith("gpudiv daemon: running, pid ")
    try:
        yield socket
    finally:
        gpudiv(["daemon", "stop", "--socket", socket], "/", None, **env)


@pytest.fixture(scope="module")
def shared():
    """One daemon for the tests that only run commands through it."""
    folder = tempfile.mkdtemp(prefix="gd", dir="/tmp")
    try:
        with daemon_in(folder) as socket:
            yield socket
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def running(socket_folder):
    """A daemon of the test's own (one it stops)."""
    with daemon_in(socket_folder) as socket:
        yield socket


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
    pytest.param(["analyze", "--no-such-option", SAMPLE], marks=pytest.mark.slow),
    pytest.param(["--help"], marks=pytest.mark.slow),
    pytest.param(["rules"], marks=pytest.mark.slow),
], ids=["report", "missing-file", "usage-error", "help", "rules"])
def test_same_output_and_status_as_its_own_process(shared, tmp_path, args):
    before = served(shared)
    here = gpudiv(args, tmp_path, None)
    there = gpudiv(args, tmp_path, shared)
    assert (there.returncode, there.stdout, there.stderr) == \
        (here.returncode, here.stdout, here.stderr)
    assert "Traceback" not in there.stderr
    assert served(shared) == before + 1


def test_warnings_and_output_interleave_as_in_its_own_process(shared, tmp_path):
    """Standard error line-buffered, standard output block-buffered into a file: one file
    for both gets the same lines in the same order."""
    sample = str(ROOT / "samples" / "cuda" / "function_pointers.O3.ptx")  # has warnings
    merged = {}
    for where, socket in (("here", None), ("there", shared)):
        with open(tmp_path / where, "w") as both:
            subprocess.run([sys.executable, "-c", COMMAND, "analyze", "--analysis", "simple",
                            sample], cwd=tmp_path, env=environment(socket), stdout=both,
                           stderr=subprocess.STDOUT, timeout=120, check=True)
        merged[where] = (tmp_path / where).read_text()
    assert "warning: kernel apply_per_lane" in merged["here"]
    assert merged["there"] == merged["here"]


def test_files_are_written_in_the_clients_folder(shared, tmp_path):
    args = ["analyze", "--analysis", "affine2", SAMPLE, "--format", "json", "-o"]
    assert gpudiv([*args, "here.json"], tmp_path, None).returncode == 0
    there = gpudiv([*args, "there.json"], tmp_path, shared)
    assert there.returncode == 0, there.stderr
    assert without_timing((tmp_path / "there.json").read_text()) == \
        without_timing((tmp_path / "here.json").read_text())


@pytest.mark.slow
def test_the_clients_environment_reaches_the_command(shared, tmp_path):
    rules = tmp_path / "mine.lp"
    rules.write_text("seen(V) :- var(V, _).\n#show seen/1.\n")
    args = ["solve", SAMPLE, "--rules", "mine.lp"]
    here = gpudiv(args, tmp_path, None, COLUMNS="50")
    there = gpudiv(args, tmp_path, shared, COLUMNS="50")
    assert there.returncode == here.returncode == 0, there.stderr
    assert there.stdout == here.stdout


@pytest.mark.slow
def test_a_stale_daemon_steps_aside_and_stops(socket_folder, tmp_path):
    # A copy of the package of its own, first on the path, whose module this test edits
    # (editing the installed one would stop every other test's daemon).
    package = Path(daemon_module.__file__).parents[1]
    copy = tmp_path / "site" / "gpudiv"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    if not (copy / "rules").exists():  # an editable install maps gpudiv.rules elsewhere
        shutil.copytree(rules_dir(), copy / "rules",
                        ignore=shutil.ignore_patterns("__pycache__"))
    env = {"PYTHONPATH": str(copy.parent)}
    with daemon_in(socket_folder, **env) as socket:
        same = gpudiv(["analyze", "--analysis", "simple", SAMPLE], tmp_path, socket, **env)
        assert same.returncode == 0 and served(socket) == 1
        module = copy / "cli" / "daemon.py"
        module.write_text(module.read_text() + "\n# edited\n")
        there = gpudiv(["analyze", "--analysis", "simple", SAMPLE], tmp_path, socket, **env)
        assert there.returncode == 0 and "kernel vec_add" in there.stdout
        assert not os.path.exists(socket)  # ran in its own process; the daemon went away
        status = gpudiv(["daemon", "status", "--socket", socket], "/", None, **env)
        assert status.returncode == 2 and "not running" in status.stdout
        assert "changed" in Path(socket + ".log").read_text()


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


def run_through(socket: str, args: list[str], cwd: Path | str, **env: str) -> tuple[int, int]:
    """Send `gpudiv ARGS` to the daemon as the client does (with `env` added to the
    environment), its output thrown away; the process that ran it and its exit status."""
    from gpudiv.command import replies, request

    with open(os.devnull, "r+b") as nothing:
        fd = nothing.fileno()
        connection = request(socket, ("run", args, str(cwd), environment(socket, **env),
                                      0o022, [("utf-8", "strict")] * 3), [fd, fd, fd])
        assert connection is not None
        connection.settimeout(30)  # a command that never answers fails the test, not hangs
        try:
            words = list(replies(connection))
        finally:
            connection.close()
    assert [w[0] for w in words] == ["pid", "exit"], words
    return int(words[0][1]), int(words[1][1])


def test_a_worker_runs_commands_one_after_another(shared, tmp_path):
    """The first command pays for the copies of the daemon's pages it touches; the next
    runs in the same worker."""
    first = run_through(shared, ["analyze", "--analysis", "simple", SAMPLE], tmp_path)
    second = run_through(shared, ["analyze", "missing.ptx"], tmp_path)
    third = run_through(shared, ["analyze", "--analysis", "simple", SAMPLE], tmp_path)
    assert (first[1], second[1], third[1]) == (0, 2, 0)
    assert first[0] == second[0] == third[0]


def test_a_request_larger_than_the_channel_buffer_reaches_the_worker(shared, tmp_path):
    """A megabyte of environment is more than a socket pair holds at once: the daemon
    sends it to the worker in several sends (one send left the worker waiting for the
    rest and the client for its answer)."""
    large = {f"LARGE_{i}": "x" * 100_000 for i in range(10)}
    assert run_through(shared, ["analyze", "missing.ptx"], tmp_path, **large)[1] == 2


@pytest.mark.slow
def test_reuse_1_forks_afresh_for_every_command(socket_folder, tmp_path):
    with daemon_in(socket_folder, "--reuse", "1") as socket:
        pids = {run_through(socket, ["analyze", "--analysis", "simple", SAMPLE], tmp_path)[0]
                for _ in range(3)}
    assert len(pids) == 3


def test_reuse_must_be_a_positive_count(tmp_path):
    done = gpudiv(["daemon", "start", "--socket", str(tmp_path / "d.sock"), "--reuse", "0"],
                  "/", None)
    assert done.returncode == 2 and "--reuse" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_what_a_command_changes_does_not_reach_the_next(shared, tmp_path):
    """Folder and environment are the client's for every command a worker runs: after a
    command with `COLUMNS=50` in one folder, one without it in another gives what its own
    process gives."""
    rules = "seen(V) :- var(V, _).\n#show seen/1.\n"
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "mine.lp").write_text(rules)
    args = ["solve", SAMPLE, "--rules", "mine.lp"]
    narrow = gpudiv(args, tmp_path / "a", shared, COLUMNS="50")
    assert narrow.returncode == 0, narrow.stderr
    here = gpudiv(args, tmp_path / "b", None)
    there = gpudiv(args, tmp_path / "b", shared)
    assert there.returncode == here.returncode == 0, there.stderr
    assert there.stdout == here.stdout


def test_start_twice_and_status(shared):
    again = gpudiv(["daemon", "start", "--socket", shared], "/", None)
    assert again.returncode == 0 and "already running" in again.stdout
    status = gpudiv(["daemon", "status", "--socket", shared], "/", None).stdout.strip()
    assert status.startswith("gpudiv daemon: running, pid ") and f"({shared})" in status
    assert status.endswith(", running now: 0") and "commands served: " in status


@pytest.mark.slow
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
def test_ctrl_c_reaches_the_command(shared, tmp_path):
    client = subprocess.Popen(
        [sys.executable, "-c", COMMAND, "analyze", "--analysis", "affine2", LARGE, "--format",
         "json", "-o", os.devnull], cwd=tmp_path, env=environment(shared),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        status = gpudiv(["daemon", "status", "--socket", shared], "/", None).stdout
        if "running now: 1" in status:
            break
        time.sleep(0.05)
    time.sleep(0.3)
    client.send_signal(signal.SIGINT)
    out, err = client.communicate(timeout=60)
    assert client.returncode == 130, err
    assert err.strip() == "gpudiv: interrupted"


def test_the_warm_up_loads_what_reports_need(tmp_path):
    """Children find the text report's renderer (rich) imported: each text report would
    otherwise import it again (15 ms)."""
    probe = ("import sys, gpudiv.cli.daemon as d; d.warm_up(); "
             "print(' '.join(m for m in ('rich.console', 'gpudiv.report.documents', "
             "'gpudiv.report.jsontext') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120, check=True).stdout.split()
    assert out == ["rich.console", "gpudiv.report.documents", "gpudiv.report.jsontext"]


@pytest.mark.parametrize(("code", "done", "grown", "threads", "retires"), [
    (0, 1, 0, 1, False), (1, 5, 10 << 20, 1, False), (2, 99, 0, 1, False),
    (0, 100, 0, 1, True),  # its `--reuse` commands are done
    (130, 1, 0, 1, True),  # interrupted: the command may have stopped half-way
    (3, 1, 0, 1, True),  # an internal error
    (0, 1, daemon_module.WORKER_GROWTH + 1, 1, True),  # grew too much
    (0, 1, 0, 2, True),  # left a thread running
])
def test_when_a_worker_retires(code, done, grown, threads, retires):
    assert daemon_module._should_retire(code, done, 100, grown, threads) is retires
