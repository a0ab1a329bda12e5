"""The `gpudiv` command's entry point: hand the command to a running daemon, else run it here.

A Python process that imports clingo and the analyses costs about 0.1 s of processor time
before it reads a line; `ptxas` assembles a small file in 0.02 s. `gpudiv daemon start`
keeps one warm process (`gpudiv.cli.daemon`) whose forked workers run the commands. This module
is what every `gpudiv` command runs first, so it imports only the standard library: when
a daemon of this installation is listening, it sends the command line, the working
folder, the environment and its three standard streams (as file descriptors, so the
child reads and writes them directly), forwards Ctrl-C, and exits with the child's
status; otherwise, or with `GPUDIV_NO_DAEMON` set, it runs `gpudiv.cli.main` itself.

Protocol (one Unix socket connection per request): the client sends a 4-byte big-endian
length and a `marshal`led tuple, with the descriptors attached to the first bytes; the
daemon answers lines of ASCII text: `pid N` once a worker runs it, then `exit CODE
SECONDS` (the command's status and processor seconds, once the worker has answered or,
if it ended during the command, been reaped), or
`stale` (the installation changed since the daemon started: the client runs the command
itself), or a status line.
"""

from __future__ import annotations

# The C modules under `socket` and `signal`: their Python wrappers import enum, selectors
# and functools, half of what this module costs a command that a daemon runs. `_socket`
# loads only when a daemon's socket is there.
import _signal
import gc
import marshal
import os
import sys
import zlib

TYPE_CHECKING = False  # (no `typing` import: this module is every command's start)
if TYPE_CHECKING:
    import _socket
    from collections.abc import Callable

PROTOCOL = 1
# Every `gpudiv` command that never goes to a daemon: managing the daemon itself.
LOCAL_COMMANDS = ("daemon",)


def socket_path() -> str:
    """The daemon socket of this installation: `GPUDIV_DAEMON_SOCKET`, else one per user,
    Python and package folder under `XDG_RUNTIME_DIR` (or the temporary folder)."""
    chosen = os.environ.get("GPUDIV_DAEMON_SOCKET")
    if chosen:
        return chosen
    base = os.environ.get("XDG_RUNTIME_DIR") or os.environ.get("TMPDIR") or "/tmp"
    package = os.path.dirname(os.path.abspath(__file__))
    key = zlib.crc32(f"{sys.executable}\0{sys.version}\0{package}".encode())
    return os.path.join(base, f"gpudiv-{os.getuid()}", f"daemon-{key:08x}.sock")


def request(path: str, message: tuple, fds: list[int] = ()) -> _socket.socket | None:
    """A connection to the daemon at `path` with `message` (and the descriptors `fds`,
    attached to its first bytes) sent; None when no daemon listens there."""
    import _socket

    connection = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        connection.connect(path)
        send_request(connection, message, fds)
    except OSError:
        connection.close()
        return None
    return connection


def send_request(connection, message: tuple, fds: list[int] = ()) -> None:
    """Send one request on a connected blocking Unix socket: its length, the `marshal`led
    message and, attached to the first bytes, the descriptors `fds` (OSError on failure).
    A message larger than the socket's buffer (a large environment) goes in several sends."""
    payload = marshal.dumps((PROTOCOL, *message))
    head = len(payload).to_bytes(4, "big") + payload
    rights = b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in fds)
    import _socket

    sent = connection.sendmsg([head], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, rights)]
                              if fds else [])
    if sent < len(head):  # never a send of nothing: the daemon may have answered
        connection.sendall(head[sent:])


def replies(connection: _socket.socket):
    """The daemon's reply lines, as lists of words, until it closes the connection."""
    pending = b""
    while True:
        try:
            chunk = connection.recv(4096)
        except OSError:  # the daemon went away
            return
        if not chunk:
            return
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line.decode("ascii", "replace").split()


def _streams_usable() -> bool:
    """Whether descriptors 0, 1 and 2 are open (they are handed to the daemon's child)."""
    try:
        for fd in (0, 1, 2):
            os.fstat(fd)
    except OSError:
        return False
    return True


def _encodings() -> tuple:
    """The encoding and error handler of this process's standard streams, which the child
    gives its own (Python chose them from this environment and these descriptors)."""
    return tuple((getattr(s, "encoding", None) or "utf-8", getattr(s, "errors", None) or
                  "strict") for s in (sys.stdin, sys.stdout, sys.stderr))


