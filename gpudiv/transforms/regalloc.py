"""`regalloc`: register allocation with divergence-aware spilling (Sampaio 2013 ch. 4).

Options: `allocator` (linear, divergence, remat, affine; `spill_rules.ALLOCATORS`) and
`registers` (the budget of registers for the kernel's values, per thread).

1. Liveness and interference come from the rules (`liveness.py`); linear scan
   (`linear_scan.py`) assigns registers and picks the spilled variables, the same for
   every allocator.
2. Every variable kept in a register is renamed to it (`r0`, `r1`, …). Each read of a
   spilled variable is preceded by its reload into a scratch register (`x0`, `x1`; `x2`
   holds addresses and the dynamic part of rule iv), each write goes to `x0` and is
   followed by its store, as `spill_rules.py` says for the allocator.
3. Local slots are `local[LOCAL_BASE + k]` (one per thread); shared slots are
   `shared[sb + k]` where `sb = SHARED_BASE + warpid · K` is computed once at the entry
   (in a block of its own when the entry block is a loop header) into a reserved base
   register (one area of K words per warp; μ-SIMD runs one block,
   whose shared memory is its own).
4. The definition of a variable that is recomputed (rules i, iii) is removed when it
   cannot trap; its store is removed in any case.

Parameters are not registers (they are read from parameter space, as `ld.param`); a
parameter the kernel assigns is first copied into a fresh variable. The kernel records
its statistics in `attrs["transform_stats"]` and its spill areas in `attrs["scratch"]`
(what `--verify` may find changed in the result and not in the original). A PTX program
is allocated on its text by `regalloc_ptx.py` (`run_program`).
"""

from __future__ import annotations

import re
from collections import Counter

from gpudiv import ir
from gpudiv.lang.musimd.printer import instruction_text
from gpudiv.lang.printing import PrintError
from gpudiv.transforms import traits
from gpudiv.transforms.base import Pass, PassError, kernel_language, register
from gpudiv.transforms.builder import Rewriter, clone_kernel
from gpudiv.transforms.linear_scan import Assignment, conflicts, linear_scan
from gpudiv.transforms.liveness import LivenessError, liveness
from gpudiv.transforms.regalloc_ptx import PtxAllocError, allocate_program
from gpudiv.transforms.spill_rules import (
    ALLOCATORS,
    CONSTANT,
    LOCAL,
    REMAT,
    SHARED,
    SHARED_AFFINE,
    SpillPlan,
    plan,
)

SHARED_BASE = 1 << 28  # shared spill areas start here (far above a program's own data)
LOCAL_BASE = 1 << 28  # local spill slots start here
SCRATCH_SPAN = 1 << 26  # the words reserved after each base
_INT32 = 1 << 32


def wrap32(value: int) -> int:
    """A value as the 32-bit two's complement integer μ-SIMD computes with."""
    value %= _INT32
    return value - _INT32 if value >= 1 << 31 else value


def _assign(dest: str, op: str | None, *args: ir.Operand) -> ir.Instruction:
    """A fresh assignment (`op` None: a copy)."""
    text = f"{dest} = " + (f" {op} ".join(map(str, args)) if op else str(args[0]))
    return ir.Instruction(ir.ASSIGN, ir.Loc(0), dest=dest, args=args,
                          operator=op or "copy", text=text)


def _load(dest: str, space: str, address: ir.Operand) -> ir.Instruction:
    return ir.Instruction(ir.LOAD, ir.Loc(0), dest=dest, args=(address,), space=space,
                          text=f"{dest} = {space}[{address}]")


def _store(space: str, address: ir.Operand, value: ir.Operand) -> ir.Instruction:
    return ir.Instruction(ir.STORE, ir.Loc(0), args=(address, value), space=space,
                          text=f"{space}[{address}] = {value}")


class _Names:
    """Register names that no parameter takes."""

    def __init__(self, kernel: ir.Kernel):
        taken = set(kernel.params)
        prefix = "" if not any(re.fullmatch(r"(r|x)\d+|sb", p) for p in taken) else "ra_"
        self.prefix = prefix
        self.base = prefix + "sb"

    def register(self, n: int) -> str:
        """The name of allocatable register n."""
        return f"{self.prefix}r{n}"

    def scratch(self, n: int) -> str:
        """The name of scratch register n."""
        return f"{self.prefix}x{n}"


