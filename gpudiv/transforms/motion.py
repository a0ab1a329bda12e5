"""The program model of code motion (Fukuhara 2023 §2.1; shared/notes §1, §3.2, §3.9).

Nodes are basic blocks, after `split-critical-edges`. For each expression a block has
an *entry part* (up to and including the first instruction that modifies an operand of
the expression) and an *exit part* (after the last one); a transparent block is all
entry part, so its exit computation is false (the seed's convention).

- **Expression identity** is lexical: the operator (for PTX the full opcode, so the type
  is part of it), the operand tuple and the destination's type. Operands are compared as
  written, without copy propagation.
- **Candidates** are instructions that define one register from their operands and
  nothing else: `ir.ASSIGN`, not a copy, no guard, no implicit operands, and
  `traits.is_speculatable` (no side effects, cannot trap, not convergent). So loads,
  divisions, atomics, collectives and barriers never move; a pure computation on
  registers reads nothing another lane or a barrier can change, so moving it across a
  barrier keeps its meaning. In PTX only single-instruction groups whose operands are
  registers, special registers or integers move (the printer writes them back).
- **Expressions considered**: those computed at least twice, or once in a block on a
  cycle. A single computation outside every cycle is redundant on no path, so LCM keeps
  it in place and SCM's smallest region is its own block: leaving it out changes no
  result and keeps the model linear in practice (5,000-instruction kernels).
- **Local predicates** per (expression, block): `ncomp` (an occurrence before any
  modification of an operand), `xcomp` (an occurrence after the last modification, in
  a block that modifies an operand), `transp` (no modification). A modification is any
  instruction whose destination is an operand.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx

from gpudiv import ir
from gpudiv.ir.cfg import EXIT, successor_labels
from gpudiv.transforms import traits

Key = tuple  # (operator, args, dest type)


@dataclass
class BlockView:
    """One block seen from one expression: its occurrences split into the entry and
    exit segments, and the first and last modification (instructions of the block)."""

    entry: list[ir.Instruction] = field(default_factory=list)
    exit: list[ir.Instruction] = field(default_factory=list)
    first_mod: ir.Instruction | None = None
    last_mod: ir.Instruction | None = None

    @property
    def transparent(self) -> bool:
        """No instruction of the block modifies an operand."""
        return self.first_mod is None


@dataclass
class Model:
    """Blocks, edges and per-expression block views of one kernel."""

    labels: list[str]
    succ: dict[str, list[str]]
    ends: set[str]
    keys: list[Key]
    views: dict[tuple[int, str], BlockView]
    sample: dict[int, ir.Instruction]


def _printable_ptx(instr: ir.Instruction, kernel: ir.Kernel) -> bool:
    """A PTX instruction the printer can write from its IR form when it is copied."""
    opcode = instr.attrs.get("opcode")
    if opcode is None:
        return True  # μ-SIMD
    if instr.operator != opcode:
        return False
    group = [i for i in kernel.instructions() if i.group == instr.group]
    if len(group) != 1:
        return False
    root = str(opcode).split(".", 1)[0]
    names = [a.name for a in instr.args if isinstance(a, ir.Var)] + [instr.dest]
    if any("@" in n or n not in kernel.registers for n in names):
        return False  # a temporary of the lowering, not a PTX register
    return all(isinstance(a, ir.Var) or
               (isinstance(a, ir.Special) and root in ("mov", "cvt")) or
               (isinstance(a, ir.Const) and isinstance(a.value, int) and
                not str(opcode).split(".")[-1].startswith("f")) for a in instr.args)


def is_candidate(instr: ir.Instruction, kernel: ir.Kernel) -> bool:
    """Whether code motion may move, insert or replace computations like this one."""
    return (instr.kind == ir.ASSIGN and instr.dest is not None and instr.operator
            not in (None, "copy") and instr.guard is None and not instr.implicit
            and bool(instr.args) and traits.is_speculatable(instr)
            and _printable_ptx(instr, kernel))


def key_of(instr: ir.Instruction, kernel: ir.Kernel) -> Key:
    """The lexical identity of the expression an instruction computes."""
    return (instr.operator, instr.args, kernel.registers.get(instr.dest or "", "s32"))


def operands(key: Key) -> set[str]:
    """The registers an expression reads."""
    return {a.name for a in key[1] if isinstance(a, ir.Var)}


def _view(block: ir.Block, key: Key, kernel: ir.Kernel) -> BlockView:
    """Split the occurrences of `key` in `block` into its entry and exit segments."""
    names = operands(key)
    view = BlockView()
    tail: list[ir.Instruction] = []
    for instr in block.instructions:
        occurs = is_candidate(instr, kernel) and key_of(instr, kernel) == key
        if occurs and view.first_mod is None:
            view.entry.append(instr)
        elif occurs:
            tail.append(instr)
        if instr.dest is not None and instr.dest in names:
            if view.first_mod is None:
                view.first_mod = instr
            view.last_mod = instr
            tail = []
    view.exit = tail if view.first_mod is not None else []
    return view


def build_model(kernel: ir.Kernel) -> Model:
    """The code-motion model of a kernel (whose critical edges are already split)."""
    labels = [b.label for b in kernel.blocks]
    succ, ends = {}, set()
    for i, block in enumerate(kernel.blocks):
        targets = list(dict.fromkeys(successor_labels(kernel, i)))
        if EXIT in targets:
            ends.add(block.label)
        succ[block.label] = [t for t in targets if t != EXIT]
    cyclic = _blocks_in_cycles(succ)
    found: dict[Key, list[tuple[str, ir.Instruction]]] = {}
    for block in kernel.blocks:
        for instr in block.instructions:
            if is_candidate(instr, kernel):
                found.setdefault(key_of(instr, kernel), []).append((block.label, instr))
    keys: list[Key] = []
    sample: dict[int, ir.Instruction] = {}
    for key, places in found.items():
        if len(places) > 1 or places[0][0] in cyclic:
            sample[len(keys)] = places[0][1]
            keys.append(key)
    views = {(e, b.label): _view(b, key, kernel)
             for e, key in enumerate(keys) for b in kernel.blocks}
    return Model(labels, succ, ends, keys, views, sample)


def _blocks_in_cycles(succ: dict[str, list[str]]) -> set[str]:
    """Blocks on a cycle of the block graph."""
    graph = nx.DiGraph()
    graph.add_nodes_from(succ)
    graph.add_edges_from((b, t) for b, ts in succ.items() for t in ts)
    return {b for scc in nx.strongly_connected_components(graph) for b in scc
            if len(scc) > 1 or graph.has_edge(b, b)}


def facts(model: Model, speculate: set[str] = frozenset(),
          exprs: list[int] | None = None) -> str:
    """The ASP facts of rules/SCHEMA.md "Code motion" (of the expressions `exprs`, by
    default all): blocks are numbered in order."""
    number = {label: n for n, label in enumerate(model.labels)}
    lines = [f"node({n})." for n in number.values()]
    if model.labels:
        lines.append("start(0).")
    lines += [f"end({number[b]})." for b in model.ends]
    lines += [f"succ({number[b]},{number[s]})." for b, ts in model.succ.items() for s in ts]
    lines += [f"speculate({number[b]})." for b in speculate if b in number]
    for e in range(len(model.keys)) if exprs is None else exprs:
        lines.append(f"expr({e}).")
        for label in model.labels:
            view, n = model.views[(e, label)], number[label]
            if view.entry:
                lines.append(f"ncomp({e},{n}).")
            if view.exit:
                lines.append(f"xcomp({e},{n}).")
            if view.transparent:
                lines.append(f"transp({e},{n}).")
    return "\n".join(lines) + "\n"
