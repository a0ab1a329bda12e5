"""Seeded random PTX kernels: the random μ-SIMD programs of `gpudiv.verify.randprog` in PTX.

`random_ptx(seed, ...)` generates a μ-SIMD kernel with `random_program` (cycles mode by
default: irreducible cycles, switches lowered as chains of branches, multi-way exits) and
translates it with `musimd_to_ptx` into a PTX 7.0 kernel for sm_80 that the PTX front end
and `ptxas -arch=sm_80` accept. The control-flow graph is kept block for block (a μ-SIMD
label becomes a PTX label, `bz`/`bnz` a `setp` and a predicated `bra`, `jump` a
`bra.uni`), and so is the arithmetic: every μ-SIMD variable is one `.b32` register and
each operator has the PTX instruction with the interpreter's semantics (32-bit wrap-around,
division truncating toward zero, shifts clamped, comparisons giving 0 or 1):

    + - *  add.s32 sub.s32 mul.lo.s32     / %    div.s32 rem.s32
    & | ^  and.b32 or.b32 xor.b32         << >>  shl.b32 shr.s32
    min max  min.s32 max.s32              < <= > >= == !=  setp.*.s32 + selp.s32 1, 0
    - ! ~  neg.s32, setp.eq.s32 + selp, not.b32

Parameters `n`, `k` are `.param .s32` read with `ld.param`; `tid`, `laneid`, `warpid`,
`ntid` are `%tid.x`, `%laneid`, `%warpid`, `%ntid.x`; `shared[a]` is a 16-word `.shared`
array, `local[a]` an 8-word `.local` array; `atominc`/`atomadd` are `atom.shared.add.u32`
plus the added amount (μ-SIMD gives each lane the new value, PTX the old one); `barrier` is
`bar.sync 0`; `stop` is `ret`; `sync` has no PTX counterpart and is dropped. A variable
that may be read before it is written is set to 0 at the top, as the μ-SIMD interpreter
starts every register at 0. A branch on a comparison computed just before it uses the
comparison's predicate directly (`@!%p bra` for `bz`), as nvcc's code does.

With `calls=True` some operations become calls to device functions, in the call sequence
nvcc's `-G` builds use (a `{ }` scope declaring `.param` arguments written with `st.param`,
`call.uni (retval0), f, (param0, …)`, the result read with `ld.param`), so that the oracle
also sees the front end's inlining: `min` (`gd_min`: arguments spilled to a `.local`
stack frame and read back, one `ret` per branch arm), `max` (`gd_max`: a + b − min(a, b)
through a nested call to `gd_min`), `*` (`gd_mul`: shift-and-add in a loop whose trip count
is the position of the multiplier's highest bit, a divergent loop exit when the multiplier
differs between lanes), `<` (`gd_lt`: 1 or 0 from two `ret`s) and `tid` (`gd_tid`: the
function reads `%tid.x` itself). Each computes exactly what the instruction it replaces
computes, so the kernel still behaves as the μ-SIMD program.

With `calls="recursive"`, `*` calls `gd_mulr` instead: shift-and-add by recursion
(a·b = 2a·(b >> 1) + (b odd ? a : 0), 0 when b is 0; as deep as the position of b's
highest bit, at most 33 activations), which keeps `a` in a `.local` frame across its
recursive call. Inlining stops at the recursive call, so the kernel runs with its calls
as calls and its deeper activations are checked against `gd_mulr` analysed on its own.
"""

from __future__ import annotations

from gpudiv import ir
from gpudiv.lang.musimd.parse import parse_musimd
from gpudiv.verify.randprog import random_program

SHARED_WORDS = 16
LOCAL_WORDS = 8
SPECIAL_REGISTERS = {"tid": "%tid.x", "laneid": "%laneid", "warpid": "%warpid",
                     "ntid": "%ntid.x"}
ARITHMETIC = {"+": "add.s32", "-": "sub.s32", "*": "mul.lo.s32", "/": "div.s32",
              "%": "rem.s32", "&": "and.b32", "|": "or.b32", "^": "xor.b32",
              "<<": "shl.b32", ">>": "shr.s32", "min": "min.s32", "max": "max.s32"}
COMPARISONS = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne"}