class _Spiller:
    """Writes reload and store sequences for one kernel."""

    def __init__(self, kernel: ir.Kernel, plans: list[SpillPlan], names: _Names):
        self.rewriter = Rewriter(kernel)
        self.names = names
        self.plans = {p.name: p for p in plans}
        self.slots: dict[str, int] = {}
        counts = Counter()
        for p in plans:
            if p.space is not None:
                self.slots[p.name] = counts[p.space]
                counts[p.space] += 1
        self.local_slots, self.shared_slots = counts["local"], counts["shared"]
        self.static = Counter()

    def _shared_address(self, name: str, into: str) -> tuple[list[ir.Instruction], ir.Operand]:
        slot = self.slots[name]
        base = ir.Var(self.names.base)
        if slot == 0:
            return [], base
        return [_assign(into, "+", base, ir.Const(slot))], ir.Var(into)

    def reload(self, name: str, into: str) -> list[ir.Instruction]:
        """Instructions that put spilled `name` into register `into`."""
        p, temp = self.plans[name], self.names.scratch(2)
        if p.rule == LOCAL:
            self.static["local_loads"] += 1
            return [_load(into, "local", ir.Const(LOCAL_BASE + self.slots[name]))]
        if p.rule == CONSTANT:
            self.static["remat_instructions"] += 1
            return [_assign(into, None, ir.Const(wrap32(p.constant)))]
        if p.rule == REMAT:
            code = self._affine(into, p.coefficient, ir.Const(wrap32(p.constant)))
            self.static["remat_instructions"] += len(code)
            return code
        code, address = self._shared_address(name, temp)
        self.static["shared_loads"] += 1
        if p.rule == SHARED:
            return [*code, _load(into, "shared", address)]
        rebuild = self._affine(into, p.coefficient, ir.Var(temp))
        self.static["mad_instructions"] += len(rebuild)
        return [*code, _load(temp, "shared", address), *rebuild]

    @staticmethod
    def _affine(into: str, coefficient: int, offset: ir.Operand) -> list[ir.Instruction]:
        """`into = coefficient·tid + offset` (one instruction when coefficient is 1)."""
        tid = ir.Special("tid")
        if coefficient == 1:
            return [_assign(into, "+", tid, offset)]
        code = [_assign(into, "*", ir.Const(wrap32(coefficient)), tid)]
        if offset != ir.Const(0):
            code.append(_assign(into, "+", ir.Var(into), offset))
        return code

    def store(self, name: str, value: str) -> list[ir.Instruction]:
        """Instructions that save spilled `name`, now in register `value`."""
        p = self.plans[name]
        if p.rule in (CONSTANT, REMAT):
            return []
        if p.rule == LOCAL:
            self.static["local_stores"] += 1
            return [_store("local", ir.Const(LOCAL_BASE + self.slots[name]), ir.Var(value))]
        temp = self.names.scratch(2)
        code, address = self._shared_address(name, temp)
        self.static["shared_stores"] += 1
        if p.rule == SHARED:
            return [*code, _store("shared", address, ir.Var(value))]
        part, tid = self.names.scratch(1), ir.Special("tid")
        if p.coefficient == 1:
            dynamic = [_assign(part, "-", ir.Var(value), tid)]
        else:
            dynamic = [_assign(part, "*", ir.Const(wrap32(p.coefficient)), tid),
                       _assign(part, "-", ir.Var(value), ir.Var(part))]
        self.static["mad_instructions"] += len(dynamic)
        return [*dynamic, *code, _store("shared", address, ir.Var(part))]


