"""The solve layer: rule files + facts → clingo → atoms, with timings and counts.

Analyses call `solve` with the names of shipped rule files (or paths of users' files) and
the facts of a kernel; they get back the shown atoms grouped by predicate. Errors in rule
files come back as `RuleError` with the file, line and column clingo reported.
"""

from __future__ import annotations

import atexit
import os
import re
import time
from collections import defaultdict
from functools import lru_cache
from importlib import import_module

from gpudiv.analyses.atoms import NOT_PLAIN, AtomReader
from gpudiv.analyses.clingo_lib import ATOM_UNDEFINED, Control, parse_term, symbol_text
from gpudiv.analyses.facts import program_text
from gpudiv.ir.perf import memory_bytes
from gpudiv.ir.record import Record
from gpudiv.lang.regex_cache import LazyPattern, RegexCache

TYPE_CHECKING = False  # (typing is not imported: an analysis never needs it)
if TYPE_CHECKING:  # (nor pathlib: paths are strings on the way to an analysis)
    from pathlib import Path


class RuleError(Exception):
    """A rule file that does not parse or ground; the message is one `file:line:col:` line."""


# Default limits on a clingo run with a user's rule file: a rule file is a program, and one
# line (`big(X) :- X = 1..100000000.`) can ground for minutes and take gigabytes.
DEFAULT_SOLVE_TIMEOUT_S = 180.0
DEFAULT_SOLVE_MEMORY_MB = 4096


class Budget(Record, frozen=True):
    """Limits on one clingo run: wall-clock seconds and MiB of memory (0: no limit).

    A limited run grounds and solves in a child process (`os.fork`) whose address space
    is capped, so that neither a runaway grounding nor clingo running out of memory can
    take the caller down."""

    seconds: float
    megabytes: int

    def __init__(self, seconds: float = DEFAULT_SOLVE_TIMEOUT_S,
                       megabytes: int = DEFAULT_SOLVE_MEMORY_MB) -> None:
        object.__setattr__(self, "seconds", seconds)
        object.__setattr__(self, "megabytes", megabytes)

    @property
    def limited(self) -> bool:
        """Whether any limit applies."""
        return self.seconds > 0 or self.megabytes > 0


DEFAULT_BUDGET = Budget()
UNLIMITED = Budget(0, 0)


class UnsatisfiableError(RuleError):
    """The rules have no answer set for a kernel's facts (an integrity constraint fails)."""


_LOCATED = LazyPattern(r"^\S.*?:\d+:\d+: error: ")


def in_context(error: RuleError, path: str, loc, context: str) -> RuleError:
    """The error with the kernel (and variant) it happened for; the line keeps starting
    with `FILE:LINE:COL: error:` (the rule file's place, else the kernel's) for editors and
    CI log parsers."""
    text = str(error)
    if _LOCATED.match(text):
        return type(error)(f"{text} ({context})")
    message = text.removeprefix("error: ")
    return type(error)(f"{path}:{loc.line}:{loc.column}: error: {context}: {message}")


class SolveResult(Record):
    """Shown atoms by predicate name, as tuples of Python values, plus statistics and the
    shown symbols as clingo's symbol ids."""

    atoms: dict[str, list[tuple]]
    ground_ms: float
    solve_ms: float
    atom_count: int
    rule_count: int
    symbol_ids: list[int]

    def __init__(self, atoms: dict[str, list[tuple]] | None = None, ground_ms: float = 0.0,
                       solve_ms: float = 0.0, atom_count: int = 0, rule_count: int = 0,
                       symbol_ids: list[int] | None = None) -> None:
        self.atoms = defaultdict(list) if atoms is None else atoms
        self.ground_ms = ground_ms
        self.solve_ms = solve_ms
        self.atom_count = atom_count
        self.rule_count = rule_count
        self.symbol_ids = [] if symbol_ids is None else symbol_ids

    @property
    def symbols(self) -> list:
        """The shown symbols as `clingo.Symbol`s (imports clingo's Python package)."""
        from clingo import Symbol

        return [Symbol(symbol) for symbol in self.symbol_ids]

    def relation(self, name: str) -> list[tuple]:
        """All tuples of one shown predicate."""
        return self.atoms.get(name, [])

    def unary(self, name: str) -> set:
        """The first arguments of a shown predicate, as a set."""
        return {t[0] for t in self.atoms.get(name, [])}


