"""The program model of scalar replacement of loads (Fukuhara 2023 §4.3; shared/notes §4).

Nodes are single statements (the seed's model for question propagation, notes §4.1): one
node per instruction, one for an empty block; the blocks' critical edges are split first.

- **Forms.** A load is identified by its *form* `(space, base, offset, opcode)`: the
  address is the register `base` plus the constant `offset` (PTX: the register and the
  displacement of `[%rd+8]`; μ-SIMD: `shared[x]` where `x = b + c` or `x = b - c` earlier
  in the same block, with neither redefined in between, is `(shared, b, c)`; otherwise
  `(shared, x, 0)`; a constant address has base None). Forms are compared as written,
  without copy propagation, so `A[i]` and `A[j]` differ even when `j = i`.
- **Candidates**: loads with one destination, no guard, not volatile and not part of a
  larger source instruction (PTX vector loads); PTX loads from `global`, `shared`,
  `local` or `const` through a register (`ld.param` is read once by nvcc anyway).
- **Modifications** of a form (the seed's rule 4, with conservative aliasing): a store or
  atomic to the same space (PTX: a generic store kills every form), a barrier, fence,
  call or any other side effect (other threads' writes become visible there), and a
  definition of the base register. A definition `b = b + c` or `b = b - c` with a
  constant (the seed's rule 6, algebraic conversion) *converts* instead: form
  `(s, b, k)` after it is form `(s, b, k + c)` before it (`A[i]` after `i = i + 1` is
  `A[i+1]` before), when that form is also loaded somewhere; otherwise it kills.
- **Speculation** (SSRQP's hoisting above a divergent branch) makes lanes load that did
  not before. μ-SIMD loads cannot fault (unwritten cells read 0), so μ-SIMD forms may be
  speculated; PTX loads may fault out of bounds like the hardware's, so a PTX load is
  hoisted above a branch only where it is down-safe (every path from there loads the
  same address anyway: `speculable` is false and rules/ssrqp.lp asks for `antin`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpudiv import ir
from gpudiv.ir.cfg import EXIT, branch_region, build_cfg, successor_labels
from gpudiv.transforms import traits

Form = tuple  # (space, base operand (ir.Var or ir.Special) or None, offset, opcode)
PTX_SPACES = ("global", "shared", "local", "const")
_UNSAFE_QUALIFIERS = ("volatile", "relaxed", "acquire", "mmio", "weak")


@dataclass
class LoadModel:
    """Statement nodes, their edges and the load forms of one kernel."""

    nodes: list[tuple[str, ir.Instruction | None]]  # (block label, instruction)
    succ: dict[int, list[int]]
    ends: set[int]
    forms: list[Form]
    occurrences: dict[int, int] = field(default_factory=dict)  # node → form
    mods: set[tuple[int, int]] = field(default_factory=set)  # (node, form)
    convs: set[tuple[int, int, int]] = field(default_factory=set)  # (node, after, before)
    speculable: set[int] = field(default_factory=set)
    region_kills: set[tuple[int, int]] = field(default_factory=set)  # (branch node, form)
    sample: dict[int, ir.Instruction] = field(default_factory=dict)
    language: str = "musimd"

    def block_of(self, node: int) -> str:
        """The label of the block a node belongs to."""
        return self.nodes[node][0]


def _ptx_candidate(instr: ir.Instruction, kernel: ir.Kernel) -> bool:
    """A PTX load that scalar replacement may copy, move and replace."""
    opcode = str(instr.attrs.get("opcode", ""))
    base = instr.args[0] if instr.args else None
    if instr.operator != opcode or instr.space not in PTX_SPACES:
        return False
    if any(q in opcode.split(".") for q in _UNSAFE_QUALIFIERS) or ".v" in opcode:
        return False
    if "symbol" in instr.attrs or instr.attrs.get("generic"):
        return False
    if not isinstance(base, ir.Var) or base.name not in kernel.registers or "@" in base.name:
        return False
    if instr.dest is None or instr.dest not in kernel.registers or "@" in instr.dest:
        return False
    if instr.group is None:
        return True  # made by a pass: one instruction
    group = [i for i in kernel.instructions() if i.group == instr.group]
    return len(group) == 1


def is_candidate(instr: ir.Instruction, kernel: ir.Kernel, language: str) -> bool:
    """Whether scalar replacement may replace this load, or insert copies of it."""
    if instr.kind != ir.LOAD or instr.dest is None or instr.guard is not None:
        return False
    if instr.implicit or len(instr.args) != 1:
        return False
    if language == "ptx":
        return _ptx_candidate(instr, kernel)
    return instr.space in ("shared", "local")


def _folding(instr: ir.Instruction) -> tuple[ir.Operand, int] | None:
    """`x = b + c`, `x = c + b` or `x = b - c` (μ-SIMD): (b, ±c)."""
    if instr.kind != ir.ASSIGN or instr.guard is not None or len(instr.args) != 2:
        return None
    a, b = instr.args
    base = (ir.Var, ir.Special)
    if instr.operator == "+" and isinstance(a, base) and isinstance(b, ir.Const):
        return a, int(b.value)
    if instr.operator == "+" and isinstance(b, base) and isinstance(a, ir.Const):
        return b, int(a.value)
    if instr.operator == "-" and isinstance(a, base) and isinstance(b, ir.Const):
        return a, -int(b.value)
    return None


def base_name(form: Form) -> str | None:
    """The name of the register a form's address is based on (None: a constant)."""
    base = form[1]
    return base.name if isinstance(base, ir.Var) else None


