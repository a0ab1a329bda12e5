"""`srqp`, `esrqp`, `ssrqp-s` and `ssrqp`: scalar replacement of loads by question
propagation (Fukuhara 2023 §4.3), the questions answered as dataflow by rules/srqp.lp,
rules/cdrnd.lp and rules/ssrqp.lp; loads.py is the program model.

- `srqp`: a load whose value is available on every path (possibly after inserting
  copies of it into the predecessors that lack it, where it is down-safe and some other
  predecessor has a real occurrence) reads a temporary instead of memory; values carry
  across `i = i + c` (inter-iteration redundancy, a rotating temporary).
- `esrqp`: the same, inserting only into statements of the control dependence region of
  non-divergence (CDRND): never into the sides of a divergent branch.
- `ssrqp`: ESRQP, then every load ESRQP leaves is hoisted above the divergent branches
  it is control dependent on (the speculation query), then ESRQP again.
- `ssrqp-s`: the baseline that hoists above every branch, divergent or not.

Each pass splits critical edges first and leaves a kernel where nothing changes as it
is. Divergent branches come from the analysis named by the `divergence` option (simple,
affine or affine2; default affine2). Each rewrite gets fresh temporaries `sr_t…`.
"""

from __future__ import annotations

from typing import ClassVar

import networkx as nx

from gpudiv import ir
from gpudiv.analyses.solve import RuleError, shipped_rule, solve
from gpudiv.ir.cfg import EXIT, successor_labels
from gpudiv.ir.dominators import immediate_dominators
from gpudiv.transforms import traits
from gpudiv.transforms.base import Pass, PassError, kernel_language, register
from gpudiv.transforms.builder import Rewriter, clone_kernel
from gpudiv.transforms.coalesce import coalesce_new
from gpudiv.transforms.critical_edges import drop_unused_edge_blocks
from gpudiv.transforms.lcm import prepare
from gpudiv.transforms.loads import (
    LoadModel,
    build_load_model,
    load_facts,
    reconvergence_kills,
)
from gpudiv.transforms.motion_explain import (
    ExpressionMotion,
    availability_records,
    speculation_records,
)
from gpudiv.transforms.sscm import branch_blocks, divergent_blocks

Relations = dict[str, set[tuple]]
ENTRY, VIRTUAL_EXIT = "entry", "exit"


def control_facts(count: int, edges: list[tuple[int, int]], ends: set[int],
                  divergent: set[int]) -> str:
    """Facts of rules/cfg.lp and rules/cdrnd.lp for blocks 0..count-1 (0 is the start):
    the augmented CFG (`entry` -> 0, `entry` -> `exit`, ends -> `exit`), its immediate
    post-dominators, its branches, and divergence."""
    graph = nx.DiGraph()
    graph.add_nodes_from([ENTRY, VIRTUAL_EXIT, *range(count)])
    graph.add_edge(ENTRY, VIRTUAL_EXIT)
    if count:
        graph.add_edge(ENTRY, 0)
    graph.add_edges_from(edges)
    graph.add_edges_from((n, VIRTUAL_EXIT) for n in ends)
    ipdom = immediate_dominators(graph.reverse(copy=False), VIRTUAL_EXIT)
    lines = [f"bnode({n})." for n in [ENTRY, *range(count)]]
    lines += [f"block({n})." for n in graph.nodes]
    lines += [f"edge({a},{b})." for a, b in graph.edges]
    lines += [f"branch({n},{graph.out_degree(n)})." for n in graph.nodes
              if graph.out_degree(n) > 1]
    lines += [f"ipdom({n},{p})." for n, p in ipdom.items() if n != p]
    lines += [f"bdiv({n})." for n in sorted(divergent)]
    return "\n".join(lines) + "\n"


def block_facts(kernel: ir.Kernel, model: LoadModel, divergent: set[str]) -> str:
    """Facts of rules/cdrnd.lp for a kernel's blocks and the statement nodes in them."""
    number = {b.label: i for i, b in enumerate(kernel.blocks)}
    edges, ends = [], set()
    for i in range(len(kernel.blocks)):
        targets = successor_labels(kernel, i)
        edges += [(i, number[t]) for t in targets if t != EXIT]
        if EXIT in targets or not targets:
            ends.add(i)
    text = control_facts(len(kernel.blocks), edges, ends,
                         {number[b] for b in divergent if b in number})
    return text + "\n".join(f"inblock({n},{number[label]})."
                             for n, (label, _) in enumerate(model.nodes)) + "\n"