def forward(argv: list[str], path: str) -> int | None:
    """Run `gpudiv ARGV` in the daemon at `path`; its exit status, or None when the
    command should run here (no daemon, a stale one, unusable standard streams)."""
    if not _streams_usable():
        return None
    mask = os.umask(0)
    os.umask(mask)
    connection = request(path, ("run", argv, os.getcwd(), dict(os.environ), mask,
                                _encodings()), [0, 1, 2])
    if connection is None:
        return None
    child = None
    previous = {}

    def interrupt(number: int, _frame) -> None:
        try:
            os.kill(child, number)
        except ProcessLookupError:  # it has ended; its status is on the way
            pass

    try:
        for words in replies(connection):  # Ctrl-C before the child runs: see main
            if words[:1] == ["pid"] and child is None:
                child = int(words[1])
                for number in (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP):
                    previous[number] = _signal.signal(number, interrupt)
            elif words[:1] == ["exit"]:
                return int(words[1])
            elif words[:1] == ["stale"]:
                return None
    finally:
        for number, handler in previous.items():
            _signal.signal(number, handler)
        connection.close()
    if child is None:
        return None  # the daemon went away before starting the command
    print("gpudiv: error: the daemon's child ended without a status", file=sys.stderr)
    return 3


def _ours(path: str) -> bool:
    """Whether `path` is a socket of this user (a command line and an environment are
    never sent to anyone else's)."""
    try:
        info = os.stat(path)
    except OSError:
        return False
    return info.st_uid == os.getuid() and (info.st_mode & 0o170000) == 0o140000


def main() -> int:
    """Entry point of the `gpudiv` command."""
    status = through_daemon(sys.argv[1:])
    if status is not None:
        return status
    return _import_cli()(sys.argv[1:])


def _import_cli() -> Callable[[list[str] | None], int]:
    """`gpudiv.cli.main.main`, imported with the cyclic collector paused: the imports make
    only objects that live as long as the process, and the collections they triggered
    rescanned them (about 1.5 ms of a command's start). They are then moved where
    collections never look (`gc.freeze`, as `gpudiv.ir.perf.start_up` does with what the
    command's own start makes)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        from gpudiv.cli.main import main as run_here

        gc.freeze()
    finally:
        if was_enabled:
            gc.enable()
    return run_here


def through_daemon(argv: list[str]) -> int | None:
    """The status of the command run by a daemon of this installation, or None when it
    is to run here (no daemon, a `daemon` command, `GPUDIV_NO_DAEMON`, a stale daemon)."""
    if not argv or argv[0] in LOCAL_COMMANDS or os.environ.get("GPUDIV_NO_DAEMON"):
        return None
    path = socket_path()
    if not _ours(path):
        return None
    try:
        return forward(argv, path)
    except KeyboardInterrupt:
        print("gpudiv: interrupted", file=sys.stderr)
        return 130


def run() -> None:
    """The `gpudiv` console script: `main` (dataclass methods compiled once per machine
    when the command runs here), then the process ends without freeing its
    objects one by one, as a compiler's driver ends (an analysed file's IR, SSA forms,
    results and the modules: about 30 ms of particle_library.G's 1.3 s, 3 ms of a small
    file's 0.1 s). The standard streams are flushed and the `atexit` functions run first;
    while a thread other than the main one is alive, the process exits as usual (which
    waits for it)."""
    status = through_daemon(sys.argv[1:])
    if status is None:
        status = _run_here_with_cached_methods()
    threading = sys.modules.get("threading")
    if threading is not None and threading.active_count() > 1:
        sys.exit(status)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # the reader went away (`| head`); a closed stream
            pass
    import atexit

    atexit._run_exitfuncs()
    os._exit(status)


def _run_here_with_cached_methods() -> int:
    """The command in this process, its dataclass methods compiled once per machine
    instead of once per process, from the first import of `dataclasses` on
    (`gpudiv.lang.method_cache`)."""
    from gpudiv.lang import method_cache

    cache = method_cache.install()
    try:
        return _import_cli()(sys.argv[1:])
    finally:
        if cache is not None:
            cache.save()
