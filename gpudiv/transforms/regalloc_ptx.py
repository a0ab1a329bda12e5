"""`regalloc` on PTX: at most N registers of each class per thread, spills to `.local`
or per-warp `.shared` areas (Sampaio 2013 ch. 4; the μ-SIMD side is `regalloc.py`).

Register classes are the declared PTX types (`.pred`, `.b16`, `.b32`, `.f32`, `.b64`,
`.f64` as nvcc declares them; any other declared type is a class of its own): a register
keeps its declared type, so the interpreter and `ptxas` see the same operand types as in
the original. After allocation class C holds `%P0 … %P(k−1)` for values and `%Px0 …` for
the spill code's scratch (P: `%p`, `%rs`, `%r`, `%f`, `%rd`, `%fd`, else `%ra_TYPE_`),
plus `%sb` (a `.b32`, the shared base) when a value is spilled to shared memory. The
budget N bounds all of them together: a class whose values, scratch and base do not fit
gets fewer value registers and the scan is run again, and a class whose scratch alone
exceeds N is refused.

1. Liveness, intervals and the scan are those of μ-SIMD (rules/liveness.lp on the IR,
   `linear_scan.scan` per class, IR points in kernel order); only PTX registers (`%…`
   names the text declares) are allocated.
2. The text is written from the kernel's PTX instructions (`ptx_source` forms), each
   register renamed; a spilled register is reloaded into a scratch register before the
   instruction that reads it and stored after the one that writes it. A guarded write
   also reads its register (the value stays when the guard is false), so it is reloaded
   first. Predicates go to memory as a `.u32` 0/1 (`selp`, `setp.ne`).
3. Local slots are 8 bytes of `__gpudiv_spill_local`; shared slots are 8 bytes of
   `__gpudiv_spill_shared`, one area of K slots per warp, at `%sb` = the area's address
   + (linear thread index / 32)·8K, computed once before the first label. Shared memory
   is per block, so blocks have distinct areas; the array holds one area per warp of the
   largest block (`.reqntid`/`.maxntid`, else 1024 threads).
4. Rules (i), (iii), (iv) apply to 32-bit integer classes only: affine2's coefficients
   hold modulo 2^32 (rules/affine.lp), so a 64-bit or narrower recomputation could differ
   where the original wrapped (note §4.8 item 4). Other classes use rule (ii) (every SSA
   version uniform) or local memory. A definition of a recomputed value that is a plain
   unguarded ALU instruction is removed.

The result is read back by the PTX front end, so the kernel the pipeline carries is
exactly the text that is printed (and that `ptxas` checks).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from gpudiv import ir
from gpudiv.analyses.results import KernelResult
from gpudiv.lang.printing import PrintError
from gpudiv.lang.ptx.forms import PInstr
from gpudiv.lang.ptx.parse import parse_ptx
from gpudiv.lang.ptx.printer import instruction_text, operand_names, print_kernel, print_ptx
from gpudiv.transforms.linear_scan import Assignment, Interval, intervals, scan
from gpudiv.transforms.liveness import LivenessError, liveness
from gpudiv.transforms.spill_rules import (
    ALLOCATORS,
    CONSTANT,
    LOCAL,
    REMAT,
    SHARED,
    SHARED_AFFINE,
    SpillPlan,
    plan,
    uniform_everywhere,
)

PREFIX = {"pred": "%p", "b16": "%rs", "b32": "%r", "f32": "%f", "b64": "%rd", "f64": "%fd"}
BITS = {"pred": 32, "b8": 8, "u8": 8, "s8": 8, "b16": 16, "u16": 16, "s16": 16, "f16": 16,
        "bf16": 16, "b32": 32, "u32": 32, "s32": 32, "f32": 32, "f16x2": 32, "bf16x2": 32,
        "b64": 64, "u64": 64, "s64": 64, "f64": 64}
REMAT_TYPES = frozenset({"b32", "u32", "s32"})  # rules (i), (iii), (iv)
BASE = "%sb"
LOCAL_AREA, SHARED_AREA = "__gpudiv_spill_local", "__gpudiv_spill_shared"
SLOT_BYTES = 8
MAX_THREADS = 1024
SHARED_LIMIT = 48 * 1024  # static shared memory of a block
# Opcodes (their first part) of side-effect-free definitions a recomputed value may drop.
PURE = frozenset({"mov", "add", "sub", "mul", "mad", "shl", "shr", "and", "or", "xor",
                  "cvt", "neg", "not", "min", "max", "selp", "abs"})


class PtxAllocError(Exception):
    """A PTX kernel this allocator cannot rewrite (one line, naming the kernel)."""


@dataclass
class _Op:
    """One PTX instruction of the body: its form, CUDA position and PTX registers."""

    pi: PInstr
    origin: object
    reads: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)


def _renamed(op: tuple, names: dict[str, str]) -> tuple:
    """An operand with its registers renamed."""
    tag = op[0]
    if tag in ("r", "i"):
        return (tag, names.get(op[1], op[1]))
    if tag == "s":
        return ("s", _renamed(op[1], names), op[2])
    if tag == "!":
        return ("!", _renamed(op[1], names))
    if tag in ("v", "a", "p"):
        return (tag, [_renamed(o, names) for o in op[1]])
    if tag == "|":
        return ("|", _renamed(op[1], names), _renamed(op[2], names))
    return op


def ptx_registers(kernel: ir.Kernel) -> dict[str, str]:
    """PTX register → declared type, for the registers the kernel's text mentions."""
    source = kernel.attrs["ptx_source"]
    mentioned: set[str] = set()
    for pi in source["forms"].values():
        mentioned.update(n for o in pi.operands for n in operand_names(o))
        if pi.guard:
            mentioned.add(pi.guard)
    return {n: t for n, t in kernel.registers.items()
            if n in mentioned and n.startswith("%") and "@" not in n}