def solve_loads(kernel: ir.Kernel, model: LoadModel, divergent: set[str],
                hoist_at: set[str] | None, gate: bool) -> Relations:
    """The shown relations of the scalar-replacement rules on the model. `hoist_at`:
    blocks whose branch the speculation query may hoist above (None: no speculation)."""
    if not model.forms:
        return {}
    rules = ["cfg.lp", "cdrnd.lp", "srqp.lp"] + (["ssrqp.lp"] if hoist_at is not None else [])
    facts = load_facts(model, set(), set(hoist_at or ()), "gate.\n" if gate else "")
    facts += block_facts(kernel, model, divergent)
    try:
        result = solve([shipped_rule(r) for r in rules], facts)
    except RuleError as error:
        raise PassError(f"scalar replacement rules failed: {error}") from error
    return {name: set(tuples) for name, tuples in result.atoms.items()}


def load_of(model: LoadModel, f: int, dest: str, rewriter: Rewriter) -> list[ir.Instruction]:
    """Instructions loading form `f` into `dest` (μ-SIMD: the address first, if offset)."""
    sample = model.sample[f]
    space, base, offset, opcode = model.forms[f]
    if model.language == "ptx":
        attrs = {k: v for k, v in sample.attrs.items() if k in ("opcode", "origin")}
        attrs["disp"] = offset
        text = f"{opcode} {dest}, [{base}+{offset}];"
        return [ir.Instruction(ir.LOAD, sample.loc, dest, (base,), sample.operator,
                               space, text=text, attrs=attrs)]
    if base is None:
        return [ir.Instruction(ir.LOAD, sample.loc, dest, (ir.Const(offset),), None, space,
                               text=f"{dest} = {space}[{offset}]")]
    if offset == 0:
        return [ir.Instruction(ir.LOAD, sample.loc, dest, (base,), None, space,
                               text=f"{dest} = {space}[{base}]")]
    address = rewriter.fresh_register("sr_a", "s32")
    return [ir.Instruction(ir.ASSIGN, sample.loc, address, (base, ir.Const(offset)),
                           "+", text=f"{address} = {base} + {offset}"),
            ir.Instruction(ir.LOAD, sample.loc, dest, (ir.Var(address),), None, space,
                           text=f"{dest} = {space}[{address}]")]


def copy_of(loc: ir.Loc, dest: str, source: str) -> ir.Instruction:
    """`dest = source`."""
    return ir.Instruction(ir.ASSIGN, loc, dest, (ir.Var(source),), "copy",
                          text=f"{dest} = {source}")


def as_copy(instr: ir.Instruction, temp: str) -> None:
    """Make the load `d = M[a]` read the temporary: `d = t`."""
    instr.kind, instr.operator, instr.args, instr.space = ir.ASSIGN, "copy", (ir.Var(temp),), None
    instr.group = None
    for key in ("opcode", "disp", "symbol", "offset"):
        instr.attrs.pop(key, None)
    instr.text = f"{instr.dest} = {temp}"


def place_after(rewriter: Rewriter, model: LoadModel, node: int,
                instrs: list[ir.Instruction]) -> None:
    """Put `instrs` at the end of statement `node` (before it, when it is a terminator or
    an empty block's place)."""
    label, anchor = model.nodes[node]
    if anchor is None or anchor.kind in ir.TERMINATORS:
        for instr in instrs:
            if anchor is None:
                rewriter.insert_at_end(label, instr)
            else:
                rewriter.insert_before(anchor, instr)
        return
    for instr in reversed(instrs):
        rewriter.insert_after(anchor, instr)


