"""IR + SSA → ASP facts, the one interface between Python and the rules.

Each relation is documented in rules/SCHEMA.md; `RELATIONS` lists name and arity of every
relation emitted here so tests can check the two agree. All symbols are quoted strings;
integers that do not fit clingo's 32-bit integers are never emitted as numbers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping

from gpudiv import ir
from gpudiv.analyses.invariants import invariant_values
from gpudiv.analyses.launch_shape import BlockShape, derived_values, special_values
from gpudiv.ir.cfg import ENTRY, EXIT, ControlFlowGraph
from gpudiv.ir.operators import integer_bits, normalise, zero_extended_bits
from gpudiv.ir.ssa import SSAForm

RELATIONS: dict[str, int] = {
    "block": 1, "edge": 2, "entry": 1, "exit": 1, "block_order": 2, "ipdom": 2, "idom": 2,
    "sync_ipdom": 2, "doomed": 1,
    "loop": 1, "loop_block": 2, "loop_parent": 2, "loop_header": 2,
    "branch": 2, "branch_cond": 2, "uniform_hint": 1,
    "var": 2, "def_kind": 2, "def_line": 2, "def_block": 2, "operand": 2,
    "source": 2, "uniform_input": 1, "const": 2, "copy": 2,
    "phi": 2, "mu": 2, "eta": 2, "rejoin": 2, "rejoin_gate": 2, "invariant_value": 1,
    "load": 3, "load_arg": 3, "store": 3, "atomic": 2,
    "assign_op": 2, "op_bits": 2, "zero_extend": 2, "arg": 3, "arg_const": 3, "arg_big": 2,
    "phi_arg": 3, "back_edge": 2,
    "thread_id": 1, "lane_index": 1, "warp_index": 1,
    "instr_at": 3, "mem_read": 3, "mem_write": 3, "mem_disp": 2, "mem_size": 2,
    "mem_def": 2, "store_value": 2, "barrier": 1, "hidden_operands": 1,
    "branch_when": 3, "cmp_kind": 2, "pred_not": 2,
    "call_input": 1, "call_output": 1, "local_via": 2, "affine_input": 3,
}

# PTX integer comparison names (unsigned ones by their ordering) → cmp_kind/2.
PTX_COMPARISONS = {"lt": "lt", "le": "le", "gt": "gt", "ge": "ge", "eq": "eq", "ne": "ne",
                   "lo": "lt", "ls": "le", "hi": "gt", "hs": "ge"}

# Memory spaces of mem_read/mem_write: every space an instruction can read or write; the
# deadlock rules treat global, shared and generic ones as memory other threads can see.
MEMORY_KINDS = (ir.LOAD, ir.STORE, ir.ATOMIC)

# Special registers that are the thread index itself (affine: 1·tid + 0).
THREAD_ID_NAMES = ("tid", "%tid.x")

# clingo integers are 32-bit; keep a margin so rules can add small numbers safely.
INT_LIMIT = 2**30


def quote(text: str) -> str:
    """An ASP string constant for `text`."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _namer(namespace: str, instead: Mapping[str, str] | None = None
           ) -> Callable[[str], str]:
    """`quote` for names of blocks, loops and variables, with the namespace in front
    (and a variable of `instead` named by its value there: a folded copy by its root);
    each name is quoted once (a variable's name is in a dozen facts)."""
    quoted: dict[str, str] = {}
    instead = instead or {}

    def named(name: str) -> str:
        text = quoted.get(name)
        if text is None:
            text = quoted[name] = quote(namespace + instead.get(name, name))
        return text

    return named


def fits(value: int) -> bool:
    """Whether an integer can safely enter a rule as a number."""
    return -INT_LIMIT < value < INT_LIMIT


def _source_kind(var_kind: str, space: str | None, special_class: str | None) -> str | None:
    """Why a definition is a source of divergence, or None."""
    if var_kind == "special":
        return "special" if special_class == "divergent" else None
    if var_kind == "atomic":
        return "atomic"
    if var_kind == "load" and space == "local":
        return "local_load"
    if var_kind == "undef":
        return "undefined"
    if var_kind == ir.OPAQUE:
        return "opaque"
    return None