def body_ops(kernel: ir.Kernel, regs: dict[str, str]) -> list[_Op | str]:
    """The body as labels (str) and PTX instructions, in kernel order."""
    source = kernel.attrs["ptx_source"]
    forms: dict[int, PInstr] = source["forms"]
    inlined: dict[int, tuple] = source["inlined"]
    labels = set(source["labels"])
    items: list[_Op | str] = []
    ops: dict[int, _Op] = {}  # by id of the PTX instruction: an inlined call is one
    for block in kernel.blocks:
        if block.label in labels:
            items.append(block.label)
        for instr in block.instructions:
            group = instr.group
            if group in forms:
                pi, origin = forms[group], instr.attrs.get("origin")
            elif group in inlined:  # a callee's instruction: written as its call
                pi, origin = inlined[group]
            else:
                raise PtxAllocError(f"kernel {kernel.name}: instruction '{instr.text}' "
                                    "has no PTX form to rename")
            op = ops.get(id(pi))
            if op is None:
                op = ops[id(pi)] = _Op(pi, origin)
                items.append(op)
            op.reads += [v for v in instr.used_vars if v in regs and v not in op.reads]
            if instr.dest in regs and instr.dest not in op.writes:
                op.writes.append(instr.dest)
    for op in ops.values():
        mentioned = [n for o in op.pi.operands for n in operand_names(o)]
        mentioned += [op.pi.guard] if op.pi.guard else []
        op.reads += [n for n in dict.fromkeys(mentioned)
                     if n in regs and n not in op.reads and n not in op.writes]
        if op.pi.guard:  # a guarded write keeps the old value when the guard is false
            op.reads += [w for w in op.writes if w not in op.reads]
    return items


def prefix(type_: str) -> str:
    """Name prefix of a class's registers."""
    return PREFIX.get(type_, f"%ra_{type_}_")


def _mem_type(type_: str) -> str:
    """The ld/st type of a class (predicates are stored as .u32)."""
    return "u32" if type_ == "pred" else f"b{BITS[type_]}"


def _signed32(value: int) -> int:
    value %= 1 << 32
    return value - (1 << 32) if value >= 1 << 31 else value