def _increment(instr: ir.Instruction, language: str) -> int | None:
    """c when the instruction is `b = b + c` or `b = b - c` with an integer constant."""
    if instr.kind != ir.ASSIGN or instr.guard is not None or instr.dest is None:
        return None
    if language == "ptx":
        opcode = str(instr.attrs.get("opcode", ""))
        parts = opcode.split(".")
        if len(parts) != 2 or parts[0] not in ("add", "sub") or \
                parts[1] not in ("s32", "u32", "s64", "u64"):
            return None
        operator = "+" if parts[0] == "add" else "-"
    else:
        operator = instr.operator
    if operator not in ("+", "-") or len(instr.args) != 2:
        return None
    a, b = instr.args
    if isinstance(a, ir.Var) and a.name == instr.dest and isinstance(b, ir.Const) \
            and isinstance(b.value, int):
        return int(b.value) if operator == "+" else -int(b.value)
    if operator == "+" and isinstance(b, ir.Var) and b.name == instr.dest and \
            isinstance(a, ir.Const) and isinstance(a.value, int):
        return int(a.value)
    return None


def form_of(instr: ir.Instruction, folded: dict[str, tuple[ir.Operand, int]]) -> Form:
    """The form of a candidate load (`folded`: μ-SIMD address registers of the block)."""
    (address,) = instr.args
    opcode = str(instr.attrs.get("opcode", "load"))
    if isinstance(address, ir.Const):
        return (instr.space, None, int(address.value), opcode)
    disp = int(instr.attrs.get("disp", 0))
    if isinstance(address, ir.Var) and address.name in folded:
        base, offset = folded[address.name]
        return (instr.space, base, offset + disp, opcode)
    return (instr.space, address, disp, opcode)


def _kills_memory(instr: ir.Instruction, space: str) -> bool:
    """Whether the instruction may write the memory a load from `space` reads, or makes
    other threads' writes visible."""
    if instr.kind in (ir.STORE, ir.ATOMIC):
        other = "generic" if instr.attrs.get("generic") else (instr.space or "generic")
        return other in (space, "generic")
    if instr.kind in (ir.BARRIER, ir.FENCE):
        return True
    found = traits.traits(instr)
    return traits.SIDE_EFFECTS in found or traits.BARRIER in found


def _nodes(kernel: ir.Kernel) -> tuple[list, dict[int, list[int]], set[int]]:
    """Statement nodes, their successors and the end nodes."""
    nodes: list[tuple[str, ir.Instruction | None]] = []
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for block in kernel.blocks:
        first[block.label] = len(nodes)
        nodes += [(block.label, i) for i in block.instructions] or [(block.label, None)]
        last[block.label] = len(nodes) - 1
    succ: dict[int, list[int]] = {n: [] for n in range(len(nodes))}
    ends: set[int] = set()
    for n in range(len(nodes) - 1):
        if nodes[n][0] == nodes[n + 1][0]:
            succ[n].append(n + 1)
    for i, block in enumerate(kernel.blocks):
        targets = list(dict.fromkeys(successor_labels(kernel, i)))
        if EXIT in targets or not targets:
            ends.add(last[block.label])
        succ[last[block.label]] += [first[t] for t in targets if t != EXIT]
    return nodes, succ, ends