def rules_dir() -> str:
    """The directory of the shipped rule files."""
    # The package's own folder (what `importlib.resources.files` gives for a package on
    # disk, without importing importlib.resources and zipfile at every start).
    return os.path.dirname(import_module("gpudiv.rules").__file__)


def shipped_rule(name: str) -> str:
    """Path of a shipped rule file such as `divergence.lp`."""
    path = os.path.join(rules_dir(), name)
    if not os.path.isfile(path):
        raise RuleError(f"{name}: error: no such shipped rule file")
    return path


@lru_cache(maxsize=1)
def _shipped_folder() -> str:
    """`rules_dir()` with every link resolved."""
    return os.path.realpath(rules_dir())


def is_shipped(path: Path | str) -> bool:
    """Whether `path` is a shipped rule file (it lies in `rules_dir()`, links resolved)."""
    return os.path.dirname(os.path.realpath(path)) == _shipped_folder()


# One argument of an atom as clingo prints it: a string, an integer or a constant.
_ARGUMENT = LazyPattern(r'"((?:[^"\\]|\\.)*)"|(-?\d+)|([a-z_][A-Za-z0-9_\']*)')
_UNESCAPE = LazyPattern(r"\\(.)")


def _atom(symbol: int) -> tuple[str, tuple]:
    """The predicate name and the Python values of the arguments of an atom (a symbol id)
    that `AtomReader` does not read: from its printed form, or through `clingo.Symbol`'s
    accessors for nested terms and classical negation (the argument printed)."""
    parsed = _parse_atom(symbol_text(symbol))
    if parsed is None:
        from clingo import Symbol

        atom = Symbol(symbol)
        return atom.name, tuple(_value(a) for a in atom.arguments)
    return parsed


def _parse_atom(text: str) -> tuple[str, tuple] | None:
    """Name and argument values of a printed atom whose arguments are all strings,
    integers or constants; None for anything else (nested terms, classical negation)."""
    if text[0] == "-":
        return None
    open_at = text.find("(")
    if open_at < 0:
        return text, ()
    values, position, end = [], open_at + 1, len(text) - 1
    while position < end:
        match = _ARGUMENT.match(text, position)
        after = match.end() if match else -1
        if match is None or text[after] not in ",)":
            return None
        string, number, constant = match.groups()
        if string is not None:
            if "\\" in string:
                string = _UNESCAPE.sub(lambda m: "\n" if m[1] == "n" else m[1], string)
            values.append(string)
        elif number is not None:
            values.append(int(number))
        else:
            values.append(constant)
        position = after + 1
    return text[:open_at], tuple(values)


def _value(symbol):
    """A `clingo.Symbol` argument as a Python value: a number, a string, a constant's
    name, else its printed form."""
    from clingo import SymbolType

    if symbol.type == SymbolType.Number:
        return symbol.number
    if symbol.type == SymbolType.String:
        return symbol.string
    if symbol.type == SymbolType.Function and not symbol.arguments:
        return symbol.name
    return str(symbol)


_LOCATION = LazyPattern(
    r"^(?P<file>.*?):(?P<line>\d+):(?P<col>\d+)(?:-\d+(?::\d+)?)?: (?P<msg>.*)$")


def _format_unsafe(message: str) -> str | None:
    """`file:line:col: error: unsafe variable 'X' in: rule` from clingo's several lines."""
    lines = message.strip().splitlines()
    # clingo prints the rule with its internal `#inc_base` guard; users never wrote that
    rule = re.sub(r"\[#inc_base\];?", "", lines[1].strip()) if len(lines) > 1 else ""
    rule = re.sub(r"#Anon\d+", "_", rule)
    for line in lines[2:]:
        match = _LOCATION.match(line.strip())
        if match and "is unsafe" in match["msg"]:
            variable = match["msg"].split("note: ", 1)[-1].replace(" is unsafe", "")
            return (f"{match['file']}:{match['line']}:{match['col']}: error: unsafe variable "
                    f"{variable} in: {rule}")
    return None


