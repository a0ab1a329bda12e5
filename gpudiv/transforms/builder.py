"""The rewriter: every change a pass makes to a kernel goes through it.

Insertion points (before/after an instruction, at the start or end of a block), block
splitting, adding a block and retargeting branches, critical-edge splitting, erasing,
replace-all-uses, cloning, fresh register and label names. New instructions get fresh
ids from the kernel (`ir.Kernel.fresh_id`); instructions keep theirs when they move.
Control flow follows the IR's rule: a block without a terminator, or ending in a
conditional branch, falls through to the next block in the list.
"""

from __future__ import annotations

import copy
import re

from gpudiv import ir
from gpudiv.ir.record import replace

_NOT_A_NAME = re.compile(r"[^A-Za-z0-9_]")


class RewriteError(Exception):
    """A rewrite that would break the kernel (an unknown block, an ambiguous edge)."""


def clone_kernel(kernel: ir.Kernel) -> ir.Kernel:
    """A deep copy: same ids, labels and registers; changing it leaves `kernel` alone."""
    return copy.deepcopy(kernel)


def clone_program(program: ir.Program) -> ir.Program:
    """A deep copy of a program and all its kernels."""
    return copy.deepcopy(program)


def flag_type(kernel: ir.Kernel) -> str:
    """The register type of a new flag: a predicate in PTX, the only type in μ-SIMD."""
    return "pred" if "ptx_source" in kernel.attrs else "s32"


def set_flag(flag: str, value: int, loc: ir.Loc) -> ir.Instruction:
    """`flag = value`."""
    return ir.Instruction(ir.ASSIGN, loc, dest=flag, args=(ir.Const(value),),
                          operator="copy", text=f"{flag} = {value}")