def apply_replacement(kernel: ir.Kernel, model: LoadModel, found: Relations) -> bool:
    """Insert, save, convert and replace as the srqp.lp relations say; whether anything
    changed."""
    rewriter = Rewriter(kernel)
    touched = sorted({t[1] for name in ("insert", "replace", "save", "convert")
                      for t in found.get(name, ())} | {t[2] for t in found.get("convert", ())})
    if not found.get("replace"):
        return False
    temps = coalesced(kernel, model, found)
    temps.update({f: rewriter.fresh_register(f"sr_t{f}", _type(kernel, model, f))
                  for f in touched if f not in temps})
    for n, f in sorted(found.get("insert", ())):
        place_after(rewriter, model, n, load_of(model, f, temps[f], rewriter))
    for n, after, before in sorted(found.get("convert", ())):
        place_after(rewriter, model, n, [copy_of(model.nodes[n][1].loc, temps[after],
                                                 temps[before])])
    for n, f in sorted(found.get("save", ())):
        instr = model.nodes[n][1]
        if temps[f] == instr.dest:
            continue
        place_after(rewriter, model, n, [copy_of(instr.loc, temps[f], instr.dest)])
    addresses = set()
    for n, f in sorted(found.get("replace", ())):
        instr = model.nodes[n][1]
        addresses.update(instr.used_vars)
        if instr.dest == temps[f]:
            rewriter.erase(instr)  # it would copy the temporary to itself
        else:
            as_copy(instr, temps[f])
    drop_unread(kernel, addresses)
    return True


def drop_unread(kernel: ir.Kernel, names: set[str]) -> None:
    """Erase the definitions of registers in `names` that nothing reads any more (the
    address of a replaced load), when they are pure single instructions; repeated for
    the registers those read."""
    rewriter = Rewriter(kernel)
    while names:
        read = {v for i in kernel.instructions() for v in i.used_vars}
        defs = [i for i in kernel.instructions() if i.dest in names - read]
        groups: dict[int, int] = {}
        for i in kernel.instructions():
            if i.group is not None:
                groups[i.group] = groups.get(i.group, 0) + 1
        dead = [i for i in defs if i.kind == ir.ASSIGN and traits.is_speculatable(i)
                and (i.group is None or groups.get(i.group) == 1)]
        names = set()
        for instr in dead:
            names.update(instr.used_vars)
            rewriter.erase(instr)


def coalesced(kernel: ir.Kernel, model: LoadModel, found: Relations) -> dict[int, str]:
    """Forms whose only writer would be one saved load `d = M[a]` with `d` defined
    nowhere else (but by replaced loads of the same form, which then go): `d` itself
    serves as the temporary (no copy `t = d`)."""
    writers: dict[int, list[tuple[str, int]]] = {}
    for n, f in found.get("insert", ()):
        writers.setdefault(f, []).append(("insert", n))
    for n, f, _ in found.get("convert", ()):
        writers.setdefault(f, []).append(("convert", n))
    for n, f in found.get("save", ()):
        writers.setdefault(f, []).append(("save", n))
    definitions: dict[str, int] = {}
    for instr in kernel.instructions():
        if instr.dest is not None:
            definitions[instr.dest] = definitions.get(instr.dest, 0) + 1
    result = {}
    for f, ws in writers.items():
        if len(ws) == 1 and ws[0][0] == "save":
            dest = model.nodes[ws[0][1]][1].dest
            selves = sum(1 for n, g in found.get("replace", ())
                         if g == f and model.nodes[n][1].dest == dest)
            if dest is not None and definitions.get(dest, 0) - selves == 1:
                result[f] = dest  # the replaced loads into `dest` itself go away
    return result


def _type(kernel: ir.Kernel, model: LoadModel, f: int) -> str:
    """The register type of a form's temporary (that of a load's destination)."""
    return kernel.registers.get(model.sample[f].dest or "", "s32")


def apply_hoists(kernel: ir.Kernel, model: LoadModel, found: Relations) -> bool:
    """Copy each hoisted load before the branches `hnode` names and at the end of the
    statements `cnode` names (Algorithm 2.1's compensation), and make the origin read
    the copy; whether anything changed."""
    origins = {o for (o,) in found.get("hoist", ())}
    if not origins:
        return False
    rewriter = Rewriter(kernel)
    forms = sorted({model.occurrences[o] for o in origins})
    temps = {f: rewriter.fresh_register(f"sr_h{f}", _type(kernel, model, f)) for f in forms}
    places = sorted({(n, model.occurrences[o])
                     for o, n in found.get("hnode", set()) | found.get("cnode", set())
                     if o in origins})
    for n, f in places:
        place_after(rewriter, model, n, load_of(model, f, temps[f], rewriter))
    addresses = set()
    for o in sorted(origins):
        addresses.update(model.nodes[o][1].used_vars)
        as_copy(model.nodes[o][1], temps[model.occurrences[o]])
    drop_unread(kernel, addresses)
    return True