def graph_facts(cfg: ControlFlowGraph, namespace: str = "") -> list[str]:
    """The blocks and edges of a CFG, its virtual entry and exit, the program order of
    the source blocks and the immediate dominators (what rules/structure.lp reads), one
    atom per string."""
    q = _namer(namespace)
    out = [f"block({q(node)})" for node in cfg.graph.nodes]
    out += [f"edge({q(u)},{q(v)})" for u, v in cfg.graph.edges]
    out += [f"entry({q(ENTRY)})", f"exit({q(EXIT)})"]
    out += [f"block_order({q(b.label)},{n})" for n, b in enumerate(cfg.kernel.blocks)
            if b.label in cfg.graph]
    out += [f"idom({q(node)},{q(parent)})" for node, parent in cfg.idom.items()]
    return out


def kernel_facts(ssa: SSAForm, namespace: str = "",
                 shape: BlockShape | None = None,
                 relations: Collection[str] | None = None,
                 folded: Mapping[str, str] | None = None) -> list[str]:
    """All facts of one kernel, one atom per string (without the final dot); with
    `relations`, the facts of some other relations may be left out too (`facts_text`
    keeps only those; building the memory facts, def_kind/2, def_line/2 and the operands
    of assignments for analyses that never read them was a third of the facts time).

    `namespace` is put in front of every name of a block, loop or SSA variable (never in
    front of operators, kinds or spaces), so that the facts of several kernels can share
    one ground program without their names meeting (`gpudiv.analyses.driver`). A known
    block `shape` makes some special registers constant or warp-uniform
    (`gpudiv.analyses.launch_shape`). `folded` maps plain copies to their roots
    (`gpudiv.analyses.copies`): they have no facts of their own and their roots stand
    wherever they are read.
    """
    cfg = ssa.cfg
    kernel = cfg.kernel
    instrs = kernel.by_id()
    out: list[str] = []
    add = out.append
    q = _namer(namespace, folded)
    folded = folded or {}
    wanted = RELATIONS.keys() if relations is None else relations
    assigns = not ASSIGN_RELATIONS.isdisjoint(wanted)
    loads = not LOAD_RELATIONS.isdisjoint(wanted)
    shaped = special_values(shape, kernel.specials)
    derived = derived_values(ssa, shape)
    # A `.func` analysed on its own (call summaries): the inputs that differ between lanes
    # in the calling context analysed (none: only what the body itself makes differ).
    divergent_inputs = kernel.attrs.get("divergent_inputs", frozenset())
    constant_inputs = kernel.attrs.get("constant_inputs", {})  # ... the literal ones
    affine_inputs = kernel.attrs.get("affine_inputs", {})  # ... and the affine ones
    inputs = {instrs[n].dest: name for n, name in ssa.defs.items()
              if name is not None and instrs[n].operator == "call.input"
              } if "call_return" in kernel.attrs else {}
    out.extend(graph_facts(cfg, namespace))
    for node, parent in cfg.ipdom.items():
        add(f"ipdom({q(node)},{q(parent)})")
    for node, parent in cfg.sync_ipdom.items():
        add(f"sync_ipdom({q(node)},{q(parent)})")
    for node in sorted(cfg.doomed):
        add(f"doomed({q(node)})")
    for loop in cfg.loops.values():
        add(f"loop({q(loop.name)})")
        for header in loop.headers:
            add(f"loop_header({q(loop.name)},{q(header)})")
        if loop.parent:
            add(f"loop_parent({q(loop.name)},{q(loop.parent)})")
        for b in sorted(loop.blocks):
            add(f"loop_block({q(loop.name)},{q(b)})")
    for rejoin in cfg.rejoins.values():
        for branch in rejoin.branches:
            add(f"rejoin_gate({q(rejoin.block)},{q(branch)})")
    for source, header in back_edges(cfg):
        add(f"back_edge({q(source)},{q(header)})")
    for br in ssa.branches:
        add(f"branch({q(br.block)},{br.instruction})")
        if br.condition is not None:
            add(f"branch_cond({q(br.block)},{q(br.condition)})")
        term = instrs[br.instruction]
        if term.target is not None and term.operator in ("bz", "bnz"):
            add(f"branch_when({q(br.block)},{q(term.target)},{int(term.operator == 'bnz')})")
        if instrs[br.instruction].attrs.get("uniform_hint"):
            add(f"uniform_hint({q(br.block)})")
    for name in sorted(invariant_values(ssa)):
        add(f"invariant_value({q(name)})")
    for var in ssa.variables.values():
        if var.name in folded:
            continue
        name = q(var.name)
        add(f"var({name},{quote(var.source)})")
        if "def_kind" in wanted:
            add(f"def_kind({name},{quote(var.kind)})")
        if "def_line" in wanted:
            add(f"def_line({name},{var.loc.line})")
        add(f"def_block({name},{q(var.block)})")
        for operand in dict.fromkeys(var.operands):
            add(f"operand({name},{q(operand)})")
        instr = instrs[var.instruction] if var.instruction is not None else None
        special_class = kernel.specials.get(var.name) if var.kind == "special" else None
        known = shaped.get(var.name) if var.kind == "special" else None
        if known is not None and known.kind != "lane":
            special_class = "uniform"
            if known.kind == "constant":
                add(f"const({name},{known.value})")
        elif known is not None:
            add(f"lane_index({name})")
        if var.name in derived:
            kind = derived[var.name].kind
            add(f"warp_index({name})" if kind == "uniform" else f"lane_index({name})")
        why = _source_kind(var.kind, instr.space if instr else None, special_class)
        if instr is not None and instr.operator == "call.input":
            add(f"call_input({name})")
            # an input is what the calling context says: divergent, or a uniform input
            why = "input" if instr.dest in divergent_inputs else None
            coefficients = affine_inputs.get(instr.dest)
            if coefficients is not None:  # a2·tid² + a1·tid + ⊥: not uniform, not ⊥
                why = "input"
                for degree, value in zip((2, 1), coefficients, strict=True):
                    add(f"affine_input({name},{degree},{value})")
            elif why is None:
                add(f"uniform_input({name})")
                value = constant_inputs.get(instr.dest)
                if value is not None and fits(value):
                    add(f"const({name},{value})")
        if instr is not None and "affine" in instr.attrs:  # a call's known affine result
            for degree, value in enumerate(instr.attrs["affine"][::-1]):
                if value is not None:
                    add(f"affine_input({name},{degree},{value})")
        for pointer in instr.attrs.get("via_inputs", ()) if instr is not None else ():
            add(f"local_via({name},{q(inputs[pointer])})")
        if why is not None:
            add(f"source({name},{quote(why)})")
        if var.kind == "param" or (var.kind == "special" and special_class == "uniform"):
            add(f"uniform_input({name})")
        if var.kind == "special" and var.name in THREAD_ID_NAMES:
            add(f"thread_id({name})")
        if var.kind == "phi":
            add(f"phi({name},{q(var.block)})")
            if var.phi_kind == "mu":
                add(f"mu({name},{q(var.loop)})")
            for pred, value in var.incoming:
                add(f"phi_arg({name},{q(pred)},{q(value)})")
        if var.kind == "eta":
            add(f"eta({name},{q(var.loop)})")
        if var.kind == "rejoin":
            add(f"rejoin({name},{q(var.block)})")
        if instr is None:
            continue
        if instr.kind == ir.ASSIGN:
            if assigns:
                _assign_facts(ssa, instrs, var.instruction, name, add, q)
            if instr.implicit:
                add(f"hidden_operands({name})")
            kind = comparison_kind(instr)
            if kind is not None:
                add(f"cmp_kind({name},{quote(kind)})")
            if instr.operator == "not.pred" and var.operands:
                add(f"pred_not({name},{q(var.operands[0])})")
        if instr.kind == ir.ASSIGN and instr.operator == "copy":
            arg = instr.args[0]
            if isinstance(arg, ir.Const) and fits(arg.value):
                add(f"const({name},{arg.value})")
            elif var.operands:
                add(f"copy({name},{q(var.operands[0])})")
        elif instr.kind == ir.LOAD and loads:
            address = _operand_atom(ssa, instrs, var.instruction, 0, q)
            add(f"load({name},{quote(instr.space)},{address})")
            for index in range(len(instr.args)):
                operand = _operand_atom(ssa, instrs, var.instruction, index, q)
                add(f"load_arg({name},{index},{operand})")
        elif instr.kind == ir.ATOMIC:
            add(f"atomic({name},{quote(instr.space)})")
    for n in kernel.attrs.get("call_return", ()):  # a `.func` lowered on its own
        for name in dict.fromkeys(ssa.uses[n]):
            if name is not None:
                add(f"call_output({q(name)})")
    for n, instr in instrs.items() if "store" in wanted else ():
        if instr.kind == ir.STORE and ssa.instruction_block.get(n):
            add(f"store({n},{quote(instr.space)},{_operand_atom(ssa, instrs, n, 0, q)})")
    if not MEMORY_RELATIONS.isdisjoint(wanted):
        _memory_facts(ssa, instrs, add, q)
    return out


