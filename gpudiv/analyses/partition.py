"""Grounding a large kernel in parts: a plan that cuts its facts at articulation blocks,
and the runs that ground the parts one after another (issue 16, item 2).

clingo's time per ground atom grows with the size of the ground program (its tables
outgrow the processor's caches): grounding 100,000 straight-line instructions took 1.5
times as long per atom as 1,000. A plan cuts the kernel into parts of about `PART_FACTS`
facts, each grounded by its own clingo run, so that the time per atom stays that of a
part whatever the kernel's size.

Where a kernel may be cut. An *articulation* is a block Y outside every loop that every
path from the entry to the exit passes (it post-dominates the entry and dominates the
exit). Then the blocks before Y (reached from the entry without passing Y) only lead to
blocks before Y or to Y, and the blocks after Y only to blocks after Y: every branch
before Y meets its lanes again at Y at the latest, no loop crosses Y, and every value
read after Y was defined before it or after it, never further on. A cut lies in an
articulation, after its φ, η and rejoin definitions: before any of its instructions. A
*slot* is the stretch between two possible cuts; a part is a run of slots.

What a part holds. Every fact belongs to the entity its first argument names (a variable,
a block or a loop), and an entity to the slot where it is defined: a variable to its
instruction, or to the top of its articulation for φ, η and rejoin definitions, or to its
segment (the blocks between two articulations); a loop to its header's segment; a block
to its segment, an articulation to the part of its terminator (the branch that ends it).
A part also gets, for every entity of an earlier part that its facts name (a value read
across a cut), that entity's facts that name no other entity (`var/2`, `assign_op/2`, …)
and every atom the rules derived about it in its own part (its first argument): the
earlier part exports them through a conditional `#show`. A part that only holds the top
or some instructions of an articulation gets that block's facts that name no other
entity (`block/1`, `doomed/1`).

Why the answer is the same as grounding the kernel whole. The shipped divergence rules
(`PARTITIONED_RULES`) derive what they say about an entity from facts about it, about the
values it reads and about the branches, loops and blocks around it, which all lie in its
part or, for values read, earlier; the atoms about an earlier value are its whole answer
(its own part derived them from everything that decides them). Two relations flow the
other way: af_uneed/1 and af_vu/2 (affine.lp) say that a value is read by some operator,
and each part derives them again from its own reads, which are all that the atoms using
them look at. An atom about an entity is taken from the part that owns the entity. The
plan checks that no fact names an entity of a later part; a kernel that fails a check, has
unreachable blocks or blocks without an exit, or whose rules are not the shipped
divergence rules is grounded whole. Tests compare both ways on the samples, on generated
kernels and on random programs cut at every possible place.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from functools import lru_cache

from gpudiv.analyses.atoms import AtomReader
from gpudiv.analyses.solve import (
    _SHOW_LINE,
    RuleError,
    Signatures,
    SolveResult,
    _ground_and_solve,
    _shipped_statements,
    _without_shows,
    is_shipped,
)
from gpudiv.ir.cfg import ENTRY, EXIT
from gpudiv.ir.record import Record

TYPE_CHECKING = False  # (typing is not imported: an analysis never needs it)
if TYPE_CHECKING:
    from pathlib import Path

    from gpudiv.ir.ssa import SSAForm

# Facts per part (about 5,000 straight-line PTX instructions of `affine2` facts); a kernel
# of fewer than twice this many facts is grounded whole.
PART_FACTS = 40_000

# The rule files whose answers are the same when grounded in parts (see the module's
# docstring); any other file in a run, a user's above all, keeps the kernel whole.
PARTITIONED_RULES = frozenset({"cfg.lp", "divergence.lp", "affine.lp", "affine2.lp"})

# Per input relation (gpudiv.analyses.facts.RELATIONS), the positions among its arguments
# that may name a block, a loop or a variable. A relation missing here keeps the kernel
# whole (tests/analyses/test_partition.py checks that every relation is listed).
ENTITY_ARGUMENTS: dict[str, tuple[int, ...]] = {
    "block": (0,), "edge": (0, 1), "entry": (0,), "exit": (0,), "block_order": (0,),
    "ipdom": (0, 1), "idom": (0, 1), "sync_ipdom": (0, 1), "doomed": (0,),
    "loop": (0,), "loop_block": (0, 1), "loop_parent": (0, 1), "loop_header": (0, 1),
    "branch": (0,), "branch_cond": (0, 1), "uniform_hint": (0,),
    "var": (0,), "def_kind": (0,), "def_line": (0,), "def_block": (0, 1), "operand": (0, 1),
    "source": (0,), "uniform_input": (0,), "const": (0,), "copy": (0, 1),
    "phi": (0, 1), "mu": (0, 1), "eta": (0, 1), "rejoin": (0, 1), "rejoin_gate": (0, 1),
    "invariant_value": (0,), "load": (0, 2), "load_arg": (0, 2), "atomic": (0,),
    "assign_op": (0,), "op_bits": (0,), "zero_extend": (0,), "arg": (0, 2),
    "arg_const": (0,), "arg_big": (0,), "phi_arg": (0, 1, 2), "back_edge": (0, 1),
    "thread_id": (0,), "lane_index": (0,), "warp_index": (0,), "hidden_operands": (0,),
    "branch_when": (0, 1), "cmp_kind": (0,), "pred_not": (0, 1), "call_input": (0,),
    "call_output": (0,), "local_via": (0, 1), "affine_input": (0,),
}
# (store/3, instr_at/3 and the other memory relations name instructions: only the
# deadlock rules read them, and those are not grounded in parts.)

EXPORT = "gpudiv_export"  # export(E): the atoms about entity E are wanted by a later part


class Plan(Record):
    """A kernel's facts cut into parts: per part its own facts, the entities of earlier
    parts it names, and the entities whose atoms it exports; per entity its owning part."""

    facts: list[list[tuple]]
    imports: list[list[str]]
    exports: list[set[str]]
    owner: dict[str, int]
    plain: dict[str, list[tuple]]

    def __init__(self, facts: list[list[tuple]], imports: list[list[str]],
                       exports: list[set[str]], owner: dict[str, int],
                       plain: dict[str, list[tuple]]) -> None:
        self.facts = facts
        self.imports = imports
        self.exports = exports
        self.owner = owner
        self.plain = plain


def partitioned(rule_files: list[Path | str] | tuple) -> bool:
    """Whether these rule files may be grounded in parts (only shipped divergence rules)."""
    return all(is_shipped(path) and os.path.basename(str(path)) in PARTITIONED_RULES
               for path in rule_files)


def may_cut(ssa: SSAForm) -> bool:
    """Whether the kernel is large enough that `plan` may cut it (a cheap test, before its
    facts are written: a variable has about eight facts)."""
    return len(ssa.variables) * 8 >= 2 * PART_FACTS


def articulations(ssa: SSAForm) -> list[str]:
    """The kernel's articulation blocks in execution order (see the module's docstring)."""
    cfg = ssa.cfg
    dominating_exit, node = set(), EXIT
    while node in cfg.idom:
        node = cfg.idom[node]
        dominating_exit.add(node)
    in_loops = set().union(*(loop.blocks for loop in cfg.loops.values()))
    found, node = [], ENTRY
    while node in cfg.ipdom:
        node = cfg.ipdom[node]
        if node in dominating_exit and node not in in_loops and node not in (ENTRY, EXIT):
            found.append(node)
    return found


def _segments(ssa: SSAForm, cuts: list[str]) -> dict[str, int]:
    """Per block, how many articulations dominate it (an articulation counts itself):
    blocks with the same number lie between the same two articulations."""
    idom = ssa.cfg.idom
    segment = {ENTRY: 0, **{block: i + 1 for i, block in enumerate(cuts)}}
    for block in ssa.cfg.graph.nodes:
        path, node = [], block
        while node not in segment:
            path.append(node)
            node = idom.get(node, ENTRY)
        for waiting in path:
            segment[waiting] = segment[node]
    return segment


def _slots(ssa: SSAForm, cuts: list[str]) -> tuple[dict[str, int], dict[str, tuple[int, int]]]:
    """Per variable, loop and block the slot it belongs to (an articulation: the slot of
    its terminator), and per articulation the first and last slot it spans.

    Slot `start[s]` holds the blocks of segment s with the top (φ, η, rejoin) of the
    articulation that ends it; each instruction of an articulation has a slot of its own
    between that and the next segment's."""
    cfg = ssa.cfg
    segment = _segments(ssa, cuts)
    blocks = {b.label: b for b in cfg.kernel.blocks}
    start = [0]
    for block in cuts:
        start.append(start[-1] + 1 + len(blocks[block].instructions if block in blocks
                                         else ()))
    span = {block: (start[t], start[t + 1]) for t, block in enumerate(cuts)}
    slot = {block: start[s] for block, s in segment.items()}
    for loop in cfg.loops.values():
        slot.setdefault(loop.name, slot[loop.headers[0]])
    position = {instr.id: i for block in cuts if block in blocks
                for i, instr in enumerate(blocks[block].instructions)}
    for var in ssa.variables.values():
        if var.block not in span:
            slot[var.name] = slot[var.block]
        elif var.instruction is None:
            slot[var.name] = span[var.block][0]
        else:
            slot[var.name] = span[var.block][0] + 1 + position[var.instruction]
    return slot, span


