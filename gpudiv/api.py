"""The Python API: load files, analyse kernels, check claims on the interpreter."""

from __future__ import annotations

from collections.abc import Callable

from gpudiv import ir
from gpudiv.analyses import DEFAULT_ANALYSIS, get_analysis
from gpudiv.analyses.findings import Finding, deadlock_findings, file_findings
from gpudiv.analyses.launch_shape import BlockShape, as_shape
from gpudiv.analyses.results import KernelResult
from gpudiv.analyses.solve import RuleError, in_context
from gpudiv.ir.record import Record, replace
from gpudiv.lang.load import LoadError, language_of, load, parse_text, path_text, read_source

TYPE_CHECKING = False  # (typing is not imported: an analysis never needs it)
if TYPE_CHECKING:  # the interpreters and the oracle (numpy) load when a kernel runs
    from pathlib import Path  # (and pathlib is not imported: paths are strings here)

    from gpudiv.analyses.call_summaries import CallsAnalysis
    from gpudiv.analyses.deadlock import KernelDeadlocks
    from gpudiv.interp.musimd import LaunchConfig
    from gpudiv.interp.ptx import PtxLaunch
    from gpudiv.interp.simt import Counters
    from gpudiv.transforms.motion_explain import MotionExplanation
    from gpudiv.verify.call_projection import Projection
    from gpudiv.verify.oracle import CheckReport

# Languages a reference interpreter can execute (gpudiv.interp.musimd, gpudiv.interp.ptx).
EXECUTABLE_LANGUAGES = ("musimd", "ptx")

# How `analyze` treats calls to functions of the file: inlined at every call site, or
# summarised once per calling context (`analyze_with_summaries`).
CALL_MODES = ("inline", "summary")


# How the PTX interpreter runs a kernel's calls to functions of its file (`kernel_to_run`).
RUN_CALL_MODES = ("auto", "inline", "call")


def kernel_to_run(path: str | Path, kernel: ir.Kernel, calls: str = "auto") -> ir.Kernel:
    """The form of a PTX kernel (as `load` reads it from `path`: calls inlined) that the
    interpreter runs: `inline` as it is; `call` with its calls run as calls (each
    function lowered once, `gpudiv.interp.ptx_calls`); `auto` as it is unless inlining
    left a call to a function of the file opaque (recursion, nesting deeper than the
    inliner goes, a function pointer; such a kernel keeps the text it was read from).
    ValueError when the calls cannot be kept."""
    if calls not in RUN_CALL_MODES:
        raise ValueError(f"unknown call mode '{calls}' (one of {', '.join(RUN_CALL_MODES)})")
    if calls == "inline" or (calls == "auto" and not kernel.attrs.get("calls_not_inlined")):
        return kernel
    from gpudiv.interp.ptx_calls import executable_form

    text = kernel.attrs.get("ptx_text")  # what inlining left opaque: the text is kept
    if text is None:
        try:
            text = read_source(path_text(path))
        except LoadError as error:
            raise ValueError(f"kernel {kernel.name}: cannot keep its calls as calls "
                             f"({error})") from None
    return executable_form(kernel, str(path), str(text))


class FileAnalysis(Record):
    """The analysis of every kernel of one file, with the file's diagnostics."""

    path: str
    language: str
    kernels: list[KernelResult]
    diagnostics: list[ir.Diagnostic]
    parse_ms: dict[str, float]
    # Findings computed before the kernels' SSA forms were dropped (see `lean`).
    cached_findings: list[Finding] | None
    # With call summaries (`analyze(..., calls="summary")`): the summaries and contexts,
    # what `check_calls` and `compare_calls` need (`kernels` lists the kernels, then every
    # function in every calling context).
    calls: CallsAnalysis | None

    def __init__(self, path: str, language: str, kernels: list[KernelResult],
                       diagnostics: list[ir.Diagnostic] | None = None,
                       parse_ms: dict[str, float] | None = None,
                       cached_findings: list[Finding] | None = None,
                       calls: CallsAnalysis | None = None) -> None:
        self.path = path
        self.language = language
        self.kernels = kernels
        self.diagnostics = [] if diagnostics is None else diagnostics
        self.parse_ms = {} if parse_ms is None else parse_ms
        self.cached_findings = cached_findings
        self.calls = calls

    @property
    def errors(self) -> list[ir.Diagnostic]:
        """Diagnostics of severity error."""
        return [d for d in self.diagnostics if d.severity == "error"]

    def kernel(self, name: str) -> KernelResult:
        """The result for one kernel."""
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(name)

    def findings(self) -> list[Finding]:
        """What gpudiv warns about in this file (divergent branches, …), in program order."""
        if self.cached_findings is not None:
            return self.cached_findings
        return file_findings(self.path, self.kernels)

    def lean(self) -> FileAnalysis:
        """A copy without the kernels' SSA forms and solved relations (cheap to send to
        another process); its findings are computed first and kept."""
        return replace(self, kernels=[replace(k, ssa=None, relations={}) for k in self.kernels],
                       cached_findings=self.findings(), calls=None)


