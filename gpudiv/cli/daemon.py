"""`gpudiv daemon start|stop|status`: one warm process that runs `gpudiv` commands.

Start-up is most of what a `gpudiv` command on a small file costs: Python, clingo, the
analyses and the rule files' syntax trees. The daemon pays for them once: it imports
them, analyses a small built-in kernel under each analysis, freezes what start-up made
(`gc.freeze`), and then forks one child per command that `gpudiv.command` sends. The
child takes the client's working folder, environment, umask and standard streams (the
client's own descriptors), runs `gpudiv.cli.main.main` on its command line and exits with
its status; the daemon reaps it and sends the client the status and the child's
processor time. A child is a fresh copy of the warm process, so one command cannot
change what the next one sees.

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
import selectors
import signal
import socket
import subprocess
import sys
import time
from typing import TYPE_CHECKING

from gpudiv.cli.common import EXIT_ERROR, EXIT_OK, CommandError
from gpudiv.command import PROTOCOL, replies, request, socket_path

if TYPE_CHECKING:
    from gpudiv.api import FileAnalysis

IDLE_TIMEOUT = 3600.0
START_WAIT = 30.0  # seconds `start` waits for the daemon to listen
REQUEST_LIMIT = 16 << 20  # bytes of one request (command line and environment)
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
    from gpudiv.analyses import ANALYSES, DEFAULT_ANALYSIS
    from gpudiv.cli.main import COMMANDS
    from gpudiv.ir.perf import started
    from gpudiv.report import corpus  # noqa: F401 - imported for the children

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


def _child(argv: list[str], cwd: str, env: dict[str, str], umask: int,
           encodings: list[tuple[str, str]], fds: list[int]) -> int:
    """Run one command as the client would have run it; its exit status."""
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


def _read_request(connection: socket.socket) -> tuple[tuple, list[int]]:
    """One request: the unmarshalled tuple and the descriptors sent with it."""
    connection.settimeout(10.0)  # a client that never finishes its request is dropped
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


class Daemon:
    """The accept loop: one forked child per `run` request, reaped as it ends."""

    def __init__(self, listener: socket.socket, path: str, idle_timeout: float) -> None:
        self.listener = listener
        self.path = path
        self.idle_timeout = idle_timeout
        self.watched = package_files()
        self.stamp = stamp_of(self.watched)
        self.running: dict[int, socket.socket] = {}
        self.served = 0
        self.started = time.time()
        self.last_active = time.monotonic()
        self.stopping = False

    def serve(self) -> None:
        """Accept requests until stopped, stale or idle; then wait for the children."""
        wake_read, wake_write = os.pipe()
        os.set_blocking(wake_write, False)
        signal.set_wakeup_fd(wake_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, lambda *_: self._stop())
        signal.signal(signal.SIGINT, lambda *_: self._stop())
        selector = selectors.DefaultSelector()
        selector.register(self.listener, selectors.EVENT_READ)
        selector.register(wake_read, selectors.EVENT_READ)
        self.wake = (selector, wake_read, wake_write)
        while not self.stopping or self.running:
            idle = self.last_active + self.idle_timeout - time.monotonic()
            events = selector.select(timeout=max(idle, 0.01) if not self.running else None)
            for key, _mask in events:
                if key.fileobj is self.listener:
                    self._accept()
                elif key.fileobj == wake_read:
                    with contextlib.suppress(BlockingIOError):
                        os.read(wake_read, 4096)
            self._reap()
            if not self.running and time.monotonic() - self.last_active >= self.idle_timeout:
                self._stop()

    def _stop(self) -> None:
        """Stop accepting: the socket goes at once, so that new commands run in their own
        process; the loop ends when the running children have ended."""
        if self.stopping:
            return
        self.stopping = True
        self.wake[0].unregister(self.listener)
        self.listener.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

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
        _, argv, cwd, env, umask, encodings = message
        pid = os.fork()
        if pid == 0:  # the child: never returns to the loop
            code = 3
            try:
                self.listener.close()
                connection.close()
                signal.set_wakeup_fd(-1)
                for fd in self.wake[1:]:
                    os.close(fd)
                code = _child(argv, cwd, env, umask, encodings, fds)
            except BaseException as error:  # noqa: BLE001 - the promise is: never a traceback
                with contextlib.suppress(Exception):
                    print(f"gpudiv: internal error in the daemon: {type(error).__name__}: "
                          f"{error}", file=sys.stderr, flush=True)
            finally:
                os._exit(code if isinstance(code, int) and 0 <= code < 256 else 1)
        for fd in fds:
            os.close(fd)
        self.served += 1
        self.running[pid] = connection
        with contextlib.suppress(OSError):
            connection.sendall(f"pid {pid}\n".encode())

    def _answer(self, connection: socket.socket, kind: str | None) -> None:
        """A `status`, `stop` or `stale` answer."""
        with contextlib.suppress(OSError):
            if kind == "status":
                connection.sendall(f"status {os.getpid()} {self.started:.0f} {self.served} "
                                   f"{len(self.running)}\n".encode())
            elif kind in ("stop", "stale"):
                connection.sendall(f"{kind}\n".encode())
                self._stop()
        connection.close()

    def _reap(self) -> None:
        """Send each ended child's status and processor seconds to its client."""
        while self.running:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            connection = self.running.pop(pid, None)
            if connection is None:
                continue
            code = os.waitstatus_to_exitcode(status)
            code = 128 - code if code < 0 else code  # killed by a signal: 128 + number
            seconds = usage.ru_utime + usage.ru_stime
            with contextlib.suppress(OSError):
                connection.sendall(f"exit {code} {seconds:.6f}\n".encode())
            connection.close()
            self.last_active = time.monotonic()


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


def serve(path: str, idle_timeout: float) -> int:
    """Warm up, listen at `path` and serve until stopped (the daemon process's body)."""
    listener = _listen(path)
    try:
        warm_up()
        gc.collect()
        gc.freeze()
        Daemon(listener, path, idle_timeout).serve()
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
        return serve(path, args.idle_timeout)
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
    return _start(path, args.idle_timeout)


def _start(path: str, idle_timeout: float) -> int:
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
             "--idle-timeout", str(idle_timeout)],
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
                    "`gpudiv` command of this installation is run by a fork of it, "
                    "without Python's and clingo's start-up (GPUDIV_NO_DAEMON=1 runs a "
                    "command in its own process).")
    daemon.add_argument("action", choices=("start", "stop", "status", "serve"),
                        help="serve: be the daemon (what `start` runs in the background)")
    daemon.add_argument("--socket", help="socket path (default: one per user and "
                                         "installation; GPUDIV_DAEMON_SOCKET)")
    daemon.add_argument("--idle-timeout", type=float, default=IDLE_TIMEOUT, metavar="S",
                        help="stop after S seconds without a command")
    daemon.set_defaults(handler=cmd_daemon)
