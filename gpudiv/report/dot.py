"""The CFG of an analysed kernel as Graphviz DOT (and SVG when Graphviz is installed).

`gpudiv cfg FILE --kernel K` writes it. Each block is a box listing its φ/μ/η definitions
and its instructions (definitions of divergent variables in red, of affine ones, c·tid + k,
in amber); a block ending in a divergent branch is filled red and its two edges are red
and bold, a uniform branch's edges are green; `taken`/`fall` label the two edges of a
conditional branch. The virtual entry and exit are small ellipses; blocks the CFG inserted
on loop exits are dashed.
"""

from __future__ import annotations

import html
import shutil
import subprocess

from gpudiv import ir
from gpudiv.analyses.results import KernelResult
from gpudiv.ir.cfg import ENTRY, EXIT

DIVERGENT_FILL = "#fde2e2"
UNIFORM_FILL = "#e3f4e3"
DIVERGENT_EDGE = "#c62828"
UNIFORM_EDGE = "#2e7d32"
DIVERGENT_TEXT = "#b71c1c"
AFFINE_TEXT = "#a66b00"
TEXT_COLOURS = {"divergent": DIVERGENT_TEXT, "affine": AFFINE_TEXT, "constaffine": AFFINE_TEXT}
PHI_SYMBOLS = {"mu": "μ", "gamma": "γ", "eta": "η", "rejoin": "ρ"}


class GraphvizError(Exception):
    """Graphviz is missing or failed; the message is one line."""


def _quote(text: str) -> str:
    """A DOT double-quoted ID."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _row(text: str, color: str | None = None, bold: bool = False) -> str:
    body = html.escape(text, quote=False) or " "
    if bold:
        body = f"<B>{body}</B>"
    if color:
        body = f'<FONT COLOR="{color}">{body}</FONT>'
    return f'<TR><TD ALIGN="LEFT">{body}</TD></TR>'


def _block_label(result: KernelResult, label: str,
                 colours: dict[str, str], max_lines: int) -> str:
    """The HTML-like label of one block: its name, φs and instructions."""
    ssa = result.ssa
    kernel = ssa.cfg.kernel
    rows = []
    title = label
    try:
        block: ir.Block | None = kernel.block(label)
    except KeyError:
        block = None
    if block is not None:
        title += f"  (line {block.loc.line})"
    rows.append(_row(title, bold=True))
    lines: list[tuple[str, str | None]] = []
    for name in ssa.phis.get(label, []):
        var = ssa.variables[name]
        symbol = PHI_SYMBOLS.get(var.phi_kind or "", "φ")
        lines.append((f"{name} = {symbol}({', '.join(var.operands)})", colours.get(name)))
    if block is not None:
        for instr in block.instructions:
            defined = ssa.defs.get(instr.id)
            text = instr.text or instr.kind
            lines.append((text, colours.get(defined) if defined else None))
    if len(lines) > max_lines:
        hidden = len(lines) - max_lines
        lines = lines[:max_lines] + [(f"… {hidden} more", None)]
    rows += [_row(text, color) for text, color in lines]
    return '<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0">' + "".join(rows) + "</TABLE>>"


def cfg_dot(result: KernelResult, max_lines: int = 40) -> str:
    """The DOT text of a kernel's CFG coloured by the analysis result."""
    ssa = result.ssa
    cfg = ssa.cfg
    kernel = cfg.kernel
    colours = {v.name: TEXT_COLOURS[v.klass] for v in result.variables
               if v.klass in TEXT_COLOURS}
    branches = {b.label: b for b in result.branches}
    instrs = kernel.by_id()
    out = [f"digraph {_quote(result.name)} {{",
           f"  label={_quote(f'kernel {result.name} ({result.analysis} analysis)')};",
           "  labelloc=t;",
           '  node [shape=box, fontname="monospace", fontsize=10];',
           '  edge [fontname="sans-serif", fontsize=9];']
    order = [ENTRY, *cfg.order, EXIT]
    for node in order:
        if node not in cfg.graph:
            continue
        if node in (ENTRY, EXIT):
            out.append(f"  {_quote(node)} [shape=ellipse, label={_quote(node[1:])}];")
            continue
        attrs = [f"label={_block_label(result, node, colours, max_lines)}"]
        branch = branches.get(node)
        if branch is not None:
            fill = DIVERGENT_FILL if branch.divergent else UNIFORM_FILL
            edge = DIVERGENT_EDGE if branch.divergent else UNIFORM_EDGE
            attrs += ["style=filled", f'fillcolor="{fill}"', f'color="{edge}"']
        if node in cfg.synthetic:
            attrs.append("style=dashed")
        out.append(f"  {_quote(node)} [{', '.join(attrs)}];")
    for u, v in cfg.graph.edges:
        attrs = []
        branch = branches.get(u)
        if branch is not None and cfg.graph.out_degree(u) == 2:
            target = instrs[branch.instruction].target
            taken = v == target or cfg.synthetic.get(v) == target
            color = DIVERGENT_EDGE if branch.divergent else UNIFORM_EDGE
            attrs += [f'label="{"taken" if taken else "fall"}"', f'color="{color}"',
                      f'fontcolor="{color}"']
            if branch.divergent:
                attrs.append("penwidth=2")
        suffix = f" [{', '.join(attrs)}]" if attrs else ""
        out.append(f"  {_quote(u)} -> {_quote(v)}{suffix};")
    out.append("}")
    return "\n".join(out) + "\n"


def graphviz_available() -> bool:
    """Whether Graphviz's `dot` is on PATH."""
    return shutil.which("dot") is not None


def dot_to_svg(dot_text: str, timeout: float = 60.0) -> str:
    """Render DOT to SVG with Graphviz's `dot`."""
    executable = shutil.which("dot")
    if executable is None:
        raise GraphvizError("error: Graphviz 'dot' is not on PATH (install graphviz for SVG)")
    try:
        done = subprocess.run([executable, "-Tsvg"], input=dot_text.encode(),
                              capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise GraphvizError(f"error: Graphviz 'dot' took more than {timeout:.0f} s") from None
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip().splitlines()
        raise GraphvizError(f"error: Graphviz 'dot' failed: {message[0] if message else ''}")
    return done.stdout.decode()
