"""One clingo run through clingo's C library, without importing clingo's Python package.

`import clingo` executes the whole Python wrapper (control, solving, backend, ast,
statistics, typing, textwrap…): 40–45 ms of wall time on its own on this project's
machine, about 10 ms of a small file's `gpudiv analyze` beyond the modules both import,
while `ptxas` assembles that file in 20 ms (issue 16, items 3 and 5). The wrapper talks to
clingo through a cffi extension module, `clingo._clingo`; this module loads that extension
on its own (4 ms) and calls the handful of C functions an analysis needs: make a control
object, load and add programs, add facts as ground atoms through the backend, ground,
take the final model's shown symbols as clingo's 64-bit symbol ids, read two statistics.
Symbols are interned by clingo for the life of the process, so the ids stay valid after
the control object is freed; `clingo.Symbol(id)` is the same symbol.

Where the extension cannot be loaded that way (a clingo whose wrapper is built
differently), the package is imported and its own cffi objects are used: same results.
Errors raise what clingo's wrapper raises: `RuntimeError` with clingo's message,
`MemoryError` when it ran out of memory.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable

# The logger of a control: (message code, message text); codes are clingo's integers
# (`clingo.MessageCode` values: 2 is an undefined atom).
Logger = Callable[[int, str], None]
ATOM_UNDEFINED = 2

_library: tuple | None = None


def library() -> tuple:
    """clingo's cffi `ffi` and `lib`, loaded once per process."""
    global _library
    if _library is None:
        _library = _load()
    return _library


def _load() -> tuple:
    """The extension module's ffi and lib."""
    module = sys.modules.get("clingo._clingo") or _load_extension()
    if module is None:  # pragma: no cover - every clingo ≥ 5.6 wheel ships the extension
        from clingo._internal import _ffi, _lib

        return _ffi, _lib
    return module.ffi, module.lib


# Whether the logger callback attached last is ours and came after `clingo.core`'s.
_logger_attached = {"ours": False, "after_core": False}


def _attach_logger(ffi) -> None:
    """Make clingo's logger callback ours: it passes the message code as clingo's own
    does (a `MessageCode` once `clingo.core` is loaded, else the integer, which `_code`
    reads either way) and decodes the message leniently. clingo's callback, which
    `clingo.core` attaches when it is imported, decodes strictly and ends the process
    ("PANIC: exception in nothrow scope") when a message holds a character that clingo
    cut in two, as it did for a fact with "é←" in it."""
    core = "clingo.core" in sys.modules
    if _logger_attached["ours"] and (_logger_attached["after_core"] or not core):
        return

    @ffi.def_extern(name="pyclingo_logger_callback")
    def _logged(code, message, data) -> None:
        codes = sys.modules.get("clingo.core")
        if codes is not None:
            code = codes.MessageCode(code)
        ffi.from_handle(data)(code, ffi.string(message).decode(errors="replace"))

    _logger_attached.update(ours=True, after_core=core)


def _load_extension():
    """`clingo._clingo` loaded from the clingo package's folder without running the
    package's `__init__`, registered in `sys.modules` so that a later `import clingo`
    uses the same module; None when it is not there."""
    from importlib.machinery import PathFinder

    try:
        package = PathFinder.find_spec("clingo")
        if package is None or not package.submodule_search_locations:
            return None
        spec = PathFinder.find_spec("clingo._clingo", package.submodule_search_locations)
        if spec is None or spec.loader is None:
            return None
        flags = sys.getdlopenflags()
        # Functions bound when first called, not all 8,000 symbols at load: the library is
        # 4.6 MB and a run calls few of them (0.4 ms of every command's start).
        sys.setdlopenflags(flags & ~os.RTLD_NOW | os.RTLD_LAZY)
        try:
            module = spec.loader.create_module(spec)
        finally:
            sys.setdlopenflags(flags)
        spec.loader.exec_module(module)
    except (ImportError, OSError):
        return None
    return sys.modules.setdefault("clingo._clingo", module)


def _code(code) -> int:
    """A message code as an integer (clingo's own logger callback passes a `MessageCode`)."""
    return getattr(code, "value", code)


def _check(ok: bool) -> None:
    """Raise clingo's last error when a C call failed."""
    if ok:
        return
    ffi, lib = library()
    message = ffi.string(lib.clingo_error_message()).decode(errors="replace")
    if lib.clingo_error_code() == lib.clingo_error_bad_alloc:
        raise MemoryError(message)
    raise RuntimeError(message)