def _format_messages(messages: list[str]) -> str:
    for message in messages:
        first = message.strip().splitlines()[0] if message.strip() else ""
        match = _LOCATION.match(first)
        if match and "unsafe variables in" in first:
            unsafe = _format_unsafe(message)
            if unsafe:
                return unsafe
        if match:
            text = match["msg"].replace("error: ", "", 1).replace("info: ", "", 1)
            more = [x.strip() for x in message.strip().splitlines()[1:] if x.strip()]
            if more and text.endswith(":"):  # e.g. `file could not be opened:` + the name
                text = f"{text} {' '.join(more)}"
            return f"{match['file']}:{match['line']}:{match['col']}: error: {text}"
    return "error: " + (messages[0].strip().splitlines()[0] if messages else "clingo failed")


def _signature(atom_text: str) -> tuple[str, int] | None:
    """`(name, arity)` of an atom as clingo prints it (`foo(X,g(Y,1))` → foo/2)."""
    match = re.match(r"^-?([a-z_][A-Za-z0-9_']*)", atom_text)
    if match is None:
        return None
    rest = atom_text[match.end():].strip()
    if not rest.startswith("("):
        return match[1], 0
    depth, arity, quoted, escaped = 0, 1, False, False
    for char in rest:
        if quoted:
            quoted = escaped or char != '"'
            escaped = not escaped and char == "\\"
            continue
        if char == '"':
            quoted = True
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 1:
            arity += 1
    return match[1], arity


def _undefined_error(messages: list[str], known: set[tuple[str, int]]) -> str | None:
    """The first atom of a user's file that no rule derives and SCHEMA.md does not know."""
    shipped = rules_dir()
    for message in messages:
        lines = message.strip().splitlines()
        match = _LOCATION.match(lines[0]) if lines else None
        if match is None or match["file"].startswith(shipped) or len(lines) < 2:
            continue
        if "atom does not occur in any rule head" not in match["msg"]:
            continue
        signature = _signature(lines[1].strip())
        if signature is None or signature in known:
            continue
        name, arity = signature
        return (f"{match['file']}:{match['line']}:{match['col']}: error: undefined predicate "
                f"{name}/{arity}: no loaded rule derives it and it is not an input relation "
                "of rules/SCHEMA.md")
    return None


Signatures = frozenset[tuple[str, int]]
# Used by every analysis (hiding a shipped file's `#show`s; joint solves): from the cache.
_PATTERNS = RegexCache("solve", {
    "show_line": r"(?m)^#show\s+([a-z_][A-Za-z0-9_']*)\s*/\s*(\d+)\s*\.\s*$",
    "namespace": r"(\d+)\|",
}).compile_all()
_SHOW_LINE = _PATTERNS["show_line"]


@lru_cache(maxsize=32)
def _without_shows(path: str, mtime_ns: int, hide: Signatures) -> str:
    """A shipped rule file's text without its `#show` lines for the `hide` signatures."""
    with open(path, encoding="utf-8") as file:
        text = file.read()
    return _SHOW_LINE.sub(lambda m: "" if (m[1], int(m[2])) in hide else m[0], text)


@lru_cache(maxsize=32)
def _shipped_statements(path: str, mtime_ns: int, hide: Signatures) -> tuple | None:
    """A shipped rule file (`_without_shows` when hiding) parsed once into clingo's syntax
    trees (parsing the text of affine.lp again for every clingo run took 2 ms, adding its
    trees 0.3 ms); None when it does not parse (then the text goes in, and clingo reports
    the error)."""
    import clingo.ast  # (3.7 ms to import: not at start-up)

    statements: list = []
    quiet = {"logger": lambda _code, _message: None}
    try:
        if hide:
            clingo.ast.parse_string(_without_shows(path, mtime_ns, hide), statements.append,
                                    **quiet)
        else:  # locations name the file, as `Control.load` gives them
            clingo.ast.parse_files([path], statements.append, **quiet)
    except RuntimeError:
        return None
    comment = getattr(clingo.ast.ASTType, "Comment", None)  # (clingo ≥ 5.8 keeps them)
    return tuple(s for s in statements if s.ast_type != comment)


# clingo's syntax trees free themselves through its library, which Python may tear down
# first at exit: drop the cached ones while it is still there.
atexit.register(_shipped_statements.cache_clear)


# How often each shipped rule file was loaded in this process, by `_shipped_statements`
# key; from load `TREES_FROM` on it goes in as syntax trees parsed once. Parsing the
# text of affine.lp takes about 2.5 ms more than adding its trees, while `clingo.ast`
# imports clingo's Python package (30–40 ms, which the analyses otherwise never load):
# a one-file process (particle_library.G runs clingo three times) would lose.
TREES_FROM = 16
_loads: dict[tuple[str, int, Signatures], int] = {}


