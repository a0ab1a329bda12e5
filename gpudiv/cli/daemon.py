"""`gpudiv daemon start|stop|status`: one warm process that runs `gpudiv` commands.

Start-up is most of what a `gpudiv` command on a small file costs: Python, clingo, the
analyses and the rule files' syntax trees. The daemon pays for them once: it imports
them, analyses a small built-in kernel under each analysis, freezes what start-up made
(`gc.freeze`), and then hands each command that `gpudiv.command` sends to a worker, a
fork of the warm process. The worker takes the client's working folder, environment,
umask and standard streams (the client's own descriptors), runs `gpudiv.cli.main.main`
on its command line, gives the descriptors back (the client's pipes end with the command)
and answers its exit status and processor time, which the daemon passes on.

A worker then waits for the next command: a fresh fork pays for copying every page of
the daemon's memory it writes to (on a small file, about as much as the analysis
itself), a worker only once. Each command gets the client's folder, environment, umask,
streams and signal handlers anew, and what the package remembers between calls in one
process is keyed by the files' contents or modification times, as for any program that
calls gpudiv's API repeatedly. A worker ends after `--reuse` commands (1: a fresh fork
per command), after a command that was interrupted or failed inside gpudiv, that left a
thread running, or that made it grow by more than `WORKER_GROWTH`; the daemon keeps at
most `IDLE_WORKERS` waiting.

The daemon listens on a Unix socket in a folder only its user may enter
(`gpudiv.command.socket_path`), answers a client whose installation changed since it
started (`gpudiv` modules edited, reinstalled) with `stale` and stops, and stops by
itself after `--idle-timeout` seconds without a command.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import marshal
import os
import resource
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn

from gpudiv.cli.common import EXIT_ERROR, EXIT_OK, CommandError
from gpudiv.command import PROTOCOL, replies, request, send_request, socket_path
from gpudiv.ir.perf import memory_bytes

if TYPE_CHECKING:
    from gpudiv.api import FileAnalysis

IDLE_TIMEOUT = 3600.0
START_WAIT = 30.0  # seconds `start` waits for the daemon to listen
REQUEST_LIMIT = 16 << 20  # bytes of one request (command line and environment)
WORKER_COMMANDS = 100  # commands a worker runs before it ends (`--reuse`)
WORKER_GROWTH = 256 << 20  # bytes of memory a worker may gain before it ends
IDLE_WORKERS = 2  # workers kept waiting for the next command
# What the daemon analyses once before it listens, under every analysis, so that the
# rule files' syntax trees and the modules a command imports on first use are ready.
WARM_UP_PTX = """
.version 7.0
.target sm_80
.address_size 64
.visible .entry warm(.param .u64 out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    setp.lt.u32 %p1, %r1, 16;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    st.global.u32 [%rd2], %r1;
DONE:
    ret;
}
"""


def package_files() -> list[str]:
    """Every module of the installed package and every folder holding them (a module
    added to a folder changes the folder's time)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = []
    for folder, folders, files in os.walk(package):
        folders[:] = [f for f in folders if f != "__pycache__"]
        found.append(folder)
        found.extend(os.path.join(folder, f) for f in files if f.endswith(".py"))
    return found


def stamp_of(paths: list[str]) -> list[int]:
    """The modification time of each path (-1 for one that is gone): a daemon whose
    modules changed since it started would run old code."""
    out = []
    for path in paths:
        try:
            out.append(os.stat(path).st_mtime_ns)
        except OSError:
            out.append(-1)
    return out


def warm_up() -> None:
    """Import what commands use and analyse `WARM_UP_PTX` under every analysis."""
    from gpudiv import api
    from gpudiv.analyses import ANALYSES, DEFAULT_ANALYSIS, solve
    from gpudiv.cli.main import COMMANDS
    from gpudiv.ir.perf import started
    from gpudiv.report import corpus  # noqa: F401 - imported for the children

    # A daemon lives long: the shipped rule files go in as syntax trees, parsed here once
    # for all its workers (clingo.ast imported with them).
    solve.TREES_FROM = 1
    for name in ("analyze", "check", "explain", "compare", "run", "transform"):
        importlib.import_module(COMMANDS[name][0])
    for analysis in ANALYSES:
        with contextlib.suppress(Exception):  # a failing analysis fails in the child
            analysed = api.analyze_text(WARM_UP_PTX, "warm.ptx", analysis, language="ptx")
            if analysis == DEFAULT_ANALYSIS:
                _render_reports(analysed)
    started()


def _render_reports(analysed: FileAnalysis) -> None:
    """Write the coloured text report and the JSON report of one analysis, so that children
    find rich (15 ms to import; a plain text report needs nothing more) and its style
    caches ready."""
    from gpudiv.report import documents, jsontext

    documents.render_analysis([analysed], None, color=True)
    jsontext.dumps_indented(documents.analysis_json([analysed]))


def _run_command(argv: list[str], cwd: str, env: dict[str, str], umask: int,
                 encodings: list[tuple[str, str]], fds: list[int]) -> int:
    """Run one command as the client would have run it (in a worker); its exit status."""
    from gpudiv.cli.main import main

    for number in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    os.umask(umask)
    streams = []
    for fd, (encoding, errors) in enumerate(encodings):
        # As Python sets them up: stderr always line-buffered, stdout on a terminal only
        # (so that warnings and output interleave as they do in a process of its own).
        line_buffered = fd == 2 or (fd == 1 and os.isatty(fd))
        streams.append(open(fd, "r" if fd == 0 else "w", buffering=1 if line_buffered else -1,  # noqa: SIM115
                            encoding=encoding, errors=errors, closefd=False))
    sys.stdin, sys.stdout, sys.stderr = streams
    sys.argv = ["gpudiv", *argv]
    try:
        code = main(argv)
    except SystemExit as stop:  # argparse: --help, usage errors
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 2)
        if not isinstance(stop.code, int | None):
            print(stop.code, file=sys.stderr)
    except KeyboardInterrupt:
        code = 130
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    return code