class Control:
    """A clingo control object: programs in, ground, the final model's shown symbols out.
    `close` frees it (also when used as a context manager)."""

    def __init__(self, arguments: Iterable[str], logger: Logger, message_limit: int) -> None:
        ffi, lib = library()
        _attach_logger(ffi)
        self._logger = ffi.new_handle(lambda code, text: logger(_code(code), text))
        strings = [ffi.new("char[]", argument.encode()) for argument in arguments]
        pointer = ffi.new("clingo_control_t**")
        _check(lib.clingo_control_new(strings, len(strings), lib.pyclingo_logger_callback,
                                      self._logger, message_limit, pointer))
        self._rep = pointer[0]

    def __enter__(self) -> Control:
        return self

    def __exit__(self, *_exception) -> None:
        self.close()

    def close(self) -> None:
        """Free clingo's control object."""
        if self._rep is not None:
            library()[1].clingo_control_free(self._rep)
            self._rep = None

    def load(self, path: str) -> None:
        """Read a program file."""
        _check(library()[1].clingo_control_load(self._rep, path.encode()))

    def add(self, program: str) -> None:
        """Add program text to the `base` part."""
        ffi, lib = library()
        _check(lib.clingo_control_add(self._rep, b"base", ffi.NULL, 0, program.encode()))

    def add_statements(self, statements: Iterable) -> None:
        """Add statements parsed by `clingo.ast` (objects with the C tree in `_rep`)."""
        ffi, lib = library()
        pointer = ffi.new("clingo_program_builder_t**")
        _check(lib.clingo_program_builder_init(self._rep, pointer))
        builder = pointer[0]
        _check(lib.clingo_program_builder_begin(builder))
        try:
            for statement in statements:
                _check(lib.clingo_program_builder_add(builder, statement._rep))
        finally:
            _check(lib.clingo_program_builder_end(builder))

    def add_facts(self, facts: Iterable[tuple]) -> None:
        """Add facts `(relation, *arguments)` as ground atoms through clingo's backend,
        without parsing: a `str` argument is a string, an `int` a number, a `str`
        subclass (`gpudiv.analyses.facts.Constant`) a bare constant. The grounder sees
        them as it sees facts of the program text (clingo parses a fact statement in
        about 4 µs; adding and grounding particle_library.G's largest run, 24,719 facts,
        took 15 % less this way)."""
        ffi, lib = library()
        self._through_backend(lambda backend: _add_facts(ffi, lib, backend, facts))

    def add_atoms(self, symbols: Iterable[int]) -> None:
        """Add ground atoms given as clingo symbol ids (from another run's model) as facts
        through the backend: the same symbols, constants and strings as they were."""
        ffi, lib = library()
        atom, add_atom, rule, null = (ffi.new("clingo_atom_t*"), lib.clingo_backend_add_atom,
                                      lib.clingo_backend_rule, ffi.NULL)
        symbol = ffi.new("clingo_symbol_t*")

        def add(backend) -> None:
            for value in symbols:
                symbol[0] = value
                if not (add_atom(backend, symbol, atom)
                        and rule(backend, False, atom, 1, null, 0)):
                    _check(False)

        self._through_backend(add)

    def _through_backend(self, fill: Callable[[object], None]) -> None:
        """`fill(backend)` between the begin and end of this control's clingo backend
        (no `contextlib` on the analyze path: docs/design.md, "Start-up")."""
        ffi, lib = library()
        pointer = ffi.new("clingo_backend_t**")
        _check(lib.clingo_control_backend(self._rep, pointer))
        backend = pointer[0]
        _check(lib.clingo_backend_begin(backend))
        try:
            fill(backend)
        finally:
            _check(lib.clingo_backend_end(backend))

    def ground(self) -> None:
        """Ground the `base` part."""
        ffi, lib = library()
        name = ffi.new("char[]", b"base")
        parts = ffi.new("clingo_part_t[1]")
        parts[0].name, parts[0].params, parts[0].size = name, ffi.NULL, 0
        _check(lib.clingo_control_ground(self._rep, parts, 1, ffi.NULL, ffi.NULL))

    def final_model(self) -> list[int] | None:
        """The ids of the shown symbols of the last model clingo finds (it stops after the
        first one unless the program optimises; then the last one is the optimum); None
        when there is no model."""
        ffi, lib = library()
        handle_pointer = ffi.new("clingo_solve_handle_t**")
        _check(lib.clingo_control_solve(self._rep, lib.clingo_solve_mode_yield, ffi.NULL, 0,
                                        ffi.NULL, ffi.NULL, handle_pointer))
        handle, symbols = handle_pointer[0], None
        try:
            model = ffi.new("clingo_model_t**")
            shown, size = lib.clingo_show_type_shown, ffi.new("size_t*")
            while True:
                _check(lib.clingo_solve_handle_model(handle, model))
                if model[0] == ffi.NULL:
                    return symbols
                _check(lib.clingo_model_symbols_size(model[0], shown, size))
                buffer = ffi.new("clingo_symbol_t[]", size[0])
                _check(lib.clingo_model_symbols(model[0], shown, buffer, size[0]))
                symbols = ffi.unpack(buffer, size[0])
                _check(lib.clingo_solve_handle_resume(handle))
        finally:
            _check(lib.clingo_solve_handle_close(handle))

    def problem_size(self) -> tuple[int, int]:
        """The ground program's atom and rule counts (statistics `problem.lp.atoms` and
        `problem.lp.rules`); 0 where clingo has no such entry."""
        ffi, lib = library()
        statistics = ffi.new("clingo_statistics_t**")
        _check(lib.clingo_control_statistics(self._rep, statistics))
        stats, key, found = statistics[0], ffi.new("uint64_t*"), ffi.new("bool*")
        _check(lib.clingo_statistics_root(stats, key))
        for name in (b"problem", b"lp"):
            _check(lib.clingo_statistics_map_has_subkey(stats, key[0], name, found))
            if not found[0]:
                return 0, 0
            _check(lib.clingo_statistics_map_at(stats, key[0], name, key))
        lp, counts = key[0], []
        value = ffi.new("double*")
        for name in (b"atoms", b"rules"):
            _check(lib.clingo_statistics_map_has_subkey(stats, lp, name, found))
            if not found[0]:
                counts.append(0)
                continue
            _check(lib.clingo_statistics_map_at(stats, lp, name, key))
            _check(lib.clingo_statistics_value_get(stats, key[0], value))
            counts.append(int(value[0]))
        return counts[0], counts[1]


