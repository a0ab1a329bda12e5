"""Gated SSA: φ at (pruned) iterated dominance frontiers, η at loop exits (LCSSA), and
rejoin copies where lanes of different iterations of a cycle meet inside it.

Every φ knows what gates it: a μ merges the entry value of a loop with its loop-carried
values at the loop header; a γ merges values at a join of branches (which branches is a
property the rules derive: `join/2` in rules/cfg.lp); an η is the copy of a loop-defined
value on the loop's dedicated exit block, gated by the loop's exits. Because every value
used outside its loop goes through an η, one class holds for an SSA variable at all its
uses (Sampaio 2013 §3.3; the thesis builds the same form with Tu & Padua's algorithm).
A rejoin copy is the same idea inside a cycle: lanes split by a branch may go round the
cycle a different number of times before they meet at the branch's post-dominator, so a
value of the cycle read there is a copy gated by that branch (docs/design.md, "Cycles").
"""

from __future__ import annotations

from gpudiv import ir
from gpudiv.ir.cfg import ENTRY, EXIT, CFGLimit, ControlFlowGraph
from gpudiv.ir.dominators import IndexedGraph, frontiers_by_number
from gpudiv.ir.record import Record


class SSAVar(Record):
    """One SSA variable: where and how it is defined, and which SSA variables it reads."""

    name: str
    source: str
    kind: str
    block: str
    loc: ir.Loc
    operands: list[str]
    incoming: list[tuple[str, str]]
    instruction: int | None
    loop: str | None
    phi_kind: str | None

    __slots__ = ("name", "source", "kind", "block", "loc", "operands", "incoming", "instruction",
                 "loop", "phi_kind")

    def __init__(self, name: str, source: str, kind: str, block: str, loc: ir.Loc,
                       operands: list[str] | None = None,
                       incoming: list[tuple[str, str]] | None = None,
                       instruction: int | None = None, loop: str | None = None,
                       phi_kind: str | None = None) -> None:
        self.name = name
        self.source = source
        self.kind = kind
        self.block = block
        self.loc = loc
        self.operands = [] if operands is None else operands
        self.incoming = [] if incoming is None else incoming
        self.instruction = instruction
        self.loop = loop
        self.phi_kind = phi_kind


class Branch(Record):
    """A conditional branch: its block, instruction id and condition (SSA name or None)."""

    block: str
    instruction: int
    condition: str | None
    loc: ir.Loc

    def __init__(self, block: str, instruction: int, condition: str | None, loc: ir.Loc) -> None:
        self.block = block
        self.instruction = instruction
        self.condition = condition
        self.loc = loc


class SSAForm(Record):
    """The SSA view of one kernel over its CFG."""

    cfg: ControlFlowGraph
    variables: dict[str, SSAVar]
    # Keyed by instruction id (`ir.Instruction.id`). `uses[i]` has one entry per operand
    # of `reads`: the arguments first (aligned with `args`), then implicit reads and the
    # guard.
    uses: dict[int, list[str | None]]
    defs: dict[int, str | None]
    phis: dict[str, list[str]]
    branches: list[Branch]
    undefined: list[tuple[str, ir.Loc]]
    instruction_block: dict[int, str]

    def __init__(self, cfg: ControlFlowGraph, variables: dict[str, SSAVar],
                       uses: dict[int, list[str | None]], defs: dict[int, str | None],
                       phis: dict[str, list[str]], branches: list[Branch],
                       undefined: list[tuple[str, ir.Loc]],
                       instruction_block: dict[int, str]) -> None:
        self.cfg = cfg
        self.variables = variables
        self.uses = uses
        self.defs = defs
        self.phis = phis
        self.branches = branches
        self.undefined = undefined
        self.instruction_block = instruction_block

    def use_of(self, instruction: int, arg: int) -> str | None:
        """SSA name read by operand `arg` of the instruction with id `instruction`."""
        return self.uses[instruction][arg]