_INTEGER_TYPES = frozenset(f"{k}{w}" for k in "sub" for w in (8, 16, 32, 64))


def comparison_kind(instr: ir.Instruction) -> str | None:
    """The comparison of a PTX integer `setp` of two operands with one destination and no
    boolean combination (`setp.lo.u32` → "lt"), None for anything else (μ-SIMD
    comparisons have their own `assign_op/2` names)."""
    parts = str(instr.operator).split(".")
    if (parts[0] != "setp" or len(parts) != 3 or len(instr.args) != 2 or "|" in instr.text
            or parts[2] not in _INTEGER_TYPES):
        return None
    return PTX_COMPARISONS.get(parts[1])


def instruction_id(n: int) -> str:
    """The name of the instruction with id `n` in the memory facts (`"i17"`, before its
    namespace)."""
    return f"i{n}"


# The relations `_assign_facts` writes, and those of loads.
ASSIGN_RELATIONS = frozenset({"assign_op", "op_bits", "zero_extend", "arg", "arg_const",
                              "arg_big"})
LOAD_RELATIONS = frozenset({"load", "load_arg"})
# The relations `_memory_facts` writes.
MEMORY_RELATIONS = frozenset({"instr_at", "barrier", "mem_read", "mem_write", "mem_disp",
                              "mem_size", "mem_def", "store_value"})