def _add_facts(ffi, lib, backend, facts: Iterable[tuple]) -> None:
    """`Control.add_facts` between the backend's begin and end; every distinct argument
    and relation name becomes a clingo symbol (or C string) once."""
    symbol, atom = ffi.new("clingo_symbol_t*"), ffi.new("clingo_atom_t*")
    function, add_atom, rule = (lib.clingo_symbol_create_function,
                                lib.clingo_backend_add_atom, lib.clingo_backend_rule)
    names: dict[str, bytes] = {}
    values: dict[object, int] = {}
    strings: dict[str, int] = {}
    null = ffi.NULL
    for fact in facts:
        arguments = []
        for value in fact[1:]:
            if type(value) is str:
                known = strings.get(value)
                if known is None:
                    _check(lib.clingo_symbol_create_string(value.encode(), symbol))
                    known = strings[value] = symbol[0]
            else:
                known = values.get(value)
                if known is None:
                    known = values[value] = _symbol(lib, value, symbol)
            arguments.append(known)
        name = names.get(fact[0])
        if name is None:
            name = names[fact[0]] = fact[0].encode()
        if not (function(name, arguments, len(arguments), True, symbol)
                and add_atom(backend, symbol, atom) and rule(backend, False, atom, 1, null, 0)):
            _check(False)


def _symbol(lib, value: object, out) -> int:
    """The clingo symbol of a number or of a bare constant (a `str` subclass)."""
    if type(value) is int:
        lib.clingo_symbol_create_number(value, out)
    elif isinstance(value, str):
        _check(lib.clingo_symbol_create_id(str(value).encode(), True, out))
    else:
        raise TypeError(f"a fact argument must be a str or an int, not {value!r}")
    return out[0]


def symbol_text(symbol: int) -> str:
    """A symbol as clingo prints it."""
    ffi, lib = library()
    size = ffi.new("size_t*")
    _check(lib.clingo_symbol_to_string_size(symbol, size))
    text = ffi.new("char[]", size[0])
    _check(lib.clingo_symbol_to_string(symbol, text, size[0]))
    return ffi.string(text).decode()


def parse_term(text: str) -> int:
    """The id of the symbol that `text` (as `symbol_text` gives it) denotes."""
    ffi, lib = library()
    symbol = ffi.new("clingo_symbol_t*")
    _check(lib.clingo_parse_term(text.encode(), ffi.NULL, ffi.NULL, 0, symbol))
    return symbol[0]