@dataclass
class _Code:
    """Spill slots and the writer of reload and store sequences."""

    types: dict[str, str]
    plans: dict[str, SpillPlan]
    slots: dict[str, int] = field(default_factory=dict)
    static: Counter = field(default_factory=Counter)

    def __post_init__(self) -> None:
        count: Counter = Counter()
        for name, p in self.plans.items():
            if p.space is not None:
                self.slots[name] = count[p.space]
                count[p.space] += 1
        self.local_slots, self.shared_slots = count["local"], count["shared"]

    def address(self, name: str) -> str:
        """The address of a spilled register's slot."""
        offset = self.slots[name] * SLOT_BYTES
        if self.plans[name].space == "local":
            return f"[{LOCAL_AREA}+{offset}]" if offset else f"[{LOCAL_AREA}]"
        return f"[{BASE}+{offset}]" if offset else f"[{BASE}]"

    def reload(self, name: str, into: str, temp: _Temps) -> list[str]:
        """Lines that put spilled `name` into scratch register `into`."""
        p, type_ = self.plans[name], self.types[name]
        if p.rule == CONSTANT:
            self.static["remat_instructions"] += 1
            return [f"mov.b32 {into}, {_signed32(p.constant)};"]
        if p.rule == REMAT:
            code = _affine(into, into, p.coefficient, str(_signed32(p.constant)))
            self.static["remat_instructions"] += len(code)
            return code
        space = p.space
        self.static[f"{space}_loads"] += 1
        if type_ == "pred":
            word = temp.get("b32")
            return [f"ld.{space}.u32 {word}, {self.address(name)};",
                    f"setp.ne.u32 {into}, {word}, 0;"]
        load = f"ld.{space}.{_mem_type(type_)} {into}, {self.address(name)};"
        if p.rule == SHARED_AFFINE:
            tid = temp.get("b32")
            code = _affine(into, tid, p.coefficient, into)
            self.static["mad_instructions"] += len(code)
            return [load, *code]
        return [load]

    def store(self, name: str, value: str, temp: _Temps) -> list[str]:
        """Lines that save spilled `name`, now in scratch register `value`."""
        p, type_ = self.plans[name], self.types[name]
        if p.rule in (CONSTANT, REMAT):
            return []
        space = p.space
        self.static[f"{space}_stores"] += 1
        if type_ == "pred":
            word = temp.get("b32")
            return [f"selp.u32 {word}, 1, 0, {value};",
                    f"st.{space}.u32 {self.address(name)}, {word};"]
        if p.rule == SHARED_AFFINE:
            part = temp.get("b32")
            code = [f"mov.u32 {part}, %tid.x;"]
            if p.coefficient != 1:
                code.append(f"mul.lo.s32 {part}, {part}, {_signed32(p.coefficient)};")
            code.append(f"sub.s32 {part}, {value}, {part};")
            self.static["mad_instructions"] += len(code)
            return [*code, f"st.{space}.b32 {self.address(name)}, {part};"]
        return [f"st.{space}.{_mem_type(type_)} {self.address(name)}, {value};"]


def _affine(into: str, tid: str, coefficient: int, offset: str) -> list[str]:
    """`into = coefficient·%tid.x + offset` through register `tid` (which may be `into`
    when `offset` is a constant)."""
    code = [f"mov.u32 {tid}, %tid.x;"]
    if coefficient != 1:
        code.append(f"mul.lo.s32 {tid}, {tid}, {_signed32(coefficient)};")
    if offset != "0" or tid != into:
        code.append(f"add.s32 {into}, {tid}, {offset};")
    return code


class _Temps:
    """Scratch registers of one instruction, by class (`get` hands out the next); `peak`
    records the most of each class any instruction used."""

    def __init__(self, used: Counter, peak: Counter):
        self.used = Counter(used)
        self.peak = peak

    def get(self, type_: str) -> str:
        """The next free scratch register of a class."""
        name = f"{prefix(type_)}x{self.used[type_]}"
        self.used[type_] += 1
        self.peak[type_] = max(self.peak[type_], self.used[type_])
        return name


@dataclass
class _Result:
    """The written body and what it used."""

    lines: list[str]
    scratch: Counter
    removed: int