def build_load_model(kernel: ir.Kernel, language: str) -> LoadModel:
    """The scalar-replacement model of a kernel whose critical edges are split."""
    nodes, succ, ends = _nodes(kernel)
    model = LoadModel(nodes, succ, ends, [], language=language)
    index: dict[Form, int] = {}
    folded: dict[str, tuple[ir.Operand, int]] = {}
    label = None
    for n, (block, instr) in enumerate(nodes):
        if block != label:
            folded, label = {}, block
        if instr is None:
            continue
        if is_candidate(instr, kernel, language):
            form = form_of(instr, folded if language == "musimd" else {})
            if form not in index:
                index[form] = len(model.forms)
                model.forms.append(form)
                model.sample[index[form]] = instr
            model.occurrences[n] = index[form]
        if instr.dest is not None:
            folded = {x: (b, c) for x, (b, c) in folded.items()
                      if instr.dest != x and ir.Var(instr.dest) != b}
            if language == "musimd" and (f := _folding(instr)) and f[0] != ir.Var(instr.dest):
                folded[instr.dest] = f
    if language == "musimd":
        model.speculable = set(range(len(model.forms)))
    for n, (_, instr) in enumerate(nodes):
        if instr is not None:
            _modifications(model, n, instr, index)
    return model


def _modifications(model: LoadModel, n: int, instr: ir.Instruction,
                   index: dict[Form, int]) -> None:
    """Record what node `n` (instruction `instr`) does to every form."""
    step = _increment(instr, model.language)
    for f, form in enumerate(model.forms):
        space, base, offset, opcode = form
        if _kills_memory(instr, space):
            model.mods.add((n, f))
            continue
        if base_name(form) is None or instr.dest != base_name(form):
            continue
        model.mods.add((n, f))
        if step is not None:
            before = index.get((space, base, offset + step, opcode))
            if before is not None:
                model.convs.add((n, f, before))


def load_facts(model: LoadModel, cdrnd: set[str], divergent: set[str],
               extra: str = "") -> str:
    """The ASP facts of rules/SCHEMA.md "Scalar replacement" for the model."""
    lines = [f"snode({n})." for n in range(len(model.nodes))]
    if model.nodes:
        lines.append("sstart(0).")
    lines += [f"send({n})." for n in sorted(model.ends)]
    lines += [f"ssucc({n},{m})." for n, ms in model.succ.items() for m in ms]
    lines += [f"form({f})." for f in range(len(model.forms))]
    lines += [f"occ({n},{f})." for n, f in sorted(model.occurrences.items())]
    lines += [f"mod({n},{f})." for n, f in sorted(model.mods)]
    lines += [f"conv({n},{a},{b})." for n, a, b in sorted(model.convs)]
    lines += [f"speculable({f})." for f in sorted(model.speculable)]
    lines += [f"rkill({n},{f})." for n, f in sorted(model.region_kills)]
    for n, (label, instr) in enumerate(model.nodes):
        if label in cdrnd:
            lines.append(f"cdrnd({n}).")
        if instr is not None and instr.kind == ir.BRANCH:
            lines.append(f"branch({n}).")
            if label in divergent:
                lines.append(f"divbranch({n}).")
    return "\n".join(lines) + "\n" + extra


def reconvergence_kills(kernel: ir.Kernel, model: LoadModel, divergent: set[str]) -> None:
    """Kill, at the first statement of the reconvergence point (immediate
    post-dominator) of each divergent branch, the forms of every space written inside
    the branch's region (`gpudiv.ir.cfg.branch_region`): the lanes on the other side ran
    those writes while a lane waited, between its earlier load and a later one (SIMT
    lock-step; a store by another warp without a barrier in between is a data race,
    which the model assumes away). The branch statement of such a region gets
    `region_kills` too: a load hoisted above it would not see the other side's writes."""
    cfg = build_cfg(kernel)
    blocks = {b.label: b for b in kernel.blocks}
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for n, (label, _) in enumerate(model.nodes):
        first.setdefault(label, n)
        last[label] = n
    for label in sorted(divergent):
        join = cfg.ipdom.get(label)
        if join is None or join == EXIT or join not in first or label not in cfg.graph:
            continue
        region = branch_region(cfg.graph, label, join)
        written = [i for b in region if b in blocks for i in blocks[b].instructions]
        node, branch = first[join], last[label]
        for f, form in enumerate(model.forms):
            if any(_kills_memory(i, form[0]) for i in written):
                model.mods.add((node, f))
                model.region_kills.add((branch, f))
                model.convs = {c for c in model.convs if c[0] != node}