# Device functions of `calls=True`: name → (parameters, the functions it calls, body).
DEVICE_FUNCTIONS: dict[str, tuple[int, tuple[str, ...], str]] = {
    "gd_min": (2, (), """\t.local .align 4 .b8 __local_depot_min[8];
\t.reg .b64 %SP;
\t.reg .b64 %SPL;
\t.reg .pred %p<2>;
\t.reg .b32 %r<5>;
\tmov.u64 %SPL, __local_depot_min;
\tcvta.local.u64 %SP, %SPL;
\tld.param.u32 %r1, [gd_min_param_0];
\tld.param.u32 %r2, [gd_min_param_1];
\tst.u32 [%SP], %r1;
\tst.local.u32 [%SPL+4], %r2;
\tld.local.u32 %r3, [%SPL];
\tld.u32 %r4, [%SP+4];
\tsetp.lt.s32 %p1, %r3, %r4;
\t@%p1 bra $L_gd_min_first;
\tst.param.b32 [func_retval0], %r4;
\tret;
$L_gd_min_first:
\tst.param.b32 [func_retval0], %r3;
\tret;"""),
    "gd_max": (2, ("gd_min",), """\t.reg .b32 %r<6>;
\tld.param.u32 %r1, [gd_max_param_0];
\tld.param.u32 %r2, [gd_max_param_1];
\t{
\t.param .b32 param0;
\tst.param.b32 [param0], %r1;
\t.param .b32 param1;
\tst.param.b32 [param1], %r2;
\t.param .b32 retval0;
\tcall.uni (retval0), gd_min, (param0, param1);
\tld.param.b32 %r3, [retval0];
\t}
\tadd.s32 %r4, %r1, %r2;
\tsub.s32 %r5, %r4, %r3;
\tst.param.b32 [func_retval0], %r5;
\tret;"""),
    "gd_mul": (2, (), """\t.reg .pred %p<3>;
\t.reg .b32 %r<5>;
\tld.param.u32 %r1, [gd_mul_param_0];
\tld.param.u32 %r2, [gd_mul_param_1];
\tmov.u32 %r3, 0;
$L_gd_mul_loop:
\tsetp.eq.s32 %p1, %r2, 0;
\t@%p1 bra $L_gd_mul_done;
\tand.b32 %r4, %r2, 1;
\tsetp.eq.s32 %p2, %r4, 0;
\t@%p2 bra $L_gd_mul_next;
\tadd.s32 %r3, %r3, %r1;
$L_gd_mul_next:
\tshl.b32 %r1, %r1, 1;
\tshr.u32 %r2, %r2, 1;
\tbra.uni $L_gd_mul_loop;
$L_gd_mul_done:
\tst.param.b32 [func_retval0], %r3;
\tret;"""),
    "gd_lt": (2, (), """\t.reg .pred %p<2>;
\t.reg .b32 %r<3>;
\tld.param.u32 %r1, [gd_lt_param_0];
\tld.param.u32 %r2, [gd_lt_param_1];
\tsetp.lt.s32 %p1, %r1, %r2;
\t@%p1 bra $L_gd_lt_true;
\tst.param.b32 [func_retval0], 0;
\tret;
$L_gd_lt_true:
\tst.param.b32 [func_retval0], 1;
\tret;"""),
    "gd_mulr": (2, (), """\t.local .align 4 .b8 __local_depot_mulr[4];
\t.reg .b64 %SPL;
\t.reg .pred %p<3>;
\t.reg .b32 %r<8>;
\tmov.u64 %SPL, __local_depot_mulr;
\tld.param.u32 %r1, [gd_mulr_param_0];
\tld.param.u32 %r2, [gd_mulr_param_1];
\tsetp.eq.s32 %p1, %r2, 0;
\t@%p1 bra $L_gd_mulr_zero;
\tst.local.u32 [%SPL], %r1;
\tshl.b32 %r3, %r1, 1;
\tshr.u32 %r4, %r2, 1;
\t{
\t.param .b32 param0;
\tst.param.b32 [param0], %r3;
\t.param .b32 param1;
\tst.param.b32 [param1], %r4;
\t.param .b32 retval0;
\tcall.uni (retval0), gd_mulr, (param0, param1);
\tld.param.b32 %r5, [retval0];
\t}
\tand.b32 %r6, %r2, 1;
\tsetp.eq.s32 %p2, %r6, 0;
\t@%p2 bra $L_gd_mulr_even;
\tld.local.u32 %r7, [%SPL];
\tadd.s32 %r5, %r5, %r7;
$L_gd_mulr_even:
\tst.param.b32 [func_retval0], %r5;
\tret;
$L_gd_mulr_zero:
\tst.param.b32 [func_retval0], 0;
\tret;"""),
    "gd_tid": (0, (), """\t.reg .b32 %r<2>;
\tmov.u32 %r1, %tid.x;
\tst.param.b32 [func_retval0], %r1;
\tret;"""),
}
# The operators (and special register) `calls=True` computes by calling a device function.
CALLED = {"min": "gd_min", "max": "gd_max", "*": "gd_mul", "<": "gd_lt", "tid": "gd_tid"}
RECURSIVE_CALLED = {**CALLED, "*": "gd_mulr"}