def _load_rules(control: Control, rule_files: list[Path | str], hide: Signatures
                ) -> None:
    """Load the rule files; shipped ones without the `#show`s of `hide` (relations that the
    caller does not read: they cost a Python object per atom, quadratically many for
    region/2 on deep nests), from their `TREES_FROM`-th load in a process on as syntax
    trees parsed once."""
    for path in rule_files:
        if not is_shipped(path):
            control.load(str(path))
            continue
        mtime_ns = os.stat(path).st_mtime_ns
        key = (str(path), mtime_ns, hide)
        _loads[key] = loads = _loads.get(key, 0) + 1
        statements = _shipped_statements(*key) if loads >= TREES_FROM else None
        if statements is None and hide:
            control.add(_without_shows(str(path), mtime_ns, hide))
        elif statements is None:
            control.load(str(path))
        else:
            control.add_statements(statements)


def _ground_and_solve(rule_files: list[Path | str], program: str,
                      show: list[tuple[str, int]] | None,
                      known: set[tuple[str, int]] | None,
                      hide: Signatures = frozenset(),
                      options: tuple[str, ...] = (), facts: list[tuple] = (),
                      atoms: list[int] = ()) -> SolveResult:
    """One clingo run: the shown symbols of the final model, times and counts (see
    `solve`); `facts` (tuples) and `atoms` (clingo symbol ids) go in as facts through
    clingo's backend after the program text."""
    messages: list[str] = []
    undefined: list[str] = []

    def logger(code: int, message: str) -> None:
        (undefined if code == ATOM_UNDEFINED else messages).append(message)

    quiet = not show and known is None
    with Control([*(["--warn=none"] if quiet else []), *options], logger,
                 20 if quiet else 1000) as control:
        return _run(control, rule_files, program, facts, show, known, hide, messages,
                    undefined, atoms)


def _run(control: Control, rule_files: list[Path | str], program: str, facts: list[tuple],
         show: list[tuple[str, int]] | None, known: set[tuple[str, int]] | None,
         hide: Signatures, messages: list[str], undefined: list[str],
         atoms: list[int] = ()) -> SolveResult:
    """`_ground_and_solve` on a new control object whose logger fills `messages` and
    `undefined`."""
    # Errors stop; infos (e.g. "operation undefined", which the affine rules rely on for
    # ⊥) are clingo's business and never an error of ours.
    fatal = ("error:", "unsafe", "syntax")
    try:
        _load_rules(control, rule_files, hide)
        control.add(program)
        if facts:
            control.add_facts(facts)
        if atoms:
            control.add_atoms(atoms)
        if show is not None:
            control.add("".join(f"#show {n}/{a}.\n" for n, a in show))
    except RuntimeError as error:
        raise RuleError(_format_messages(messages) if messages else str(error)) from None
    result = SolveResult()
    start = time.perf_counter()
    try:
        control.ground()
    except RuntimeError as error:
        raise RuleError(_format_messages(messages) if messages else str(error)) from None
    errors = [m for m in messages if "info:" not in m.split("\n", 1)[0]
              and any(word in m for word in fatal)]
    if errors:
        raise RuleError(_format_messages(errors))
    if known is not None:
        error = _undefined_error(undefined, known)
        if error:
            raise RuleError(error)
    result.ground_ms = (time.perf_counter() - start) * 1000
    start = time.perf_counter()
    model = control.final_model()
    result.solve_ms = (time.perf_counter() - start) * 1000
    if model is None:
        raise UnsatisfiableError("error: the rules have no answer set for these facts (an "
                                 "integrity constraint fails)")
    result.symbol_ids = model
    result.atom_count, result.rule_count = control.problem_size()
    return result


def users_rule_files(rule_files: list[Path | str]) -> list[str]:
    """The rule files that are not shipped ones (the user's)."""
    return [str(p) for p in rule_files if not is_shipped(p)]


