"""The oracle on a kernel whose calls run as calls (issue 16, item 1).

A kernel that recurses cannot be run with its calls inlined: inlining stops at the
recursive call and leaves it opaque. It runs with its calls kept
(`FunctionReader.executable`, `gpudiv.interp.ptx_calls`), and its claims, made on the
inlined kernel the analysis saw, are checked on that run:

- each thread's activation chain (the call instructions from the kernel down) is
  followed through the `call` and `ret` hooks of the engine;
- an activation is the inlined copy of the same call sites (`attrs["call_instances"]`);
  one deeper than inlining went (a recursive call left opaque) has no copy and nothing
  is checked in it;
- in that copy, an instruction is the k-th IR instruction lowered from the same PTX
  instruction (`call_projection._key`), with the same operator and as many operands,
  which it reads operand by operand under other names (a function's registers are
  `NAME@@FUNCTION` when it runs as a call, `NAME@N` in inlined copy N);
- the groups that pass arguments and results (`call`, its results, `call.input`,
  `call.return` against the inlined parameter and result copies) are lowered
  differently and not matched: the arguments are checked where the callee reads them.

The wrapped observer (the oracle's `ClaimObserver`) sees the inlined kernel's
instruction ids and register names, as when the inlined kernel runs.

An activation deeper than inlining went (a recursive call) is checked against the claims
of its function analysed on its own in the context that covers every caller
(`call_summaries.any_caller_results`: every input divergent and possibly pointing into
the caller's frame), matched instruction by instruction the same way; an observer of the
wrapped one's kind checks those claims, and its uses and violations are added to the
wrapped one's when the run ends.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from gpudiv import ir
from gpudiv.analyses.call_summaries import any_caller_results
from gpudiv.analyses.results import KernelResult
from gpudiv.interp.ptx import PtxExecutionError, run_ptx_kernel
from gpudiv.interp.ptx_calls import CALL_OPERATORS, executable_form
from gpudiv.lang.ptx.functions import FunctionReader
from gpudiv.verify.call_projection import _frames, _key


class _Twin:
    """An instruction of the inlined kernel and how its operands are named in the run."""

    __slots__ = ("id", "names")

    def __init__(self, instr: ir.Instruction, names: dict[str, str]) -> None:
        self.id = instr.id
        self.names = names


def _matched(instr: ir.Instruction, twin: ir.Instruction | None) -> _Twin | None:
    """`twin` as the counterpart of `instr`, when it reads as many operands with the same
    operator."""
    if twin is None or twin.operator != instr.operator or len(twin.reads) != len(instr.reads):
        return None
    names = {mine.name: theirs.name for mine, theirs in zip(twin.reads, instr.reads,
                                                           strict=True)
             if isinstance(mine, ir.Var) and isinstance(theirs, ir.Var)}
    return _Twin(twin, names)


def _matched_units(units: list[tuple[str, ir.Kernel]], target: ir.Kernel,
                   suffixes: dict[str, list[str]]) -> dict[tuple[str, int], _Twin]:
    """For each unit (name, its lowering in the run) and each frame of `target` that
    stands for it (`suffixes`): {(suffix, id of an instruction of the run): its twin}."""
    frames = _frames(target)
    seen: dict[tuple, int] = {}
    by_key = {_key(i, seen, frames[i.id]): i for i in target.instructions()}
    twins: dict[tuple[str, int], _Twin] = {}
    for unit, kernel in units:
        unit_seen: dict[tuple, int] = {}
        for instr in kernel.instructions():
            key = _key(instr, unit_seen, "")[1:]
            if instr.operator in CALL_OPERATORS:
                continue
            for suffix in suffixes.get(unit, ()):
                twin = _matched(instr, by_key.get((suffix, *key)))
                if twin is not None:
                    twins[(suffix, instr.id)] = twin
    return twins


def _twins(executable: ir.Kernel, inlined: ir.Kernel) -> dict[tuple[str, int], _Twin]:
    """(unit, id of an instruction of the run) → its twin in one frame of the inlined
    kernel, per frame suffix: {(suffix, id): twin} for every suffix of the unit."""
    suffixes: dict[str, list[str]] = {"": [""]}  # unit → the frames that stand for it
    for suffix, (*_, callee) in inlined.attrs.get("call_instances", {}).items():
        suffixes.setdefault(callee, []).append(suffix)
    units = [("", executable), *executable.attrs.get("functions", {}).items()]
    return _matched_units(units, inlined, suffixes)


def _unit_twins(unit: ir.Kernel, alone: ir.Kernel) -> dict[int, _Twin]:
    """Id of an instruction of a function as the run lowers it → its twin in the same
    function lowered on its own (`FunctionReader.lower`: one frame, "")."""
    return {n: twin for (_, n), twin in _matched_units([("", unit)], alone, {"": [""]}).items()}


# Each function of a PTX text analysed on its own for any caller, by (text, analysis):
# the kernels of a file, and the runs of `check` and `transform --verify`, share them.
_ALONE: dict[tuple[str, str], dict[str, KernelResult]] = {}
_ALONE_KEPT = 8


def _alone(text: str, analysis: str) -> dict[str, KernelResult]:
    """`call_summaries.any_caller_results` of every function of the text, computed once
    per text (every kernel of a file looks its functions up here)."""
    key = (text, analysis)
    if key not in _ALONE:
        if len(_ALONE) >= _ALONE_KEPT:
            _ALONE.pop(next(iter(_ALONE)))
        reader = FunctionReader(text, "<kernel>")
        _ALONE[key] = any_caller_results(reader, analysis, list(reader.functions))
    return _ALONE[key]


class DeepClaims:
    """The claims for activations without an inlined copy, per function, found when
    first needed: (its result in the context that covers every caller, twins)."""

    def __init__(self, executable: ir.Kernel, inlined: ir.Kernel) -> None:
        self.executable = executable
        self.text = inlined.attrs.get("ptx_text")
        self.found: dict[tuple[str, str], tuple[KernelResult, dict[int, _Twin]] | None] = {}

    def of(self, function: str, analysis: str
           ) -> tuple[KernelResult, dict[int, _Twin]] | None:
        """The claims of `function` under `analysis` (None: it cannot be analysed)."""
        key = (function, analysis)
        if key not in self.found:
            self.found[key] = None
            units = self.executable.attrs.get("functions", {})
            if self.text is not None and function in units:
                result = _alone(str(self.text), analysis).get(function)
                if result is not None:
                    self.found[key] = (result, _unit_twins(units[function],
                                                           result.ssa.cfg.kernel))
        return self.found[key]


class CallsObserver:
    """Follows each thread's activations in a run with calls as calls and shows the
    wrapped observer the run as the inlined kernel's."""

    def __init__(self, inner, executable: ir.Kernel, inlined: ir.Kernel,
                 twins: dict[tuple[str, int], _Twin], deep: DeepClaims | None = None
                 ) -> None:
        self.inner = inner
        self.twins = twins
        self.kernel_ids = {i.id for i in executable.instructions()}
        self.unit_of = {i.id: name for name, unit in
                        executable.attrs.get("functions", {}).items()
                        for i in unit.instructions()}
        # Activations deeper than inlining: checked by an observer of the inner one's kind
        # (the oracle's: it has the result and the launch) per function.
        result = getattr(inner, "result", None)
        self.deep = deep if result is not None and hasattr(inner, "config") else None
        self.analysis = getattr(result, "analysis", None)
        self.deep_observers: dict[str, tuple[object, dict[int, _Twin]] | None] = {}
        # The call site each call instruction stands for: (line, column).
        units = [executable, *executable.attrs.get("functions", {}).values()]
        self.sites = {i.id: (i.loc.line, i.loc.column) for unit in units
                      for i in unit.instructions() if i.operator == "call" and i.dest is None}
        self.instances = {(parent, line, column): suffix for suffix, (parent, line, column, _)
                          in inlined.attrs.get("call_instances", {}).items()}
        # Activation chains, interned: chain 0 is the kernel; each other one is (its
        # caller's chain, the call instruction) with the inlined frame it stands for.
        self.chains: dict[tuple[int, int], int] = {}
        self.parents: list[int] = [0]
        self.suffixes: list[str | None] = [""]
        self.lane_chain = np.zeros(0, dtype=np.int64)

    def _lanes(self, lanes: np.ndarray) -> np.ndarray:
        needed = int(lanes.max()) + 1 if len(lanes) else 0
        if needed > len(self.lane_chain):
            grown = np.zeros(needed, dtype=np.int64)
            grown[:len(self.lane_chain)] = self.lane_chain
            self.lane_chain = grown
        return self.lane_chain

    def call(self, warp: int, instruction: int, lanes: np.ndarray) -> None:
        """`lanes` entered the callee of `instruction`."""
        chains = self._lanes(lanes)
        parent = 0 if instruction in self.kernel_ids else int(chains[lanes[0]])
        chain = self.chains.get((parent, instruction))
        if chain is None:
            chain = self.chains[(parent, instruction)] = len(self.parents)
            self.parents.append(parent)
            above = self.suffixes[parent]
            line, column = self.sites[instruction]
            self.suffixes.append(None if above is None
                                 else self.instances.get((above, line, column)))
        chains[lanes] = chain

    def ret(self, warp: int, instruction: int, lanes: np.ndarray) -> None:
        """`lanes` left their callee."""
        chains = self._lanes(lanes)
        chains[lanes] = self.parents[int(chains[lanes[0]])]

    def _target(self, instruction: int, active: np.ndarray) -> tuple[object, _Twin] | None:
        """Who checks an instruction of the run, and as which instruction: the wrapped
        observer in the kernel or an inlined copy, else the observer of the activation's
        function analysed alone (None: nobody)."""
        if instruction in self.kernel_ids:
            suffix: str | None = ""
        else:
            suffix = self.suffixes[int(self._lanes(active)[active[0]])]
        if suffix is not None:
            twin = self.twins.get((suffix, instruction))
            return None if twin is None else (self.inner, twin)
        return None if self.deep is None else self._deep(instruction)

    def _deep(self, instruction: int) -> tuple[object, _Twin] | None:
        """The observer and twin of an instruction of an activation without an inlined
        copy (None: its function has no claims there)."""
        function = self.unit_of[instruction]
        if function not in self.deep_observers:
            claims = self.deep.of(function, self.analysis)
            self.deep_observers[function] = None if claims is None else \
                (type(self.inner)(claims[0], self.inner.config), claims[1])
        found = self.deep_observers[function]
        twin = None if found is None else found[1].get(instruction)
        return None if twin is None else (found[0], twin)

    def before(self, warp: int, instruction: int, active: np.ndarray,
               read: Callable[[str], np.ndarray]) -> None:
        target = self._target(instruction, active)
        if target is not None:
            observer, twin = target
            names = twin.names
            observer.before(warp, twin.id, active, lambda name: read(names.get(name, name)))

    def branch(self, warp: int, instruction: int, active: np.ndarray,
               jumps: np.ndarray) -> None:
        target = self._target(instruction, active)
        if target is not None:
            target[0].branch(warp, target[1].id, active, jumps)

    def finish(self) -> None:
        """Add the deep activations' uses and violations to the wrapped observer's."""
        for found in self.deep_observers.values():
            if found is not None:
                self.inner.uses_checked += found[0].uses_checked
                self.inner.violations.extend(found[0].violations)