def _read_request(connection: socket.socket, timeout: float | None = 10.0
                  ) -> tuple[tuple, list[int]]:
    """One request: the unmarshalled tuple and the descriptors sent with it (`timeout`:
    seconds a client may take to send it; None: wait as long as it takes)."""
    connection.settimeout(timeout)  # a client that never finishes its request is dropped
    data, fds, _flags, _address = socket.recv_fds(connection, 65536, 3)
    if len(data) < 4:
        raise ValueError("short request")
    size = int.from_bytes(data[:4], "big")
    if size > REQUEST_LIMIT:
        raise ValueError("request too large")
    while len(data) < 4 + size:
        chunk = connection.recv(min(1 << 20, 4 + size - len(data)))
        if not chunk:
            raise ValueError("truncated request")
        data += chunk
    message = marshal.loads(data[4:4 + size])
    if not isinstance(message, tuple) or not message or message[0] != PROTOCOL:
        raise ValueError("unknown protocol")
    connection.settimeout(None)
    return message[1:], fds


def _cpu_seconds() -> float:
    """Processor seconds (user + system) of this process and of the children it reaped."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _idle_signals() -> None:
    """A worker between commands: a client's late Ctrl-C is ignored, SIGTERM and SIGHUP
    end it (the daemon hands the next command to another)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for number in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, signal.SIG_DFL)


def _release_streams(saved: list[int]) -> None:
    """After a command: its streams closed and descriptors 0, 1 and 2 back to the daemon's
    (so that the client's pipes see their end as soon as the command is done)."""
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        if stream not in (sys.__stdin__, sys.__stdout__, sys.__stderr__):
            with contextlib.suppress(OSError, ValueError):
                stream.close()  # opened with closefd=False: the descriptor stays
    for target, fd in enumerate(saved):
        os.dup2(fd, target)
    sys.stdin, sys.stdout, sys.stderr = sys.__stdin__, sys.__stdout__, sys.__stderr__


def _forget_command_state() -> None:
    """What a command may leave behind that the next must not see: the temporary folder
    `tempfile` chose from its environment and the package fingerprint of `--cache`
    (computed once per process; a shipped rule file may have been edited since)."""
    tempfile.tempdir = None
    fingerprint = sys.modules.get("gpudiv.report.corpus_cache")
    if fingerprint is not None:
        fingerprint.code_fingerprint.cache_clear()