def _cap_memory(megabytes: int) -> None:
    """In the child: cap the address space at what it maps now plus `megabytes` MiB."""
    import resource

    if megabytes <= 0:
        return
    limit = memory_bytes() + megabytes * 2**20
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _child_outcome(rule_files, program, show, known, megabytes: int,
                   hide: Signatures = frozenset(), options: tuple[str, ...] = ()) -> tuple:
    """What a limited run sends back: ("ok", times, counts, shown atoms as text),
    ("rule", message) or ("memory",)."""
    try:
        _cap_memory(megabytes)
        result = _ground_and_solve(rule_files, program, show, known, hide, options)
    except RuleError as error:
        if "bad_alloc" in str(error):
            return ("memory",)
        return ("unsat" if isinstance(error, UnsatisfiableError) else "rule", str(error))
    except MemoryError:
        return ("memory",)
    except RuntimeError as error:  # clingo's own failures, std::bad_alloc among them
        return ("memory",) if "bad_alloc" in str(error) else ("rule", f"error: {error}")
    return ("ok", result.ground_ms, result.solve_ms, result.atom_count, result.rule_count,
            [symbol_text(s) for s in result.symbol_ids])


def _can_fork() -> bool:
    """Whether a run can be limited (`gpudiv.analyses.forked`, imported only for a
    limited run)."""
    from gpudiv.analyses.forked import can_fork

    return can_fork()


def _limited_ground_and_solve(rule_files: list[Path | str], program: str,
                              show: list[tuple[str, int]] | None,
                              known: set[tuple[str, int]] | None,
                              budget: Budget, hide: Signatures = frozenset(),
                              options: tuple[str, ...] = ()) -> SolveResult:
    """`_ground_and_solve` in a child process under the budget; RuleError naming the
    user's rule files when it runs out of time or memory."""
    from gpudiv.analyses.forked import run_in_child

    names = ", ".join(users_rule_files(rule_files)) or "rules"
    outcomes: list[tuple] = []
    end = run_in_child(0, 1, lambda _: _child_outcome(rule_files, program, show, known,
                                                      budget.megabytes, hide, options),
                       budget.seconds if budget.seconds > 0 else None,
                       lambda _, outcome: outcomes.append(outcome))
    status = end.status
    if end.timed_out:
        raise RuleError(f"{names}: error: grounding and solving did not finish within "
                        f"{budget.seconds:g} s (raise the limit with --solve-timeout "
                        "SECONDS, 0: none)")
    outcome = outcomes[0] if outcomes else ("crash", status)
    if outcome[0] == "memory" or (outcome[0] == "crash" and budget.megabytes > 0):
        raise RuleError(f"{names}: error: grounding and solving needed more than "
                        f"{budget.megabytes} MiB of memory (raise the limit with "
                        "--solve-memory MIB, 0: none)")
    if outcome[0] == "crash":
        raise RuleError(f"{names}: error: clingo stopped abnormally (status {status})")
    if outcome[0] == "rule":
        raise RuleError(outcome[1])
    if outcome[0] == "unsat":
        raise UnsatisfiableError(outcome[1])
    _, ground_ms, solve_ms, atom_count, rule_count, shown = outcome
    return SolveResult(ground_ms=ground_ms, solve_ms=solve_ms, atom_count=atom_count,
                       rule_count=rule_count, symbol_ids=[parse_term(t) for t in shown])


def solve(rule_files: list[Path | str], facts: str | list[tuple], extra: str = "",
          show: list[tuple[str, int]] | None = None,
          known: set[tuple[str, int]] | None = None,
          budget: Budget | None = None, hide: Signatures = frozenset(),
          options: tuple[str, ...] = ()) -> SolveResult:
    """Ground and solve facts with the rule files; return the atoms of the final model (the
    only one, or the optimum where the rules optimise).

    With `known` (the signatures a user's rule may read without defining them: the input
    relations), an atom of a user's rule file over any other predicate that no rule derives
    is an error (a misspelt relation), reported at the user's file:line:col.

    `budget` limits time and memory (`Budget`); by default a run with a user's rule file
    gets `DEFAULT_BUDGET` and a run of the shipped rules none. `hide`: relations that
    shipped rule files `#show` but the caller does not need. `options`: clingo command-line
    options for this run (e.g. an optimisation strategy).
    """
    users = users_rule_files(rule_files)
    if budget is None:
        budget = DEFAULT_BUDGET if users else UNLIMITED
    text, tuples = (facts, []) if isinstance(facts, str) else ("", facts)
    if tuples and (users or known is not None or budget.limited):
        text, tuples = program_text(tuples), []  # a user's rules see the facts as text
    if budget.limited and _can_fork():  # no limits where processes cannot fork
        result = _limited_ground_and_solve(rule_files, text + extra, show, known, budget,
                                           hide, options)
    else:
        result = _ground_and_solve(rule_files, text + extra, show, known, hide, options,
                                   tuples)
    symbols = result.symbol_ids
    for symbol, atom in zip(symbols, AtomReader().read(symbols), strict=True):
        name, arguments = atom if atom is not None else _atom(symbol)
        result.atoms[name].append(arguments)
    return result