_RUNNERS: dict[int, tuple[ir.Kernel, Callable]] = {}  # the last kernels run as calls
_RUNNERS_KEPT = 8


def run_ptx_any(kernel: ir.Kernel, launch, observer=None, trace=None,
                run: Callable = run_ptx_kernel):
    """`run` (`run_ptx_kernel`, `run_ptx_growing`) on a kernel read with its calls
    inlined, or, when inlining left a call to a function of the file opaque (recursion,
    function pointers), on the kernel with its calls run as calls, the observer seeing
    the inlined kernel (`CallsObserver`). PtxExecutionError when its calls cannot be
    kept."""
    if not kernel.attrs.get("calls_not_inlined"):
        return run(kernel, launch, observer, trace)
    known = _RUNNERS.get(id(kernel))
    if known is None or known[0] is not kernel:
        try:
            executable = executable_form(kernel, "<kernel>")
        except ValueError as error:
            raise PtxExecutionError(kernel.name, kernel.loc.line, None, [],
                                    str(error)) from None
        if len(_RUNNERS) >= _RUNNERS_KEPT:
            _RUNNERS.pop(next(iter(_RUNNERS)))
        known = _RUNNERS[id(kernel)] = (kernel, calls_runner(executable, kernel, run_ptx_kernel))
    return known[1](kernel, launch, observer, trace, run)


def calls_runner(executable: ir.Kernel, inlined: ir.Kernel, run: Callable) -> Callable:
    """A `run(kernel, launch, observer)` for the oracle that runs `executable` (the
    kernel with its calls kept) for the inlined kernel the claims are about."""
    twins = _twins(executable, inlined)
    deep = DeepClaims(executable, inlined)

    def run_as_calls(kernel: ir.Kernel, launch, observer=None, trace=None,
                     run: Callable = run):
        if observer is None:
            return run(executable, launch, None, trace)
        wrapped = CallsObserver(observer, executable, inlined, twins, deep)
        try:
            return run(executable, launch, wrapped, trace)
        finally:
            wrapped.finish()
    return run_as_calls
