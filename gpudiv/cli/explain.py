"""Explanations: why a variable is divergent (or affine), and why its value is not known.

`gpudiv explain FILE --kernel K VAR [--format text|json] [--analysis A]` runs here. The
reasons are derived by the rules, not by this module: `reason/3` (simple analysis) or
`affine_reason/3` (affine analyses) say why a variable is not uniform, one step at a time
(a source, an operand, a γ at the join of a divergent branch, an η after a loop with a
divergent exit); `because/4` (rules/affine_explain.lp) says why a coefficient is ⊥. This
module follows those steps from VAR to a terminal reason by breadth-first search (the
shortest chain), and, when the chain ends at a divergent branch or loop exit, explains the
branch's condition in turn. Reporters only format the steps.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import deque
from dataclasses import asdict, dataclass, field

from gpudiv import __version__
from gpudiv.analyses import ANALYSES, DEFAULT_ANALYSIS, affine, get_analysis
from gpudiv.analyses.findings import shortest_chain
from gpudiv.analyses.results import KernelResult, VariableResult
from gpudiv.analyses.solve import shipped_rule
from gpudiv.cli.common import (
    EXIT_ERROR,
    EXIT_OK,
    CommandError,
    choose_kernel,
    one_line_errors,
)
from gpudiv.ir import Program
from gpudiv.lang.load import load

EXPLAIN_RULES = ("affine_explain.lp",)
AFFINE_DEGREES = {"affine": 1, "affine2": 2}
POWER_NAMES = {0: "the constant term", 1: "the tid coefficient", 2: "the tid² coefficient"}


@dataclass
class Step:
    """One reason: `variable` (an SSA name) is what it is because of `rule` from `origin`."""

    variable: str
    line: int
    rule: str
    origin: str
    text: str
    depth: int = 0


@dataclass
class Explanation:
    """Why one SSA variable is not uniform and why its value is not known statically."""

    kernel: str
    analysis: str
    variable: str
    source: str
    line: int
    klass: str
    affine: dict[str, int | str] | None
    divergence: list[Step] = field(default_factory=list)
    unknown: list[Step] = field(default_factory=list)

    def as_dict(self) -> dict:
        """The JSON form (the contract of `explain --format json`)."""
        out = asdict(self)
        out["class"] = out.pop("klass")
        return out


def _source_words(result: KernelResult, var: str) -> str:
    ssa_var = result.ssa.variables.get(var)
    kind = ssa_var.kind if ssa_var else ""
    if kind == "special":
        if var in ("tid", "%tid.x"):
            return f"{var} is the thread index: it differs between lanes"
        return f"{var} is a special register that differs between lanes"
    return {
        "atomic": f"{var} is the result of an atomic operation",
        "load": f"{var} is loaded from thread-private memory",
        "undef": f"{var} may be read before it is assigned",
        "opaque": f"{var} comes from an instruction the analysis cannot see through",
    }.get(kind, f"{var} is an origin of divergence")


def _line(result: KernelResult, name: str) -> int:
    var = result.ssa.variables.get(name)
    return var.loc.line if var else 0


def _branch_line(result: KernelResult, block: str) -> int:
    for branch in result.branches:
        if branch.label == block:
            return branch.line
    return 0


def _relation(result: KernelResult, name: str) -> dict[str, list[tuple]]:
    by_var: dict[str, list[tuple]] = {}
    for row in sorted(result.relations.get(name, []), key=str):
        by_var.setdefault(str(row[0]), []).append(tuple(str(x) for x in row[1:]))
    return by_var


def divergence_steps(result: KernelResult, name: str, depth: int = 0,
                     seen: set[str] | None = None) -> list[Step]:
    """Why `name` is not uniform, down to a source (branches explained recursively)."""
    seen = set() if seen is None else seen
    if name in seen:
        return []
    seen.add(name)
    path, terminal = shortest_chain(name, _relation(result, "reason"))
    if terminal is None:
        return []
    steps = [Step(a, _line(result, a), "operand", b, f"{a} reads {b}", depth)
             for a, b in zip(path, path[1:], strict=False)]
    last = path[-1]
    why, origin = terminal
    if why == "join":
        steps.append(Step(last, _line(result, last), why, origin,
                          f"{last} merges the values of the two sides of the divergent "
                          f"branch at {origin} (line {_branch_line(result, origin)})", depth))
        steps += _branch_steps(result, origin, depth + 1, seen)
    elif why == "loop_exit":
        steps.append(Step(last, _line(result, last), why, origin,
                          f"{last} is read after loop {origin}, which lanes leave in "
                          "different iterations", depth))
        for block in _exit_branches(result, origin):
            steps += _branch_steps(result, block, depth + 1, seen)
            break
    elif why == "rejoin":
        steps.append(Step(last, _line(result, last), why, origin,
                          _rejoin_words(result, last, origin), depth))
        steps += _branch_steps(result, origin, depth + 1, seen)
    else:
        steps.append(Step(last, _line(result, last), why, origin,
                          _source_words(result, last), depth))
    return steps


def _rejoin_words(result: KernelResult, var: str, branch: str) -> str:
    """Why a rejoin copy is divergent, in words."""
    return (f"{var} is read where lanes split by the divergent branch at {branch} (line "
            f"{_branch_line(result, branch)}) meet again after different numbers of trips "
            "around a cycle")


def _exit_branches(result: KernelResult, loop: str) -> list[str]:
    """Divergent branches inside `loop` whose lanes meet again outside it (or, failing
    those, whose lanes leave it toward a trap)."""
    cfg = result.ssa.cfg
    blocks = cfg.loops[loop].blocks if loop in cfg.loops else set()
    inside = [b.label for b in result.branches if b.divergent and b.label in blocks]
    return ([b for b in inside if cfg.sync_ipdom.get(b) not in blocks]
            or [b for b in inside if cfg.ipdom.get(b) not in blocks])


def _branch_steps(result: KernelResult, block: str, depth: int, seen: set[str]) -> list[Step]:
    branch = next((b for b in result.branches if b.label == block), None)
    if branch is None or branch.condition is None:
        return []
    head = Step(block, branch.line, "branch", branch.condition,
                f"the branch at {block} tests {branch.condition}, which is not uniform",
                depth)
    return [head] + divergence_steps(result, branch.condition, depth, seen)


_BECAUSE_WORDS = {
    "input": "{v} is a kernel input: the same in every lane, not known statically",
    "memory": "{v} is loaded from memory: not known statically",
    "address": "{v} is loaded with operand {o} (its address or a texture coordinate), "
               "which differs between lanes",
    "overflow": "a coefficient of {v} does not fit in ±2^30 (or a literal is too large)",
    "wrap": "{v} widens {o} with zeros, and {o} may lie below 0 (or beyond its width) in "
            "some lanes, where it wraps around",
    "degree": "{v} is a product with a term in a power of tid above the analysis' degree",
    "nonlinear": "{v} applies an operator the analysis does not model to {o}, which "
                 "differs between lanes",
    "operator": "{v} applies an operator whose result is not computed statically",
    "difference": "{v} compares values whose difference depends on tid",
    "compare": "{v} compares values that are not both constants",
    "merge": "{v} merges different values (one of them from {o})",
}


def unknown_steps(result: KernelResult, name: str, power: int) -> list[Step]:
    """Why coefficient `power` of `name` is ⊥, from because/4, down to a terminal cause."""
    because: dict[tuple[str, int], list[tuple[str, str]]] = {}
    for var, n, why, origin in result.relations.get("because", []):
        because.setdefault((str(var), int(n)), []).append((str(why), str(origin)))
    bottom = {(str(v), int(n)) for v, n in result.relations.get("affine_bot", [])}

    def next_power(var: str, n: int) -> int:
        if (var, n) in bottom:
            return n
        return min((m for v, m in bottom if v == var), default=n)

    parent: dict[tuple[str, int], tuple[str, int] | None] = {(name, power): None}
    queue = deque([(name, power)])
    while queue:
        node = queue.popleft()
        for why, origin in sorted(because.get(node, [])):
            if why == "operand":
                nxt = (origin, next_power(origin, node[1]))
                if nxt not in parent:
                    parent[nxt] = node
                    queue.append(nxt)
                continue
            path = [node]
            while parent[path[-1]] is not None:
                path.append(parent[path[-1]])
            path.reverse()
            steps = [Step(a[0], _line(result, a[0]), "operand", b[0],
                          f"{POWER_NAMES.get(a[1], 'a coefficient')} of {a[0]} is ⊥ "
                          f"because {POWER_NAMES.get(b[1], 'a coefficient')} of operand "
                          f"{b[0]} is", 0)
                     for a, b in zip(path, path[1:], strict=False)]
            return steps + [_terminal_because(result, node[0], why, origin)]
    return []


def _terminal_because(result: KernelResult, var: str, why: str, origin: str) -> Step:
    line = _line(result, var)
    if why == "source":
        return Step(var, line, why, origin, _source_words(result, var))
    if why == "join":
        return Step(var, line, why, origin,
                    f"{var} merges the values of the two sides of the divergent branch at "
                    f"{origin} (line {_branch_line(result, origin)})")
    if why == "loop_exit":
        return Step(var, line, why, origin, f"{var} is read after loop {origin}, which "
                    "lanes leave in different iterations")
    if why == "rejoin":
        return Step(var, line, why, origin, _rejoin_words(result, var, origin))
    text = _BECAUSE_WORDS.get(why, "{v}: " + why).format(v=var, o=origin)
    return Step(var, line, why, origin, text)


def affine_json(values: tuple[int | None, int | None, int | None] | None
                ) -> dict[str, int | str] | None:
    """`{"tid2": x, "tid": y, "const": z}` with "bottom" for ⊥ (the JSON report's form)."""
    if values is None:
        return None
    return dict(zip(("tid2", "tid", "const"),
                    ("bottom" if c is None else c for c in values), strict=True))


def explain_variable(result: KernelResult, var: VariableResult) -> Explanation:
    """The explanation of one variable of an analysed kernel."""
    out = Explanation(result.name, result.analysis, var.name, var.source, var.line, var.klass,
                      affine_json(var.affine))
    if not var.uniform:
        out.divergence = divergence_steps(result, var.name)
    if var.affine is None:
        return out
    bottom = {int(n) for v, n in result.relations.get("affine_bot", []) if v == var.name}
    powers = [0] if var.klass in ("uniform", "affine") else []
    if var.klass == "divergent":
        powers = [p for p in (2, 1) if p in bottom]
    if powers:
        out.unknown = unknown_steps(result, var.name, powers[0])
    return out


def analyse_for_explanation(kernel, analysis: str) -> KernelResult:
    """The kernel analysed with the reasons needed to explain it (because/4 for affine)."""
    if analysis in AFFINE_DEGREES:
        return affine.analyze_kernel(kernel, analysis, AFFINE_DEGREES[analysis],
                                     extra_rules=tuple(shipped_rule(f) for f in EXPLAIN_RULES))
    return get_analysis(analysis)(kernel)


def explain(path: str, variable: str, kernel: str | None = None,
            analysis: str = DEFAULT_ANALYSIS) -> list[Explanation]:
    """Explanations of VAR (an SSA name like `d#4`, or a source name: all its SSA names)."""
    return explain_program(load(path), variable, kernel, analysis)


def explain_program(program: Program, variable: str, kernel: str | None = None,
                    analysis: str = DEFAULT_ANALYSIS) -> list[Explanation]:
    """Explanations of VAR in a loaded program (its diagnostics are the caller's)."""
    path = program.path
    if program.errors and not program.kernels:
        raise CommandError(str(program.errors[0]))
    kernel = choose_kernel(path, [k.name for k in program.kernels], kernel)
    result = analyse_for_explanation(program.kernel(kernel), analysis)
    chosen = [v for v in result.variables if v.name == variable] or result.by_source(variable)
    if not chosen:
        raise CommandError(f"{path}: error: kernel {kernel} has no variable '{variable}' "
                           "(give an SSA name such as x#2 or a source name)")
    return [explain_variable(result, v) for v in chosen]


def render_text(explanations: list[Explanation]) -> str:
    """People's form: a header per variable, then the numbered steps with their lines."""
    lines = []
    for e in explanations:
        value = ""
        if e.affine is not None:
            a = {k: ("⊥" if v == "bottom" else v) for k, v in e.affine.items()}
            value = f" = {a['tid2']}·tid² + {a['tid']}·tid + {a['const']}"
        lines.append(f"{e.variable} (source {e.source}, line {e.line}) in kernel {e.kernel}: "
                     f"{e.klass}{value} [analysis {e.analysis}]")
        if e.divergence:
            lines.append("  why it is not uniform:")
            lines += [f"    {'  ' * s.depth}line {s.line}: {s.text} [{s.rule}]"
                      for s in e.divergence]
        if e.unknown:
            lines.append("  why its value is not known statically:")
            lines += [f"    line {s.line}: {s.text} [{s.rule}]" for s in e.unknown]
        if not e.divergence and not e.unknown:
            lines.append("  nothing to explain: the value is "
                         + ("a known constant" if e.klass == "constant" else "uniform"))
    return "\n".join(lines) + "\n"


@one_line_errors
def cmd_explain(args: argparse.Namespace) -> int:
    """Explain one variable of one kernel."""
    program = load(args.file)
    for diagnostic in program.diagnostics:
        print(str(diagnostic), file=sys.stderr)
    if program.errors and not program.kernels:
        return EXIT_ERROR
    explanations = explain_program(program, args.variable, args.kernel, args.analysis)
    if args.format == "json":
        json.dump({"tool": "gpudiv", "version": __version__, "path": args.file,
                   "explanations": [e.as_dict() for e in explanations]}, sys.stdout, indent=2,
                  ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_text(explanations))
    return EXIT_OK if explanations and not program.errors else EXIT_ERROR


def register(sub: argparse._SubParsersAction) -> None:
    """Add `explain` to the `gpudiv` subcommand parser."""
    parser = sub.add_parser("explain", help="why a variable is divergent or not constant")
    parser.add_argument("file", metavar="FILE", help="a .musimd or .ptx file")
    parser.add_argument("variable", metavar="VAR", help="SSA name (d#4) or source name (d)")
    parser.add_argument("--kernel", help="the kernel (needed when the file has several)")
    parser.add_argument("--format", choices=("text", "json"), default="text",
                        help="output format")
    parser.add_argument("--analysis", choices=sorted(ANALYSES), default=DEFAULT_ANALYSIS,
                        help="the analysis whose reasons are shown")
    parser.set_defaults(handler=cmd_explain)
