"""Kernel fusion on a host program, checked end to end: the original and the
transformed program run on the interpreter for every combination of the inputs'
values, and every final host value and device buffer must agree (README "Host programs
and kernel fusion")."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from gpudiv.interp.host import HostCounters, HostRun, HostRunError, input_sets, run_host
from gpudiv.ir import host as h
from gpudiv.lang.host.parse import load_host
from gpudiv.lang.host.printer import print_fused, print_host
from gpudiv.transforms.base import PassError
from gpudiv.transforms.kfcm import PASSES, FusionResult
from gpudiv.transforms.ptx_fusion import entry_text, module_header


@dataclass
class InputRun:
    """One input combination: whether both programs agree, and their counters."""

    inputs: dict[str, int]
    status: str  # equal, differs, failed
    difference: str | None
    before: HostCounters | None
    after: HostCounters | None

    def to_json(self) -> dict:
        """The run as plain data."""
        return {"inputs": self.inputs, "status": self.status, "difference": self.difference,
                "before": self.before.as_dict() if self.before else None,
                "after": self.after.as_dict() if self.after else None}


@dataclass
class HostTransform:
    """A fused host program: the result, its texts, the static and dynamic counts."""

    path: str
    pass_name: str
    result: FusionResult
    launches_before: int
    launches_after: int
    runs: list[InputRun] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """Some input made the two programs differ (or fail)."""
        return any(r.status != "equal" for r in self.runs)

    def languages(self) -> list[str]:
        """The languages of the fused kernels (μ-SIMD first)."""
        kernels = self.result.program.kernels
        return sorted({kernels[n].language for n in self.result.fused}, reverse=True)

    def fused_file(self, host_target: str, language: str = "musimd") -> str:
        """Where the fused kernels of a program written to `host_target` go."""
        return str(Path(host_target).with_suffix("")) + f".fused.{language}"

    def text(self, target: str | None = None) -> str:
        """The transformed host program, its imports relative to `target` (or as given)."""
        prog = self.result.program
        base = Path(self.path).parent
        imports = [str(base / i) for i in prog.imports]
        if target is not None:
            imports = [os.path.relpath(i, Path(target).parent) for i in imports]
            imports += [Path(self.fused_file(target, lang)).name for lang in self.languages()]
        else:
            imports = list(prog.imports)
        return print_host(prog, imports)

    def kernels_text(self, language: str = "musimd") -> str:
        """The fused kernels of one language (μ-SIMD text, or a PTX module)."""
        kernels = self.result.program.kernels
        names = [n for n in self.result.fused if kernels[n].language == language]
        if language == "musimd":
            return print_fused(self.result.program, names)
        if not names:
            return ""
        header = module_header(kernels[names[0]].text)
        return header + "".join("\n" + entry_text(kernels[n].text, n) + "\n" for n in names)

    def to_json(self) -> dict:
        """Everything but the texts, as plain data."""
        return {"file": self.path, "pass": self.pass_name,
                "launch_statements": {"before": self.launches_before,
                                      "after": self.launches_after},
                "fused_kernels": self.result.fused,
                "steps": [s.to_json() for s in self.result.steps],
                "refusals": [r.to_json() for r in self.result.refusals],
                "unfused": [{"kernel": k, "line": n, "blocked": b}
                            for k, n, b in self.result.unfused],
                "runs": [r.to_json() for r in self.runs]}


def first_difference(before: HostRun, after: HostRun) -> str | None:
    """The first host value or buffer that differs, in words (None: all equal)."""
    a, b = before.values(), after.values()
    for name in sorted(set(a) | set(b)):
        if a.get(name) != b.get(name):
            x, y = a.get(name), b.get(name)
            if isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
                i = next(i for i in range(len(x)) if x[i] != y[i])
                return f"{name}[{i}]: {x[i]} before, {y[i]} after"
            return f"{name}: {x} before, {y} after"
    return None


def _static_launches(prog: h.HostProgram) -> int:
    return len(prog.launches())


def transform_host(path: str | Path, pass_name: str, verify: bool = False) -> HostTransform:
    """Run KFCM or KF_trad on a host program file; with `verify`, compare runs."""
    if pass_name not in PASSES:
        raise PassError(f"unknown host pass '{pass_name}' (host programs take "
                        f"{' or '.join(PASSES)})")
    original = load_host(path)
    prog = load_host(path)
    count = _static_launches(prog)
    result = PASSES[pass_name](prog)
    done = HostTransform(str(path), pass_name, result, count, _static_launches(prog))
    if verify:
        for inputs in input_sets(original):
            done.runs.append(compare_runs(original, prog, inputs))
    return done


def compare_runs(before: h.HostProgram, after: h.HostProgram,
                 inputs: dict[str, int]) -> InputRun:
    """Run both programs on one input combination and compare their final values."""
    try:
        a = run_host(before, inputs)
    except HostRunError as error:
        return InputRun(inputs, "failed", f"the original fails: {error}", None, None)
    try:
        b = run_host(after, inputs)
    except HostRunError as error:
        return InputRun(inputs, "failed", f"the result fails: {error}", a.counters, None)
    diff = first_difference(a, b)
    return InputRun(inputs, "differs" if diff else "equal", diff, a.counters, b.counters)


def run_host_file(path: str | Path, inputs: dict[str, int] | None = None) -> HostRun:
    """Read and run a host program (inputs not given take their first value)."""
    return run_host(load_host(path), inputs)