def _program(source: str | Path | ir.Program) -> ir.Program:
    if isinstance(source, ir.Program):
        return source
    return load(source)


def analyze(source: str | Path | ir.Program, analysis: str = DEFAULT_ANALYSIS,
            block: BlockShape | str | tuple[int, ...] | None = None,
            on_progress: Callable[[str, int, int], None] | None = None,
            kernel_timeout: float | None = None, calls: str = "inline") -> FileAnalysis:
    """Analyse every kernel of a file (path) or parsed program. `block` is the block
    shape of every launch (`"32x8"`, `(32, 8)`, a BlockShape): with it `%ntid.*` are
    constants and, when X % 32 == 0, `%tid.y`/`%tid.z` are warp-uniform (PTX only; a
    kernel's `.reqntid` wins). ValueError for a shape that cannot launch.
    `on_progress(stage, done, total)` hears of the stages of long work: "reading" (0, 0)
    before a file is read, then each kernel "preparing" (CFG, SSA, facts) and "solving".
    `kernel_timeout`: seconds each kernel's analysis may take; a kernel that overruns is
    not analysed and gets an error diagnostic that says so (the others are analysed).
    `calls`: "inline" (every call inlined) or "summary" (`analyze_with_summaries`)."""
    if calls not in CALL_MODES:
        raise ValueError(f"unknown call mode '{calls}' (known: {', '.join(CALL_MODES)})")
    if calls == "summary":
        return analyze_with_summaries(source, analysis, block, on_progress, kernel_timeout)
    if on_progress is not None and not isinstance(source, ir.Program):
        on_progress("reading", 0, 0)
    program = _program(source)
    driver = get_analysis(analysis)
    shape = as_shape(block)
    result = FileAnalysis(program.path, program.language, [], list(program.diagnostics),
                          dict(program.parse_ms))
    for kernel, kernel_result in zip(program.kernels,
                                     driver.run(program.kernels, shape,
                                                on_progress=on_progress,
                                                kernel_timeout=kernel_timeout),
                                     strict=True):
        if isinstance(kernel_result, RuleError):
            text = str(in_context(kernel_result, program.path, kernel.loc,
                                  f"kernel {kernel.name}"))
            where, _, message = text.partition(": error: ")
            rule_path, line, column = where.rsplit(":", 2)
            result.diagnostics.append(ir.Diagnostic("error", message, rule_path, int(line),
                                                    int(column)))
            continue
        kernel_result.timing_ms["parse"] = program.parse_ms.get(kernel.name, 0.0)
        result.diagnostics += _warnings(kernel_result, program.path)
        result.kernels.append(kernel_result)
    return result


def _warnings(result: KernelResult, path: str) -> list[ir.Diagnostic]:
    """The warnings of an analysed kernel (or function in a calling context) as
    diagnostics of its file."""
    what = "function" if result.calling_context else "kernel"
    return [ir.Diagnostic("warning", f"{what} {result.name}: {warning}", path, loc.line,
                          loc.column) for warning, loc in result.warnings]


