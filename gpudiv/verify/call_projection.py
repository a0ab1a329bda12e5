"""Call summaries projected onto the inlined kernel: what lets the oracle check them and
`gpudiv compare --calls` measure what they lose against inlining (issue 16, item 1).

With call summaries (`gpudiv.analyses.call_summaries`) a function is analysed once per
calling context, and no inlined kernel is built. The interpreter runs the kernel with its
calls inlined (PTX calls to functions of the file have the semantics of their bodies),
so to check the summaries on it, each claim is carried over to every inlined copy:

- every instruction of the inlined kernel belongs to one frame, the kernel's or one
  inlined call (`attrs["call_instances"]`: which call site of which caller each copy
  stands for, so which function and calling context its claims come from);
- in that frame it is the k-th instruction lowered from one PTX instruction, as is one
  instruction of the function analysed on its own: the SSA variables the two read,
  operand by operand, get the same claim (a variable read by several instructions whose
  claims disagree gets the weaker one, or none when they say as much differently, and
  the disagreement is counted);
- φs, ηs and rejoin copies that no instruction reads match by register and block;
- the arguments a call passes are read, in the caller's frame, by the parameter copies
  of the inlined kernel and by the `call` instruction of the summarised one: matched by
  register name (the rest of a call's group is lowered differently and not matched).

The projection is a `KernelResult` of the inlined kernel's own SSA form, so the oracle
checks it as it checks any analysis (affine claims too), and it can be compared variable
by variable with the same analysis of the inlined kernel.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpudiv import ir
from gpudiv.analyses import get_analysis
from gpudiv.analyses.call_summaries import CallsAnalysis, Context, call_contexts
from gpudiv.analyses.results import BranchResult, KernelResult, VariableResult
from gpudiv.ir.record import replace

# How much a class says (a variable whose reads disagree gets the weaker claim): uniform
# and constaffine say as much, differently.
_STRENGTH = {"divergent": 0, "affine": 1, "constaffine": 2, "uniform": 2, "constant": 3}
NO_CLAIM = ("divergent", None, None)

# A claim on an SSA variable: its class, its constant, its affine coefficients.
Claim = tuple[str, int | None, tuple | None]


@dataclass
class Difference:
    """A variable of the inlined kernel whose class differs between inlining and call
    summaries, with the frame it belongs to and why."""

    variable: str
    source: str
    line: int
    frame: str
    inlined: str
    summarised: str
    why: str


@dataclass
class Projection:
    """One kernel: the simple analysis of its inlined form, the summaries' claims carried
    onto it, and how they compare."""

    kernel: str
    inlined: KernelResult
    projected: KernelResult
    mapped: int  # variables of the inlined kernel that got a claim from the summaries
    unmapped: list[str] = field(default_factory=list)
    conflicts: int = 0  # variables whose reads got different claims
    losses: list[Difference] = field(default_factory=list)
    gains: list[Difference] = field(default_factory=list)
    # branches (block, line) that inlining finds uniform and the summaries divergent, and
    # the other way round
    branch_losses: list[tuple[str, int]] = field(default_factory=list)
    branch_gains: list[tuple[str, int]] = field(default_factory=list)


def _key(instr: ir.Instruction, seen: dict[tuple, int], frame: str) -> tuple:
    """(frame, line, column, k): the k-th instruction lowered from one PTX instruction in
    one frame."""
    base = (frame, instr.loc.line, instr.loc.column)
    k = seen.get(base, 0)
    seen[base] = k + 1
    return (*base, k)


def _frames(kernel: ir.Kernel) -> dict[int, str]:
    """For each instruction id of an inlined kernel: the suffix of its frame ("" for
    the kernel's own instructions)."""
    inlined = kernel.attrs.get("ptx_source", {}).get("inlined_forms", {})
    return {i.id: inlined[i.group][1] if i.group in inlined else ""
            for i in kernel.instructions()}


def _claims_of(result: KernelResult) -> dict[str, Claim]:
    """The claim the analysis makes on each variable it lists (special registers and
    undefined values are not listed: the oracle has its own claims on specials). A
    divergent variable's partly known coefficients are no claim."""
    return {v.name: NO_CLAIM if v.klass == "divergent" else (v.klass, v.value, v.affine)
            for v in result.variables}


def _unsuffixed(name: str, suffix: str) -> str:
    """A register name of frame `suffix` as the function lowered on its own names it."""
    if not suffix:
        return name
    base, plus, offset = name.partition("+")
    if base.endswith(suffix):
        return base[:-len(suffix)] + plus + offset
    return name


def _block_unsuffixed(label: str, suffix: str) -> str:
    """A block label of frame `suffix` as in the function lowered on its own (an edge
    block `a^b` names two labels)."""
    return "^".join(_unsuffixed(part, suffix) for part in label.split("^"))


@dataclass
class _View:
    """What the projection looks up in one analysed kernel or function (built once per
    result: every inlined copy of a function in one context shares it)."""

    instructions: dict[tuple, ir.Instruction]  # (line, column, k) → instruction
    claims: dict[str, Claim]
    joins: dict[tuple, str]  # (register, block, kind) → the φ, η or rejoin copy
    uniform_branches: set[int]  # instruction ids


def _view(result: KernelResult) -> _View:
    seen: dict[tuple, int] = {}
    variables = result.ssa.variables.values()
    return _View({_key(i, seen, "")[1:]: i for i in result.ssa.cfg.kernel.instructions()},
                 _claims_of(result),
                 {(v.source, v.block, v.phi_kind): v.name for v in variables
                  if v.instruction is None and v.phi_kind is not None},
                 {b.instruction for b in result.branches if not b.divergent})


class _Projector:
    """Carries the claims of the summarised frames onto one inlined kernel."""

    def __init__(self, calls: CallsAnalysis, kernel: KernelResult, inlined: KernelResult):
        self.calls = calls
        self.inlined = inlined
        self.instances = inlined.ssa.cfg.kernel.attrs.get("call_instances", {})
        self.results: dict[str, KernelResult | None] = {"": kernel}
        self.claims: dict[str, Claim] = {}
        self.branch_claims: dict[int, bool] = {}
        self.conflicts: set[str] = set()
        self.frame_names: dict[str, str] = {"": kernel.name}
        self.sites: dict[int, dict[tuple[str, int, int], Context]] = {}
        self.views: dict[int, _View] = {}

    def view(self, result: KernelResult) -> _View:
        if id(result) not in self.views:
            self.views[id(result)] = _view(result)
        return self.views[id(result)]

    def result_of(self, suffix: str) -> KernelResult | None:
        """The analysis of the frame an inlined copy stands for (None: not summarised)."""
        if suffix in self.results:
            return self.results[suffix]
        parent, line, column, callee = self.instances[suffix]
        caller = self.result_of(parent)
        found = None
        if caller is not None:
            context = self.sites_of(caller).get((callee, line, column))
            try:
                function = self.calls.context(callee, context)
            except KeyError:  # not summarised (recursive, or no summary could be made)
                function = None
            if function is not None:
                found = function.result
                self.frame_names[suffix] = function.label
        self.results[suffix] = found
        return found

    def sites_of(self, caller: KernelResult) -> dict[tuple[str, int, int], Context]:
        """The summarised call sites of a kernel or function and their contexts (computed
        once per caller: a kernel may hold hundreds of inlined calls)."""
        known = self.sites.get(id(caller))
        if known is None:
            known = self.sites[id(caller)] = {
                (name, line, column): context for name, context, line, column
                in call_contexts(caller, self.calls.summaries)}
        return known

    def claim(self, name: str | None, claim: Claim) -> None:
        if name is None:
            return
        known = self.claims.get(name)
        if known is None:
            self.claims[name] = claim
        elif known != claim:
            self.conflicts.add(name)
            weaker = min(known, claim, key=lambda c: _STRENGTH[c[0]])
            self.claims[name] = NO_CLAIM if _STRENGTH[known[0]] == _STRENGTH[claim[0]] \
                else weaker

    def project(self) -> None:
        kernel = self.inlined.ssa.cfg.kernel
        frames = _frames(kernel)
        seen: dict[tuple, int] = {}
        uses = self.inlined.ssa.uses
        branches = {b.instruction: b for b in self.inlined.ssa.branches}
        for instr in kernel.instructions():
            suffix = frames[instr.id]
            result = self.result_of(suffix)
            key = _key(instr, seen, suffix)
            if result is None:
                continue
            view = self.view(result)
            twin = view.instructions.get(key[1:])
            claims = view.claims
            first = view.instructions.get((*key[1:3], 0))
            if first is not None and "callee" in first.attrs:
                # A summarised call's group is lowered differently (parameter and result
                # copies against one `call` and its results): only the arguments match.
                if first.operator == "call" and first.dest is None:
                    self.project_arguments(instr, suffix, result, first, claims)
                continue
            if twin is None:
                continue
            own, theirs = uses.get(instr.id, []), result.ssa.uses.get(twin.id, [])
            if len(own) != len(theirs) or instr.operator != twin.operator:
                continue
            for mine, their in zip(own, theirs, strict=True):
                if their in claims:
                    self.claim(mine, claims[their])
            mine, their = self.inlined.ssa.defs.get(instr.id), result.ssa.defs.get(twin.id)
            if mine is not None and their in claims:
                self.claim(mine, claims[their])
            if instr.id in branches:
                self.branch_claims[instr.id] = twin.id in view.uniform_branches

    def project_joins(self) -> None:
        """φ, η and rejoin variables, matched by register and block (a φ that only feeds
        other φs is read by no instruction)."""
        for var in self.inlined.ssa.variables.values():
            if var.instruction is not None or var.phi_kind is None or var.name in self.claims:
                continue
            suffix = _frame_suffix(var.block)
            result = self.results.get(suffix)
            if result is None:
                continue
            view = self.view(result)
            their = view.joins.get((_unsuffixed(var.source, suffix),
                                    _block_unsuffixed(var.block, suffix), var.phi_kind))
            if their in view.claims:
                self.claim(var.name, view.claims[their])

    def project_arguments(self, instr: ir.Instruction, suffix: str, result: KernelResult,
                          call: ir.Instruction, claims: dict[str, Claim]) -> None:
        """The caller's reads of a call's arguments, matched by register name."""
        by_name = {}
        for arg, name in zip(call.reads, result.ssa.uses.get(call.id, []), strict=False):
            if isinstance(arg, ir.Var) and name is not None:
                by_name[arg.name] = name
        for arg, mine in zip(instr.reads, self.inlined.ssa.uses.get(instr.id, []),
                             strict=False):
            if isinstance(arg, ir.Var):
                their = by_name.get(_unsuffixed(arg.name, suffix))
                if their in claims:
                    self.claim(mine, claims[their])


def _projected_result(inlined: KernelResult, claims: dict[str, Claim],
                      branch_claims: dict[int, bool]) -> KernelResult:
    """The inlined kernel's result with the projected claims (no claim: divergent)."""
    variables: list[VariableResult] = []
    for var in inlined.variables:
        klass, value, affine = claims.get(var.name, NO_CLAIM)
        variables.append(replace(var, klass=klass, value=value, affine=affine,
                                 reason=None if klass != "divergent" else var.reason))
    branches: list[BranchResult] = [replace(b, divergent=not branch_claims.get(
        b.instruction, False)) for b in inlined.branches]
    return replace(inlined, analysis=f"{inlined.analysis} (call summaries)",
                   variables=variables, branches=branches, relations={})


def _depots(result: KernelResult) -> set[str]:
    """The `.local` objects a frame declares that the analysis promoted to variables."""
    return {name.split("[")[0] for name in result.ssa.cfg.kernel.attrs.get("stack_slots", ())}


def _declared(result: KernelResult) -> set[str]:
    """The `.local` objects (and other symbols) a frame declares in its body."""
    return set(result.ssa.cfg.kernel.attrs.get("ptx_source", {}).get("symbols", {}))


class _Reasons:
    """Why the summaries say less than inlining about a variable of some frame."""

    def __init__(self, projector: _Projector, inlined: KernelResult):
        self.projector = projector
        self.inline_promoted = _depots(inlined)
        self.irreducible = any(len(loop.headers) > 1
                               for loop in inlined.ssa.cfg.loops.values())

    def unpromoted(self, suffix: str) -> set[str]:
        """The frame's own stack objects that inlining promotes and the summaries do not."""
        result = self.projector.results.get(suffix)
        if result is None:
            return set()
        return (_declared(result) & self.inline_promoted) - _depots(result)

    def why(self, inlined: Claim, summarised: Claim, suffix: str) -> str:
        if (inlined[0], summarised[0]) in (("constant", "uniform"), ("constaffine", "affine")):
            return ("a constant that comes from a call's literal arguments: a summary "
                    "gives a call's result back as uniform, not as the constant it is in "
                    "that calling context")
        frame, chain = suffix, []
        while True:  # the frame itself, then its callers
            lost = self.unpromoted(frame)
            if lost:
                told = self.escaped(frame, lost)
                return told if not chain else f"a divergent argument: {told}"
            if frame == "" or frame not in self.projector.instances:
                break
            chain.append(frame)
            frame = self.projector.instances[frame][0]
        for frame in self.projector.results:  # a callee: through what a call returns
            lost = self.unpromoted(frame)
            if lost:
                return f"a call's result: {self.escaped(frame, lost)}"
        if inlined[0] in ("affine", "constaffine"):
            return ("an affine value that crosses a call: a summary gives a call's result "
                    "back as uniform, a literal or divergent, and takes an argument whose "
                    "tid coefficients are not known as divergent")
        if self.irreducible:
            return ("an irreducible cycle: its loops are found from other headers once the "
                    "calls are inlined (more blocks, another depth-first order), and the "
                    "values that leave them are gated by other exits")
        return "differs from inlining (no known cause: please report it)"

    def escaped(self, frame: str, lost: set[str]) -> str:
        where = self.projector.frame_names.get(frame, frame)
        return (f"the stack frame of {where} ({', '.join(sorted(lost))}) stays memory: its "
                f"address is passed to a call, so its slots are not promoted to variables as "
                f"they are when the call is inlined")


def project(calls: CallsAnalysis, kernel: str) -> Projection:
    """The summaries' claims on one kernel, carried onto its inlined form and compared
    with the same analysis of that form."""
    result = next(k for k in calls.kernels if k.name == kernel)
    lowered = calls.reader.inlined(kernel)
    if lowered is None:
        raise ValueError(f"kernel {kernel}: cannot be checked with call summaries: its "
                         f"calls cannot be inlined (see the errors above)")
    inlined = get_analysis(calls.analysis)(lowered, result.block)
    projector = _Projector(calls, result, inlined)
    projector.project()
    projector.project_joins()
    projected = _projected_result(inlined, projector.claims, projector.branch_claims)
    frames = _frames(inlined.ssa.cfg.kernel)
    frame_of = {var.name: frames.get(var.instruction, "") if var.instruction is not None
                else _frame_suffix(var.block) for var in inlined.ssa.variables.values()}
    reasons = _Reasons(projector, inlined)
    own = _claims_of(inlined)
    projection = Projection(kernel, inlined, projected, len(projector.claims),
                            conflicts=len(projector.conflicts))
    for mine, theirs in zip(inlined.branches, projected.branches, strict=True):
        if mine.divergent != theirs.divergent:
            (projection.branch_losses if theirs.divergent else projection.branch_gains).append(
                (mine.label, mine.line))
    for var in inlined.variables:
        if var.name not in projector.claims:
            projection.unmapped.append(var.name)
            continue
        theirs, mine = projector.claims[var.name], own[var.name]
        if theirs == mine:
            continue
        suffix = frame_of[var.name]
        frame = projector.frame_names.get(suffix, suffix)
        difference = Difference(var.name, var.source, var.line, frame, _describe(mine),
                                _describe(theirs), "")
        if _STRENGTH[theirs[0]] <= _STRENGTH[mine[0]]:
            difference.why = reasons.why(mine, theirs, suffix)
            projection.losses.append(difference)
        else:
            difference.why = "the summary is more precise than inlining here"
            projection.gains.append(difference)
    return projection


def project_each(calls: CallsAnalysis) -> list[tuple[KernelResult, Projection | ValueError]]:
    """Each kernel with its projection, or why its inlined form cannot be built."""
    found: list[tuple[KernelResult, Projection | ValueError]] = []
    for kernel in calls.kernels:
        try:
            found.append((kernel, project(calls, kernel.name)))
        except ValueError as error:
            found.append((kernel, error))
    return found


def _frame_suffix(label: str) -> str:
    """The frame suffix of a block label (`$L__BB3_2@4` → `@4`)."""
    head, at, tail = label.rpartition("@")
    return at + tail if at and tail.isdigit() else ""


def _describe(claim: Claim) -> str:
    klass, value, affine = claim
    if klass == "constant":
        return f"constant {value}"
    if klass in ("affine", "constaffine") and affine is not None:
        a2, a1, a0 = ("⊥" if c is None else str(c) for c in affine)
        return f"{klass} {a2}·tid² + {a1}·tid + {a0}"
    return klass