def plan(ssa: SSAForm, facts: list[tuple], part_facts: int | None = None) -> Plan | None:
    """The kernel's facts cut into parts of about `part_facts` (default `PART_FACTS`)
    facts; None when it is not worth it or not safe (see the module's docstring)."""
    cfg = ssa.cfg
    part_facts = PART_FACTS if part_facts is None else part_facts
    if len(facts) < 2 * part_facts or cfg.unreachable or cfg.no_exit:
        return None
    cuts = articulations(ssa)
    if not cuts:
        return None
    names = {*ssa.variables, *cfg.graph.nodes}
    if len(names) != len(ssa.variables) + len(cfg.graph.nodes):
        return None  # a variable and a block of the same name
    try:
        slot, span = _slots(ssa, cuts)
    except KeyError:  # a variable outside every block, or not among its block's instructions
        return None
    return _cut(facts, slot, span, part_facts)


# Per relation, the indices in a fact tuple of the entity arguments after the first.
_OTHERS = {relation: tuple(1 + i for i in positions[1:])
           for relation, positions in ENTITY_ARGUMENTS.items()}


def _cut(facts: list[tuple], slot: dict[str, int], span: dict[str, tuple[int, int]],
         part_facts: int) -> Plan | None:
    """The plan for facts whose entities lie in the given slots."""
    if not {fact[0] for fact in facts} <= _OTHERS.keys():
        return None
    try:
        per_slot = Counter([slot[fact[1]] for fact in facts])
    except (KeyError, IndexError):
        return None  # a fact about no entity
    part_of_slot: dict[int, int] = {}
    part, size = 0, 0
    for s in sorted(per_slot):
        if size >= part_facts:
            part, size = part + 1, 0
        part_of_slot[s] = part
        size += per_slot[s]
    if part == 0:
        return None
    part_at = [part] * (max(slot.values()) + 1)
    for s in range(len(part_at) - 2, -1, -1):  # a slot without facts: the next one's part
        part_at[s] = part_of_slot.get(s, part_at[s + 1])
    owner = {name: part_at[s] for name, s in slot.items()}
    first = dict(owner)
    touching: dict[str, range] = {}
    for block, (top, _end) in span.items():
        first[block] = part_at[top]
        touching[block] = range(first[block], owner[block] + 1)
    parts: list[list[tuple]] = [[] for _ in range(part + 1)]
    imports: list[set[str]] = [set() for _ in range(part + 1)]
    for fact in facts:
        entity = fact[1]
        home = owner[entity]
        parts[home].append(fact)
        for i in _OTHERS[fact[0]]:
            named = fact[i]
            if named == entity or named not in owner:
                continue
            if first[named] > home:
                return None  # a fact that names an entity defined further on
            if owner[named] != home and home not in touching.get(named, ()):
                imports[home].add(named)
    plain = _plain_facts(facts, set().union(*imports, touching), owner)
    for block, parts_touched in touching.items():
        for other in parts_touched[:-1]:
            parts[other] += plain.get(block, ())
    exports: list[set[str]] = [set() for _ in parts]
    for named in set().union(*imports):
        exports[owner[named]].add(named)
    return Plan(parts, [sorted(i) for i in imports], exports, owner, plain)