def _copy_assigned_params(kernel: ir.Kernel) -> None:
    """Give each parameter the kernel writes a variable of its own, copied at the entry."""
    written = {i.dest for i in kernel.instructions() if i.dest in kernel.params}
    if not written or not kernel.blocks:
        return
    rewriter = Rewriter(kernel)
    for param in sorted(written):
        fresh = rewriter.fresh_register(f"{param}_var", kernel.registers.get(param, "s32"))
        rewriter.replace_all_uses(param, ir.Var(fresh))
        for instr in kernel.instructions():
            if instr.dest == param:
                instr.dest = fresh
        rewriter.insert_at_start(kernel.blocks[0].label, _assign(fresh, None, ir.Var(param)))


@register
class RegisterAllocation(Pass):
    """Linear scan with a register budget; spills placed by the chosen allocator."""

    name = "regalloc"
    description = ("register allocation: linear scan, spills to local memory or, by "
                   "divergence and affinity, to shared memory or recomputed (μ-SIMD, PTX)")

    def _settings(self) -> tuple[str, int]:
        """(allocator, registers) from the options, checked."""
        allocator = str(self.options.get("allocator", "linear"))
        registers = int(self.options.get("registers", 8))  # type: ignore[arg-type]
        if allocator not in ALLOCATORS:
            raise PassError(f"unknown allocator '{allocator}' (known: "
                            f"{', '.join(ALLOCATORS)})")
        if registers < 1:
            raise PassError("the register budget must be at least 1")
        return allocator, registers

    def run_program(self, program: ir.Program, kernels: set[str] | None = None) -> None:
        """μ-SIMD: kernel by kernel; PTX: the module's text rewritten and read back."""
        if program.language != "ptx":
            super().run_program(program, kernels)
            return
        allocator, registers = self._settings()
        try:
            result = allocate_program(program, kernels, allocator, registers,
                                      self.analysis)
        except PtxAllocError as error:
            raise PassError(str(error)) from error
        program.kernels = result.kernels
        program.attrs = result.attrs

    def run(self, kernel: ir.Kernel) -> ir.Kernel:
        """The kernel with every variable in one of `registers` registers or spilled."""
        allocator, registers = self._settings()
        if kernel_language(kernel) == "ptx":
            raise PassError(f"kernel {kernel.name}: a PTX kernel is allocated with its "
                            "program (run_program)")
        work = clone_kernel(kernel)
        _copy_assigned_params(work)
        try:
            live = liveness(work)
        except LivenessError as error:
            raise PassError(str(error)) from error
        assignment = linear_scan(work, live, registers)
        clash = conflicts(assignment, live)
        if clash:
            raise PassError(f"kernel {kernel.name}: interfering {clash[0]} share a register")
        analysis_name = ALLOCATORS[allocator][0]
        result = self.analysis(work, analysis_name) if analysis_name and \
            assignment.spilled else None
        plans = plan(allocator, assignment.spilled, result)
        return rewrite(work, assignment, plans, allocator, registers)


def rewrite(kernel: ir.Kernel, assignment: Assignment, plans: list[SpillPlan],
            allocator: str, registers: int) -> ir.Kernel:
    """Rename to registers and insert the spill code of `plans` (in place)."""
    names = _Names(kernel)
    spiller = _Spiller(kernel, plans, names)
    regs = {v: names.register(n) for v, n in assignment.registers.items()}
    before = kernel.instruction_count
    removed = 0
    for block in kernel.blocks:
        for instr in list(block.instructions):
            removed += _rewrite_instruction(instr, spiller, regs, kernel)
    if spiller.shared_slots:
        _set_up_base(spiller.rewriter, names.base, spiller.shared_slots)
    kernel.registers = {**{r: "s32" for r in regs.values()},
                        **{names.scratch(n): "s32" for n in range(3)}}
    if spiller.shared_slots:
        kernel.registers[names.base] = "s32"
    kernel.attrs["scratch"] = {"shared": (SHARED_BASE, SHARED_BASE + SCRATCH_SPAN),
                               "local": (LOCAL_BASE, LOCAL_BASE + SCRATCH_SPAN)}
    kernel.attrs["transform_stats"] = {
        "allocator": allocator, "register_budget": registers,
        "registers_used": assignment.used,
        "scratch_registers": _scratch_used(kernel, names),
        "definitions_removed": removed, "instructions_original": before,
        **_spill_stats(plans, spiller)}
    return kernel