def _memory_facts(ssa: SSAForm, instrs: dict[int, ir.Instruction], add, q) -> None:
    """`instr_at/3`, `mem_read/3`, `mem_write/3`, `mem_disp/2`, `mem_size/2`, `mem_def/2`,
    `store_value/2` and `barrier/1`: where memory instructions and barriers are and what
    they touch (read by rules/deadlock.lp)."""
    for block in ssa.cfg.kernel.blocks:
        for position, instr in enumerate(block.instructions):
            n = instr.id
            if (n not in ssa.instruction_block
                    or (instr.kind not in MEMORY_KINDS and instr.kind != ir.BARRIER)):
                continue
            _memory_instruction_facts(ssa, instrs, n, ssa.instruction_block[n], position,
                                      add, q)


def _memory_instruction_facts(ssa: SSAForm, instrs: dict[int, ir.Instruction], n: int,
                              block: str, position: int, add, q) -> None:
    """The memory facts of the instruction with id `n`, instruction `position` of `block`."""
    instr = instrs[n]
    name = q(instruction_id(n))
    add(f"instr_at({name},{q(block)},{position})")
    if instr.kind == ir.BARRIER:
        add(f"barrier({name})")
        return
    address = _address_atom(ssa, instrs, n, q)
    space = quote(instr.space or "generic")
    if instr.kind in (ir.LOAD, ir.ATOMIC):
        add(f"mem_read({name},{space},{address})")
    if instr.kind in (ir.STORE, ir.ATOMIC):
        add(f"mem_write({name},{space},{address})")
    disp = instr.attrs.get("disp", 0)
    if isinstance(disp, int) and fits(disp):
        add(f"mem_disp({name},{disp})")
    size = access_size(instr)
    if size is not None:
        add(f"mem_size({name},{size})")
    defined = ssa.defs.get(n) if instr.dest is not None and instr.kind != ir.STORE else None
    if defined:
        add(f"mem_def({name},{q(defined)})")
    if instr.kind == ir.STORE:
        values = ssa.uses[n][1:len(instr.args)]
        for used in dict.fromkeys(u for u in values if u is not None):
            add(f"store_value({name},{q(used)})")