def _plain_facts(facts: list[tuple], wanted: set[str], owner: dict[str, int]
                 ) -> dict[str, list[tuple]]:
    """Per wanted entity, its facts that name no other entity."""
    plain: dict[str, list[tuple]] = defaultdict(list)
    for fact in facts:
        entity = fact[1]
        if entity in wanted and all(fact[i] == entity or fact[i] not in owner
                                    for i in _OTHERS[fact[0]]):
            plain[entity].append(fact)
    return dict(plain)


def _heads(statements: tuple) -> set[tuple[str, int]] | None:
    """The predicates rule heads derive; None for a head that is not a plain atom."""
    from clingo.ast import ASTType

    heads: set[tuple[str, int]] = set()
    for statement in statements:
        if statement.ast_type != ASTType.Rule:
            continue
        head = statement.head
        if head.ast_type == ASTType.Literal and head.atom.ast_type == ASTType.BooleanConstant:
            continue  # an integrity constraint
        if head.ast_type != ASTType.Literal or head.atom.ast_type != ASTType.SymbolicAtom:
            return None
        term = head.atom.symbol
        terms = term.arguments if term.ast_type == ASTType.Pool else [term]
        if any(t.ast_type != ASTType.Function for t in terms):
            return None
        heads |= {(t.name, len(t.arguments)) for t in terms}
    return heads