class _Translator:
    """Emits the PTX of one μ-SIMD kernel; registers are numbered as they are needed."""

    def __init__(self, kernel: ir.Kernel, name: str, calls: bool | str = False) -> None:
        self.kernel = kernel
        self.name = name
        # The operators (and special register) computed by a call: none without `calls`.
        self.called_for = ({} if not calls else RECURSIVE_CALLED if calls == "recursive"
                           else CALLED)
        self.called: set[str] = set()  # the device functions the kernel calls
        self.body: list[str] = []
        self.registers: dict[str, str] = {}
        self.counts = {"r": 0, "p": 0, "rd": 0}
        self.predicate: tuple[str, str] | None = None  # (variable, predicate) just computed

    def fresh(self, kind: str) -> str:
        """A new register of kind `r` (.b32), `p` (.pred) or `rd` (.b64)."""
        self.counts[kind] += 1
        return f"%{kind}{self.counts[kind]}"

    def register(self, variable: str) -> str:
        """The .b32 register holding a μ-SIMD variable."""
        if variable not in self.registers:
            self.registers[variable] = self.fresh("r")
        return self.registers[variable]

    def emit(self, text: str) -> None:
        """One PTX instruction."""
        self.body.append(f"\t{text};")

    def value(self, operand: ir.Operand, immediate: bool = True) -> str:
        """A source operand: a register, or a literal when `immediate` (else moved to one)."""
        if isinstance(operand, ir.Var):
            return self.register(operand.name)
        if isinstance(operand, ir.Const) and immediate:
            return str(operand.value)
        if isinstance(operand, ir.Special) and operand.name in self.called_for:
            return self.call(self.called_for[operand.name], [])
        temporary = self.fresh("r")
        source = (SPECIAL_REGISTERS[operand.name] if isinstance(operand, ir.Special)
                  else str(operand))
        self.emit(f"mov.u32 {temporary}, {source}")
        return temporary

    def address(self, space: str, operand: ir.Operand) -> str:
        """The address of word `operand` of the shared or local array, as `[...]`."""
        array = "sh" if space == "shared" else "lo"
        if isinstance(operand, ir.Const):
            offset = 4 * operand.value
            return f"[{array}+{offset}]" if offset else f"[{array}]"
        index = self.value(operand, immediate=False)
        if space == "shared":
            base, offset, total = self.fresh("r"), self.fresh("r"), self.fresh("r")
            self.emit(f"mov.u32 {base}, {array}")
            self.emit(f"shl.b32 {offset}, {index}, 2")
            self.emit(f"add.s32 {total}, {base}, {offset}")
            return f"[{total}]"
        base, offset, total = self.fresh("rd"), self.fresh("rd"), self.fresh("rd")
        self.emit(f"mov.u64 {base}, {array}")
        self.emit(f"mul.wide.s32 {offset}, {index}, 4")
        self.emit(f"add.s64 {total}, {base}, {offset}")
        return f"[{total}]"

    def call(self, function: str, arguments: list[str], dest: str | None = None) -> str:
        """Call a device function of `DEVICE_FUNCTIONS` on registers; its result register."""
        self.called.add(function)
        dest = dest or self.fresh("r")
        self.body.append("\t{")
        names = []
        for k, argument in enumerate(arguments):
            self.body.append(f"\t.param .b32 param{k};")
            self.emit(f"st.param.b32 [param{k}], {argument}")
            names.append(f"param{k}")
        self.body.append("\t.param .b32 retval0;")
        self.emit(f"call.uni (retval0), {function}, ({', '.join(names)})")
        self.emit(f"ld.param.b32 {dest}, [retval0]")
        self.body.append("\t}")
        return dest

    # -- instructions -------------------------------------------------------------------

    def assign(self, instr: ir.Instruction) -> None:
        """Copies, unary and binary operators."""
        dest = self.register(instr.dest or "")
        operator = instr.operator or "copy"
        if operator in self.called_for and len(instr.args) == 2:
            left, right = self.value(instr.args[0], False), self.value(instr.args[1], False)
            self.call(self.called_for[operator], [left, right], dest)
        elif operator == "copy":
            self.emit(f"mov.u32 {dest}, {self.value(instr.args[0])}")
        elif len(instr.args) == 1:
            source = self.value(instr.args[0], immediate=False)
            if operator == "!":
                predicate = self.fresh("p")
                self.emit(f"setp.eq.s32 {predicate}, {source}, 0")
                self.emit(f"selp.s32 {dest}, 1, 0, {predicate}")
            else:
                self.emit(f"{'not.b32' if operator == '~' else 'neg.s32'} {dest}, {source}")
        elif operator in COMPARISONS:
            left, right = self.value(instr.args[0], False), self.value(instr.args[1])
            predicate = self.fresh("p")
            self.emit(f"setp.{COMPARISONS[operator]}.s32 {predicate}, {left}, {right}")
            self.emit(f"selp.s32 {dest}, 1, 0, {predicate}")
            self.predicate = (instr.dest or "", predicate)
        else:
            left, right = self.value(instr.args[0], False), self.value(instr.args[1])
            self.emit(f"{ARITHMETIC[operator]} {dest}, {left}, {right}")

    def memory(self, instr: ir.Instruction) -> None:
        """Loads, stores and atomics on the shared and local arrays."""
        space = instr.space or "shared"
        where = self.address(space, instr.args[0])
        if instr.kind == ir.STORE:
            self.emit(f"st.{space}.u32 {where}, {self.value(instr.args[1], False)}")
        elif instr.kind == ir.LOAD:
            self.emit(f"ld.{space}.u32 {self.register(instr.dest or '')}, {where}")
        else:
            amount = "1" if instr.operator == "inc" else self.value(instr.args[1], False)
            dest = self.register(instr.dest or "")
            self.emit(f"atom.shared.add.u32 {dest}, {where}, {amount}")
            self.emit(f"add.s32 {dest}, {dest}, {amount}")

    def branch(self, instr: ir.Instruction) -> None:
        """`bz`/`bnz`: a predicated `bra`, reusing a comparison's predicate when it can."""
        jump_if_zero = instr.operator == "bz"
        condition = instr.args[0]
        target = _label(instr.target or "")
        if (isinstance(condition, ir.Var) and self.predicate is not None
                and self.predicate[0] == condition.name):
            guard = ("@!" if jump_if_zero else "@") + self.predicate[1]
        else:
            predicate = self.fresh("p")
            test = "eq" if jump_if_zero else "ne"
            self.emit(f"setp.{test}.s32 {predicate}, {self.value(condition, False)}, 0")
            guard = "@" + predicate
        self.emit(f"{guard} bra {target}")

    def instruction(self, instr: ir.Instruction) -> None:
        """One μ-SIMD instruction as PTX (nothing for `sync`)."""
        just_computed, self.predicate = self.predicate, None  # valid one instruction
        if instr.kind == ir.ASSIGN:
            self.assign(instr)
        elif instr.kind in (ir.LOAD, ir.STORE, ir.ATOMIC):
            self.memory(instr)
        elif instr.kind == ir.BRANCH:
            self.predicate = just_computed
            self.branch(instr)
        elif instr.kind == ir.JUMP:
            self.emit(f"bra.uni {_label(instr.target or '')}")
        elif instr.kind == ir.STOP:
            self.emit("ret")
        elif instr.kind == ir.BARRIER:
            self.emit("bar.sync 0")
        elif instr.kind != ir.SYNC:
            raise ValueError(f"no PTX translation for a μ-SIMD '{instr.kind}' instruction")

    # -- the kernel ---------------------------------------------------------------------

    def prologue(self) -> None:
        """Parameters into their registers; zeros into variables maybe read unwritten."""
        for param in self.kernel.params:
            self.emit(f"ld.param.u32 {self.register(param)}, [{param}]")
        for variable in sorted(_maybe_read_first(self.kernel)):
            self.emit(f"mov.u32 {self.register(variable)}, 0")

    def text(self) -> str:
        """The whole PTX module."""
        self.prologue()
        targets = {i.target for i in self.kernel.instructions() if i.target}
        for block in self.kernel.blocks:
            self.predicate = None  # a block may be reached from elsewhere
            if block.label in targets:
                self.body.append(f"{_label(block.label)}:")
            for instr in block.instructions:
                self.instruction(instr)
        if not self.body[-1].strip().startswith(("ret", "bra")):
            self.emit("ret")
        params = ", ".join(f".param .s32 {p}" for p in self.kernel.params)
        head = [".version 7.0", ".target sm_80", ".address_size 64", "",
                *device_functions(self.called),
                f".visible .entry {self.name}({params})", "{",
                f"\t.reg .pred %p<{self.counts['p'] + 1}>;",
                f"\t.reg .b32 %r<{self.counts['r'] + 1}>;",
                f"\t.reg .b64 %rd<{self.counts['rd'] + 1}>;",
                f"\t.shared .align 4 .b32 sh[{SHARED_WORDS}];",
                f"\t.local .align 4 .b32 lo[{LOCAL_WORDS}];", ""]
        return "\n".join(head + self.body + ["}", ""])


