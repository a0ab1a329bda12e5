"""IR + SSA → ASP facts, the one interface between Python and the rules.

Each relation is documented in rules/SCHEMA.md; `RELATIONS` lists name and arity of every
relation emitted here so tests can check the two agree. A fact is a tuple `(relation,
*arguments)`: a `str` argument is a string symbol (quoted in the text), an `int` a number,
a `Constant` a bare constant (`big`); integers that do not fit clingo's 32-bit integers
are never emitted as numbers. The analyses hand the tuples to clingo directly
(`gpudiv.analyses.clingo_lib.Control.add_facts`); `facts_text` writes them as a program.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping

from gpudiv import ir
from gpudiv.analyses.invariants import invariant_values
from gpudiv.analyses.launch_shape import BlockShape, derived_values, special_values
from gpudiv.ir.cfg import ENTRY, EXIT, ControlFlowGraph
from gpudiv.ir.operators import integer_bits, normalise, zero_extended_bits
from gpudiv.ir.ssa import SSAForm
from gpudiv.lang.ptx.forms import SCALAR_TYPE_BITS

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


class Constant(str):
    """A fact argument written as a bare constant (`big`), not as a string."""


BIG = Constant("big")  # an integer operand too large for clingo's numbers


def quote(text: str) -> str:
    """An ASP string constant for `text` (clingo's escapes: backslash, quote, newline)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def atom_texts(facts: Iterable[tuple]) -> list[str]:
    """Each fact as an atom in ASP syntax (without the final dot)."""
    quoted: dict[str, str] = {}

    def argument(value: object) -> str:
        if type(value) is str:
            text = quoted.get(value)
            if text is None:
                text = quoted[value] = quote(value)
            return text
        return str(value)

    return [f"{fact[0]}({','.join(map(argument, fact[1:]))})" if len(fact) > 1 else fact[0]
            for fact in facts]


def _namer(namespace: str, instead: Mapping[str, str] | None = None
           ) -> Callable[[str], str]:
    """Names of blocks, loops and variables with the namespace in front (and a variable
    of `instead` named by its value there: a folded copy by its root); one string per
    name (a variable's name is in a dozen facts)."""
    named_as: dict[str, str] = {}
    instead = instead or {}

    def named(name: str) -> str:
        text = named_as.get(name)
        if text is None:
            text = named_as[name] = namespace + instead.get(name, name)
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


def graph_facts(cfg: ControlFlowGraph, namespace: str = "",
                wanted: Collection[str] = RELATIONS.keys()) -> list[tuple]:
    """The blocks and edges of a CFG, its virtual entry and exit, the program order of
    the source blocks and the immediate dominators (what rules/structure.lp reads);
    only the `wanted` relations."""
    q = _namer(namespace)
    out: list[tuple] = []
    if "block" in wanted:
        out += [("block", q(node)) for node in cfg.graph.nodes]
    if "edge" in wanted:
        out += [("edge", q(u), q(v)) for u, v in cfg.graph.edges]
    out += [("entry", q(ENTRY)), ("exit", q(EXIT))]
    if "block_order" in wanted:
        out += [("block_order", q(b.label), n) for n, b in enumerate(cfg.kernel.blocks)
                if b.label in cfg.graph]
    if "idom" in wanted:
        out += [("idom", q(node), q(parent)) for node, parent in cfg.idom.items()]
    return out


def kernel_facts(ssa: SSAForm, namespace: str = "",
                 shape: BlockShape | None = None,
                 relations: Collection[str] | None = None,
                 folded: Mapping[str, str] | None = None) -> list[tuple]:
    """All facts of one kernel (tuples: the module's docstring); with
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
    out: list[tuple] = []
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
    out.extend(graph_facts(cfg, namespace, wanted))
    for node, parent in cfg.ipdom.items():
        add(("ipdom", q(node), q(parent)))
    for node, parent in cfg.sync_ipdom.items():
        add(("sync_ipdom", q(node), q(parent)))
    for node in sorted(cfg.doomed):
        add(("doomed", q(node)))
    for loop in cfg.loops.values():
        add(("loop", q(loop.name)))
        for header in loop.headers:
            add(("loop_header", q(loop.name), q(header)))
        if loop.parent:
            add(("loop_parent", q(loop.name), q(loop.parent)))
        for b in sorted(loop.blocks):
            add(("loop_block", q(loop.name), q(b)))
    for rejoin in cfg.rejoins.values():
        for branch in rejoin.branches:
            add(("rejoin_gate", q(rejoin.block), q(branch)))
    for source, header in back_edges(cfg):
        add(("back_edge", q(source), q(header)))
    for br in ssa.branches:
        add(("branch", q(br.block), br.instruction))
        if br.condition is not None:
            add(("branch_cond", q(br.block), q(br.condition)))
        term = instrs[br.instruction]
        if term.target is not None and term.operator in ("bz", "bnz"):
            add(("branch_when", q(br.block), q(term.target), int(term.operator == 'bnz')))
        if instrs[br.instruction].attrs.get("uniform_hint"):
            add(("uniform_hint", q(br.block)))
    for name in sorted(invariant_values(ssa)):
        add(("invariant_value", q(name)))
    for var in ssa.variables.values():
        if var.name in folded:
            continue
        name = q(var.name)
        add(("var", name, var.source))
        if "def_kind" in wanted:
            add(("def_kind", name, var.kind))
        if "def_line" in wanted:
            add(("def_line", name, var.loc.line))
        add(("def_block", name, q(var.block)))
        for operand in dict.fromkeys(var.operands):
            add(("operand", name, q(operand)))
        instr = instrs[var.instruction] if var.instruction is not None else None
        special_class = kernel.specials.get(var.name) if var.kind == "special" else None
        known = shaped.get(var.name) if var.kind == "special" else None
        if known is not None and known.kind != "lane":
            special_class = "uniform"
            if known.kind == "constant":
                add(("const", name, known.value))
        elif known is not None:
            add(("lane_index", name))
        if var.name in derived:
            kind = derived[var.name].kind
            add(("warp_index" if kind == "uniform" else "lane_index", name))
        why = _source_kind(var.kind, instr.space if instr else None, special_class)
        if instr is not None and instr.operator == "call.input":
            add(("call_input", name))
            # an input is what the calling context says: divergent, or a uniform input
            why = "input" if instr.dest in divergent_inputs else None
            coefficients = affine_inputs.get(instr.dest)
            if coefficients is not None:  # a2·tid² + a1·tid + ⊥: not uniform, not ⊥
                why = "input"
                for degree, value in zip((2, 1), coefficients, strict=True):
                    add(("affine_input", name, degree, value))
            elif why is None:
                add(("uniform_input", name))
                value = constant_inputs.get(instr.dest)
                if value is not None and fits(value):
                    add(("const", name, value))
        if instr is not None and "affine" in instr.attrs:  # a call's known affine result
            for degree, value in enumerate(instr.attrs["affine"][::-1]):
                if value is not None:
                    add(("affine_input", name, degree, value))
        for pointer in instr.attrs.get("via_inputs", ()) if instr is not None else ():
            add(("local_via", name, q(inputs[pointer])))
        if why is not None:
            add(("source", name, why))
        if var.kind == "param" or (var.kind == "special" and special_class == "uniform"):
            add(("uniform_input", name))
        if var.kind == "special" and var.name in THREAD_ID_NAMES:
            add(("thread_id", name))
        if var.kind == "phi":
            add(("phi", name, q(var.block)))
            if var.phi_kind == "mu":
                add(("mu", name, q(var.loop)))
            for pred, value in var.incoming:
                add(("phi_arg", name, q(pred), q(value)))
        if var.kind == "eta":
            add(("eta", name, q(var.loop)))
        if var.kind == "rejoin":
            add(("rejoin", name, q(var.block)))
        if instr is None:
            continue
        if instr.kind == ir.ASSIGN:
            if assigns:
                _assign_facts(ssa, instrs, var.instruction, name, add, q)
            if instr.implicit:
                add(("hidden_operands", name))
            kind = comparison_kind(instr)
            if kind is not None:
                add(("cmp_kind", name, kind))
            if instr.operator == "not.pred" and var.operands:
                add(("pred_not", name, q(var.operands[0])))
        if instr.kind == ir.ASSIGN and instr.operator == "copy":
            arg = instr.args[0]
            if isinstance(arg, ir.Const) and fits(arg.value):
                add(("const", name, arg.value))
            elif var.operands:
                add(("copy", name, q(var.operands[0])))
        elif instr.kind == ir.LOAD and loads:
            address = _operand_atom(ssa, instrs, var.instruction, 0, q)
            add(("load", name, instr.space, address))
            for index in range(len(instr.args)):
                operand = _operand_atom(ssa, instrs, var.instruction, index, q)
                add(("load_arg", name, index, operand))
        elif instr.kind == ir.ATOMIC:
            add(("atomic", name, instr.space))
    for n in kernel.attrs.get("call_return", ()):  # a `.func` lowered on its own
        for name in dict.fromkeys(ssa.uses[n]):
            if name is not None:
                add(("call_output", q(name)))
    for n, instr in instrs.items() if "store" in wanted else ():
        if instr.kind == ir.STORE and ssa.instruction_block.get(n):
            add(("store", n, instr.space, _operand_atom(ssa, instrs, n, 0, q)))
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
    add(("instr_at", name, q(block), position))
    if instr.kind == ir.BARRIER:
        add(("barrier", name))
        return
    address = _address_atom(ssa, instrs, n, q)
    space = instr.space or "generic"
    if instr.kind in (ir.LOAD, ir.ATOMIC):
        add(("mem_read", name, space, address))
    if instr.kind in (ir.STORE, ir.ATOMIC):
        add(("mem_write", name, space, address))
    disp = instr.attrs.get("disp", 0)
    if isinstance(disp, int) and fits(disp):
        add(("mem_disp", name, disp))
    size = access_size(instr)
    if size is not None:
        add(("mem_size", name, size))
    defined = ssa.defs.get(n) if instr.dest is not None and instr.kind != ir.STORE else None
    if defined:
        add(("mem_def", name, q(defined)))
    if instr.kind == ir.STORE:
        values = ssa.uses[n][1:len(instr.args)]
        for used in dict.fromkeys(u for u in values if u is not None):
            add(("store_value", name, q(used)))


def _address_atom(ssa: SSAForm, instrs: dict[int, ir.Instruction], n: int, q
                  ) -> str | int:
    """The base of a memory access: `"@sym"` for a PTX variable (`[sym+4]`), else the
    address operand as in `load/3`."""
    symbol = instrs[n].attrs.get("symbol")
    if isinstance(symbol, str):
        return q("@" + symbol)
    if not instrs[n].args:
        return 0
    return _operand_atom(ssa, instrs, n, 0, q)


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
        bits = SCALAR_TYPE_BITS.get(part, bits)
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
    add(("assign_op", name, normalise(instr)))
    bits = integer_bits(instr)
    if bits is not None:
        add(("op_bits", name, bits))
    extended = zero_extended_bits(instr)
    if extended is not None:
        add(("zero_extend", name, extended))
    for index, value in enumerate(instr.args):
        used = ssa.uses[instruction][index]
        if used is not None:
            add(("arg", name, index, q(used)))
        elif isinstance(value, ir.Const) and fits(value.value):
            add(("arg_const", name, index, value.value))
        else:
            add(("arg_big", name, index))


def _operand_atom(ssa: SSAForm, instrs: dict[int, ir.Instruction], instruction: int,
                  arg: int, q) -> str | int:
    """An operand as a term: the SSA name (a string) or the integer, or `big` if too
    large."""
    name = ssa.uses[instruction][arg]
    if name is not None:
        return q(name)
    value = instrs[instruction].args[arg]
    return value.value if isinstance(value, ir.Const) and fits(value.value) else BIG


def facts_of(ssa: SSAForm, namespace: str = "",
             relations: Collection[str] | None = None,
             shape: BlockShape | None = None,
             folded: Mapping[str, str] | None = None) -> list[tuple]:
    """The facts of one kernel (only `relations`, when given), for a launch with the given
    block shape (None: any), plain copies folded into their roots (`folded`, see
    `kernel_facts`)."""
    facts = kernel_facts(ssa, namespace, shape, relations, folded)
    return facts if relations is None else [f for f in facts if f[0] in relations]


def program_text(facts: Iterable[tuple]) -> str:
    """Facts as an ASP program, one per line."""
    return "".join(f"{atom}.\n" for atom in atom_texts(facts))


def facts_text(ssa: SSAForm, namespace: str = "",
               relations: Collection[str] | None = None,
               shape: BlockShape | None = None,
               folded: Mapping[str, str] | None = None) -> str:
    """`facts_of` as one ASP program text."""
    return program_text(facts_of(ssa, namespace, relations, shape, folded))