def analyze_with_summaries(source: str | Path | ir.Program,
                           analysis: str = DEFAULT_ANALYSIS,
                           block: BlockShape | str | tuple[int, ...] | None = None,
                           on_progress: Callable[[str, int, int], None] | None = None,
                           kernel_timeout: float | None = None) -> FileAnalysis:
    """Analyse a PTX file with call summaries (`gpudiv.analyses.call_summaries`): each
    `.func` once per calling context instead of once per call site. The result lists the
    kernels (their calls as summaries), then each function in each calling context that
    occurs (`KernelResult.calling_context`); `FileAnalysis.calls` keeps the summaries.
    A μ-SIMD file has no calls and is analysed as `analyze` does. A parsed Program cannot
    be given: the summaries lower the PTX text function by function."""
    from gpudiv.analyses.call_summaries import analyze_calls
    from gpudiv.lang.ptx.functions import FunctionReader

    get_analysis(analysis)  # ValueError for an unknown name
    if isinstance(source, ir.Program):
        raise ValueError("call summaries read a PTX file: give its path, not a parsed program")
    path = path_text(source)
    if language_of(path) != "ptx":
        return analyze(path, analysis, block, on_progress, kernel_timeout)
    if on_progress is not None:
        on_progress("reading", 0, 0)
    reader = FunctionReader(read_source(path), path)
    calls = analyze_calls(reader, analysis, as_shape(block), kernel_timeout)
    results = calls.kernels + [found.result for found in calls.functions]
    result = FileAnalysis(path, "ptx", results, list(calls.diagnostics),
                          {k.name: calls.timing_ms["parse"] / max(len(calls.kernels), 1)
                           for k in calls.kernels}, calls=calls)
    for kernel_result in results:
        result.diagnostics += _warnings(kernel_result, path)
    result.diagnostics.sort(key=lambda d: (d.line, d.column))
    return result


def compare_calls(source: str | Path, analysis: str = DEFAULT_ANALYSIS
                  ) -> tuple[FileAnalysis, list[Projection]]:
    """Call summaries against inlining on one PTX file: for each kernel, the summaries'
    claims carried onto its inlined form and every variable whose class differs from
    the same analysis of that form, with why (`gpudiv.verify.call_projection`)."""
    from gpudiv.verify.call_projection import project_each

    analysed = analyze_with_summaries(source, analysis)
    if analysed.calls is None:
        return analysed, []
    projections = []
    for kernel, found in project_each(analysed.calls):
        if isinstance(found, ValueError):  # its inlined form cannot be built: say so, go on
            loc = kernel.ssa.cfg.kernel.loc
            analysed.diagnostics.append(ir.Diagnostic("error", str(found), analysed.path,
                                                      loc.line, loc.column))
        else:
            projections.append(found)
    return analysed, projections


class FileDeadlocks(Record):
    """The SIMT-deadlock report of every kernel of one file (`gpudiv deadlock`)."""

    path: str
    language: str
    kernels: list[KernelDeadlocks]
    diagnostics: list[ir.Diagnostic]

    def __init__(self, path: str, language: str, kernels: list[KernelDeadlocks],
                       diagnostics: list[ir.Diagnostic] | None = None) -> None:
        self.path = path
        self.language = language
        self.kernels = kernels
        self.diagnostics = [] if diagnostics is None else diagnostics

    @property
    def errors(self) -> list[ir.Diagnostic]:
        """Diagnostics of severity error."""
        return [d for d in self.diagnostics if d.severity == "error"]

    def kernel(self, name: str) -> KernelDeadlocks:
        """The report of one kernel."""
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(name)

    def findings(self) -> list[Finding]:
        """Loops that may deadlock and divergent barriers, per kernel in file order."""
        return [f for k in self.kernels for f in deadlock_findings(self.path, k)]

    def as_dict(self) -> dict:
        """JSON form: the file and its kernels' reports."""
        return {"file": self.path, "language": self.language,
                "kernels": [k.as_dict() for k in self.kernels]}


def _pragmas(program: ir.Program) -> tuple[set[str], bool]:
    """The kernels a file's `gpudiv: warp-synchronous` comments opt out (see
    `gpudiv.analyses.deadlock.PRAGMA`)."""
    from gpudiv.analyses.deadlock import pragma_kernels

    try:
        with open(program.path, encoding="utf-8", errors="replace") as file:
            text = file.read()
    except OSError:
        return set(), False
    return pragma_kernels(text)