def _block_statements(cfg: ControlFlowGraph, number: dict[str, int]) -> list[range]:
    """Instruction numbers (program order) of each block of the CFG by block number, as a
    range (a list held an int object per instruction)."""
    statements = [range(0)] * len(number)
    index = 0
    for block in cfg.kernel.blocks:
        end = index + len(block.instructions)
        found = number.get(block.label)
        if found is not None:  # (not a block removed as unreachable)
            statements[found] = range(index, end)
        index = end
    return statements


def _block_uses(instrs: list[ir.Instruction], statements: list[range]
                ) -> tuple[dict[str, list[int]], dict[str, set[int]]]:
    """In one pass over the instructions: the blocks (by number) where each source
    variable has an upward-exposed use (a read before any definition in the block: it is
    live on entry there), and the blocks whose instructions define each source variable
    (a second pass for the definitions went through every instruction of a large kernel
    again)."""
    exposed: dict[str, list[int]] = {}
    def_blocks: dict[str, set[int]] = {}
    defined: set[str] = set()  # sets reused, cleared per block: a set per block was memory
    read_here: set[str] = set()
    var_type = ir.Var
    for block, numbers in enumerate(statements):
        defined.clear()
        read_here.clear()
        for n in numbers:
            instr = instrs[n]
            for arg in instr.reads:  # (`used_vars` without its list)
                if type(arg) is var_type:
                    name = arg.name
                    if name not in defined and name not in read_here:
                        read_here.add(name)
                        blocks = exposed.get(name)
                        if blocks is None:
                            exposed[name] = [block]
                        else:
                            blocks.append(block)
            dest = instr.dest
            if dest is not None and dest not in defined:
                defined.add(dest)
                blocks = def_blocks.get(dest)
                if blocks is None:
                    def_blocks[dest] = {block}
                else:
                    blocks.add(block)
    return exposed, def_blocks


_NO_BLOCKS: frozenset[int] = frozenset()


def _liveness(predecessors: list[list[int]], exposed: dict[str, list[int]],
              def_blocks: dict[str, set[int]], wanted: bytearray
              ) -> tuple[dict[int, set[str]], dict[str, int]]:
    """The live-in source variables of the `wanted` blocks (only those that have one), and
    in how many wanted blocks each variable is live, from the blocks where each variable
    has an upward-exposed use (`_block_uses`); blocks by number.

    A backward may-analysis, one variable at a time: its upward-exposed uses are followed
    backwards through the predecessors until a block that defines it (`def_blocks`), so
    every (block, variable) pair is reached once. Iterating the equations over all blocks
    until nothing changed redid every live set once per loop level and copied it each
    time (0.99 s against 0.42 s on a 100,000-instruction loop nest). Only the blocks where
    SSA construction asks for liveness keep a live set (joins, where a φ may go; loop
    exits; rejoin points): a set per block was most of the memory of SSA construction,
    and memory is what makes a large kernel slower per block.

    Every block of a CFG that `build_cfg` made is reachable from the entry but the exit,
    which has no statements and precedes no block: a walk needs no reachability test."""
    live_in: dict[int, set[str]] = {}
    live_blocks: dict[str, int] = {}
    for name, uses in exposed.items():
        defining = def_blocks.get(name, _NO_BLOCKS)
        live = set(uses)  # the blocks where `name` is live on entry
        work = uses[:]
        while work:
            for pred in predecessors[work.pop()]:
                if pred not in live and pred not in defining:
                    live.add(pred)
                    work.append(pred)
        count = 0
        for block in live:
            if wanted[block]:
                count += 1
                names = live_in.get(block)
                if names is None:
                    live_in[block] = {name}
                else:
                    names.add(name)
        if count:
            live_blocks[name] = count
    return live_in, live_blocks


def _liveness_wanted(cfg: ControlFlowGraph, numbered: IndexedGraph) -> bytearray:
    """Whether SSA construction reads the live-in variables of each block, by number:
    joins (the blocks of two predecessors or more, the only ones in a dominance
    frontier), dedicated loop exits (η copies) and rejoin points (rejoin copies)."""
    wanted = bytearray(len(preds) > 1 for preds in numbered.predecessors)
    number = numbered.number
    for exit_blocks in cfg.loop_exits.values():
        for label in exit_blocks:
            wanted[number[label]] = True
    for label in cfg.rejoins:
        wanted[number[label]] = True
    return wanted