def device_functions(called: set[str]) -> list[str]:
    """The PTX of the called device functions and those they call, callees first."""
    needed: list[str] = []

    def visit(name: str) -> None:
        if name not in needed:
            for callee in DEVICE_FUNCTIONS[name][1]:
                visit(callee)
            needed.append(name)

    for name in sorted(called):
        visit(name)
    lines = []
    for name in needed:
        arity, _, body = DEVICE_FUNCTIONS[name]
        params = ", ".join(f".param .b32 {name}_param_{k}" for k in range(arity))
        lines += [f".func (.param .b32 func_retval0) {name}({params})", "{", body, "}", ""]
    return lines


def _label(label: str) -> str:
    """A PTX label for a μ-SIMD label (prefixed: no clash with PTX names)."""
    return f"$L_{label}"


def _maybe_read_first(kernel: ir.Kernel) -> set[str]:
    """Variables that may be read before they are written: all but those written by the
    straight-line start of the kernel (up to its first branch) before any read of them."""
    written, read_first = set(kernel.params), set()
    for instr in kernel.instructions():
        if instr.kind in (ir.BRANCH, ir.JUMP, ir.STOP):
            break
        read_first |= set(instr.used_vars) - written
        if instr.dest is not None:
            written.add(instr.dest)
    every = {name for instr in kernel.instructions()
             for name in [*instr.used_vars, *([instr.dest] if instr.dest else [])]}
    return (every - written) | read_first


def musimd_to_ptx(kernel: ir.Kernel, name: str | None = None,
                  calls: bool | str = False) -> str:
    """The PTX module of one parsed μ-SIMD kernel (see the module doc for the mapping;
    `calls`: some operations through device functions, `"recursive"`: `*` by recursion)."""
    return _Translator(kernel, name or kernel.name, calls).text()


def random_ptx(seed: int, statements: int = 20, *, max_depth: int = 3, cycles: bool = True,
               unstructured: bool = False, name: str = "rand", calls: bool | str = False
               ) -> str:
    """The PTX of one random terminating kernel `NAME(n, k)` (module doc; `calls`: some
    operations through device functions, `"recursive"`: `*` by recursion)."""
    text = random_program(seed, statements, max_depth=max_depth, cycles=cycles,
                          unstructured=unstructured, name=name)
    program = parse_musimd(text, f"{name}.musimd")
    if program.errors:
        raise ValueError(f"generated μ-SIMD does not parse: {program.errors[0]}")
    return musimd_to_ptx(program.kernels[0], name, calls)