def deadlock(source: str | Path | ir.Program, assume_safe: tuple[str, ...] = ()
             ) -> FileDeadlocks:
    """Look for SIMT-induced deadlocks in every kernel of a file (path) or parsed program.

    Kernels named in `assume_safe`, or by a `gpudiv: warp-synchronous` comment of the file,
    are reported with `assumed_safe` and give no findings."""
    from gpudiv.analyses import deadlock as deadlock_analysis
    from gpudiv.analyses.deadlock import kernel_deadlocks

    program = _program(source)
    named, everything = _pragmas(program)
    trusted = set(assume_safe) | named
    result = FileDeadlocks(program.path, program.language, [], list(program.diagnostics))
    driver = deadlock_analysis.analysis()
    for kernel, kernel_result in zip(program.kernels, driver.run(program.kernels),
                                     strict=True):
        if isinstance(kernel_result, RuleError):
            result.diagnostics.append(ir.Diagnostic(
                "error", f"kernel {kernel.name}: {kernel_result}", program.path,
                kernel.loc.line, kernel.loc.column))
            continue
        kernel_result.timing_ms["parse"] = program.parse_ms.get(kernel.name, 0.0)
        result.kernels.append(kernel_deadlocks(kernel_result,
                                               everything or kernel.name in trusted))
    return result


def analyze_text(text: str, path: str = "<string>", analysis: str = DEFAULT_ANALYSIS,
                 language: str = "musimd",
                 block: BlockShape | str | tuple[int, ...] | None = None) -> FileAnalysis:
    """Analyse source text directly."""
    return analyze(parse_text(text, path, language), analysis, block)


def check(analysed: FileAnalysis, seed: int = 0, reconvergence: str = "auto",
          max_steps: int | None = None,
          on_progress: Callable[[str, int, int], None] | None = None) -> list[CheckReport]:
    """Run each analysed kernel under the default launch shapes and check its claims (a
    PTX kernel analysed for one block shape runs only with that block shape). With call
    summaries (`analysed.calls`) each kernel runs with its calls inlined and every inlined
    copy of a function is checked against the claims of its calling context
    (`gpudiv.verify.call_projection`);
    `max_steps` warp steps per launch (default: `oracle.CHECK_MAX_STEPS` for μ-SIMD,
    `interp.ptx_synthesis.CHECK_MAX_STEPS` for PTX)."""
    from functools import partial

    from gpudiv.analyses.stack_slots import original
    from gpudiv.interp.musimd import reconvergence_for
    from gpudiv.interp.ptx import run_ptx_growing
    from gpudiv.interp.ptx_launch import machine_policy
    from gpudiv.verify.call_runs import run_ptx_any
    from gpudiv.verify.oracle import (
        CHECK_MAX_STEPS,
        CheckReport,
        check_kernel,
        ptx_launches,
        random_launches,
    )

    if analysed.language not in EXECUTABLE_LANGUAGES:
        return [CheckReport(k.name, status="not-executed", reason=f"no reference interpreter "
                            f"for {analysed.language} yet") for k in analysed.kernels]
    results: list[KernelResult | CheckReport] = list(analysed.kernels)
    if analysed.calls is not None:  # call summaries: their claims on the inlined kernels
        results = _projected(analysed.calls)
    reports = []
    for index, result in enumerate(results):
        if isinstance(result, CheckReport):  # nothing to run
            reports.append(result)
            continue
        if on_progress is not None:
            on_progress("checking", index, len(results))
        if analysed.language == "ptx":  # PTX reconverges at immediate post-dominators
            launches = [replace(launch, reconvergence=reconvergence) for launch in
                        ptx_launches(original(result.ssa.cfg.kernel), seed + index,
                                     result.block, max_steps)]
            reports.append(check_kernel(result, launches,
                                        run=partial(run_ptx_any, run=run_ptx_growing)))
            policy = machine_policy(original(result.ssa.cfg.kernel), reconvergence)
            reports[-1].reconvergence = "sync" if policy == "marked" else policy
            if original(result.ssa.cfg.kernel).attrs.get("calls_not_inlined"):
                reports[-1].calls = "call"
            continue
        launches = random_launches(result.ssa.cfg.kernel, seed + index,
                                   reconvergence=reconvergence,
                                   max_steps=CHECK_MAX_STEPS if max_steps is None
                                   else max_steps)
        reports.append(check_kernel(result, launches))
        reports[-1].reconvergence = (reconvergence_for(result.ssa.cfg.kernel)
                                     if reconvergence == "auto" else reconvergence)
    return reports