def _loop_blocks(cfg: ControlFlowGraph, number: dict[str, int]) -> dict[str, set[int]]:
    """The blocks of each loop, by number."""
    return {name: {number[label] for label in loop.blocks} for name, loop in cfg.loops.items()}


def _place_etas(cfg: ControlFlowGraph, number: dict[str, int],
                loop_blocks: dict[str, set[int]], def_blocks: dict[str, set[int]],
                live_in: dict[int, set[str]]) -> dict[str, list[tuple[str, str]]]:
    """(loop, variable) η copies at the top of each dedicated loop-exit block
    (`def_blocks`: the blocks whose instructions define each variable)."""
    etas: dict[str, list[tuple[str, str]]] = {}
    for loop_name, exit_blocks in cfg.loop_exits.items():
        blocks = loop_blocks[loop_name]
        for exit_block in exit_blocks:
            for var in sorted(live_in.get(number[exit_block], ())):
                if not def_blocks.get(var, _NO_BLOCKS).isdisjoint(blocks):
                    etas.setdefault(exit_block, []).append((loop_name, var))
    return etas


def _with_copies(def_blocks: dict[str, set[int]], number: dict[str, int],
                 placed: dict[str, list[tuple[str, str]]]) -> dict[str, set[int]]:
    """`def_blocks` and the blocks of (gate, variable) copies such as η and rejoin copies
    placed at the top of blocks (copying only the sets that grow)."""
    if not placed:
        return def_blocks
    merged = dict(def_blocks)
    grown: set[str] = set()
    for label, pairs in placed.items():
        for _, var in pairs:
            if var not in grown:
                grown.add(var)
                merged[var] = set(merged.get(var, ()))
            merged[var].add(number[label])
    return merged


def _place_rejoins(cfg: ControlFlowGraph, number: dict[str, int],
                   loop_blocks: dict[str, set[int]], live_in: dict[int, set[str]],
                   def_blocks: dict[str, set[int]],
                   phis: dict[str, list[str]]) -> dict[str, list[tuple[str, str]]]:
    """(loop, variable) rejoin copies at the top of each rejoin point (`cfg.Rejoin`): every
    variable live there that its cycle defines, by an instruction, an η or a φ."""
    in_phis: dict[str, set[int]] = {}
    for label, names in phis.items():
        for var in names:
            in_phis.setdefault(var, set()).add(number[label])
    rejoins: dict[str, list[tuple[str, str]]] = {}
    for label, rejoin in cfg.rejoins.items():
        blocks = loop_blocks[rejoin.loop]
        for var in sorted(live_in.get(number[label], ())):
            if not (def_blocks.get(var, _NO_BLOCKS).isdisjoint(blocks)
                    and in_phis.get(var, _NO_BLOCKS).isdisjoint(blocks)):
                rejoins.setdefault(label, []).append((rejoin.loop, var))
    return rejoins


def _place_phis(nodes: list[str], frontier: dict[int, list[int]],
                def_blocks: dict[str, set[int]], live_in: dict[int, set[str]],
                live_blocks: dict[str, int]) -> dict[str, list[str]]:
    """Source variables that need a φ at each block (pruned by liveness; `live_blocks`:
    in how many of the blocks that `_liveness` keeps live sets of each variable is live,
    a bound on its φs; `frontier`: each block's dominance frontier; blocks by number,
    `nodes` their labels).

    A variable live on entry to no block (a temporary used where it is defined) needs no
    φ, and its walk over the iterated frontier is skipped: in a nest of n `if`s each
    condition's frontier is the n joins around it, which made this quadratic."""
    phis: dict[int, list[str]] = {}
    for var, blocks in def_blocks.items():
        unplaced = live_blocks.get(var, 0)  # blocks where a φ of var may still be needed
        if not unplaced:
            continue
        work = list(blocks)
        placed: set[int] = set()
        while work and unplaced:
            b = work.pop()
            for y in frontier.get(b, ()):
                if y in placed:
                    continue
                placed.add(y)
                if var in live_in.get(y, ()):
                    phis.setdefault(y, []).append(var)
                    unplaced -= 1
                if y not in blocks:
                    work.append(y)
    # each block's φs in name order (sorting each, not all)
    return {nodes[block]: sorted(names) for block, names in phis.items()}


