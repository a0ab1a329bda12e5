"""`transform`: run a pass pipeline over a file, print the result and, when asked, prove
it on the interpreter (the Python API behind `gpudiv transform`).

With `verify`, the program that is compared with the original is the printed result read
back (what `-o` writes), so a run also checks the printer and the parser. After the
memory comparison the analysis oracle checks the claims of the analysis on the result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gpudiv import ir
from gpudiv.analyses import DEFAULT_ANALYSIS, get_analysis
from gpudiv.analyses.results import KernelResult
from gpudiv.ir.verify import verify_kernel
from gpudiv.lang.load import load, parse_text
from gpudiv.lang.printing import PrintError, print_program
from gpudiv.transforms import Pass, PassError, Pipeline
from gpudiv.verify.call_runs import run_ptx_any
from gpudiv.verify.equivalence import (
    DIFFERS,
    NOT_EXECUTED,
    VERIFIED,
    compare_kernels,
    launches_for,
)
from gpudiv.verify.oracle import check_kernel, ptx_launches, random_launches
from gpudiv.verify.spill_cost import profile
from gpudiv.verify.ssde_check import check_ssde

UNVERIFIED = "unverified"
STATS = "transform_stats"


class TransformError(Exception):
    """A pipeline that cannot run on a file, as one `FILE:LINE:COL: error: …` line."""


@dataclass
class KernelTransform:
    """What happened to one kernel."""

    name: str
    status: str = UNVERIFIED
    runs: int = 0
    difference: str | None = None
    difference_detail: dict | None = None
    reason: str = ""
    static: dict[str, int] = field(default_factory=dict)
    dynamic: dict[str, object] = field(default_factory=dict)
    oracle_violations: list[str] = field(default_factory=list)
    # the ssde pass: what `check_ssde` established, and what it found wrong
    ssde: dict[str, int] | None = None
    ssde_summary: str = ""
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        """The JSON object of `gpudiv transform --format json`."""
        out: dict[str, object] = {
            "name": self.name, "status": self.status, "runs": self.runs,
            "difference": self.difference_detail, "reason": self.reason,
            "static": self.static, "dynamic": self.dynamic,
            "oracle_violations": self.oracle_violations}
        if self.ssde is not None:
            out["ssde"] = self.ssde
            out["problems"] = self.problems
        return out


@dataclass
class FileTransform:
    """The transformed program of one file, its text and the per-kernel outcomes."""

    path: str
    language: str
    program: ir.Program
    text: str
    kernels: list[KernelTransform]
    diagnostics: list[ir.Diagnostic] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """Whether a kernel differs or violates a claim."""
        return any(k.status == DIFFERS or k.oracle_violations or k.problems
                   for k in self.kernels)

    def to_json(self) -> dict[str, object]:
        """The JSON object of one file."""
        return {"path": self.path, "kernels": [k.to_json() for k in self.kernels]}


def _static(before: ir.Kernel, after: ir.Kernel) -> dict[str, int]:
    return {"instructions_before": before.instruction_count,
            "instructions_after": after.instruction_count,
            "blocks_before": len(before.blocks), "blocks_after": len(after.blocks),
            **after.attrs.get("transform_stats", {})}


def _well_formed_hook(one: Pass, program: ir.Program) -> None:
    """After each pass: every kernel is well formed (else the pass is at fault)."""
    for kernel in program.kernels:
        problems = verify_kernel(kernel)
        if problems:
            raise PassError(f"pass {one.name} left an ill-formed kernel: {problems[0]}")


def _oracle(program: ir.Program, kernel: ir.Kernel, seed: int,
            analysis: str) -> list[str]:
    """Claims of `analysis` on the kernel violated on the interpreter (as text)."""
    (result,) = get_analysis(analysis).run([kernel])
    if not isinstance(result, KernelResult):
        return [f"analysis failed: {result}"]
    if program.language == "ptx":
        # a kernel analysed for its declared block shape (.reqntid) runs only with it
        report = check_kernel(result, ptx_launches(kernel, seed, result.block),
                              run=run_ptx_any)
    else:
        report = check_kernel(result, random_launches(kernel, seed))
    return [str(v) for v in report.violations]


def _rewrites_deadlocks(pipeline: Pipeline) -> bool:
    """Whether the pipeline runs `ssde` (then `--verify` compares the original under
    `mimd` with the result under `ipdom`)."""
    return any(one.name == "ssde" for one in pipeline.passes)


def transform(source: str | Path | ir.Program, passes: str | list[Pass],
              kernel: str | None = None, verify: bool = False, seed: int = 0,
              analysis: str = DEFAULT_ANALYSIS, reconvergence: str = "auto",
              options: dict[str, dict[str, object]] | None = None,
              canonical: bool = True) -> FileTransform:
    """Run the passes (`"p1,p2"` or Pass objects; `options`: pass name → options) over
    a file's kernels (only `kernel` when given) and print the result; with `verify`,
    compare runs under the `reconvergence` policy and re-check claims. `canonical=False`
    reads PTX as written (`gpudiv.lang.load.parse_text`); the runs then start from the
    canonical reading of the same file, the form the interpreter executes."""
    program = source if isinstance(source, ir.Program) else load(source, canonical=canonical)
    where = f"{program.path}:1:1: error:"
    if program.errors:
        raise TransformError(str(program.errors[0]))
    if kernel is not None and kernel not in [k.name for k in program.kernels]:
        raise TransformError(f"{where} no kernel '{kernel}'")
    try:
        pipeline = (Pipeline.parse(passes, _well_formed_hook, options)
                    if isinstance(passes, str)
                    else Pipeline(list(passes), _well_formed_hook))
        pipeline.kernels = {kernel} if kernel else None
        result = pipeline.run(program)
        text = print_program(result)
    except (PassError, PrintError) as error:
        raise TransformError(f"{where} {error}") from None
    outcome = FileTransform(program.path, program.language, result, text, [],
                            list(program.diagnostics))
    reread = parse_text(text, program.path, program.language) if verify else None
    if reread is not None and reread.errors:
        raise TransformError(f"{where} the printed result does not parse: {reread.errors[0]}")
    baseline = (load(program.path) if verify and not canonical
                and not isinstance(source, ir.Program) else program)
    for index, (read, new) in enumerate(zip(program.kernels, result.kernels, strict=True)):
        if kernel is not None and read.name != kernel:
            continue
        report = KernelTransform(read.name, static=_static(read, new))
        outcome.kernels.append(report)
        if reread is None:
            continue
        old = baseline.kernels[index]
        printed = reread.kernels[index]
        if _rewrites_deadlocks(pipeline) and not new.attrs.get(STATS, {}).get("assumed_safe"):
            evidence = check_ssde(old, printed, program.language, seed + index)
            equal = evidence.equivalence
            report.ssde, report.ssde_summary = evidence.to_json(), evidence.summary()
            if evidence.detections_after:
                report.problems.append(f"gpudiv deadlock still finds "
                                       f"{evidence.detections_after} loops that may "
                                       "deadlock in the result")
        else:
            equal = compare_kernels(old, printed, program.language, seed + index,
                                    reconvergence, scratch=new.attrs.get("scratch"))
        report.status, report.runs, report.reason = equal.status, equal.runs, equal.reason
        report.dynamic = equal.dynamic()
        if equal.difference is not None:
            report.difference = str(equal.difference)
            report.difference_detail = equal.difference.to_json()
        if equal.status == VERIFIED:
            report.oracle_violations = _oracle(reread, printed, seed + index, analysis)
        if "allocator" in new.attrs.get(STATS, {}):  # regalloc: spill traffic, modelled
            language = program.language
            launches = launches_for(language, old, seed + index)
            report.dynamic["spills"] = {
                "before": profile(old, launches, language).to_json(),
                "after": profile(printed, launches, language).to_json()}
    return outcome


__all__ = ["DIFFERS", "NOT_EXECUTED", "UNVERIFIED", "VERIFIED", "FileTransform",
           "KernelTransform", "TransformError", "transform"]
