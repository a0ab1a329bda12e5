"""Compiled dataclass methods kept on disk between processes (process start-up).

`@dataclass` writes each method it generates (`__init__`, `__repr__`, `__eq__`,
`__hash__`, a frozen class's `__setattr__` and `__delattr__`) as Python source and runs
it through `exec` when the class is made: about 0.5 ms a class on the benchmark machine,
three quarters of it compiling those sources (issue 16). A `MethodCache` gives the
`dataclasses` module an `exec` of its own (`install`) that looks each source up among
code objects read from one file of the user's cache folder, compiled as `exec` would have
compiled it (the calling frame's `__future__` flags are part of the key), and runs the
code object; a source it lacks is compiled and kept, and `save` writes the file again.

The classes `gpudiv analyze` needs are records (`gpudiv.ir.record`), not dataclasses:
importing `dataclasses` alone costs about 9 ms. The dataclasses of the other commands
(transform, check, verify) and of lark and orjson still come through here. So that a
process that never imports `dataclasses` does not pay for it, `install` on a process
that has not imported it yet waits for that import (`_InstallOnImport`, a finder on
`sys.meta_path`), and reads the file only then.

Only the `gpudiv` console script installs it, in its own process (`gpudiv.command.run`):
importing gpudiv as a library never changes the standard library under its caller. The
file holds `marshal`led code objects, as a `.pyc` does, in the folder that already holds
gpudiv's grammar tables, under a checksum and named after the Python build: a missing,
damaged or foreign file means compiling as usual. It keeps the sources of the latest
process and as many older ones as fit `MAX_ENTRIES`, each marshalled on its own so
that a process unmarshals only the methods it makes.
"""

from __future__ import annotations
import __future__

import builtins
import marshal
import os
import sys
import zlib
from types import CodeType, ModuleType

from gpudiv.lang.cache_files import cache_folder, read_marshalled, write_marshalled

TYPE_CHECKING = False  # (typing is not imported: an analysis never needs it)
if TYPE_CHECKING:
    from os import PathLike

_FORMAT = 2
MAX_ENTRIES = 1000
# The compiler flags of `__future__` features: what `exec` takes over from its caller.
_FUTURE_FLAGS = 0
for _feature in __future__.all_feature_names:
    _FUTURE_FLAGS |= getattr(__future__, _feature).compiler_flag

Key = tuple[int, str]  # (future flags, source)


def _build() -> str:
    """What a code object depends on: the Python build that compiled it."""
    return f"{sys.implementation.cache_tag}|{sys.version}"


def cache_file() -> str | None:
    """The file of this Python build (None: no cache folder)."""
    folder = cache_folder()
    if folder is None:
        return None
    return os.path.join(folder, f"methods-{zlib.crc32(_build().encode()):08x}.bin")


class MethodCache:
    """Code objects by (flags, source), read from `path` and added to by `exec`."""

    def __init__(self, path: str | PathLike | None):
        self.path = path
        # Each code object stays marshalled until a class asks for it: a file holds the
        # methods of every command run, a command uses a few hundred of them.
        self.stored: dict[Key, bytes] = read(path)
        self.codes: dict[Key, CodeType] = {}
        self.used: set[Key] = set()
        self.compiled = 0  # sources this process compiled (not in the file)

    def exec(self, source, globals=None, locals=None, /) -> None:  # noqa: A002
        """`exec`, with a source string's code object taken from the cache."""
        if globals is None:  # exec's own defaults: the caller's namespaces
            caller = sys._getframe(1)
            globals = caller.f_globals  # noqa: A001
            if locals is None:
                locals = caller.f_locals  # noqa: A001
        if isinstance(source, str):
            key = (sys._getframe(1).f_code.co_flags & _FUTURE_FLAGS, source)
            code = self.codes.get(key) or self._stored_code(key)
            if code is None:
                code = compile(source, "<string>", "exec", flags=key[0], dont_inherit=True)
                self.compiled += 1
            self.codes[key] = code
            self.used.add(key)
            source = code
        builtins.exec(source, globals, locals)

    def _stored_code(self, key: Key) -> CodeType | None:
        """The code object the file holds for `key`, if any (and it unmarshals to one)."""
        data = self.stored.get(key)
        if data is None:
            return None
        try:
            code = marshal.loads(data)
        except (ValueError, EOFError, TypeError):
            return None
        return code if isinstance(code, CodeType) else None

    def save(self) -> None:
        """Write the file again when this process compiled a source it lacked: the
        methods this process used, then older ones up to `MAX_ENTRIES`; a folder that
        cannot be written: no cache."""
        if self.path is None or not self.compiled:
            return
        entries = {key: marshal.dumps(self.codes[key]) for key in self.used}
        for key, data in self.stored.items():
            if len(entries) >= MAX_ENTRIES:
                break
            entries.setdefault(key, data)
        write_marshalled(self.path, (_FORMAT, _build()), entries)


