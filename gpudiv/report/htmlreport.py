"""One self-contained HTML page for an analysis run (`gpudiv analyze --format html`).

The page has the run summary, the findings, and per kernel its summary, branches,
variables and, when Graphviz's `dot` is installed, its CFG as inline SVG (`gpudiv.report.dot`).
Everything is inline (style, pictures); there is no script and nothing is fetched, so the
page can be mailed or attached to a CI run as one file.
"""

from __future__ import annotations

import html
from datetime import UTC, datetime

from gpudiv import __version__
from gpudiv.analyses.findings import Finding, kernel_findings, shown_path
from gpudiv.analyses.results import KernelResult
from gpudiv.api import FileAnalysis
from gpudiv.report.corpus import CorpusSummary
from gpudiv.report.dot import GraphvizError, cfg_dot, dot_to_svg, graphviz_available
from gpudiv.report.wording import count

# Kernels with more blocks than this get no picture (Graphviz layout time grows fast).
MAX_CFG_BLOCKS = 400

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 72em; color: #222;
       padding: 0 1em; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ccc; }
h3 { font-size: 1.05em; margin-top: 1.5em; }
table { border-collapse: collapse; margin: .5em 0 1em; font-size: .9em; }
th, td { border: 1px solid #ddd; padding: .2em .6em; text-align: left; }
th { background: #f3f3f3; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
code, .mono { font-family: ui-monospace, monospace; }
.divergent { color: #b71c1c; font-weight: 600; } .uniform { color: #2e7d32; }
.constant { color: #00838f; } .affine { color: #a66b00; }
.finding { font-family: ui-monospace, monospace; font-size: .88em; margin: .2em 0; }
.warning { color: #8e24aa; font-weight: 600; } .error { color: #c62828; font-weight: 600; }
.note { color: #555; }
.cfg { overflow: auto; border: 1px solid #eee; padding: .5em; max-height: 60em; }
.muted { color: #777; }
details > summary { cursor: pointer; }
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _finding_html(finding: Finding) -> str:
    where = _e(finding.location)
    extra = f" <span class='muted'>(at {_e(finding.input_location)})</span>" \
        if finding.origin else ""
    return (f"<div class='finding'>{where}: <span class='{_e(finding.level)}'>"
            f"{_e(finding.level)}</span>: {_e(finding.message)}{extra} "
            f"<span class='muted'>[{_e(finding.rule_id)}]</span></div>")


def _table(header: list[str], rows: list[list[str]], classes: list[str] | None = None) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = []
    for index, row in enumerate(rows):
        css = f" class='{_e(classes[index])}'" if classes and classes[index] else ""
        body.append(f"<tr{css}>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _svg(result: KernelResult, pictures: bool) -> str:
    if not pictures:
        return ""
    if result.blocks > MAX_CFG_BLOCKS:
        return (f"<p class='muted'>CFG not drawn: {result.blocks} blocks (limit "
                f"{MAX_CFG_BLOCKS}).</p>")
    try:
        svg = dot_to_svg(cfg_dot(result))
    except GraphvizError as error:
        return f"<p class='muted'>CFG not drawn: {_e(error)}</p>"
    start = svg.find("<svg")
    return f"<div class='cfg'>{svg[start:] if start >= 0 else svg}</div>"


def _kernel_section(path: str, result: KernelResult, pictures: bool) -> str:
    s = result.summary
    parts = [f"<h3>kernel <code>{_e(result.name)}</code> <span class='muted'>"
             f"({count(result.instructions, 'instruction')}, {count(result.blocks, 'block')}, "
             "analysis "
             f"{_e(result.analysis)})</span></h3>",
             f"<p>{count(s['variables'], 'variable')}: {s['uniform']} uniform ({s['constant']} "
             f"constant), {s['affine']} affine, <span class='divergent'>{s['divergent']} "
             f"divergent</span>; {count(s['branches'], 'branch')}, <span class='divergent'>"
             f"{s['divergent_branches']} divergent</span></p>"]
    parts += [_finding_html(f) for f in kernel_findings(path, result)]
    rows = [[_e(b.label), str(b.line), _e(b.condition or "-"),
             "<span class='divergent'>divergent</span>" if b.divergent
             else "<span class='uniform'>uniform</span>"] for b in result.branches]
    if rows:
        parts.append("<h4>Branches</h4>" + _table(["block", "line", "condition", "class"],
                                                   rows))
    variables = sorted(result.variables, key=lambda v: (v.line, v.name))
    var_rows = [[f"<code>{_e(v.name)}</code>", _e(v.source), str(v.line),
                 f"<span class='{_e(v.klass)}'>{_e(v.klass)}"
                 f"{'' if v.value is None else ' = ' + _e(v.value)}</span>",
                 _e(f"{v.reason[0]} ← {v.reason[1]}" if v.reason else "")]
                for v in variables]
    parts.append(f"<details><summary>Variables ({len(variables)})</summary>"
                 + _table(["ssa", "source", "line", "class", "reason"], var_rows)
                 + "</details>")
    parts.append(_svg(result, pictures))
    return "\n".join(parts)


def html_report(files: list[FileAnalysis], summary: CorpusSummary,
                pictures: bool | None = None) -> str:
    """The whole page; CFG pictures when Graphviz is installed (or as `pictures` says)."""
    pictures = graphviz_available() if pictures is None else pictures
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    body = [f"<h1>gpudiv report</h1><p class='muted'>gpudiv {_e(__version__)}, {stamp}"
            + ("" if pictures else "; install Graphviz for CFG pictures") + "</p>",
            "<h2>Summary</h2>",
            _table(["files", "analysed", "failed", "kernels", "variables", "uniform",
                    "affine", "divergent", "branches", "divergent branches"],
                   [[str(summary.files), str(summary.analysed), str(summary.failed),
                     str(summary.kernels), str(summary.variables),
                     f"{summary.percent(summary.uniform):.1f}%",
                     f"{summary.percent(summary.affine):.1f}%",
                     f"{summary.percent(summary.divergent):.1f}%", str(summary.branches),
                     str(summary.divergent_branches)]])]
    if summary.failures:
        body.append("<h3>Failures</h3><ul>" + "".join(
            f"<li class='finding'>{_e(reason)}</li>" for _, reason in summary.failures)
            + "</ul>")
    findings = [f for a in files for f in a.findings()]
    body.append(f"<h2>Findings ({len(findings)})</h2>")
    body += [_finding_html(f) for f in findings] or ["<p class='muted'>none</p>"]
    for analysed in files:
        body.append(f"<h2>{_e(shown_path(analysed.path))} <span class='muted'>"
                    f"({_e(analysed.language)})</span></h2>")
        for d in analysed.diagnostics:
            body.append(f"<div class='finding'><span class='{_e(d.severity)}'>"
                        f"{_e(d.severity)}</span>: {_e(d)}</div>")
        body += [_kernel_section(analysed.path, k, pictures) for k in analysed.kernels]
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            "<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>gpudiv report</title><style>{STYLE}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")
