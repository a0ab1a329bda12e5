"""Reports: analysis and check results as JSON documents and as text for people.

Reporters only format; what a result means is decided by the analyses and the oracle.
Text uses rich tables on a terminal and plain aligned columns when piped.
"""

from __future__ import annotations

import io
import os

from gpudiv import __version__
from gpudiv.analyses.findings import Finding, branch_origins
from gpudiv.analyses.results import KernelResult
from gpudiv.api import FileAnalysis
from gpudiv.ir.perf import paused_gc
from gpudiv.report.wording import count

TYPE_CHECKING = False  # (typing is not imported: an analysis never needs it)
if TYPE_CHECKING:  # the oracle (and the interpreters, numpy) only for `gpudiv check`;
    from typing import TextIO

    # rich only for text reports (0.04 s of processor time to import)
    from rich.console import Console

    from gpudiv.verify.oracle import CheckReport


def _round(ms: float) -> float:
    return round(ms, 3)


def kernel_json(result: KernelResult, path: str = "") -> dict:
    """One kernel of the `analyze --format json` contract (`path`: its file, for origins)."""
    variables = []
    for var in result.variables:
        entry = {"name": var.name, "source": var.source, "line": var.line, "class": var.klass,
                 "kind": var.kind}
        if var.value is not None:
            entry["value"] = var.value
        if var.reason is not None:
            entry["reason"] = {"rule": var.reason[0], "from": var.reason[1]}
        if var.gated_by:
            entry["gated_by"] = var.gated_by
        if var.affine is not None:
            tid2, tid, const = var.affine
            entry["affine"] = {"tid2": "bottom" if tid2 is None else tid2,
                               "tid": "bottom" if tid is None else tid,
                               "const": "bottom" if const is None else const}
        variables.append(entry)
    branches = [{"label": b.label, "line": b.line, "column": b.column,
                 "divergent": b.divergent, "condition": b.condition, "target": b.target,
                 "source_location": origin.as_dict() if origin else None}
                for b, origin in zip(result.branches, branch_origins(path, result),
                                     strict=True)]
    timing = {key: _round(result.timing_ms.get(key, 0.0))
              for key in ("parse", "ssa", "facts", "ground", "solve")}
    document = {"name": result.name, "analysis": result.analysis,
                "instructions": result.instructions, "blocks": result.blocks,
                "variables": variables, "branches": branches, "summary": result.summary,
                "timing_ms": timing, "solver": dict(result.stats),
                "block": list(result.block.dims) if result.block else None}
    if result.calling_context is not None:  # call summaries: a function in one context
        context = result.calling_context
        document["calling_context"] = {
            "function": context.function, "context": context.context,
            "call_sites": [{"caller": caller, "line": line, "column": column}
                           for caller, line, column in context.call_sites]}
    return document


def findings_by_kernel(analysed: FileAnalysis) -> dict[str, list[Finding]]:
    """The findings of a file, grouped by kernel name."""
    grouped: dict[str, list[Finding]] = {}
    for finding in analysed.findings():
        grouped.setdefault(finding.kernel, []).append(finding)
    return grouped


def _kernels_json(analysed: FileAnalysis) -> list[dict]:
    found = findings_by_kernel(analysed)
    return [{**kernel_json(k, analysed.path),
             "findings": [x.as_dict() for x in found.get(k.name, [])]}
            for k in analysed.kernels]


def analysis_json(files: list[FileAnalysis]) -> dict:
    """The whole `analyze --format json` document (built with the cyclic collector paused,
    as the analysis runs: gpudiv.ir.perf)."""
    with paused_gc():
        return {"tool": "gpudiv", "version": __version__, "inputs": [
            {"path": f.path, "language": f.language,
             "kernels": _kernels_json(f),
             "errors": [{"line": d.line, "column": d.column, "message": d.message}
                        for d in f.errors],
             "warnings": [{"line": d.line, "column": d.column, "message": d.message}
                          for d in f.diagnostics if d.severity == "warning"]}
            for f in files]}