class NotSeparable(Exception):
    """A shown atom of a joint solve names no kernel's namespace (or has nested terms)."""


# The namespace of the i-th kernel of a joint solve: "i|" in front of its names. `|` is in
# no identifier of μ-SIMD or PTX; the analysis driver solves a kernel whose names contain
# it on its own all the same.
NAMESPACE_MARK = "|"
_NAMESPACE = _PATTERNS["namespace"]


def _namespaces(values: dict[int, object]) -> tuple[dict[int, object], dict[int, object]]:
    """For every argument id of a joint solve, the kernel whose namespace it names (None:
    none; NOT_PLAIN: a nested term or a string with two namespaces) and its value without
    the namespace."""
    owners: dict[int, object] = {}
    stripped: dict[int, object] = {}
    for rep, value in values.items():
        owners[rep], stripped[rep] = None, value
        if value is NOT_PLAIN:
            owners[rep] = NOT_PLAIN
        elif isinstance(value, str) and (match := _NAMESPACE.match(value)):
            rest = value[match.end():]
            owners[rep] = NOT_PLAIN if _NAMESPACE.match(rest) else int(match[1])
            stripped[rep] = rest
    return owners, stripped


def _owner(owners: tuple | None, results: dict[int, SolveResult]) -> SolveResult | None:
    """The result of the one kernel that the owners of an atom's arguments name; None
    when they name none, several, or an argument is not plain."""
    kernels = set(owners or ())
    kernels.discard(None)
    return results.get(kernels.pop()) if len(kernels) == 1 else None


def namespace(index: int) -> str:
    """The prefix of the names of the `index`-th kernel in a joint solve."""
    return f"{index}{NAMESPACE_MARK}"


def solve_together(rule_files: list[Path | str], facts: dict[int, str | list[tuple]],
                   extra: str = "",
                   hide: Signatures = frozenset()) -> dict[int, SolveResult]:
    """Solve the facts of several kernels in one clingo run; one result per kernel.

    `facts[i]` must name every block, loop and variable with `namespace(i)` in front
    (`gpudiv.analyses.facts.facts_text(ssa, namespace(i))`) and the rules must never relate two
    names of different kernels, as the shipped ones never do: then the joint answer set is
    the union of the kernels' own ones. Each shown atom goes to the kernel whose namespace
    it names, with the namespace taken off. Ground and solve times and atom and rule
    counts are shared out in proportion to the size of each kernel's facts (clingo
    measures them for the whole run). `NotSeparable` when a shown atom names no kernel,
    names two, or has nested terms.
    """
    text = "".join(f for f in facts.values() if isinstance(f, str))
    tuples = [fact for f in facts.values() if not isinstance(f, str) for fact in f]
    result = _ground_and_solve(rule_files, text + extra, None, None, hide, (), tuples)
    results = {i: SolveResult() for i in facts}
    reader = AtomReader()
    atoms = reader.read_ids(result.symbol_ids)
    owners, stripped = _namespaces(reader.values)
    owner, value = owners.__getitem__, stripped.__getitem__
    # The kernel of an atom depends only on the owners of its arguments: atoms share a
    # few such tuples, so each is decided once.
    kernel_of: dict[tuple, SolveResult | None] = {}
    for symbol, atom in zip(result.symbol_ids, atoms, strict=True):
        key = tuple(map(owner, atom[1])) if atom is not None else None
        if key not in kernel_of:
            kernel_of[key] = _owner(key, results)
        own = kernel_of[key]
        if own is None:  # no kernel, several, or an argument that is not plain
            raise NotSeparable(symbol_text(symbol))
        own.atoms[atom[0]].append(tuple(map(value, atom[1])))
    total = sum(len(f) for f in facts.values()) or 1
    for i, own in results.items():
        share = len(facts[i]) / total
        own.ground_ms, own.solve_ms = result.ground_ms * share, result.solve_ms * share
        own.atom_count = round(result.atom_count * share)
        own.rule_count = round(result.rule_count * share)
    return results
