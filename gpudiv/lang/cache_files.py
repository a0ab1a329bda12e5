"""Files of gpudiv's on-disk caches (process start-up): the user's cache folder, and
checksummed `marshal` files under a header of what their contents depend on.

The compiled regexes (`gpudiv.lang.regex_cache`), Lark's parser tables
(`gpudiv.lang.grammars`) and the compiled dataclass methods (`gpudiv.lang.method_cache`)
live in one folder, `$XDG_CACHE_HOME/gpudiv` (else `~/.cache/gpudiv`), which may be deleted
at any time. A file is replaced at once, never seen half-written; one that is missing,
damaged or written for something else (another format, another Python build) reads as
nothing, and a folder that cannot be written means no cache, never an error.
"""

from __future__ import annotations

import _thread
import marshal
import os
import zlib

TYPE_CHECKING = False  # (typing is not imported: an analysis never needs it)
if TYPE_CHECKING:
    from os import PathLike


def cache_folder() -> str | None:
    """The user's cache folder for gpudiv (`$XDG_CACHE_HOME/gpudiv`, else
    `~/.cache/gpudiv`), created when missing; None when it cannot be made. (Paths here
    are strings: `pathlib` is not imported on the way to a small analysis.)"""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    folder = os.path.join(base, "gpudiv")
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError:
        return None
    return folder


def read_marshalled(path: str | PathLike | None, header: tuple) -> object | None:
    """What `write_marshalled` stored in `path` under `header` (what the contents depend
    on: a format number, the Python build), or None when the file is missing, its
    checksum does not match, it does not unmarshal or its header differs."""
    if path is None:
        return None
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError:
        return None
    if len(data) < 4 or int.from_bytes(data[:4], "little") != zlib.crc32(data[4:]):
        return None
    try:
        stored = marshal.loads(data[4:])
    except (ValueError, EOFError, TypeError):
        return None
    if not (isinstance(stored, tuple) and len(stored) == 2 and stored[0] == header):
        return None
    return stored[1]


def write_marshalled(path: str | PathLike | None, header: tuple, value: object) -> None:
    """Store `value` (`marshal`: plain data, code objects) in `path` under `header` and a
    checksum, replacing the file at once (a reader never sees half of it); a folder that
    cannot be written: nothing stored."""
    if path is None:
        return
    payload = marshal.dumps((header, value))
    temporary = f"{os.fspath(path)}.{os.getpid()}-{_thread.get_ident()}.tmp"
    try:
        with open(temporary, "wb") as file:
            file.write(zlib.crc32(payload).to_bytes(4, "little") + payload)
        os.replace(temporary, path)
    except OSError:
        try:
            os.unlink(temporary)
        except OSError:
            pass