def cdrnd_statements(kernel: ir.Kernel, model: LoadModel, found: Relations) -> set[int]:
    """The statements in CDRND blocks (cdrnd.lp's `bcdrnd`, blocks by number)."""
    blocks = {kernel.blocks[b].label for (b,) in found.get("bcdrnd", ())
              if isinstance(b, int)}
    return {n for n, (label, _) in enumerate(model.nodes) if label in blocks}


def replace_loads(kernel: ir.Kernel, divergent: set[str], gate: bool,
                  hoist_at: set[str] | None,
                  records: list[ExpressionMotion] | None = None,
                  coalesce: bool = True) -> ir.Kernel:
    """The scalar-replacement pipeline on a copy of `kernel` (the kernel itself when
    nothing changes): speculation first when `hoist_at` is given, then (E)SRQP, then
    copy coalescing unless `coalesce` is false; what each step did and why is appended
    to `records`."""
    records = [] if records is None else records
    work = clone_kernel(kernel)
    if not prepare(work):
        return kernel
    language = kernel_language(work)
    changed = False
    if hoist_at is not None:
        model = build_load_model(work, language)
        reconvergence_kills(work, model, divergent)
        found = solve_loads(work, model, divergent, hoist_at, True)
        records += speculation_records(model, found, hoist_at)
        changed |= apply_hoists(work, model, found)
    model = build_load_model(work, language)
    reconvergence_kills(work, model, divergent)
    found = solve_loads(work, model, divergent, None, gate)
    records += availability_records(model, found, cdrnd_statements(work, model, found))
    changed |= apply_replacement(work, model, found)
    if not changed:
        records.clear()
        return kernel
    drop_unused_edge_blocks(work, {b.label for b in kernel.blocks})
    coalesce_new(work, kernel, coalesce)
    return work


class _ScalarReplacement(Pass):
    """Shared option handling of the scalar-replacement passes."""

    gate: ClassVar[bool] = False
    speculate: ClassVar[str | None] = None  # None, "divergent" or "every"
    records: list[ExpressionMotion]
    speculate_blocks: frozenset[str] = frozenset()

    def run(self, kernel: ir.Kernel) -> ir.Kernel:
        """The kernel with its redundant loads replaced (see the module docstring; what
        moved and why in `records`)."""
        analysis = str(self.options.get("divergence", "affine2"))
        divergent = divergent_blocks(kernel, analysis)
        hoist_at = None
        if self.speculate == "divergent":
            hoist_at = divergent
        elif self.speculate == "every":
            hoist_at = branch_blocks(kernel)
        self.records, self.speculate_blocks = [], frozenset(hoist_at or ())
        return replace_loads(kernel, divergent, self.gate, hoist_at, self.records,
                             bool(self.options.get("coalesce", True)))


@register
class ScalarReplacement(_ScalarReplacement):
    """SRQP: scalar replacement by question propagation, divergence ignored."""

    name = "srqp"
    description = "scalar replacement of redundant loads (rules/srqp.lp)"


@register
class ExtendedScalarReplacement(_ScalarReplacement):
    """ESRQP: SRQP inserting only into the CDRND."""

    name = "esrqp"
    description = "srqp inserting loads only outside divergent regions (CDRND, rules/cdrnd.lp)"
    gate = True


@register
class SpeculativeScalarReplacementEverywhere(_ScalarReplacement):
    """SSRQP_S: ESRQP plus hoisting above every branch (the seed's baseline)."""

    name = "ssrqp-s"
    description = "esrqp plus hoisting loads above every branch (baseline, rules/ssrqp.lp)"
    gate = True
    speculate = "every"


@register
class SpeculativeScalarReplacement(_ScalarReplacement):
    """SSRQP: ESRQP plus hoisting loads above divergent branches only."""

    name = "ssrqp"
    description = "esrqp plus hoisting loads above divergent branches only (rules/ssrqp.lp)"
    gate = True
    speculate = "divergent"