def check_json(files: list[tuple[str, list[CheckReport]]]) -> dict:
    """The whole `check --format json` document."""
    inputs = []
    total = 0
    for path, reports in files:
        kernels = []
        for r in reports:
            total += len(r.violations)
            kernels.append({
                "name": r.name, "status": r.status, "reason": r.reason, "runs": r.runs,
                "uses_checked": r.uses_checked, "reconvergence": r.reconvergence,
                "calls": r.calls,
                "counters": dict(r.counters),
                "violations": [{"claim": v.claim, "variable": v.variable, "source": v.source,
                                "line": v.line, "lanes": v.lanes, "values": v.values,
                                "threads": v.threads, "warp_width": v.warp_width,
                                "params": v.params, "message": str(v)}
                               for v in r.violations]})
        inputs.append({"path": path, "kernels": kernels})
    not_executed = sum(1 for entry in inputs for k in entry["kernels"]
                       if k["status"] == "not-executed")
    return {"tool": "gpudiv", "version": __version__, "inputs": inputs, "violations": total,
            "not_executed": not_executed}


def _table(console: Console, title: str, header: list[str], rows: list[list[str]],
           styles: list[str | None] | None = None) -> None:
    """A rich table on a terminal, aligned plain columns otherwise."""
    if console.is_terminal:
        from rich.table import Table

        table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
        for column in header:
            table.add_column(column)
        for index, row in enumerate(rows):
            table.add_row(*row, style=(styles[index] if styles else None))
        console.print(table)
        return
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(header)]
    lines = [f"  {title}", ("    " + "  ".join(h.ljust(w) for h, w in zip(header, widths,
                                                                          strict=True))).rstrip()]
    lines += ["    " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
              for row in rows]
    console.print("\n".join(lines), markup=False, highlight=False, soft_wrap=True)


def _class_style(klass: str) -> str | None:
    return {"divergent": "red", "affine": "yellow", "constaffine": "yellow",
            "constant": "cyan"}.get(klass)


def render_kernel(console: Console, path: str, result: KernelResult) -> None:
    """Variables, branches and a summary line for one kernel."""
    what = "kernel" if result.calling_context is None else "function"
    console.print(f"{path}: {what} {result.name} ({count(result.instructions, 'instruction')}, "
                  f"{count(result.blocks, 'block')}, analysis {result.analysis})",
                  markup=False, highlight=False)
    if result.calling_context is not None:
        sites = result.calling_context.call_sites
        shown = ", ".join(f"{caller} line {line}" for caller, line, _ in sites[:4])
        more = f" and {len(sites) - 4} more" if len(sites) > 4 else ""
        console.print(f"  called from {shown}{more}", markup=False, highlight=False)
    rows = []
    for var in sorted(result.variables, key=lambda v: (v.line, v.name)):
        klass = var.klass if var.value is None else f"{var.klass} = {var.value}"
        if var.affine is not None and var.klass in ("constaffine", "affine", "divergent"):
            klass = f"{var.klass} = {var.affine_text}"
        rows.append([var.name, var.source, str(var.line), klass])
    _table(console, "variables", ["ssa", "source", "line", "class"], rows,
           [_class_style(v.klass) for v in sorted(result.variables,
                                                    key=lambda v: (v.line, v.name))])
    branch_rows = [[b.label, str(b.line), b.condition or "-",
                    "divergent" if b.divergent else "uniform"] for b in result.branches]
    header = ["block", "line", "condition", "class"]
    origins = branch_origins(path, result)
    if any(origins):  # PTX with .loc: the CUDA place beside the PTX line
        header.insert(2, "source")
        for row, origin in zip(branch_rows, origins, strict=True):
            row.insert(2, str(origin) if origin else "-")
    _table(console, "branches", header, branch_rows,
           ["red" if b.divergent else None for b in result.branches])
    s = result.summary
    console.print(f"  summary: {count(s['variables'], 'variable')}: {s['uniform']} uniform "
                  f"({s['constant']} constant), {s['affine']} affine, {s['divergent']} "
                  f"divergent; {count(s['branches'], 'branch')}, {s['divergent_branches']} "
                  "divergent",
                  markup=False, highlight=False)


