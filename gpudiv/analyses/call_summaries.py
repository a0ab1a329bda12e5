"""Call summaries: each `.func` analysed once per calling context, not once per call site
(issue 16, item 1), for any analysis (simple, affine, affine2; Sampaio 2013 §3.4–3.5).

`gpudiv analyze` inlines every call, so a kernel that calls a function from 36 places
analyses 36 copies of it. Here a PTX file is read once (`gpudiv.lang.ptx.functions`) and:

1. **Summaries, bottom-up.** Each `.func` is lowered on its own, its calls standing for the
   summaries of their callees (functions are taken callees first, `_levels`; a call into
   a cycle of the call graph stays opaque). rules/call_summary.lp derives, in one solve
   per function, which inputs each output depends on (through values, or through a
   pointer into the caller's thread-private frame) and which outputs differ between
   lanes whatever the inputs (`CallSummary`).
2. **Kernels.** Each `.entry` is lowered with its calls as summaries (`call.result` reads
   only the arguments a result depends on) and analysed by the chosen analysis,
   unchanged.
3. **Contexts, top-down.** A call site's context (`Context`) says, per callee input, what
   the caller's analysis says of its argument there: divergent, affine with known tid
   coefficients, a literal, or uniform; and which pointer inputs get `.local` addresses.
   Each function is analysed once per context that occurs (`_in_context`), and its own
   call sites give the contexts of its callees.

Exactness. Every rule of divergence.lp has exactly one divergent premise, so what is
divergent for a set of divergent inputs is the union of what each input makes divergent
and what the body makes divergent by itself: the dependences of a summary are exact.
What can differ from inlining (`gpudiv compare --calls`; `gpudiv.verify.call_projection`
names a cause for every case): an address into a caller's stack frame passed to a callee
is an escape, so that frame is not promoted to variables (`gpudiv.analyses.stack_slots`);
a call's result comes back uniform, a literal or divergent (an affine result is
divergent in the caller); a block shape given by `.reqntid` does not reach the callees;
a call nested deeper than inlining goes is summarised, not opaque.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field

from gpudiv import ir
from gpudiv.analyses import get_analysis
from gpudiv.analyses.driver import Analysis
from gpudiv.analyses.launch_shape import BlockShape
from gpudiv.analyses.results import CallingContext, KernelResult
from gpudiv.analyses.solve import RuleError, SolveResult, shipped_rule
from gpudiv.ir.digraph import DiGraph, strongly_connected_components
from gpudiv.ir.record import replace
from gpudiv.ir.ssa import SSAForm
from gpudiv.lang.ptx.functions import CallSummary, FunctionReader, Slot, SummaryOutput
from gpudiv.lang.ptx.kernel import local_registers

SUMMARY_RULES = ("cfg.lp", "call_summary.lp")


@dataclass(frozen=True)
class Context:
    """A calling context: what the caller's analysis says of each argument at the call
    site (divergent, affine with known tid coefficients, a literal; uniform when not
    listed), and which pointer inputs get addresses into the caller's thread-private
    stack frame."""

    divergent: frozenset[Slot] = frozenset()
    local: frozenset[Slot] = frozenset()
    # inputs whose arguments are the same literal in every active lane: (input, value)
    constants: frozenset[tuple[Slot, int]] = frozenset()
    # inputs whose arguments are a2·tid² + a1·tid + (a value common to the lanes), with
    # known a2 and a1 (affine analyses): (input, a2, a1); they are not in `divergent`
    affine: frozenset[tuple[Slot, int, int]] = frozenset()

    def __str__(self) -> str:
        return self.describe()

    def describe(self, function: str = "") -> str:
        """In words: `divergent: param_1; local: param_0; param_2 = 4` (parameter names
        without the function's name in front, as nvcc writes them)."""
        def name(slot: Slot) -> str:
            text = _slot_name(slot)
            return text[len(function) + 1:] if function and text.startswith(
                function + "_") else text

        parts = [f"divergent: {', '.join(name(s) for s in sorted(self.divergent))}"
                 if self.divergent else "",
                 f"local: {', '.join(name(s) for s in sorted(self.local))}"
                 if self.local else "",
                 ", ".join(f"{name(s)} = {k}" for s, k in sorted(self.constants)),
                 ", ".join(f"{name(s)} = {a2}·tid² + {a1}·tid + ⊥"
                           for s, a2, a1 in sorted(self.affine))]
        return "; ".join(p for p in parts if p) or "uniform inputs"


@dataclass
class _Summarised:
    """What the summary solve of one function gives (the driver's build result)."""

    summary: CallSummary
    block: object = None
    warnings: list = field(default_factory=list)


@dataclass
class FunctionContext:
    """One function analysed in one calling context: the analysis' result and the call
    sites (kernel, or function with its context; line, column) that have this context."""

    function: str
    context: Context
    result: KernelResult
    call_sites: list[tuple[str, int, int]] = field(default_factory=list)

    @property
    def label(self) -> str:
        """`name(divergent: param_0; local: param_1)` or `name(uniform inputs)`."""
        return f"{self.function}({self.context.describe(self.function)})"


@dataclass
class CallsAnalysis:
    """An analysis of a PTX file with call summaries."""

    path: str
    analysis: str
    kernels: list[KernelResult]
    functions: list[FunctionContext]
    summaries: dict[str, CallSummary]
    diagnostics: list[ir.Diagnostic]
    timing_ms: dict[str, float]
    reader: FunctionReader
    _by_key: dict[tuple[str, Context], FunctionContext] = field(default_factory=dict,
                                                                 repr=False)

    def context(self, function: str, context: Context) -> FunctionContext:
        """The result of one function in one context (KeyError if it was not analysed)."""
        if len(self._by_key) != len(self.functions):
            self._by_key.update({(f.function, f.context): f for f in self.functions})
        return self._by_key[(function, context)]


def _slot_name(slot: Slot) -> str:
    return slot[0] if slot[1] == 0 else f"{slot[0]}+{slot[1]}"


def _summary(name: str, kernel: ir.Kernel, ssa: SSAForm, solved: SolveResult,
             timing: dict[str, float]) -> _Summarised:
    """The `CallSummary` of one function from its solved call_summary.lp atoms."""
    instrs = kernel.by_id()
    inputs: dict[str, Slot] = {}
    for n, var in ssa.defs.items():
        slot = instrs[n].attrs.get("input") if var is not None else None
        if slot is not None:
            inputs[var] = slot
    depends: dict[str, set[Slot]] = {}
    for out, inp in solved.relation("depends"):
        depends.setdefault(out, set()).add(inputs[inp])
    local: dict[str, set[Slot]] = {}
    for out, inp in solved.relation("depends_local"):
        local.setdefault(out, set()).add(inputs[inp])
    intrinsic = solved.unary("intrinsic")
    constants = dict(solved.relation("output_constant"))
    outputs: dict[Slot, SummaryOutput] = {}
    for n in kernel.attrs.get("call_return", ()):
        for slot, var in zip(instrs[n].attrs["outputs"], ssa.uses[n], strict=True):
            outputs[slot] = SummaryOutput(frozenset(depends.get(var, ())), var in intrinsic,
                                          constants.get(var), frozenset(local.get(var, ())))
    return _Summarised(CallSummary(tuple(sorted(set(inputs.values()))), outputs))


def _levels(reader: FunctionReader) -> list[list[str]]:
    """The functions, callees first: each level calls only functions of earlier levels.
    The members of a cycle of the call graph take one level each, in file order, and
    their calls to members not yet summarised stay opaque. Linear in the call graph:
    Tarjan's components come sinks (callees) first."""
    functions = reader.functions
    graph = DiGraph()
    graph.add_nodes_from(functions)
    for function in functions:
        graph.add_edges_from((function, callee) for callee in sorted(reader.callees(function)))
    order = {f: k for k, f in enumerate(functions)}
    last: dict[str, int] = {}  # function → the last level of its component
    levels: dict[int, list[str]] = {}
    for component in strongly_connected_components(graph):
        start = max((last[callee] + 1 for member in component
                     for callee in graph.successors(member) if callee not in component),
                    default=0)
        for k, member in enumerate(sorted(component, key=order.__getitem__)):
            last[member] = start + len(component) - 1  # callers come after all of it
            levels.setdefault(start + k, []).append(member)
    return [sorted(levels[k], key=order.__getitem__) for k in sorted(levels)]


def summarise(reader: FunctionReader, errors: list[ir.Diagnostic] | None = None
              ) -> tuple[dict[str, CallSummary | None], dict[str, ir.Kernel]]:
    """The summary of every `.func` with a body, and the function lowered on its own with
    its calls as summaries. None for a function whose body cannot be lowered (the reason
    is among the reader's diagnostics) or that the rules fail on (too large: the reason
    goes to `errors`); its calls stay opaque."""
    driver = Analysis("call-summary", tuple(shipped_rule(f) for f in SUMMARY_RULES),
                      _summary)
    summaries: dict[str, CallSummary | None] = {}
    lowered: dict[str, ir.Kernel] = {}
    for level in _levels(reader):
        kernels = []
        for function in level:
            kernel = reader.lower(function, summaries)
            if kernel is None:  # its error is among the reader's diagnostics
                summaries[function] = None
            else:
                kernels.append(kernel)
        for kernel, done in zip(kernels, driver.run(kernels), strict=True):
            if isinstance(done, RuleError):
                summaries[kernel.name] = None
                if errors is not None:
                    errors.append(ir.Diagnostic("error", f"function {kernel.name}: {done}",
                                                reader.path, kernel.loc.line,
                                                kernel.loc.column))
                continue
            summaries[kernel.name] = done.summary
            lowered[kernel.name] = kernel
    return summaries, lowered


def nonuniform(result: KernelResult) -> set[str]:
    """The SSA variables an analysis does not claim uniform (affine ones included), the
    special registers not known uniform and undefined values among them."""
    found = {v.name for v in result.variables if not v.uniform}
    listed = {v.name for v in result.variables}
    specials = result.ssa.cfg.kernel.specials
    found |= {name for name, var in result.ssa.variables.items() if name not in listed
              and not (var.kind == "special" and specials.get(name) == "uniform")}
    return found


def call_contexts(result: KernelResult, summaries: dict[str, CallSummary | None]
                  ) -> list[tuple[str, Context, int, int]]:
    """Each summarised call site of an analysed kernel or function: (callee, its calling
    context, line, column). The context: the callee's inputs whose arguments are not
    uniform here (affine ones included: a summary takes an argument as uniform or
    divergent), those that may point into thread-private memory, and those that are a
    known literal."""
    divergent = nonuniform(result)
    constant = {v.name: v.value for v in result.variables
                if v.klass == "constant" and v.value is not None}
    affine = {v.name: v.affine[:2] for v in result.variables
              if v.klass in ("affine", "constaffine") and v.affine is not None
              and None not in v.affine[:2]}
    kernel = result.ssa.cfg.kernel
    instructions = kernel.instructions()
    local = local_registers(instructions, kernel.attrs.get("local_inputs", frozenset()))
    sites = []
    for instr in instructions:
        callee = instr.attrs.get("callee")
        if instr.operator != "call" or instr.dest is not None or callee not in summaries:
            continue
        uses = result.ssa.uses.get(instr.id, [])
        divergent_inputs, local_inputs, constants, affine_inputs = set(), set(), set(), set()
        for slot, positions in instr.attrs.get("call_inputs", ()):
            if positions is not None and len(positions) == 1 and uses[positions[0]] in affine:
                affine_inputs.add((slot, *affine[uses[positions[0]]]))
            elif positions is None or any(uses[p] in divergent for p in positions):
                divergent_inputs.add(slot)
            if positions is None or any(isinstance(instr.args[p], ir.Var)
                                        and instr.args[p].name in local for p in positions):
                local_inputs.add(slot)
            values = {instr.args[p].value if isinstance(instr.args[p], ir.Const)
                      else constant.get(uses[p]) for p in positions or ()}
            if len(values) == 1 and None not in values and slot not in divergent_inputs:
                constants.add((slot, values.pop()))
        context = Context(frozenset(divergent_inputs), frozenset(local_inputs),
                          frozenset(constants), frozenset(affine_inputs))
        sites.append((callee, context, instr.loc.line, instr.loc.column))
    return sites


def _in_context(kernel: ir.Kernel, context: Context) -> ir.Kernel:
    """A function's kernel in a calling context: its divergent inputs are sources of
    divergence (`divergent_inputs`: the facts say so), and what it reads through its
    `.local` pointer inputs is thread-private: such a load is a `.local` load, such a
    summarised call's result an opaque `call`."""
    local = frozenset(_slot_name(s) for s in context.local)
    variant = copy.copy(kernel)
    variant.attrs = {**kernel.attrs,
                     "divergent_inputs": frozenset(_slot_name(s) for s in context.divergent),
                     "local_inputs": local,
                     "constant_inputs": {_slot_name(s): k for s, k in context.constants},
                     "affine_inputs": {_slot_name(s): (a2, a1) for s, a2, a1 in context.affine}}
    if not local:
        return variant
    variant.blocks = [replace(block, instructions=[
        _thread_private(i) if local.intersection(i.attrs.get("via_inputs", ())) else i
        for i in block.instructions]) for block in kernel.blocks]
    return variant


def _thread_private(instr: ir.Instruction) -> ir.Instruction:
    """An instruction that reads the caller's stack frame, as it reads it."""
    if instr.kind == ir.LOAD:
        return replace(instr, space="local", attrs={**instr.attrs, "generic": True})
    if instr.kind == ir.ASSIGN:
        return replace(instr, kind=ir.OPAQUE, operator="call")
    return instr  # a store writes it (an escape of the caller's frame); an atomic is a source


class _Run:
    """One `analyze_calls`: the driver, the summaries and what has been analysed."""

    def __init__(self, reader: FunctionReader, analysis: str, block: BlockShape | None,
                 kernel_timeout: float | None):
        self.reader = reader
        self.driver = get_analysis(analysis)
        self.block = block
        self.kernel_timeout = kernel_timeout
        self.errors: list[ir.Diagnostic] = []  # the reader's diagnostics grow as it lowers
        self.summaries, self.lowered = summarise(reader, self.errors)
        # (function, context) → its result (None: the rules failed on it)
        self.analysed: dict[tuple[str, Context], KernelResult | None] = {}

    def kernels(self, names: list[str],
                sites: dict[str, dict[tuple[int, int], dict]] | None = None
                ) -> dict[str, KernelResult]:
        """The kernels analysed with their calls as summaries (`sites`: per kernel, what
        is known of each call's results in its calling context)."""
        lowered = [k for k in (self.reader.lower(e, self.summaries, (sites or {}).get(e))
                               for e in names) if k is not None]
        found = {}
        for kernel, result in zip(lowered, self.driver.run(
                lowered, self.block, kernel_timeout=self.kernel_timeout), strict=True):
            if isinstance(result, RuleError):
                self.errors.append(ir.Diagnostic(
                    "error", f"kernel {kernel.name}: {result}", self.reader.path,
                    kernel.loc.line, kernel.loc.column))
            else:
                found[kernel.name] = result
        return found

    def contexts(self, kernels: list[KernelResult]
                 ) -> dict[tuple[str, Context], FunctionContext]:
        """Every function in every calling context that occurs below the kernels, level
        by level (a context analysed before is not analysed again)."""
        contexts: dict[tuple[str, Context], FunctionContext] = {}
        pending = [(r, r.name) for r in kernels]
        while pending:
            wanted: dict[tuple[str, Context], list[tuple[str, int, int]]] = {}
            for result, caller in pending:
                for callee, context, line, column in call_contexts(result, self.summaries):
                    key = (callee, context)
                    site = (caller, line, column)
                    if key in contexts:
                        contexts[key].call_sites.append(site)
                    elif key[0] in self.lowered:
                        wanted.setdefault(key, []).append(site)
            self.analyse_contexts([k for k in wanted if k not in self.analysed])
            pending = []
            for key, sites in wanted.items():
                result = self.analysed[key]
                if result is None:
                    continue
                found = contexts[key] = FunctionContext(key[0], key[1], result, sites)
                result.name = found.label
                result.calling_context = CallingContext(key[0], key[1].describe(key[0]),
                                                        sites)
                pending.append((result, found.label))
        return contexts

    def analyse_contexts(self, keys: list[tuple[str, Context]]) -> None:
        """Analyse functions in calling contexts, in one driver run."""
        variants = [_in_context(self.lowered[f], context) for f, context in keys]
        for key, result in zip(keys, self.driver.run(
                variants, kernel_timeout=self.kernel_timeout), strict=True):
            if isinstance(result, RuleError):
                function = self.lowered[key[0]]
                self.errors.append(ir.Diagnostic(
                    "error", f"function {key[0]} ({key[1]}): {result}", self.reader.path,
                    function.loc.line, function.loc.column))
                result = None
            self.analysed[key] = result


def any_caller_results(reader: FunctionReader, analysis: str, functions: list[str]
                       ) -> dict[str, KernelResult]:
    """Each of `functions` (with a body and a summary) analysed on its own in the context
    that covers every call of it: every input divergent and possibly pointing into the
    caller's stack frame. Its claims hold in every activation, however deep (what the
    oracle checks activations without an inlined copy against: recursion). A function
    the rules fail on is left out."""
    summaries, lowered = summarise(reader)
    names = [f for f in functions if f in lowered and summaries.get(f) is not None]
    variants = []
    for function in names:
        inputs = frozenset(summaries[function].inputs)
        variants.append(_in_context(lowered[function], Context(inputs, inputs)))
    found = {}
    for function, result in zip(names, get_analysis(analysis).run(variants), strict=True):
        if not isinstance(result, RuleError):
            result.name = f"{function}(any caller)"
            found[function] = result
    return found


def site_values(result: KernelResult, contexts: dict[tuple[str, Context], FunctionContext],
                summaries: dict[str, CallSummary | None]
                ) -> dict[tuple[int, int], dict[Slot, tuple]]:
    """Per call site of an analysed kernel (line, column), what its callee's analysis in
    that calling context knows of the results: ("constant", K) or ("affine", (a2, a1,
    a0)) by output slot; only what the kernel's result does not say already (nothing
    for uniform or divergent results, which the summary says)."""
    said = _said_of_results(result)
    sites: dict[tuple[int, int], dict[Slot, tuple]] = {}
    for callee, context, line, column in call_contexts(result, summaries):
        found = contexts.get((callee, context))
        if found is None:
            continue
        function = found.result
        instrs = function.ssa.cfg.kernel.by_id()
        claims = {v.name: v for v in function.variables}
        values: dict[Slot, tuple] = {}
        for n in function.ssa.cfg.kernel.attrs.get("call_return", ()):
            for slot, var in zip(instrs[n].attrs["outputs"], function.ssa.uses[n],
                                 strict=True):
                claim = claims.get(var)
                if claim is None:
                    continue
                if claim.klass == "constant" and claim.value is not None:
                    value: tuple = ("constant", claim.value)
                elif claim.klass in ("affine", "constaffine") and claim.affine is not None \
                        and None not in claim.affine[:2]:
                    value = ("affine", claim.affine)
                else:
                    continue
                if said.get((line, column, slot)) != value:
                    values[slot] = value
        if values:
            sites[(line, column)] = values
    return sites


def _said_of_results(result: KernelResult) -> dict[tuple[int, int, Slot], tuple]:
    """What an analysed kernel says of each summarised call's results, in the form of
    `site_values`: (line, column, output slot) → ("constant", K) or ("affine", (a2, a1,
    a0)); absent when it says less."""
    claims = {v.name: v for v in result.variables}
    said: dict[tuple[int, int, Slot], tuple] = {}
    for instr in result.ssa.cfg.kernel.instructions():
        slot = instr.attrs.get("output")
        claim = claims.get(result.ssa.defs.get(instr.id)) if slot is not None else None
        if claim is None:
            continue
        key = (instr.loc.line, instr.loc.column, slot)
        if claim.klass == "constant":
            said[key] = ("constant", claim.value)
        elif claim.klass in ("affine", "constaffine"):
            said[key] = ("affine", claim.affine)
    return said


def analyze_calls(reader: FunctionReader, analysis: str = "simple",
                  block: BlockShape | None = None,
                  kernel_timeout: float | None = None) -> CallsAnalysis:
    """An analysis (`simple`, `affine`, `affine2`) of every kernel of a PTX file with
    call summaries (for launches with `block`, as `Analysis.run` takes it), and of every
    function in every calling context that occurs. A kernel the rules fail on (or that
    overruns `kernel_timeout` seconds) is left out with an error diagnostic.

    Two passes over the kernels: the first with each call's results as the summary says
    (uniform or divergent, by the arguments they depend on); the second, for kernels
    with a call whose callee, analysed in that call's context, returns a constant or an
    affine value, with those values (`site_values`). The second is sound: its arguments
    say at least as much as the first's, so each callee's context of the first pass
    covers them, and each result it gives holds."""
    timing: dict[str, float] = {"parse": reader.parse_ms}
    start = time.perf_counter()
    run = _Run(reader, analysis, block, kernel_timeout)
    timing["summaries"] = (time.perf_counter() - start) * 1000
    start = time.perf_counter()
    kernels = run.kernels(reader.entries)
    contexts = run.contexts(list(kernels.values()))
    sites = {name: found for name, result in kernels.items()
             if (found := site_values(result, contexts, run.summaries))}
    if sites:
        kernels.update(run.kernels(list(sites), sites))
        contexts = run.contexts(list(kernels.values()))
    timing["kernels and contexts"] = (time.perf_counter() - start) * 1000
    functions = sorted(contexts.values(), key=lambda c: (c.function, str(c.context)))
    ordered = [kernels[e] for e in reader.entries if e in kernels]
    return CallsAnalysis(reader.path, analysis, ordered, functions,
                         {f: s for f, s in run.summaries.items() if s is not None},
                         list(reader.diagnostics) + run.errors, timing, reader)