def _should_retire(code: int, done: int, limit: int, grown: int, threads: int) -> bool:
    """Whether a worker ends after a command instead of waiting for the next one: it has
    run `limit` commands, the command was interrupted or failed inside gpudiv (state may
    be half-changed), it left a thread running besides the main one (a later fork would
    copy it half-way), or the worker has `grown` by more than `WORKER_GROWTH` bytes."""
    return done >= limit or code in (130, 3) or threads > 1 or grown > WORKER_GROWTH


def _serve_commands(channel: socket.socket, limit: int) -> NoReturn:
    """A worker's life: run the commands the daemon sends on `channel`, one after another,
    answering `done CODE SECONDS RETIRE` after each (the command's exit status and
    processor seconds, and 1 when this worker ends now); end when the daemon closes the
    channel or after `limit` commands."""
    saved = [os.dup(fd) for fd in (0, 1, 2)]
    resident_at_start = memory_bytes(resident=True)
    done = 0
    while True:
        _idle_signals()
        try:
            message, fds = _read_request(channel, timeout=None)
        except (OSError, ValueError, EOFError, TypeError):
            os._exit(0)  # the daemon closed the channel (stopping, or enough idle workers)
        before = _cpu_seconds()
        try:
            code = _run_command(*message, fds)
        except KeyboardInterrupt:  # Ctrl-C before the command's own handler was set
            code = 130
        except BaseException as error:  # noqa: BLE001 - the promise is: never a traceback
            with contextlib.suppress(Exception):
                print(f"gpudiv: internal error in the daemon: {type(error).__name__}: "
                      f"{error}", file=sys.stderr, flush=True)
            code = 3
        code = code if isinstance(code, int) and 0 <= code < 256 else 1
        _idle_signals()
        _release_streams(saved)
        _forget_command_state()
        done += 1
        grown = memory_bytes(resident=True) - resident_at_start
        retire = _should_retire(code, done, limit, grown, threading.active_count())
        try:
            channel.sendall(f"done {code} {_cpu_seconds() - before:.6f} {int(retire)}\n"
                            .encode())
        except OSError:
            os._exit(0)
        if retire:
            os._exit(0)


@dataclass(eq=False)
class _Worker:
    """A forked worker as the daemon sees it: its channel and the client it serves now."""

    pid: int
    channel: socket.socket
    client: socket.socket | None = None
    reported: float = 0.0  # processor seconds of the commands it has answered
    pending: bytes = b""