def read(path: str | PathLike | None) -> dict[Key, bytes]:
    """The marshalled code objects stored in `path` by (flags, source) (empty when it is
    missing, damaged or from another Python build)."""
    entries = read_marshalled(path, (_FORMAT, _build()))
    if not isinstance(entries, dict):
        return {}
    return {key: code for key, code in entries.items()
            if isinstance(key, tuple) and len(key) == 2 and isinstance(key[0], int)
            and isinstance(key[1], str) and isinstance(code, bytes)}


def install(path: str | PathLike | None = None) -> MethodCache | _InstallOnImport | None:
    """A cache on `path` (default: `cache_file()`) made the `exec` of the `dataclasses`
    module, or None when that module does not compile through `exec` (a Python whose
    dataclasses work otherwise) or has been given one already. When `dataclasses` is not
    imported yet, the cache is made when it is (the returned `_InstallOnImport`)."""
    module = sys.modules.get("dataclasses")
    if module is None:
        pending = _InstallOnImport(path)
        sys.meta_path.insert(0, pending)
        return pending
    return _give_cache(module, path)


def _give_cache(dataclasses: ModuleType, path: str | PathLike | None) -> MethodCache | None:
    """Make a cache on `path` the `exec` of the `dataclasses` module (see `install`)."""
    compiles_through_exec = (hasattr(dataclasses, "_create_fn")
                             or hasattr(dataclasses, "_FuncBuilder"))
    if "exec" in vars(dataclasses) or not compiles_through_exec:
        return None
    cache = MethodCache(path if path is not None else cache_file())
    dataclasses.exec = cache.exec
    return cache


class _InstallOnImport:
    """A finder first on `sys.meta_path` until `dataclasses` is imported; the module it
    finds (through the finders after it) gets the cache once it has run."""

    def __init__(self, path: str | PathLike | None):
        self.path = path
        self.cache: MethodCache | None = None

    def find_spec(self, name: str, path=None, target=None):
        """The spec of `dataclasses`, loaded through `_LoadThenGiveCache`; else None."""
        if name != "dataclasses":
            return None
        for finder in sys.meta_path:  # (importlib is iterating over it: not changed here)
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _LoadThenGiveCache(spec.loader, self)
                return spec
        return None

    def remove(self) -> None:
        """Stop waiting for the import."""
        if self in sys.meta_path:
            sys.meta_path.remove(self)

    def save(self) -> None:
        """Save the cache if `dataclasses` was imported and got it."""
        if self.cache is not None:
            self.cache.save()


class _LoadThenGiveCache:
    """A loader that runs `dataclasses` through its own loader, then gives it the cache."""

    def __init__(self, loader, pending: _InstallOnImport):
        self.loader = loader
        self.pending = pending

    def create_module(self, spec):
        """The module object, as the wrapped loader makes it."""
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        """Run the module, then install the cache into it (and stop waiting)."""
        self.pending.remove()
        self.loader.exec_module(module)
        self.pending.cache = _give_cache(module, self.pending.path)


def uninstall() -> None:
    """Give the `dataclasses` module back the built-in `exec` (and stop waiting for its
    import)."""
    for finder in list(sys.meta_path):
        if isinstance(finder, _InstallOnImport):
            finder.remove()
    module = sys.modules.get("dataclasses")
    if module is not None:
        vars(module).pop("exec", None)
