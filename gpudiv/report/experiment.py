"""Rule experimentation: solve the facts of kernels with the shipped rules and users' rules.

`gpudiv solve FILE --rules MINE.lp [--no-default-rules] [--show pred/arity …]` runs here.
The shipped rules are every shipped rule file (rules/*.lp: the simple analysis and the
affine analysis of the highest degree together), or with `analysis` only the files that
analysis solves with. Users' files are checked first (they exist, they parse), and every
problem in them is a `RuleError` with one `file:line:col: error: …` line: syntax errors,
unsafe variables, and atoms over predicates that no loaded rule derives and
`rules/SCHEMA.md` does not list as an input relation (a misspelt relation, or a derived
one whose rule file is left out).

What is printed: the `--show` relations if given; else the relations the users' files
`#show`, or, if they show nothing, every predicate their rules define; with no user rules,
everything the shipped rules show.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import clingo
import clingo.ast

from gpudiv import ir
from gpudiv.analyses.driver import prepare
from gpudiv.analyses.facts import RELATIONS, facts_text
from gpudiv.analyses.launch_shape import kernel_shape
from gpudiv.analyses.rulefile import check_rule_file
from gpudiv.analyses.schema import shipped_rule_files, shown_relations
from gpudiv.analyses.solve import (
    Budget,
    RuleError,
    UnsatisfiableError,
    _format_messages,
    in_context,
    rules_dir,
    shipped_rule,
    solve,
)
from gpudiv.ir.cfg import CFGLimit
from gpudiv.lang.load import load
from gpudiv.report.export import analysis_rule_files

_SIGNATURE = re.compile(r"^\s*([a-z_][A-Za-z0-9_']*)\s*/\s*(\d+)\s*$")


@dataclass
class UserRules:
    """What a user's rule file defines and shows."""

    path: Path
    defines: list[tuple[str, int]] = field(default_factory=list)
    shows: list[tuple[str, int]] = field(default_factory=list)
    columns: dict[tuple[str, int], list[str]] = field(default_factory=dict)
    show_places: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)


@dataclass
class KernelSolution:
    """The shown relations of one kernel, as clingo symbols by signature."""

    name: str
    relations: dict[tuple[str, int], list[clingo.Symbol]]
    ground_ms: float
    solve_ms: float


@dataclass
class SolveRun:
    """The result of `gpudiv solve` on one file."""

    path: str
    rule_files: list[str]
    shown: list[tuple[str, int]]
    kernels: list[KernelSolution]
    diagnostics: list[ir.Diagnostic]
    columns: dict[tuple[str, int], list[str]] = field(default_factory=dict)


def parse_signature(text: str) -> tuple[str, int]:
    """`name/arity` → (name, arity); RuleError for anything else."""
    match = _SIGNATURE.match(text)
    if match is None:
        raise RuleError(f"error: --show '{text}': expected NAME/ARITY, e.g. divergent/1")
    return match[1], int(match[2])


def _head_signatures(statement: clingo.ast.AST
                     ) -> list[tuple[tuple[str, int], list[str] | None]]:
    """Predicates defined by the head of a rule (plain atoms, disjunctions, choices), each
    with the names of its arguments when all of them are variables."""
    if statement.ast_type != clingo.ast.ASTType.Rule:
        return []
    head = statement.head
    literals = []
    if head.ast_type == clingo.ast.ASTType.Literal:
        literals = [head]
    elif head.ast_type == clingo.ast.ASTType.Disjunction:
        literals = [e.literal for e in head.elements]
    elif head.ast_type == clingo.ast.ASTType.Aggregate:
        literals = [e.literal for e in head.elements]
    found = []
    for literal in literals:
        atom = literal.atom
        if atom.ast_type != clingo.ast.ASTType.SymbolicAtom:
            continue
        term = atom.symbol
        if term.ast_type == clingo.ast.ASTType.Function:
            names = [a.name if a.ast_type == clingo.ast.ASTType.Variable else None
                     for a in term.arguments]
            found.append(((term.name, len(term.arguments)),
                          names if None not in names else None))
        elif term.ast_type == clingo.ast.ASTType.SymbolicTerm:
            symbol = term.symbol
            if symbol.type == clingo.SymbolType.Function:
                found.append(((symbol.name, len(symbol.arguments)), None))
    return found