class Daemon:
    """The accept loop: each `run` request goes to an idle worker, or a newly forked one;
    a worker's answer goes back to its client, and ended workers are reaped."""

    def __init__(self, listener: socket.socket, path: str, idle_timeout: float,
                 reuse: int = WORKER_COMMANDS) -> None:
        self.listener = listener
        self.path = path
        self.idle_timeout = idle_timeout
        self.reuse = reuse
        self.watched = package_files()
        self.stamp = stamp_of(self.watched)
        self.workers: dict[int, _Worker] = {}  # by pid, until reaped
        self.idle: list[_Worker] = []
        self.served = 0
        self.started = time.time()
        self.last_active = time.monotonic()
        self.stopping = False

    @property
    def running(self) -> int:
        """How many commands run now."""
        return sum(1 for worker in self.workers.values() if worker.client is not None)

    def serve(self) -> None:
        """Accept requests until stopped, stale or idle; then wait for the commands."""
        wake_read, wake_write = os.pipe()
        os.set_blocking(wake_write, False)
        signal.set_wakeup_fd(wake_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, lambda *_: self._stop())
        signal.signal(signal.SIGINT, lambda *_: self._stop())
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.listener, selectors.EVENT_READ)
        self.selector.register(wake_read, selectors.EVENT_READ)
        self.wake = (wake_read, wake_write)
        while not self.stopping or self.running:
            idle = self.last_active + self.idle_timeout - time.monotonic()
            events = self.selector.select(timeout=max(idle, 0.01) if not self.running
                                          else None)
            for key, _mask in events:
                if key.fileobj is self.listener:
                    self._accept()
                elif key.fileobj == wake_read:
                    with contextlib.suppress(BlockingIOError):
                        os.read(wake_read, 4096)
                else:
                    self._hear(key.data)
            self._reap()
            if not self.running and time.monotonic() - self.last_active >= self.idle_timeout:
                self._stop()
        for worker in list(self.workers.values()):
            self._close_channel(worker)

    def _stop(self) -> None:
        """Stop accepting: the socket goes at once, so that new commands run in their own
        process, and idle workers are told to end; the loop ends when the running
        commands have ended."""
        if self.stopping:
            return
        self.stopping = True
        self.selector.unregister(self.listener)
        self.listener.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        for worker in self.idle:
            self._close_channel(worker)
        self.idle.clear()

    def _accept(self) -> None:
        """Answer one connection."""
        connection, _ = self.listener.accept()
        self.last_active = time.monotonic()
        try:
            message, fds = _read_request(connection)
        except (OSError, ValueError, EOFError, TypeError):
            connection.close()
            return
        kind = message[0] if message else None
        if kind == "run":
            changed = [p for p, old, new in zip(self.watched, self.stamp,
                                                stamp_of(self.watched), strict=True)
                       if old != new]
            if changed:
                print(f"gpudiv daemon: stopping, {changed[0]} changed", file=sys.stderr)
                kind = "stale"
        if kind != "run":
            for fd in fds:
                os.close(fd)
            self._answer(connection, kind)
            return
        worker = self._hand_over(message[1:], fds, connection)
        for fd in fds:
            os.close(fd)
        if worker is None:  # no worker could take it: the client runs the command itself
            connection.close()
            return
        self.served += 1
        worker.client = connection
        with contextlib.suppress(OSError):
            connection.sendall(f"pid {worker.pid}\n".encode())

    def _hand_over(self, command: tuple, fds: list[int], connection: socket.socket
                   ) -> _Worker | None:
        """Send a command and its descriptors to an idle worker (one that has ended since
        is dropped) or to a newly forked one; the worker, None when none could be had."""
        while self.idle:
            worker = self.idle.pop()
            if self._send(worker, command, fds):
                return worker
        worker = self._spawn(connection, fds)
        return worker if worker is not None and self._send(worker, command, fds) else None

    def _send(self, worker: _Worker, command: tuple, fds: list[int]) -> bool:
        """Send a worker a request as a client sends one (`gpudiv.command.send_request`),
        blocking until all of it is sent (the worker reads it whole before anything else);
        False (and the worker dropped) when it has ended."""
        worker.channel.setblocking(True)
        try:
            send_request(worker.channel, command, fds)
        except OSError:
            self._close_channel(worker)
            return False
        worker.channel.setblocking(False)
        return True

    def _spawn(self, connection: socket.socket, fds: list[int]) -> _Worker | None:
        """Fork a worker (None when the system refuses); `connection` and `fds` are the
        request in hand, which the worker receives again through its channel."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            pid = os.fork()
        except OSError:
            ours.close()
            theirs.close()
            return None
        if pid == 0:  # the worker: never returns to the loop
            try:
                ours.close()
                self._leave(connection, fds)
                _serve_commands(theirs, self.reuse)
            finally:
                os._exit(3)
        theirs.close()
        ours.setblocking(False)
        worker = _Worker(pid, ours)
        self.workers[pid] = worker
        self.selector.register(ours, selectors.EVENT_READ, worker)
        return worker

    def _leave(self, connection: socket.socket, fds: list[int]) -> None:
        """In a new worker: close what belongs to the daemon (its socket, the clients'
        connections and descriptors, the other workers' channels, its wake-up pipe and
        selector): a client's pipe held open here would never see its end."""
        signal.set_wakeup_fd(-1)
        self.listener.close()
        connection.close()
        for fd in fds:
            os.close(fd)
        for worker in self.workers.values():
            worker.channel.close()
            if worker.client is not None:
                worker.client.close()
        for fd in self.wake:
            os.close(fd)
        self.selector.close()

    def _hear(self, worker: _Worker) -> None:
        """Read what a worker has sent: each `done` goes to its client as `exit`."""
        while True:
            try:
                chunk = worker.channel.recv(4096)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if not chunk:  # it has ended: its status comes when it is reaped
                self._close_channel(worker)
                return
            worker.pending += chunk
            while b"\n" in worker.pending:
                line, worker.pending = worker.pending.split(b"\n", 1)
                self._done(worker, line.decode("ascii", "replace").split())

    def _done(self, worker: _Worker, words: list[str]) -> None:
        """A worker's `done CODE SECONDS RETIRE`: answer its client; keep the worker for
        the next command unless it retires, the daemon stops or enough others wait."""
        if words[:1] != ["done"] or len(words) != 4 or worker.client is None:
            return
        _, code, seconds, retire = words
        worker.reported += float(seconds)
        self._answer_client(worker, f"exit {code} {seconds}\n")
        if retire == "1" or self.stopping or len(self.idle) >= IDLE_WORKERS:
            self._close_channel(worker)  # it ends by itself on reading the end
        else:
            self.idle.append(worker)

    def _answer_client(self, worker: _Worker, line: str) -> None:
        """Send a worker's client its last line and let it go."""
        with contextlib.suppress(OSError):
            worker.client.sendall(line.encode())
        worker.client.close()
        worker.client = None
        self.last_active = time.monotonic()

    def _close_channel(self, worker: _Worker) -> None:
        """Stop listening to a worker (it ends when it reads the channel's end)."""
        if worker.channel.fileno() != -1:
            with contextlib.suppress(KeyError, ValueError):
                self.selector.unregister(worker.channel)
            worker.channel.close()
        if worker in self.idle:
            self.idle.remove(worker)

    def _answer(self, connection: socket.socket, kind: str | None) -> None:
        """A `status`, `stop` or `stale` answer."""
        with contextlib.suppress(OSError):
            if kind == "status":
                connection.sendall(f"status {os.getpid()} {self.started:.0f} {self.served} "
                                   f"{self.running}\n".encode())
            elif kind in ("stop", "stale"):
                connection.sendall(f"{kind}\n".encode())
                self._stop()
        connection.close()

    def _reap(self) -> None:
        """Forget ended workers; the client of one that ended during a command gets its
        exit status (128 + the signal's number when killed) and processor seconds."""
        while self.workers:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            worker = self.workers.pop(pid, None)
            if worker is None:
                continue
            if worker.client is not None and worker.channel.fileno() != -1:
                self._hear(worker)  # a `done` it sent before ending
            if worker.client is not None:
                code = os.waitstatus_to_exitcode(status)
                code = 128 - code if code < 0 else code
                seconds = max(usage.ru_utime + usage.ru_stime - worker.reported, 0.0)
                self._answer_client(worker, f"exit {code} {seconds:.6f}\n")
            self._close_channel(worker)