def _write_body(items: list[_Op | str], assignment: dict[str, str], code: _Code,
                files: dict[str, int]) -> _Result:
    """The body lines with registers renamed and spill code around each instruction."""
    lines: list[str] = []
    scratch: Counter = Counter()
    removed = 0
    origin, file_index = None, 1
    for item in items:
        if isinstance(item, str):
            lines.append(f"{_label(item)}:")
            continue
        if _recomputed(item, code):
            removed += 1
            continue
        if item.origin is not None and item.origin != origin:
            path, line, column = item.origin  # type: ignore[misc]
            file_index = files.get(path, file_index)
            lines.append(f"\t.loc\t{file_index} {line} {column}")
            origin = item.origin
        names = dict(assignment)
        temps = _Temps(Counter(), scratch)
        for name in item.reads:
            if name in code.plans:
                names[name] = temps.get(code.types[name])
        # The instruction reads all its operands before it writes, so a register it only
        # writes may take the scratch of a read; not that of a register read and written.
        outs = _Temps(Counter(), scratch)
        kept = {names[n] for n in item.writes if n in code.plans and n in item.reads}
        for name in item.writes:
            if name in code.plans and name not in item.reads:
                candidate = outs.get(code.types[name])
                while candidate in kept:
                    candidate = outs.get(code.types[name])
                names[name] = candidate
        for type_, n in outs.used.items():
            temps.used[type_] = max(temps.used[type_], n)
        before: list[str] = []
        for name in item.reads:
            if name in code.plans:
                before += code.reload(name, names[name], _Temps(temps.used, scratch))
        after: list[str] = []
        for name in item.writes:
            if name in code.plans:
                after += code.store(name, names[name], _Temps(temps.used, scratch))
        text = instruction_text(_rename_instr(item.pi, names))
        lines += [f"\t{one}" for one in (*before, text, *after)]
    return _Result(lines, scratch, removed)


def _recomputed(op: _Op, code: _Code) -> bool:
    """Whether an instruction only defines recomputed values and can be dropped."""
    if not op.writes or op.pi.guard or op.pi.opcode.split(".", 1)[0] not in PURE:
        return False
    return all(code.plans.get(w) is not None and code.plans[w].rule in (CONSTANT, REMAT)
               for w in op.writes)


def _rename_instr(pi: PInstr, names: dict[str, str]) -> PInstr:
    return PInstr(names.get(pi.guard, pi.guard) if pi.guard else None, pi.negated,
                  pi.opcode, [_renamed(o, names) for o in pi.operands], pi.line, pi.column,
                  pi.text)


def _label(name: str) -> str:
    return name.replace(".", "$").replace("@", "$").replace("^", "$")


def _setup_base(slots: int) -> list[str]:
    """`%sb` = the shared area + (linear thread index / 32) · slots · 8, through one
    scratch register."""
    t = f"{prefix('b32')}x0"
    return [f"mov.u32 {BASE}, %tid.z;", f"mov.u32 {t}, %ntid.y;",
            f"mul.lo.u32 {BASE}, {BASE}, {t};", f"mov.u32 {t}, %tid.y;",
            f"add.u32 {BASE}, {BASE}, {t};", f"mov.u32 {t}, %ntid.x;",
            f"mul.lo.u32 {BASE}, {BASE}, {t};", f"mov.u32 {t}, %tid.x;",
            f"add.u32 {BASE}, {BASE}, {t};", f"shr.u32 {BASE}, {BASE}, 5;",
            f"mul.lo.u32 {BASE}, {BASE}, {slots * SLOT_BYTES};",
            f"mov.u32 {t}, {SHARED_AREA};", f"add.u32 {BASE}, {BASE}, {t};"]