def read_user_rules(path: str | Path, allow_scripts: bool = True) -> UserRules:
    """Check that a user's rule file can be given to clingo (`gpudiv.analyses.rulefile`) and
    parses; what it defines and shows."""
    path = Path(path)
    check_rule_file(path, allow_scripts)
    rules = UserRules(path)
    messages: list[str] = []

    def visit(statement: clingo.ast.AST) -> None:
        for signature, names in _head_signatures(statement):
            if signature not in rules.defines:
                rules.defines.append(signature)
            if names and signature not in rules.columns:
                rules.columns[signature] = names
        if statement.ast_type == clingo.ast.ASTType.ShowSignature and statement.positive:
            rules.shows.append((statement.name, statement.arity))
            begin = statement.location.begin
            rules.show_places[(statement.name, statement.arity)] = (begin.line, begin.column)
        if statement.ast_type == clingo.ast.ASTType.External:  # `#external e.` defines e/0
            term = statement.atom.symbol
            if term.ast_type == clingo.ast.ASTType.Function:
                signature = (term.name, len(term.arguments))
                if signature not in rules.defines:
                    rules.defines.append(signature)

    try:
        clingo.ast.parse_files([str(path)], visit, logger=lambda _c, m: messages.append(m),
                               message_limit=5)
    except RuntimeError as error:
        raise RuleError(_format_messages(messages) if messages else f"{path}: error: {error}"
                        ) from None
    return rules


def _hint(error: RuleError, default_rules: bool) -> RuleError:
    """Name the shipped file that derives an 'undefined' predicate the user's rule reads."""
    text = str(error)
    match = re.search(r"undefined predicate ([a-z_][A-Za-z0-9_']*)/(\d+)", text)
    if match is None:
        return error
    signature = (match[1], int(match[2]))
    for rule_file in shipped_rule_files():
        if signature in [(n, a) for n, a, _ in rule_file.shows]:
            extra = (" (--no-default-rules left it out)" if not default_rules
                     else " (it is not among the default rules; add it with --rules)")
            return RuleError(f"{text}; shipped rules/{rule_file.name} derives it{extra}")
    return error


def run_rules(path: str | Path, rules: list[str | Path] | None = None,
              default_rules: bool = True, show: list[str] | None = None,
              analysis: str | None = None, kernel: str | None = None,
              budget: Budget | None = None, allow_scripts: bool = True) -> SolveRun:
    """Solve every kernel (or one) of a file with the chosen rules; see the module doc.

    `budget` limits each clingo run with users' rules (default
    `gpudiv.analyses.solve.DEFAULT_BUDGET`);
    `allow_scripts=False` refuses rule files with `#script` blocks."""
    users = [read_user_rules(r, allow_scripts) for r in rules or []]
    if not default_rules:
        shipped = []
    elif analysis is None:
        shipped = [str(p) for p in sorted(Path(rules_dir()).glob("*.lp"))]
    else:
        shipped = [str(shipped_rule(f)) for f in analysis_rule_files(analysis)]
    rule_files = shipped + [str(u.path) for u in users]
    if not rule_files:
        raise RuleError("error: no rules to solve with (--no-default-rules and no --rules)")
    if show:
        shown = [parse_signature(s) for s in show]
    elif users:
        shown = [s for u in users for s in (u.shows or u.defines)]
    else:
        shown = [s for f in shipped for s in shown_relations(Path(f).read_text("utf-8"))]
    shown = list(dict.fromkeys(shown))
    known = set(RELATIONS.items())
    defined = known | {s for u in users for s in u.defines}
    defined |= {s for f in shipped for s in read_user_rules(f).defines}
    for name, arity in shown:
        if (name, arity) not in defined:
            origin = next((f"{u.path}:{line}:{column}: error: #show {name}/{arity}"
                           for u in users
                           for line, column in [u.show_places.get((name, arity), (1, 1))]
                           if (name, arity) in u.shows), f"error: --show {name}/{arity}")
            raise RuleError(f"{origin}: no loaded rule derives it and it is not an input "
                            "relation of rules/SCHEMA.md")
    program = load(path)
    kernels = program.kernels
    if kernel is not None:
        kernels = [k for k in kernels if k.name == kernel]
        if not kernels:
            names = ", ".join(k.name for k in program.kernels) or "none"
            raise RuleError(f"{path}: error: no kernel '{kernel}' (kernels: {names})")
    solutions = []
    for k in kernels:
        try:
            ssa = prepare(k)[0]
        except CFGLimit as error:
            raise RuleError(f"{program.path}:{k.loc.line}:{k.loc.column}: error: "
                            f"{error}") from None
        facts = facts_text(ssa, shape=kernel_shape(k, None)[0])
        try:
            solved = solve(rule_files, facts, show=shown, known=known, budget=budget)
        except UnsatisfiableError as error:  # depends on the kernel: say which
            raise in_context(error, program.path, k.loc, f"kernel {k.name}") from None
        except RuleError as error:
            raise _hint(error, default_rules) from None
        relations: dict[tuple[str, int], list[clingo.Symbol]] = {s: [] for s in shown}
        for symbol in sorted(solved.symbols):
            signature = (symbol.name, len(symbol.arguments))
            if signature in relations:
                relations[signature].append(symbol)
        solutions.append(KernelSolution(k.name, relations, solved.ground_ms, solved.solve_ms))
    columns = {s: c for u in users for s, c in u.columns.items()}
    return SolveRun(program.path, rule_files, shown, solutions, list(program.diagnostics),
                    columns)