def _projected(calls: CallsAnalysis) -> list[KernelResult | CheckReport]:
    """The summaries' claims on each inlined kernel, or why a kernel cannot be checked."""
    from gpudiv.verify.call_projection import project_each
    from gpudiv.verify.oracle import CheckReport

    return [CheckReport(kernel.name, status="not-executed", reason=str(found))
            if isinstance(found, ValueError) else found.projected
            for kernel, found in project_each(calls)]


class PolicyRun(Record):
    """One run of `compare_reconvergence`: the policy, how the run ended (`finished`,
    `SIMT deadlock`, `infinite loop` or `error`), its message and counters, the time slots
    of μ-SIMD runs (a warp running one block with one set of lanes; Wu et al. Fig 3), and
    whether its memory equals the memory the mimd run left (None without a mimd result)."""

    policy: str
    status: str
    message: str
    counters: Counters | None
    slots: int | None
    same_as_mimd: bool | None

    def __init__(self, policy: str, status: str, message: str = "",
                       counters: Counters | None = None, slots: int | None = None,
                       same_as_mimd: bool | None = None) -> None:
        self.policy = policy
        self.status = status
        self.message = message
        self.counters = counters
        self.slots = slots
        self.same_as_mimd = same_as_mimd


def compare_reconvergence(kernel: ir.Kernel, launch: LaunchConfig | PtxLaunch) -> list[PolicyRun]:
    """Run one launch of a kernel under every reconvergence policy that applies (μ-SIMD:
    sync when the kernel has `sync`, ipdom, aware, frontier, mimd; PTX: ipdom, aware,
    frontier, mimd; sync first for a kernel with explicit reconvergence points on its
    branches)."""
    from gpudiv.interp.engine import has_marks
    from gpudiv.interp.musimd import reconvergence_for, run_kernel, time_slots
    from gpudiv.interp.ptx import PtxLaunch, run_ptx_kernel
    from gpudiv.interp.simt import DeadlockError, ExecutionError

    ptx = isinstance(launch, PtxLaunch)
    policies = ["ipdom", "aware", "frontier", "mimd"]
    if (ptx and has_marks(kernel)) or (not ptx and reconvergence_for(kernel) == "sync"):
        policies.insert(0, "sync")
    runs: list[PolicyRun] = []
    memories: dict[str, object] = {}
    for policy in policies:
        try:
            if ptx:
                result = run_ptx_kernel(kernel, replace(launch, reconvergence=policy))
                memories[policy] = {k: v.tobytes() for k, v in result.buffers.items()}
                runs.append(PolicyRun(policy, "finished", counters=result.counters))
            else:
                result = run_kernel(kernel, replace(launch, reconvergence=policy), trace=True)
                memories[policy] = dict(result.shared)
                runs.append(PolicyRun(policy, "finished", counters=result.counters,
                                      slots=time_slots(result.trace)))
        except DeadlockError as error:
            status = "SIMT deadlock" if str(error).startswith("SIMT") else "infinite loop"
            runs.append(PolicyRun(policy, status, str(error)))
        except ExecutionError as error:
            runs.append(PolicyRun(policy, "error", str(error)))
    reference = memories.get("mimd")
    for run in runs:
        if reference is not None and run.policy in memories:
            run.same_as_mimd = memories[run.policy] == reference
    return runs



def explain_motion(source: str | Path | ir.Program, pass_name: str,
                   kernel: str | None = None, divergence: str | None = None
                   ) -> list[MotionExplanation]:
    """Per kernel of a file (path) or parsed program (only `kernel` when given): where one
    code-motion pass (lcm, scm, sscm, spre, srqp, esrqp, ssrqp-s, ssrqp) inserts and
    replaces each expression or load, with the predicate values that justify it
    (`gpudiv transform FILE --pass P --explain`). Raises PassError for another pass."""
    from gpudiv.transforms.motion_explain import explain_kernel

    options = {"divergence": divergence} if divergence else {}
    return [explain_kernel(k, pass_name, options) for k in _program(source).kernels
            if kernel is None or k.name == kernel]