def _listen(path: str) -> socket.socket:
    """A listening socket at `path` that only this user may connect to (CommandError when
    a daemon already listens there or the path cannot be bound)."""
    if _status(path) is not None:
        raise CommandError(f"gpudiv daemon: already running at {path}")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # left by a daemon that did not stop cleanly
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    mask = os.umask(0o177)  # the socket file is created rw------- by bind
    try:
        listener.bind(path)
    except OSError as error:
        listener.close()
        raise CommandError(f"gpudiv daemon: {path}: {error.strerror or error}") from None
    finally:
        os.umask(mask)
    listener.listen(64)
    return listener


def _private_folder(path: str) -> None:
    """Make the folder of the default socket path, readable by this user only
    (CommandError when it exists and belongs to someone else or is open to others)."""
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    info = os.stat(folder)
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise CommandError(f"gpudiv daemon: {folder}: must belong to you and be private "
                           "(mode 700)")


def serve(path: str, idle_timeout: float, reuse: int = WORKER_COMMANDS) -> int:
    """Warm up, listen at `path` and serve until stopped (the daemon process's body)."""
    listener = _listen(path)
    try:
        warm_up()
        gc.collect()
        gc.freeze()
        Daemon(listener, path, idle_timeout, reuse).serve()
    finally:
        if listener.fileno() != -1:
            listener.close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
    return EXIT_OK