class _Renamer:
    """Walks the dominator tree and gives every definition a fresh SSA name."""

    def __init__(self, cfg: ControlFlowGraph, instrs: list[ir.Instruction]):
        self.cfg = cfg
        self.instrs = instrs
        self.variables: dict[str, SSAVar] = {}
        self.stacks: dict[str, list[str]] = {}
        self.counters: dict[str, int] = {}
        self.undefined: dict[str, ir.Loc] = {}
        kernel = cfg.kernel
        for p in kernel.params:
            self._define(p, SSAVar(p, p, "param", ENTRY, kernel.loc), fresh=False)
        for name in kernel.specials:
            self.variables[name] = SSAVar(name, name, "special", ENTRY, kernel.loc)

    def _define(self, source: str, var: SSAVar, fresh: bool = True) -> str:
        if fresh:
            self.counters[source] = self.counters.get(source, 0) + 1
            var.name = f"{source}#{self.counters[source]}"
        self.variables[var.name] = var
        self.stacks.setdefault(source, []).append(var.name)
        return var.name

    def current(self, source: str, loc: ir.Loc) -> str:
        """The SSA name that reaches this point (an `undef` variable when none does)."""
        stack = self.stacks.get(source)
        if stack:
            return stack[-1]
        name = f"{source}#undef"
        if name not in self.variables:
            self.variables[name] = SSAVar(name, source, "undef", ENTRY, loc)
            self.undefined[source] = loc
        return name


_NONE: tuple = ()  # what a block without φs, η or rejoin copies has of them