def _address_atom(ssa: SSAForm, instrs: dict[int, ir.Instruction], n: int, q) -> str:
    """The base of a memory access: `"@sym"` for a PTX variable (`[sym+4]`), else the
    address operand as in `load/3`."""
    symbol = instrs[n].attrs.get("symbol")
    if isinstance(symbol, str):
        return q("@" + symbol)
    if not instrs[n].args:
        return "0"
    return _operand_atom(ssa, instrs, n, 0, q)


_TYPE_BITS = re.compile(r"^[busf](8|16|32|64|128)$")


def access_size(instr: ir.Instruction) -> int | None:
    """How many address units a memory access covers: 1 cell in μ-SIMD; for PTX, bytes
    from the opcode (`ld.global.v4.f32` → 16), None when the opcode does not say."""
    opcode = instr.attrs.get("opcode")
    if opcode is None and "disp" not in instr.attrs:  # μ-SIMD: one cell per address
        return 1
    if not isinstance(opcode, str):
        return None
    parts = opcode.split(".")
    lanes = 1
    bits = None
    for part in parts[1:]:
        if part in ("v2", "v4", "v8"):
            lanes = int(part[1:])
        match = _TYPE_BITS.match(part)
        if match:
            bits = int(match[1])
    if bits is None:
        return None
    return max(1, bits // 8) * lanes


def back_edges(cfg: ControlFlowGraph) -> list[tuple[str, str]]:
    """Edges into a header of a loop from a block of that loop (they close every cycle)."""
    edges = []
    for loop in cfg.loops.values():
        for header in loop.headers:
            edges += [(p, header) for p in cfg.graph.predecessors(header) if p in loop.blocks]
    return sorted(set(edges))


def _assign_facts(ssa: SSAForm, instrs: dict[int, ir.Instruction], instruction: int, name: str,
                  add, q) -> None:
    """`assign_op/2` (normalised operator) and the ordered operands of an assignment."""
    instr = instrs[instruction]
    add(f"assign_op({name},{quote(normalise(instr))})")
    bits = integer_bits(instr)
    if bits is not None:
        add(f"op_bits({name},{bits})")
    extended = zero_extended_bits(instr)
    if extended is not None:
        add(f"zero_extend({name},{extended})")
    for index, value in enumerate(instr.args):
        used = ssa.uses[instruction][index]
        if used is not None:
            add(f"arg({name},{index},{q(used)})")
        elif isinstance(value, ir.Const) and fits(value.value):
            add(f"arg_const({name},{index},{value.value})")
        else:
            add(f"arg_big({name},{index})")


def _operand_atom(ssa: SSAForm, instrs: dict[int, ir.Instruction], instruction: int,
                  arg: int, q) -> str:
    """An operand as a term: the SSA name (quoted) or the integer, or `big` if too large."""
    name = ssa.uses[instruction][arg]
    if name is not None:
        return q(name)
    value = instrs[instruction].args[arg]
    return str(value.value) if isinstance(value, ir.Const) and fits(value.value) else "big"


def facts_text(ssa: SSAForm, namespace: str = "",
               relations: Collection[str] | None = None,
               shape: BlockShape | None = None,
               folded: Mapping[str, str] | None = None) -> str:
    """The facts of one kernel as one ASP program text (only `relations`, when given),
    for a launch with the given block shape (None: any), plain copies folded into their
    roots (`folded`, see `kernel_facts`)."""
    atoms = kernel_facts(ssa, namespace, shape, relations, folded)
    if relations is None:
        return "".join(f"{atom}.\n" for atom in atoms)
    return "".join(f"{atom}.\n" for atom in atoms if atom[:atom.find("(")] in relations)