def _status(path: str) -> list[str] | None:
    """The daemon's status line at `path` as words, or None when none answers."""
    connection = request(path, ("status",))
    if connection is None:
        return None
    try:
        return next((w for w in replies(connection) if w[:1] == ["status"]), None)
    finally:
        connection.close()


def cmd_daemon(args: argparse.Namespace) -> int:
    """Start, stop or describe the daemon of this installation."""
    path = os.path.abspath(args.socket or socket_path())
    if not args.socket and args.action in ("start", "serve"):
        _private_folder(path)
    if args.action == "serve":
        return serve(path, args.idle_timeout, args.reuse)
    status = _status(path)
    if args.action == "status":
        if status is None:
            print(f"gpudiv daemon: not running ({path})")
            return EXIT_ERROR
        pid, since, served, busy = status[1:5]
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(int(since)))
        print(f"gpudiv daemon: running, pid {pid}, since {started} ({path}); commands "
              f"served: {served}, running now: {busy}")
        return EXIT_OK
    if args.action == "stop":
        if status is None:
            print(f"gpudiv daemon: not running ({path})")
            return EXIT_OK
        connection = request(path, ("stop",))
        if connection is not None:
            list(replies(connection))
            connection.close()
        _wait_for(lambda: not os.path.exists(path), START_WAIT)
        print(f"gpudiv daemon: stopped (pid {status[1]})")
        return EXIT_OK
    if status is not None:
        print(f"gpudiv daemon: already running, pid {status[1]} ({path})")
        return EXIT_OK
    return _start(path, args.idle_timeout, args.reuse)


def _start(path: str, idle_timeout: float, reuse: int) -> int:
    """Start a daemon process in its own session and wait until it answers."""
    try:
        log = open(path + ".log", "ab")  # noqa: SIM115 - closed once the daemon has it
    except OSError as error:
        raise CommandError(f"gpudiv daemon: {path}: {error.strerror or error}") from None
    with log:
        process = subprocess.Popen(
            # -P: no working folder on sys.path, as for the `gpudiv` script; the children
            # change folder, and a module there must never shadow gpudiv's.
            [sys.executable, "-P", "-m", "gpudiv.cli", "daemon", "serve", "--socket", path,
             "--idle-timeout", str(idle_timeout), "--reuse", str(reuse)],
            cwd="/", stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
            env={**os.environ, "GPUDIV_NO_DAEMON": "1"})
    if not _wait_for(lambda: process.poll() is not None or _status(path) is not None,
                     START_WAIT) or process.poll() is not None:
        raise CommandError(f"gpudiv daemon: did not start (see {log.name})")
    print(f"gpudiv daemon: running, pid {process.pid} ({path})")
    return EXIT_OK


def _wait_for(condition, seconds: float) -> bool:
    """Poll `condition` every 20 ms for at most `seconds`; whether it became true."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def register(sub: argparse._SubParsersAction) -> None:
    """Add `daemon` to the `gpudiv` subcommand parser."""
    daemon = sub.add_parser(
        "daemon", help="keep a warm gpudiv process that runs later commands",
        description="Start, stop or describe a warm gpudiv process. While it runs, every "
                    "`gpudiv` command of this installation is run by a fork of it (a "
                    "worker, which runs up to --reuse commands one after another), "
                    "without Python's and clingo's start-up (GPUDIV_NO_DAEMON=1 runs a "
                    "command in its own process).")
    daemon.add_argument("action", choices=("start", "stop", "status", "serve"),
                        help="serve: be the daemon (what `start` runs in the background)")
    daemon.add_argument("--socket", help="socket path (default: one per user and "
                                         "installation; GPUDIV_DAEMON_SOCKET)")
    daemon.add_argument("--idle-timeout", type=float, default=IDLE_TIMEOUT, metavar="S",
                        help="stop after S seconds without a command")
    daemon.add_argument("--reuse", type=_positive_count, default=WORKER_COMMANDS,
                        metavar="N",
                        help="commands a worker runs one after another before it ends (1: a "
                             "fresh fork of the warm process for every command)")
    daemon.set_defaults(handler=cmd_daemon)


def _positive_count(text: str) -> int:
    """`--reuse`'s value: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return value