def _warps(kernel: ir.Kernel) -> int:
    """Warps of the largest block the kernel may run with."""
    shape = kernel.attrs.get("reqntid") or kernel.attrs.get("maxntid")
    threads = MAX_THREADS
    if isinstance(shape, tuple) and shape:
        threads = 1
        for n in shape:
            threads *= int(n)
    return max(1, -(-min(threads, MAX_THREADS) // 32))


def _plans(allocator: str, spilled: list[str], types: dict[str, str],
           result: KernelResult | None) -> dict[str, SpillPlan]:
    """Spill plans, the affine rules kept to 32-bit integer classes."""
    _, allowed = ALLOCATORS[allocator]
    plans: dict[str, SpillPlan] = {}
    for name in spilled:
        if types[name] in REMAT_TYPES or result is None:
            (plans[name],) = plan(allocator, [name], result)
        elif SHARED in allowed and uniform_everywhere(result, name):
            plans[name] = SpillPlan(name, SHARED)
        else:
            plans[name] = SpillPlan(name, LOCAL)
    return plans


@dataclass
class Allocation:
    """The allocated entry text of one kernel and its statistics."""

    entry: str
    stats: dict[str, object]


def allocate_kernel(kernel: ir.Kernel, allocator: str, registers: int,
                    analysis: KernelResult | None, files: dict[str, int]) -> Allocation:
    """Allocate one PTX kernel: its new `.entry` text."""
    regs = ptx_registers(kernel)
    unknown = sorted({t for t in regs.values() if t not in BITS})
    if unknown:
        raise PtxAllocError(f"kernel {kernel.name}: registers of type .{unknown[0]} "
                            "cannot be spilled")
    items = body_ops(kernel, regs)
    try:
        live = liveness(kernel)
    except LivenessError as error:
        raise PtxAllocError(str(error)) from error
    spans = {n: s for n, s in intervals(kernel, live).items() if n in regs}
    by_class: dict[str, dict[str, Interval]] = {}
    for name, span in spans.items():
        by_class.setdefault(regs[name], {})[name] = span
    budget = {c: registers for c in by_class}
    for _ in range(4 * registers + 8):
        assignment = Assignment()
        for c, class_spans in sorted(by_class.items()):
            one = scan(class_spans, budget[c])
            assignment.registers.update(one.registers)
            assignment.spilled += one.spilled
        plans = _plans(allocator, assignment.spilled, regs, analysis)
        code = _Code(regs, plans)
        names = {n: f"{prefix(regs[n])}{k}" for n, k in assignment.registers.items()}
        body = _write_body(items, names, code, files)
        if code.shared_slots:
            body.scratch["b32"] = max(body.scratch["b32"], 1)
        over = {}
        for c in by_class.keys() | body.scratch.keys():
            used = len({k for n, k in assignment.registers.items() if regs[n] == c})
            extra = body.scratch[c] + (1 if c == "b32" and code.shared_slots else 0)
            if used + extra > registers:
                over[c] = registers - extra
        if not over:
            break
        for c, left in over.items():
            if left < 0 or c not in by_class or left >= budget[c]:
                raise PtxAllocError(
                    f"kernel {kernel.name}: {registers} registers of class .{c} are too "
                    f"few (the spill code alone needs {registers - left})")
            budget[c] = left
    else:  # pragma: no cover - the budgets only shrink
        raise PtxAllocError(f"kernel {kernel.name}: the register budgets do not settle")
    clash = sorted((v, w) for v, w in live.interfere
                   if v < w and v in names and w in names and names[v] == names[w])
    if clash:
        raise PtxAllocError(f"kernel {kernel.name}: interfering {clash[0]} share a register")
    shared_bytes = code.shared_slots * SLOT_BYTES * _warps(kernel)
    if shared_bytes > SHARED_LIMIT:
        raise PtxAllocError(f"kernel {kernel.name}: {code.shared_slots} shared spill slots "
                            f"per warp need {shared_bytes} bytes of shared memory")
    declarations = []
    for c in sorted(by_class.keys() | body.scratch.keys()):
        values = len({k for n, k in assignment.registers.items() if regs[n] == c})
        if values:
            declarations.append(f".reg .{c} {prefix(c)}<{values}>;")
        if body.scratch[c]:
            declarations.append(f".reg .{c} {prefix(c)}x<{body.scratch[c]}>;")
    setup: list[str] = []
    if code.shared_slots:
        declarations.append(f".reg .b32 {BASE};")
        declarations.append(f".shared .align {SLOT_BYTES} .b8 {SHARED_AREA}[{shared_bytes}];")
        setup = [f"\t{line}" for line in _setup_base(code.shared_slots)]
    if code.local_slots:
        declarations.append(f".local .align {SLOT_BYTES} .b8 "
                            f"{LOCAL_AREA}[{code.local_slots * SLOT_BYTES}];")
    entry = _entry(kernel, files, declarations, setup + body.lines, set(regs))
    return Allocation(entry, _stats(kernel, allocator, registers, assignment, plans, code,
                                    body, regs, len([i for i in items if isinstance(i, _Op)])))


def _entry(kernel: ir.Kernel, files: dict[str, int], declarations: list[str],
           body: list[str], allocated: set[str]) -> str:
    """The kernel's `.entry` with new register declarations and body (the declarations
    of registers not allocated, such as those of inline-asm scopes, are kept)."""
    original = print_kernel(kernel, files).split("\n")
    opening = original.index("{")
    end = original.index("", opening)
    kept = [line for line in original[opening + 1:end]
            if not line.startswith("\t.reg ") or line.rstrip(";").split()[-1] not in allocated]
    lines = [*original[:opening + 1], *kept, *(f"\t{d}" for d in declarations), "",
             *body, "}"]
    return "\n".join(lines) + "\n"


def _stats(kernel: ir.Kernel, allocator: str, registers: int, assignment: Assignment,
           plans: dict[str, SpillPlan], code: _Code, body: _Result, regs: dict[str, str],
           before: int) -> dict[str, object]:
    """Spills by rule and class, slots, registers per class, static spill instructions."""
    rules = Counter(p.rule for p in plans.values())
    classes = sorted(set(regs.values()))
    per_class = {c: len({k for n, k in assignment.registers.items() if regs[n] == c})
                 + body.scratch[c] + (1 if c == "b32" and code.shared_slots else 0)
                 for c in classes}
    return {
        "allocator": allocator, "register_budget": registers,
        "registers_used": assignment.used, "registers_by_class": per_class,
        "registers_original": dict(Counter(regs.values())),
        "scratch_registers": sum(body.scratch.values()),
        "definitions_removed": body.removed, "instructions_original": kernel.instruction_count,
        "ptx_instructions_original": before,
        "base_registers": 1 if code.shared_slots else 0,
        "spilled": len(plans), "spilled_names": sorted(plans),
        "spill_rules": {n: plans[n].rule for n in sorted(plans)},
        "spills_by_class": dict(Counter(regs[n] for n in plans)),
        "spills_local": rules[LOCAL], "spills_constant": rules[CONSTANT],
        "spills_shared": rules[SHARED], "spills_remat": rules[REMAT],
        "spills_shared_affine": rules[SHARED_AFFINE],
        "local_slots_per_thread": code.local_slots,
        "shared_slots_per_warp": code.shared_slots,
        **{k: code.static[k] for k in ("local_loads", "local_stores", "shared_loads",
                                       "shared_stores", "remat_instructions",
                                       "mad_instructions")}}


def allocate_program(program: ir.Program, kernels: set[str] | None, allocator: str,
                     registers: int,
                     analyze: Callable[[ir.Kernel, str], KernelResult]) -> ir.Program:
    """The program with the chosen kernels allocated (`analyze(kernel, name)`: a named
    analysis' result), read back from its new text."""
    files = {path: index for index, path in sorted(program.attrs.get("files", {}).items())}
    try:
        text = print_ptx(program)
    except PrintError as error:
        raise PtxAllocError(str(error)) from error
    stats: dict[str, dict[str, object]] = {}
    for kernel in program.kernels:
        if kernels is not None and kernel.name not in kernels:
            continue
        analysis_name = ALLOCATORS[allocator][0]
        result = analyze(kernel, analysis_name) if analysis_name else None
        allocation = allocate_kernel(kernel, allocator, registers, result, files)
        old = print_kernel(kernel, files)
        if old not in text:
            raise PtxAllocError(f"kernel {kernel.name}: its text is not in the module")
        text = text.replace(old, allocation.entry, 1)
        stats[kernel.name] = allocation.stats
    reread = parse_ptx(text, program.path)
    if reread.errors or len(reread.kernels) != len(program.kernels):
        first = reread.errors[0] if reread.errors else "kernels lost"
        raise PtxAllocError(f"the allocated PTX does not read back: {first}")
    for kernel in reread.kernels:
        if kernel.name in stats:
            kernel.attrs["transform_stats"] = stats[kernel.name]
    return reread