class Rewriter:
    """Edits one kernel in place."""

    def __init__(self, kernel: ir.Kernel):
        self.kernel = kernel

    # -- names -----------------------------------------------------------------------
    def fresh_label(self, base: str) -> str:
        """A block label no block has, made of letters, digits and `_` (valid in μ-SIMD
        and in PTX) from `base`."""
        stem = _NOT_A_NAME.sub("_", base) or "L"
        if stem[0].isdigit():
            stem = "L" + stem
        taken = {b.label for b in self.kernel.blocks}
        name, n = stem, 0
        while name in taken:
            n += 1
            name = f"{stem}_{n}"
        return name

    def fresh_register(self, base: str, type_: str) -> str:
        """A register name nothing uses yet, entered in the register table with `type_`."""
        used = set(self.kernel.registers) | set(self.kernel.params) | set(self.kernel.specials)
        for instr in self.kernel.instructions():
            used.update(instr.used_vars)
            if instr.dest:
                used.add(instr.dest)
        name, n = base, 0
        while name in used:
            n += 1
            name = f"{base}_{n}"
        self.kernel.registers[name] = type_
        return name

    # -- finding things ----------------------------------------------------------------
    def block_of(self, instr: ir.Instruction) -> tuple[int, int]:
        """(block index, position in the block) of an instruction of the kernel."""
        for b, block in enumerate(self.kernel.blocks):
            for n, other in enumerate(block.instructions):
                if other is instr:
                    return b, n
        raise RewriteError(f"instruction {instr.id} is not in kernel {self.kernel.name}")

    def index(self, label: str) -> int:
        """The position of a block in the kernel's block list."""
        for b, block in enumerate(self.kernel.blocks):
            if block.label == label:
                return b
        raise RewriteError(f"no block '{label}' in kernel {self.kernel.name}")

    def fall_through(self, index: int) -> str | None:
        """The block that block `index` falls through to, if it can fall through."""
        block = self.kernel.blocks[index]
        term = block.terminator
        if term is not None and term.kind != ir.BRANCH:
            return None
        following = index + 1
        return self.kernel.blocks[following].label if following < len(self.kernel.blocks) \
            else None

    # -- instructions --------------------------------------------------------------------
    def new(self, instr: ir.Instruction) -> ir.Instruction:
        """`instr` with a fresh id (a copy when it already belongs to the kernel)."""
        if instr.id != ir.NO_ID:
            instr = replace(instr, attrs=dict(instr.attrs))
        instr.id = self.kernel.fresh_id()
        return instr

    def insert_before(self, anchor: ir.Instruction, instr: ir.Instruction) -> ir.Instruction:
        """Insert `instr` right before `anchor`."""
        b, n = self.block_of(anchor)
        instr = self.new(instr)
        self.kernel.blocks[b].instructions.insert(n, instr)
        return instr

    def insert_after(self, anchor: ir.Instruction, instr: ir.Instruction) -> ir.Instruction:
        """Insert `instr` right after `anchor` (which must not be a terminator)."""
        if anchor.kind in ir.TERMINATORS:
            raise RewriteError("cannot insert after a terminator")
        b, n = self.block_of(anchor)
        instr = self.new(instr)
        self.kernel.blocks[b].instructions.insert(n + 1, instr)
        return instr

    def insert_at_start(self, label: str, instr: ir.Instruction) -> ir.Instruction:
        """Insert `instr` as the first instruction of a block."""
        instr = self.new(instr)
        self.kernel.blocks[self.index(label)].instructions.insert(0, instr)
        return instr

    def insert_at_end(self, label: str, instr: ir.Instruction) -> ir.Instruction:
        """Insert `instr` at the end of a block, before its terminator if it has one."""
        block = self.kernel.blocks[self.index(label)]
        instr = self.new(instr)
        at = len(block.instructions) - (1 if block.terminator is not None else 0)
        block.instructions.insert(at, instr)
        return instr

    def erase(self, instr: ir.Instruction) -> None:
        """Remove an instruction from the kernel."""
        b, n = self.block_of(instr)
        del self.kernel.blocks[b].instructions[n]

    def replace_all_uses(self, name: str, value: ir.Operand) -> int:
        """Make every read of register `name` (arguments, implicit reads, guards) read
        `value` instead; the number of instructions changed."""
        old = ir.Var(name)
        changed = 0
        for instr in self.kernel.instructions():
            if old not in instr.reads:
                continue
            instr.args = tuple(value if a == old else a for a in instr.args)
            instr.implicit = tuple(value if a == old else a for a in instr.implicit)
            if instr.guard is not None and instr.guard.operand == old:
                instr.guard = ir.Guard(value, instr.guard.negated)
            changed += 1
        return changed

    # -- blocks --------------------------------------------------------------------------
    def add_block(self, label: str, instructions: list[ir.Instruction],
                  after: str | None = None) -> ir.Block:
        """A new block after block `after` (by default at the end of the kernel). Placing
        it must not change where another block falls through: the block before the new
        one must end in a jump or a stop (or the new block takes its fall-through, which
        the caller then means)."""
        if any(b.label == label for b in self.kernel.blocks):
            raise RewriteError(f"block '{label}' already exists")
        at = len(self.kernel.blocks) if after is None else self.index(after) + 1
        loc = self.kernel.blocks[at - 1].loc if at else self.kernel.loc
        block = ir.Block(label, [self.new(i) for i in instructions], loc, user_label=False)
        self.kernel.blocks.insert(at, block)
        return block

    def detached_position(self) -> str | None:
        """A block after which a new block can go without taking anyone's fall-through:
        the last block that ends in a jump or a stop (None if there is none)."""
        for block in reversed(self.kernel.blocks):
            term = block.terminator
            if term is not None and term.kind in (ir.JUMP, ir.STOP):
                return block.label
        return None

    def retarget(self, label: str, old: str, new: str) -> int:
        """Make the branches and jumps at the end of block `label` that go to `old` go to
        `new`; the number changed."""
        block = self.kernel.blocks[self.index(label)]
        changed = 0
        for instr in block.instructions:
            if instr.kind in (ir.BRANCH, ir.JUMP) and instr.target == old:
                instr.target = new
                changed += 1
        return changed

    def split_block(self, instr: ir.Instruction, label: str | None = None) -> ir.Block:
        """Move `instr` and everything after it in its block to a new block right after
        (which the first part falls through to)."""
        b, n = self.block_of(instr)
        block = self.kernel.blocks[b]
        name = label or self.fresh_label(f"{block.label}_split")
        tail = ir.Block(name, block.instructions[n:], instr.loc, user_label=False)
        del block.instructions[n:]
        self.kernel.blocks.insert(b + 1, tail)
        return tail

    def split_edge(self, source: str, target: str, label: str | None = None) -> ir.Block:
        """A new block on the edge source → target (it jumps to `target`): on the fall-
        through edge it goes right after `source`, on a branch edge it goes where it
        takes no block's fall-through and the branch is retargeted."""
        b = self.index(source)
        name = label or self.fresh_label(f"{source}_to_{target}")
        jump = ir.Instruction(ir.JUMP, self.kernel.blocks[b].loc, target=target,
                              text=f"jump {target}")
        taken = any(i.kind in (ir.BRANCH, ir.JUMP) and i.target == target
                    for i in self.kernel.blocks[b].instructions)
        if self.fall_through(b) == target:
            block = self.add_block(name, [jump], after=source)
            if taken:
                self.retarget(source, target, name)
            return block
        if not taken:
            raise RewriteError(f"no edge {source} -> {target}")
        where = self.detached_position()
        if where is None:
            raise RewriteError(f"no place for a block on the edge {source} -> {target}")
        block = self.add_block(name, [jump], after=where)
        self.retarget(source, target, name)
        return block

    def clone_region(self, labels: list[str], suffix: str = "clone") -> dict[str, str]:
        """Copies of the blocks `labels` (fresh labels and ids) placed where they take no
        block's fall-through; branches between region blocks go to the copies, branches
        out of the region and fall-through out of it keep their targets (a fall-through
        that no longer reaches its block becomes a jump). Nothing branches into the copies
        yet: the caller retargets edges to them. Returns old label → copy label.

        Copies carry no PTX group (they are new instructions), so a PTX printer writes
        them from the IR (copies, jumps, branches) or refuses them."""
        region = [self.kernel.blocks[self.index(label)] for label in labels]
        names = {b.label: self.fresh_label(f"{b.label}_{suffix}") for b in region}
        falls = {b.label: self.fall_through(self.index(b.label)) for b in region}
        where = self.detached_position()
        if where is None:
            raise RewriteError("no place for a copy of the region")
        copies: list[ir.Block] = []
        for n, block in enumerate(region):
            instrs = []
            for instr in block.instructions:
                twin = replace(instr, attrs=dict(instr.attrs), group=None, id=ir.NO_ID)
                if twin.target in names:
                    twin.target = names[twin.target]
                instrs.append(self.new(twin))
            copies.append(ir.Block(names[block.label], instrs, block.loc, user_label=False))
            following = falls[block.label]
            next_in_region = region[n + 1].label if n + 1 < len(region) else None
            if following is None or following == next_in_region:
                continue  # no fall-through, or it falls into the next copy
            target = names.get(following, following)
            jump = self.new(ir.Instruction(ir.JUMP, block.loc, target=target,
                                           text=f"jump {target}"))
            if copies[-1].terminator is None:
                copies[-1].instructions.append(jump)
            else:
                label = self.fresh_label(f"{names[block.label]}_next")
                copies.append(ir.Block(label, [jump], block.loc, user_label=False))
        at = self.index(where) + 1
        self.kernel.blocks[at:at] = copies
        return names