def _rewrite_instruction(instr: ir.Instruction, spiller: _Spiller, regs: dict[str, str],
                         kernel: ir.Kernel) -> int:
    """Rename one instruction's registers and surround it with its reloads and stores;
    1 when it is a recomputed definition, which is removed instead."""
    names, rewriter = spiller.names, spiller.rewriter
    p = spiller.plans.get(instr.dest or "")
    if p is not None and p.rule in (CONSTANT, REMAT) and instr.kind == ir.ASSIGN and \
            traits.is_speculatable(instr):
        rewriter.erase(instr)  # recomputed at every use instead
        return 1
    scratch: dict[str, str] = {}
    for name in dict.fromkeys(instr.used_vars):
        if name in spiller.plans:
            scratch[name] = names.scratch(len(scratch))
            for one in spiller.reload(name, scratch[name]):
                rewriter.insert_before(instr, one)
    instr.args = tuple(_rename(a, scratch, regs, kernel) for a in instr.args)
    instr.implicit = tuple(_rename(a, scratch, regs, kernel) for a in instr.implicit)
    if instr.dest is not None and instr.dest not in kernel.params:
        old = instr.dest
        if old in spiller.plans:
            instr.dest = names.scratch(0)
            anchor = instr
            for one in spiller.store(old, instr.dest):
                anchor = rewriter.insert_after(anchor, one)
        else:
            instr.dest = regs[old]
    instr.text = instr.text and _retext(instr)
    return 0


def _scratch_used(kernel: ir.Kernel, names: _Names) -> int:
    """How many scratch registers the rewritten kernel uses."""
    scratch = {names.scratch(n) for n in range(3)}
    return len({n for i in kernel.instructions() for n in (*i.used_vars, i.dest)
                if n in scratch})


def _spill_stats(plans: list[SpillPlan], spiller: _Spiller) -> dict[str, object]:
    """Spills by rule, slots and static spill instructions."""
    rules = Counter(p.rule for p in plans)
    return {
        "base_registers": 1 if spiller.shared_slots else 0,
        "spilled": len(plans), "spilled_names": [p.name for p in plans],
        "spills_local": rules[LOCAL], "spills_constant": rules[CONSTANT],
        "spills_shared": rules[SHARED], "spills_remat": rules[REMAT],
        "spills_shared_affine": rules[SHARED_AFFINE],
        "local_slots_per_thread": spiller.local_slots,
        "shared_slots_per_warp": spiller.shared_slots,
        **{k: spiller.static[k] for k in ("local_loads", "local_stores", "shared_loads",
                                          "shared_stores", "remat_instructions",
                                          "mad_instructions")}}


def _set_up_base(rewriter: Rewriter, base: str, slots: int) -> None:
    """`base = warpid·slots + SHARED_BASE` once at the entry (in a block of its own when
    the entry block is also a branch target, so that a loop does not recompute it)."""
    kernel = rewriter.kernel
    setup = [_assign(base, "*", ir.Special("warpid"), ir.Const(slots)),
             _assign(base, "+", ir.Var(base), ir.Const(SHARED_BASE))]
    entry = kernel.blocks[0]
    if any(i.target == entry.label for i in kernel.instructions()):
        block = ir.Block(rewriter.fresh_label("spill_setup"), [rewriter.new(i) for i in setup],
                         entry.loc, user_label=False)
        kernel.blocks.insert(0, block)
        return
    for one in reversed(setup):
        rewriter.insert_at_start(entry.label, one)


def _rename(operand: ir.Operand, scratch: dict[str, str], regs: dict[str, str],
            kernel: ir.Kernel) -> ir.Operand:
    """A read of a variable as a read of its register or of its reload."""
    if isinstance(operand, ir.Var) and operand.name not in kernel.params:
        return ir.Var(scratch.get(operand.name) or regs[operand.name])
    return operand


def _retext(instr: ir.Instruction) -> str:
    """A readable text for a renamed instruction (the printer writes from the IR)."""
    try:
        return instruction_text(instr)
    except PrintError:
        return instr.text