class _RenameWalk:
    """The renaming walk over the dominator tree: SSA names of every read and definition,
    φ, η and rejoin copies at the top of blocks, and the φ operands from each predecessor.

    Per block it allocates only what the block has (a kernel of many small blocks spent
    much of its time, and the memory that makes a large kernel slower per block, on empty
    lists of copies and pushed names)."""

    def __init__(self, cfg: ControlFlowGraph, instrs: list[ir.Instruction],
                 statements: list[range], renamer: _Renamer,
                 phi_sources: dict[str, list[str]], etas: dict[str, list[tuple[str, str]]],
                 rejoins: dict[str, list[tuple[str, str]]]) -> None:
        self.cfg = cfg
        self.instrs = instrs
        self.statements = statements
        self.renamer = renamer
        self.phi_sources = phi_sources
        self.etas = etas
        self.rejoins = rejoins
        self.uses: list[list[str | None] | None] = [None] * len(instrs)
        self.defs: list[str | None] = [None] * len(instrs)
        self.instruction_block = [""] * len(instrs)
        self.phis: dict[str, list[str]] = {}
        self.pending_phis: dict[str, list[SSAVar]] = {}
        # φ operands: the value reaching the end of each predecessor, per (φ block, source
        # variable), attached once the walk is over.
        self.incoming: dict[tuple[str, str], list[tuple[str, str]]] = {}
        self.block_locs = {b.label: b.loc for b in cfg.kernel.blocks}
        self.headers = {h: lp for lp in cfg.loops.values() for h in lp.headers}

    def block_loc(self, label: str) -> ir.Loc:
        """Where a block is (a synthetic loop exit: its target)."""
        return self.block_locs.get(self.cfg.synthetic.get(label, label), self.cfg.kernel.loc)

    def children(self) -> list[list[int] | None]:
        """The dominator tree's children of each block, by number, in block order: the
        numbers follow the graph's nodes, which `build_cfg` adds as ENTRY, EXIT, then the
        blocks in order; EXIT comes last (not sorted)."""
        numbered, idom = self.cfg.numbering()
        exit_number = numbered.number[EXIT]
        children: list[list[int] | None] = [None] * len(idom)
        for node in (*range(exit_number), *range(exit_number + 1, len(idom)), exit_number):
            parent = idom[node]
            if parent >= 0:
                kids = children[parent]
                if kids is None:
                    children[parent] = [node]
                else:
                    kids.append(node)
        return children

    def run(self) -> None:
        """Walk the dominator tree from ENTRY (pre-order, children in block order), by
        block number (a walk of a large kernel by label spent its time in dicts keyed by
        labels)."""
        children = self.children()
        numbered = self.cfg.numbering()[0]
        nodes, number, successors = numbered.nodes, numbered.number, numbered.successors
        statements = self.statements
        has_phis = bytearray(len(nodes))
        for label in self.phi_sources:
            has_phis[number[label]] = True
        has_copies = has_phis[:]
        for label in (*self.etas, *self.rejoins):
            has_copies[number[label]] = True
        stacks = self.renamer.stacks
        stack: list[tuple[int, list[str] | None]] = [(number[ENTRY], None)]
        while stack:
            block, pushed = stack.pop()
            if pushed is not None:  # leaving the block: its definitions go out of scope
                for source in pushed:
                    stacks[source].pop()
                continue
            label = nodes[block]
            pushed = self.enter_copies(label) if has_copies[block] else []
            self.rename_statements(label, statements[block], pushed)
            for succ in successors[block]:
                if has_phis[succ]:
                    self.feed_phis(label, nodes[succ])
            stack.append((block, pushed))
            kids = children[block]
            if kids:
                stack.extend((child, None) for child in reversed(kids))
        for label, block_phis in self.pending_phis.items():
            for var in block_phis:
                var.incoming = self.incoming.get((label, var.source), [])
                var.operands = [v for _, v in var.incoming]

    def enter_copies(self, label: str) -> list[str]:
        """Define the block's φs, then its η and rejoin copies; the sources pushed."""
        renamer = self.renamer
        pushed: list[str] = []
        loc = self.block_loc(label)
        header_of = self.headers.get(label)
        block_phis: list[SSAVar] = []
        for source in self.phi_sources.get(label, _NONE):
            var = SSAVar("", source, "phi", label, loc, phi_kind="gamma")
            if header_of is not None:
                var.phi_kind, var.loop = "mu", header_of.name
            renamer._define(source, var)
            pushed.append(source)
            block_phis.append(var)
        self.pending_phis[label] = block_phis
        names = [v.name for v in block_phis]
        for loop_name, source in self.etas.get(label, _NONE):
            operand = renamer.current(source, loc)
            var = SSAVar("", source, "eta", label, loc, operands=[operand], loop=loop_name,
                         phi_kind="eta")
            names.append(renamer._define(source, var))
            pushed.append(source)
        for loop_name, source in self.rejoins.get(label, _NONE):
            operand = renamer.current(source, loc)
            var = SSAVar("", source, "rejoin", label, loc, operands=[operand],
                         loop=loop_name, phi_kind="rejoin")
            names.append(renamer._define(source, var))
            pushed.append(source)
        if names:
            self.phis[label] = names
        return pushed

    def rename_statements(self, label: str, numbers: range, pushed: list[str]) -> None:
        """SSA names of the reads and definitions of the block's instructions (`_define`
        and `current` inline: a kernel's commonest work), the sources defined pushed."""
        renamer = self.renamer
        stacks, counters, variables = renamer.stacks, renamer.counters, renamer.variables
        instrs, uses, defs = self.instrs, self.uses, self.defs
        instruction_block = self.instruction_block
        var_type, special_type = ir.Var, ir.Special
        for n in numbers:
            instr = instrs[n]
            instruction_block[n] = label
            # Each read's SSA name (a register: the definition that reaches here; a special
            # register: its own name; a literal: None).
            read: list[str | None] = []
            for arg in instr.reads:
                kind = type(arg)
                if kind is var_type:
                    stack = stacks.get(arg.name)
                    read.append(stack[-1] if stack else renamer.current(arg.name, instr.loc))
                else:
                    read.append(arg.name if kind is special_type else None)
            uses[n] = read
            dest = instr.dest
            if dest is not None:
                count = counters.get(dest, 0) + 1
                counters[dest] = count
                name = f"{dest}#{count}"
                # The reads are the operands unless a guard or a literal is among them
                # (then a list of its own: no list per definition otherwise).
                operands = read if len(read) == len(instr.args) and None not in read \
                    else [u for u in read[:len(instr.args)] if u is not None]
                variables[name] = SSAVar(name, dest, instr.kind, label, instr.loc,
                                         operands=operands, instruction=instr.id)
                stack = stacks.get(dest)
                if stack is None:
                    stacks[dest] = [name]
                else:
                    stack.append(name)
                defs[n] = name
                pushed.append(dest)

    def feed_phis(self, label: str, succ: str) -> None:
        """Record, for each φ of `succ`, the value that reaches it from `label`."""
        current, incoming = self.renamer.current, self.incoming
        loc = self.block_loc(succ)
        for source in self.phi_sources[succ]:
            key = (succ, source)
            pairs = incoming.get(key)
            if pairs is None:
                pairs = incoming[key] = []
            pairs.append((label, current(source, loc)))