def render_findings(console: Console, findings: list[Finding]) -> None:
    """Findings in compiler style, `FILE:LINE:COL: warning: message [rule-id]`."""
    for finding in findings:
        style = {"error": "bold red", "warning": "bold magenta"}.get(finding.level, "bold")
        console.print(finding.compiler_style(), markup=False, highlight=False,
                      soft_wrap=True, style=style if console.is_terminal else None)


class PlainConsole:
    """What the text reports use of rich's Console, for a report that is not coloured:
    each print writes its text and a new line, as it is (rich takes 15 ms to import, and
    its console wraps what is not soft-wrapped at its width)."""

    is_terminal = False

    def __init__(self, file: TextIO) -> None:
        self.file = file

    def print(self, text: str = "", **_options) -> None:
        """Write `text` and a new line (rich's options only style a terminal's output)."""
        self.file.write(f"{text}\n")


def _terminal(file: TextIO) -> bool:
    """Whether rich would style output to `file` on its own (its `is_terminal`)."""
    tty_compatible = os.environ.get("TTY_COMPATIBLE", "")
    if tty_compatible in ("0", "1"):
        return tty_compatible == "1"
    if os.environ.get("FORCE_COLOR") is not None:
        return os.environ["FORCE_COLOR"] != ""
    try:
        return file.isatty()
    except (AttributeError, ValueError):
        return False


def text_console(file: TextIO, color: bool | None) -> Console | PlainConsole:
    """rich's Console where the output is coloured (`color`; when None, where rich would
    colour it on its own: a terminal, FORCE_COLOR, TTY_COMPATIBLE), a PlainConsole
    otherwise."""
    if not (color if color is not None else _terminal(file)):
        return PlainConsole(file)
    from rich.console import Console

    # emoji=False: rich would turn `file.ptx:100:2` into a picture
    return Console(file=file, force_terminal=color, highlight=False, emoji=False,
                   width=None if color else 200)


def render_analysis(files: list[FileAnalysis], out: TextIO | None = None,
                    color: bool | None = None) -> str | None:
    """Print the text report (to `out`, or return it as a string when out is None)."""
    buffer = io.StringIO() if out is None else None
    console = text_console(buffer or out, color)
    for f in files:
        found = findings_by_kernel(f)
        for kernel in f.kernels:
            render_kernel(console, f.path, kernel)
            render_findings(console, found.get(kernel.name, []))
            console.print()
    return buffer.getvalue() if buffer is not None else None


def render_check(files: list[tuple[str, list[CheckReport]]], out: TextIO) -> None:
    """One line per kernel, then one line per violation."""
    for path, reports in files:
        for r in reports:
            status = r.status if r.status != "checked" else (
                "VIOLATED" if r.violations else "ok")
            extra = f" ({r.reason})" if r.reason else ""
            out.write(f"{path}: kernel {r.name}: {status}: {count(r.runs, 'run')}, "
                      f"{count(r.uses_checked, 'use')} checked, "
                      f"{count(len(r.violations), 'violation')}{extra}\n")
            if r.counters:
                c = r.counters
                calls = ", calls run as calls" if r.calls == "call" else ""
                out.write(f"  {r.reconvergence}{calls}: {c['warp_instructions']} warp "
                          f"instructions, "
                          f"{c['lane_instructions']} lane instructions, SIMD efficiency "
                          f"{c['simd_efficiency']:.3f}, {c['divergent_branches']} divergent "
                          f"branches, {c['reconvergences']} reconvergences, max stack depth "
                          f"{c['max_stack_depth']}\n")
            for v in r.violations:
                out.write(f"{path}:{v.line}: violation: {v}\n")
    reports = [r for _, rs in files for r in rs]
    skipped = sum(1 for r in reports if r.status == "not-executed")
    out.write(f"{count(len(reports) - skipped, 'kernel')} checked, {skipped} not executed, "
              f"{count(sum(r.uses_checked for r in reports), 'use')} checked, "
              f"{count(sum(len(r.violations) for r in reports), 'violation')}\n")