@lru_cache(maxsize=8)
def _export_program(paths: tuple[str, ...], hide: Signatures
                    ) -> tuple[str, frozenset[tuple[str, int]]] | None:
    """The conditional `#show`s that export derived atoms of the entities in `export/1`,
    and the signatures the rule files show; None when a head is not a plain atom."""
    derived: set[tuple[str, int]] = set()
    shown: set[tuple[str, int]] = set()
    for path in paths:
        mtime_ns = os.stat(path).st_mtime_ns
        statements = _shipped_statements(path, mtime_ns, hide)
        heads = _heads(statements) if statements is not None else None
        if heads is None:
            return None
        derived |= heads
        shown |= {(m[1], int(m[2])) for m in _SHOW_LINE.finditer(
            _without_shows(path, mtime_ns, hide))}
    text = []
    for name, arity in sorted(derived):
        if arity:
            arguments = ",".join(f"X{i}" for i in range(arity))
            text.append(f"#show {name}({arguments}) : {EXPORT}(X0), {name}({arguments}).\n")
    return "".join(text), frozenset(shown)


def solve_in_parts(rule_files: list[Path | str], the_plan: Plan, extra: str,
                   hide: Signatures) -> SolveResult | None:
    """Ground and solve the parts of a plan one after another (see the module's
    docstring); the shown atoms of the entities each part owns, as `solve` gives them for
    the whole kernel. None when the rule files' heads cannot be exported or a part fails
    (a whole run then answers, or reports the error).

    All parts run in this process. Grounding each in a forked child kept its time
    constant (clingo keeps every symbol for the life of a process, and the twentieth of
    twenty equal parts took 695 ms here against 311 ms for the first), but the children's
    page faults and copies cost more than that saved (docs/design.md, "Grounding in
    parts")."""
    exporting = _export_program(tuple(str(p) for p in rule_files), hide)
    if exporting is None:
        return None
    export_text, shown = exporting
    program = extra + export_text
    result = SolveResult()
    exported: dict[str, list[int]] = defaultdict(list)
    reader = AtomReader()
    owner = the_plan.owner
    for part, own in enumerate(the_plan.facts):
        imported = the_plan.imports[part]
        facts = own + [f for name in imported for f in the_plan.plain.get(name, ())]
        facts += [(EXPORT, name) for name in the_plan.exports[part]]
        atoms = [a for name in imported for a in exported.get(name, ())]
        try:
            run = _ground_and_solve(rule_files, program, None, None, hide, (), facts, atoms)
        except RuleError:
            return None  # a whole run reports it, against the kernel
        result.ground_ms += run.ground_ms
        result.solve_ms += run.solve_ms
        result.atom_count += run.atom_count
        result.rule_count += run.rule_count
        wanted = the_plan.exports[part]
        # (an atom both shown and exported is in the model twice)
        symbols = list(dict.fromkeys(run.symbol_ids)) if wanted else run.symbol_ids
        for symbol, atom in zip(symbols, reader.read(symbols), strict=True):
            if atom is None:
                return None
            name, arguments = atom
            first = arguments[0] if arguments else None
            if first in wanted:
                exported[first].append(symbol)
            if (name, len(arguments)) not in shown:
                continue
            if owner.get(first) is None:
                return None  # a shown atom about no entity: only a whole run knows it
            if owner[first] == part:
                result.atoms[name].append(arguments)
                result.symbol_ids.append(symbol)
    return result