def build_ssa(cfg: ControlFlowGraph) -> SSAForm:
    """Convert a kernel (through its CFG) to gated SSA (`CFGLimit` when building the CFG
    stopped a search at its limit: without its loops or rejoin points, the SSA form would
    miss the η and rejoin copies that temporal divergence needs)."""
    if cfg.incomplete:
        raise CFGLimit(f"kernel {cfg.kernel.name}: too large to analyse: "
                       f"{cfg.incomplete}; the kernel is skipped")
    instrs = cfg.kernel.instructions()
    numbered, idom = cfg.numbering()
    number = numbered.number
    statements = _block_statements(cfg, number)
    exposed, def_blocks = _block_uses(instrs, statements)
    live_in, live_blocks = _liveness(numbered.predecessors, exposed, def_blocks,
                                     _liveness_wanted(cfg, numbered))
    loop_blocks = _loop_blocks(cfg, number)
    etas = _place_etas(cfg, number, loop_blocks, def_blocks, live_in)
    def_blocks = _with_copies(def_blocks, number, etas)
    frontier = frontiers_by_number(numbered, idom, number[ENTRY])
    phi_sources = _place_phis(numbered.nodes, frontier, def_blocks, live_in, live_blocks)
    rejoins = _place_rejoins(cfg, number, loop_blocks, live_in, def_blocks, phi_sources)
    if rejoins:
        phi_sources = _place_phis(numbered.nodes, frontier,
                                  _with_copies(def_blocks, number, rejoins), live_in,
                                  live_blocks)
    renamer = _Renamer(cfg, instrs)
    walk = _RenameWalk(cfg, instrs, statements, renamer, phi_sources, etas, rejoins)
    walk.run()
    uses, defs, instruction_block = walk.uses, walk.defs, walk.instruction_block
    for n, read in enumerate(uses):
        if read is None:  # an instruction of an unreachable block
            uses[n] = []

    branches = []
    for n, instr in enumerate(instrs):
        if instr.kind == ir.BRANCH and instruction_block[n]:
            branches.append(Branch(instruction_block[n], instr.id, uses[n][0], instr.loc))
    undefined = sorted(renamer.undefined.items(), key=lambda item: (item[1].line, item[0]))
    ids = [i.id for i in instrs]
    return SSAForm(cfg, renamer.variables, dict(zip(ids, uses, strict=True)),
                   dict(zip(ids, defs, strict=True)), walk.phis, branches, undefined,
                   dict(zip(ids, instruction_block, strict=True)))
