"""The PTX machine: prepares every IR instruction of a kernel as a function on NumPy
lanes and runs the blocks of one launch on the shared engine (`gpudiv.interp.engine`);
the semantics are described in `gpudiv.interp.ptx`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gpudiv import ir
from gpudiv.interp import ptx_texture
from gpudiv.interp.engine import (
    BARRIER,
    BRANCH,
    CALL,
    EXEC,
    FAIL,
    JUMP,
    NOP,
    RET,
    STOP,
    Engine,
    Observer,
    Warp,
    reconvergence_pcs,
)
from gpudiv.interp.policies import control_for, selector
from gpudiv.interp.ptx_calls import CALL_OPERATORS, CallFrames, StackOverflow, frame_layouts
from gpudiv.interp.ptx_launch import (
    WARP_SIZE,
    PtxDeadlockError,
    PtxExecutionError,
    PtxLaunch,
    PtxRunResult,
    machine_policy,
)
from gpudiv.interp.ptx_memory import (
    GLOBAL_BASE,
    WINDOW_SIZE,
    WINDOWS,
    Fault,
    Memory,
    generic_address,
)
from gpudiv.interp.ptx_ops import (
    OpSpec,
    Unsupported,
    assign_semantics,
    bits,
    canonical,
    constant,
    dtype,
    kind,
)
from gpudiv.interp.ptx_registers import (
    STORAGE,
    register_reader,
    register_types,
    register_writer,
    storage_bits,
)
from gpudiv.interp.simt import Counters
from gpudiv.lang.ptx.types import TYPE_NAMES as _TYPE_NAMES


@dataclass
class _Op:
    """An instruction ready to run: a code, its function or control data, its location."""

    code: int
    index: int
    instr: ir.Instruction
    label: str | None
    fn: Callable | None = None
    target: int = -1
    rpc: int = -1
    cond: Callable | None = None
    taken_when: int = 1  # bnz: 1, bz: 0, brx.idx: the case index (see `case`)
    case: int | None = None
    message: str = ""
    callee: str = ""  # CALL: the function called
    # CALL through a function pointer: (the pointer's reader, [(function, its argument
    # copies)], function address → position in that list, per thread the position of
    # the function it called last: what the call's result instructions read)
    indirect: tuple | None = None
    # bar.red: the reduction ("popc", "and" or "or") and each lane's vote (see `_release`)
    reduction: tuple[str, Callable] | None = None
    # a warp collective (shfl, vote, activemask, redux): under mimd the warp's lanes meet
    collective: bool = False


class Machine:
    """Runs one launch of one kernel."""

    def __init__(self, kernel: ir.Kernel, launch: PtxLaunch, observer: Observer | None,
                 trace: list | None) -> None:
        self.kernel = kernel
        self.launch = launch
        self.observer = observer
        self.trace = trace
        self.threads = launch.threads
        # Calls run as calls: the functions the kernel may call (`ptx_calls`).
        self.functions: dict[str, ir.Kernel] = dict(kernel.attrs.get("functions", {}))
        recursive = frozenset(kernel.attrs.get("recursive", ()))
        self.types = register_types(kernel)
        for function in self.functions.values():
            self.types.update(register_types(function))
        self.types.update(self._call_registers())
        register_bytes = self.threads * sum(max(storage_bits(t) // 8, 1)
                                            for t in self.types.values())
        self.memory = Memory(kernel, launch, self.threads, register_bytes,
                             stack=launch.stack_size if recursive else 0)
        self.counters = Counters(warp_width=WARP_SIZE)
        self.policy = machine_policy(kernel, launch.reconvergence)
        self.block_reduction: np.generic | None = None  # the value of the last bar.red
        self.block_index = (0, 0, 0)
        self.regs: dict[str, np.ndarray] = {}
        for name, type_ in self.types.items():
            self.regs[name] = np.zeros(self.threads, dtype=STORAGE[storage_bits(type_)])
        for name in kernel.params:
            self.regs[name][:] = np.uint64(self.memory.param_values.get(name, 0))
        # the `.local` variables of recursive functions move with each activation
        layouts = frame_layouts(self.functions, recursive, self.memory.addresses,
                                kernel.attrs.get("symbols", {}))
        self.specials = self._specials([s for offsets, _ in layouts.values()
                                        for s in offsets])
        self.frames = CallFrames(self.functions, recursive, self.regs, self.specials,
                                 layouts, self.threads, self.memory.stack_base,
                                 launch.stack_size)
        self.relocatable = self.frames.relocatable
        self.chosen: dict[tuple, np.ndarray] = {}  # calls through pointers (`_chosen`)
        self._renames: dict[str, str] = {}
        self.ops = self._prepare()
        self.end = len(self.ops)
        mimd = self.policy == "mimd"
        self.engine = Engine(self, kernel.name, self.counters,
                             launch.max_steps * (WARP_SIZE if mimd else 1),
                             "thread steps (mimd)" if mimd else "warp steps",
                             observer, trace is not None)

    # -- special registers -------------------------------------------------------------
    def _specials(self, frame_symbols: list[str]) -> dict[str, np.ndarray]:
        """Special registers, and the addresses of the symbols used as values and of
        `frame_symbols` (the recursive functions' `.local` variables), per thread."""
        bx, by, bz = self.launch.block
        gx, gy, gz = self.launch.grid
        tid = np.arange(self.threads, dtype=np.int64)
        lane = tid % WARP_SIZE
        u32 = np.uint32

        def full(value) -> np.ndarray:
            return np.full(self.threads, value, dtype=u32)

        ones = np.uint64(1)
        lane64 = lane.astype(np.uint64)
        specials = {
            "%tid.x": (tid % bx).astype(u32), "%tid.y": (tid // bx % by).astype(u32),
            "%tid.z": (tid // (bx * by)).astype(u32),
            "%ntid.x": full(bx), "%ntid.y": full(by), "%ntid.z": full(bz),
            "%nctaid.x": full(gx), "%nctaid.y": full(gy), "%nctaid.z": full(gz),
            "%ctaid.x": full(0), "%ctaid.y": full(0), "%ctaid.z": full(0),
            "%laneid": lane.astype(u32), "%warpid": (tid // WARP_SIZE).astype(u32),
            "%nwarpid": full((self.threads + WARP_SIZE - 1) // WARP_SIZE),
            "%smid": full(0), "%nsmid": full(1), "%gridid": np.zeros(self.threads, np.uint64),
            "%lanemask_eq": (ones << lane64).astype(u32),
            "%lanemask_lt": ((ones << lane64) - ones).astype(u32),
            "%lanemask_le": ((ones << (lane64 + ones)) - ones).astype(u32),
            "%lanemask_gt": (~((ones << (lane64 + ones)) - ones)).astype(u32),
            "%lanemask_ge": (~((ones << lane64) - ones)).astype(u32),
            "%clock": full(0), "%clock_hi": full(0),
            "%clock64": np.zeros(self.threads, np.uint64),
            "%globaltimer": np.zeros(self.threads, np.uint64),
            "%globaltimer_lo": full(0), "%globaltimer_hi": full(0),
            "%total_smem_size": full(self.memory.shared_size),
            "%dynamic_smem_size": full(self.launch.dynamic_shared),
            "%aggr_smem_size": full(self.memory.shared_size),
        }
        for k in range(32):
            specials[f"%envreg{k}"] = full(0)
        used = [n for unit in (self.kernel, *self.functions.values()) for n in unit.specials]
        for name in (*used, *frame_symbols):
            if name in self.memory.addresses:
                specials[name] = np.full(self.threads, self.memory.addresses[name][1],
                                         dtype=np.uint64)
        return specials

    def _set_block(self, index: tuple[int, int, int]) -> None:
        self.block_index = index
        for axis, value in zip("xyz", index, strict=True):
            self.specials[f"%ctaid.{axis}"].fill(value)
        for name, store in self.regs.items():
            if name not in self.memory.param_values:
                store.fill(0)
        self.memory.reset_block()
        self.frames.reset()

    def _tick(self) -> None:
        """Clock registers follow the step count."""
        steps = self.steps
        self.specials["%clock"].fill(steps & 0xFFFFFFFF)
        self.specials["%clock64"].fill(steps)
        self.specials["%globaltimer"].fill(steps)
        self.specials["%globaltimer_lo"].fill(steps & 0xFFFFFFFF)

    # -- operands ----------------------------------------------------------------------
    def _store_of(self, operand: ir.Operand) -> np.ndarray:
        if isinstance(operand, ir.Special):
            store = self.specials.get(operand.name)
            if store is None:
                raise Unsupported(f"unsupported special register '{operand.name}'")
            return store
        return self.regs[self._renames.get(operand.name, operand.name)]

    def _get(self, operand: ir.Operand, type_: str, symbol: tuple | None = None) -> Callable:
        """A function from lanes to the operand's values at PTX type `type_`."""
        if symbol is not None and symbol[0] in self.relocatable:  # a recursive frame's
            read = register_reader(self.specials[symbol[0]], "u64")
            shift, want = np.uint64(symbol[1]), dtype(canonical(type_))
            return lambda sel: (read(sel) + shift).astype(want)
        if symbol is not None:
            space, address = self.memory.symbol(symbol[0])
            value = constant(address + symbol[1], type_)
            return lambda sel: value
        if isinstance(operand, ir.Const):
            value = constant(operand.value, type_)
            return lambda sel: value
        if isinstance(operand, ir.Special) and operand.name in ("%clock", "%clock64",
                                                                "%globaltimer",
                                                                "%globaltimer_lo"):
            read = register_reader(self._store_of(operand), type_)

            def clock(sel):
                self._tick()
                return read(sel)
            return clock
        return register_reader(self._store_of(operand), type_)

    # -- preparation ---------------------------------------------------------------------
    def _prepare(self) -> list[_Op]:
        """One op per IR instruction: the kernel's, then (calls run as calls) a stop the
        kernel's end reconverges at and each function's, its exit at its `call.return`."""
        units: list[tuple[ir.Kernel, str | None]] = [(self.kernel, None)]
        units += [(function, name) for name, function in self.functions.items()]
        bases: list[int] = []
        count = 0
        for unit, name in units:
            bases.append(count)
            count += unit.instruction_count + (1 if name is None and self.functions else 0)
        self.entries = {name: base for (_, name), base in zip(units, bases, strict=True)
                        if name is not None}
        ops: list[_Op] = []
        for (unit, name), base in zip(units, bases, strict=True):
            ops += self._prepare_unit(unit, base, name)
        self._renames = {}
        return ops

    def _prepare_unit(self, unit: ir.Kernel, base: int, function: str | None) -> list[_Op]:
        """The ops of the kernel or of one function, from pc `base` on."""
        start: dict[str, int] = {}
        count = base
        for block in unit.blocks:
            start[block.label] = count
            count += len(block.instructions)
        end = count if function is None else start.get("$ret", count)
        ipdom = reconvergence_pcs(unit, start, end, self.policy in ("marked", "aware"))
        renames, copies = self._hazards(unit.instructions(), base)
        self._unit = function
        ops: list[_Op] = []
        label: str | None = None
        for block in unit.blocks:
            if block.user_label:
                label = block.label
            for instr in block.instructions:
                op = _Op(EXEC, base + len(ops), instr, label)
                self._renames = renames.get(op.index, {})
                try:
                    self._compile(op, instr)
                except Unsupported as error:
                    op.code, op.message = FAIL, str(error)
                except (KeyError, IndexError, TypeError, ValueError, AttributeError) as error:
                    op.code = FAIL
                    op.message = (f"cannot execute '{instr.text}' (internal error of the PTX "
                                  f"interpreter: {type(error).__name__}: {error})")
                if op.index in copies and op.code == EXEC:
                    op.fn = _with_copies(op.fn, [(self.regs[a], self.regs[b])
                                                 for a, b in copies[op.index]])
                if instr.target is not None:
                    op.target = start[instr.target]
                op.rpc = ipdom.get(block.label, end)
                root = str(instr.attrs.get("opcode", "")).split(".", 1)[0]
                op.collective = root in ("shfl", "vote", "activemask", "redux")
                ops.append(op)
        if function is None and self.functions:  # the kernel's end, before the functions
            ops.append(_Op(STOP, count, ir.Instruction(ir.STOP, unit.loc), label))
        return ops

    def _hazards(self, instructions: list[ir.Instruction], base: int = 0):
        """The IR instructions lowered from one PTX instruction read their sources before
        any of them writes (`ld.v2 {%rd1, %rd2}, [%rd1]`): a later one that reads a
        register an earlier one wrote reads a shadow copied when the first one runs.
        Returns renames per instruction and copies per first instruction."""
        renames: dict[int, dict[str, str]] = {}
        copies: dict[int, list[tuple[str, str]]] = {}
        first = 0
        written: set[str] = set()
        for index, instr in enumerate(instructions):
            previous = instructions[index - 1] if index else None
            if previous is None or instr.group is None or instr.group != previous.group:
                first, written = index, set()
            reads = set(instr.used_vars)
            if instr.operator in ("select", "select.not") and len(instr.args) > 1:
                reads.discard(instr.args[1].name if isinstance(instr.args[1], ir.Var) else "")
            for name in sorted(reads & written):
                shadow = f"{name}@shadow"
                if shadow not in self.regs:
                    self.regs[shadow] = np.zeros_like(self.regs[name])
                renames.setdefault(base + index, {})[name] = shadow
                if (name, shadow) not in copies.get(base + first, []):
                    copies.setdefault(base + first, []).append((name, shadow))
            if instr.dest:
                written.add(instr.dest)
        return renames, copies

    def _compile(self, op: _Op, instr: ir.Instruction) -> None:
        kind_ = instr.kind
        opcode = str(instr.attrs.get("opcode", instr.operator or ""))
        if kind_ == ir.BRANCH:
            op.code = BRANCH
            if instr.operator == "brx.idx":
                op.cond = self._get(instr.args[0], "u32")
                op.case = int(instr.attrs.get("case", 0))
            else:
                op.cond = self._get(instr.args[0], "pred")
                op.taken_when = 1 if instr.operator == "bnz" else 0
        elif kind_ == ir.JUMP:
            op.code = JUMP
        elif kind_ == ir.STOP:
            op.code = STOP
            if opcode.startswith("trap"):
                op.code, op.message = FAIL, "trap: the kernel aborted"
        elif kind_ == ir.BARRIER:
            op.code = NOP if opcode.startswith("bar.arrive") or ".arrive" in opcode else BARRIER
            guard = instr.guard
            if guard:
                op.cond = self._guard(guard)
        elif kind_ in (ir.SYNC, ir.FENCE):
            op.code = NOP
        elif kind_ == ir.ASSIGN and opcode.split(".")[0] in ("bar", "barrier") \
                and "red" in opcode.split("."):
            op.fn, op.reduction = self._barrier_reduction(instr, opcode)
        elif kind_ == ir.ASSIGN:
            op.fn = self._assign(instr, opcode)
        elif kind_ == ir.LOAD:
            op.fn = self._load(instr, opcode)
        elif kind_ == ir.STORE:
            op.fn = self._store(instr, opcode)
        elif kind_ == ir.ATOMIC:
            op.fn = self._atomic(instr, opcode)
        elif instr.operator in CALL_OPERATORS and self.functions:
            self._compile_call(op, instr)
        elif kind_ == ir.OPAQUE:
            op.fn = self._opaque(instr, opcode)
        else:
            raise Unsupported(f"unsupported instruction kind '{kind_}'")

    # -- calls run as calls (`ptx_calls`) ------------------------------------------------
    def _call_registers(self) -> dict[str, str]:
        """The registers calls pass values through, with their types: one per input slot
        of each function (typed like the register the callee reads it into) and one per
        output slot (typed like the register the callee returns)."""
        found: dict[str, str] = {}
        for name, function in self.functions.items():
            for instr in function.instructions():
                if instr.operator == "call.input" and instr.dest is not None:
                    found[_passing(name, "in", instr.attrs["input"])] = \
                        self.types.get(instr.dest, "b64")
                elif instr.operator == "call.return":
                    for slot, arg in zip(instr.attrs["outputs"], instr.args, strict=True):
                        found[_passing(name, "out", slot)] = self.types.get(
                            arg.name if isinstance(arg, ir.Var) else "", "b64")
        return found

    def _compile_call(self, op: _Op, instr: ir.Instruction) -> None:
        """A call, a callee's parameter or its return, or a call's result."""
        operator = instr.operator
        if operator == "call.input":
            op.fn = self._pass(instr.dest, ir.Var(_passing(self._unit, "in",
                                                           instr.attrs["input"])))
            return
        if operator == "call.return":
            op.code = RET
            copies = [self._pass(_passing(self._unit, "out", slot), arg)
                      for slot, arg in zip(instr.attrs["outputs"], instr.args, strict=True)]
            op.fn = _all_of(copies)
            return
        if "indirect" in instr.attrs:
            self._indirect_call(op, instr)
            return
        if "indirect_output" in instr.attrs:
            op.fn = self._indirect_result(instr)
            return
        callee = str(instr.attrs.get("callee", ""))
        if callee not in self.functions:
            raise Unsupported(f"cannot execute the call to '{callee or '?'}': the function "
                              f"has no body in this file or could not be lowered")
        if instr.dest is not None:  # a result, after the callee returned
            slot = instr.attrs.get("output")
            if slot is None:
                raise Unsupported(f"cannot execute the call to '{callee}': a result read "
                                  f"from several output slots of the callee")
            op.fn = self._pass(instr.dest, ir.Var(_passing(callee, "out", slot)))
            return
        op.code, op.callee = CALL, callee
        op.fn = self._arguments(callee, instr.attrs.get("call_inputs", ()), instr.args)
        op.target = self.entries[callee]
        if instr.guard is not None:
            op.cond = self._guard(instr.guard)

    def _arguments(self, callee: str, call_inputs: tuple, args: tuple) -> Callable:
        """Copy a call's arguments into the registers of the callee's input slots."""
        copies = []
        for slot, positions in call_inputs:
            register = _passing(callee, "in", slot)
            if register not in self.regs:
                continue
            if positions is not None and len(positions) != 1:
                raise Unsupported(f"cannot execute the call to '{callee}': it reads a "
                                  f"parameter at an offset its caller did not write as such")
            source = ir.Const(0) if positions is None else args[positions[0]]
            copies.append(self._pass(register, source))
        return _all_of(copies)

    def _chosen(self, instr: ir.Instruction) -> np.ndarray:
        """Per thread, which function the call through a pointer of `instr`'s PTX
        instruction called last (the call and its results share the group)."""
        key = (self._unit, instr.group)
        if key not in self.chosen:
            self.chosen[key] = np.full(self.threads, -1, dtype=np.int16)
        return self.chosen[key]

    def _indirect_call(self, op: _Op, instr: ir.Instruction) -> None:
        """A call through a function pointer (`_KernelLowering.indirect_call`)."""
        reachable = [(f, self._arguments(f, inputs, instr.args))
                     for f, inputs in instr.attrs["indirect"] if f in self.functions]
        at = {self.memory.addresses[f][1]: k for k, (f, _) in enumerate(reachable)}
        op.code = CALL
        op.indirect = (self._get(instr.args[0], "u64"), reachable, at, self._chosen(instr))
        if instr.guard is not None:
            op.cond = self._guard(instr.guard)

    def _indirect_result(self, instr: ir.Instruction) -> Callable:
        """A result of a call through a function pointer: in each lane, the output of the
        function that lane called (0 where that function never writes it)."""
        chosen = self._chosen(instr)
        takes = []
        for function, slot in instr.attrs["indirect_output"]:
            register = _passing(function, "out", slot) if slot is not None else ""
            takes.append(self._pass(instr.dest, ir.Var(register) if register in self.regs
                                    else ir.Const(0)))

        def result(sel, lanes, warp):
            picked = chosen[sel]
            for k, take in enumerate(takes):
                mask = picked == k
                if mask.all():
                    take(sel, lanes, warp)
                elif mask.any():
                    some = lanes[mask]
                    take(selector(some), some, warp)
        return result

    def _pass(self, dest: str, source: ir.Operand) -> Callable:
        """Copy a value bit for bit into register `dest` (a call's arguments, results)."""
        type_ = self._raw_type(source.name if isinstance(source, ir.Var) else dest)
        get = self._get(source, type_)
        write = register_writer(self.regs[dest], type_)
        return lambda sel, lanes, warp: write(sel, get(sel))

    def _guard(self, guard: ir.Guard) -> Callable:
        """The lanes mask of an instruction's guard (`@%p` / `@!%p`)."""
        read = self._get(guard.operand, "pred")
        if guard.negated:
            return lambda sel: ~np.asarray(read(sel))
        return read

    # -- assignments -------------------------------------------------------------------
    def _assign(self, instr: ir.Instruction, opcode: str) -> Callable:
        operator = instr.operator or ""
        dest = instr.dest
        if dest is None:
            raise Unsupported(f"'{opcode}' without a destination")
        if operator in ("select", "select.not"):
            return self._select(instr)
        root = opcode.split(".", 1)[0]
        if operator == "copy" or "slot_read" in instr.attrs or root in ("ld", "st", "call"):
            return self._copy(instr, opcode)
        if root in ("vote", "activemask", "redux"):
            return self._collective(instr, opcode, root)
        if root in ("cvta", "isspacep"):
            return self._address_op(instr, opcode, root)
        if root in ("txq", "suq"):
            return self._query(instr, opcode)
        if root == "bar":
            raise Unsupported(f"unsupported instruction '{opcode}'")
        store = self.regs[dest]
        spec = OpSpec(opcode, len(instr.args), instr.attrs.get("element"),
                      bool(instr.attrs.get("carry")), storage_bits(self.types[dest]),
                      tuple(instr.attrs.get("negated", ())),
                      [a.value if isinstance(a, ir.Const) else None for a in instr.args])
        semantics = assign_semantics(spec)
        if len(semantics.arg_types) != len(instr.args):
            raise Unsupported(f"'{opcode}' with {len(instr.args)} operands")
        symbols = instr.attrs.get("arg_symbols") or (None,) * len(instr.args)
        getters = [self._get(a, t, s) for a, t, s in
                   zip(instr.args, semantics.arg_types, symbols, strict=True)]
        write = register_writer(store, semantics.result_type)
        fn = semantics.fn
        if len(getters) == 1:
            g0 = getters[0]
            return lambda sel, lanes, warp: write(sel, fn(g0(sel)))
        if len(getters) == 2:
            g0, g1 = getters
            return lambda sel, lanes, warp: write(sel, fn(g0(sel), g1(sel)))
        if len(getters) == 3:
            g0, g1, g2 = getters
            return lambda sel, lanes, warp: write(sel, fn(g0(sel), g1(sel), g2(sel)))
        return lambda sel, lanes, warp: write(sel, fn(*[g(sel) for g in getters]))

    def _select(self, instr: ir.Instruction) -> Callable:
        dest = instr.dest
        store = self.regs[dest]
        type_ = self._raw_type(dest)
        cond = self._get(instr.args[0], "pred")
        value = self._get(instr.args[1], type_)
        current = register_reader(store, type_)
        write = register_writer(store, type_)
        negated = instr.operator == "select.not"

        def select(sel, lanes, warp):
            c = np.asarray(cond(sel))
            if negated:
                c = ~c
            if c.all():
                write(sel, value(sel))
            elif c.any():
                write(sel, np.where(c, value(sel), current(sel)))
        return select

    def _raw_type(self, name: str) -> str:
        type_ = self.types.get(name, "b64")
        if type_ == "pred":
            return "pred"
        return f"u{storage_bits(type_)}"

    def _copy(self, instr: ir.Instruction, opcode: str) -> Callable:
        dest = instr.dest
        store = self.regs[dest]
        parts = opcode.split(".")
        types = [p for p in parts[1:] if p in _TYPE_NAMES]
        is_signed = bool(types) and kind(types[-1]) == "s"
        if "slot_read" in instr.attrs:
            return self._slot_read(instr, store, is_signed)
        source = instr.args[0]
        if isinstance(source, ir.Const):
            type_ = types[-1] if types else self._raw_type(dest)
            if type_ == "pred" or self._raw_type(dest) == "pred":
                type_ = "pred"
        else:
            type_ = self._raw_type(source.name) if isinstance(source, ir.Var) else "u32"
        symbols = instr.attrs.get("arg_symbols") or (None,)
        get = self._get(source, type_, symbols[0])
        write = register_writer(store, type_, sign_extend=is_signed)
        return lambda sel, lanes, warp: write(sel, get(sel))

    def _slot_read(self, instr: ir.Instruction, store: np.ndarray, is_signed: bool):
        where, size, offsets = instr.attrs["slot_read"]
        getters = []
        for arg, offset in zip(instr.args, offsets, strict=True):
            type_ = self._raw_type(arg.name) if isinstance(arg, ir.Var) else "u64"
            getters.append((register_reader(self._store_of(arg), type_), offset, bits(type_)))
        width = 8 * size
        write = register_writer(store, f"u{width}" if width in (8, 16, 32, 64) else "u64",
                        sign_extend=is_signed)

        def join(sel, lanes, warp):
            total = np.zeros(len(lanes), dtype=np.uint64)
            for get, offset, nbits in getters:
                shift = 8 * (offset - where)
                value = np.asarray(get(sel)).astype(np.uint64)
                if -nbits < shift < 64:
                    total |= (value << np.uint64(shift)) if shift >= 0 else (
                        value >> np.uint64(-shift))
            if width < 64:
                total &= np.uint64((1 << width) - 1)
            write(sel, total.astype(dtype(f"u{width}")) if width in (8, 16, 32) else total)
        return join

    def _address_op(self, instr: ir.Instruction, opcode: str, root: str) -> Callable:
        """cvta (state space ↔ generic) and isspacep."""
        parts = opcode.split(".")
        types = [p for p in parts[1:] if p in _TYPE_NAMES]
        type_ = canonical(types[-1]) if types else "u64"
        space = next((p for p in parts[1:] if p in ("global", "shared", "local", "const",
                                                     "param")), None)
        if space is None:
            raise Unsupported(f"unsupported instruction '{opcode}'")
        symbols = instr.attrs.get("arg_symbols") or (None,)
        get = self._get(instr.args[0], type_, symbols[0])
        store = self.regs[instr.dest]
        dt = dtype(type_)
        if root == "isspacep":
            write = register_writer(store, "pred")
            get = self._get(instr.args[0], "u64", symbols[0])

            def isspacep(sel, lanes, warp):
                a = np.asarray(get(sel)).astype(np.int64)
                if space == "global":
                    write(sel, a >= GLOBAL_BASE)
                else:
                    base = WINDOWS[space]
                    write(sel, (a >= base) & (a < base + WINDOW_SIZE))
            return isspacep
        write = register_writer(store, type_)
        if space == "global":
            return lambda sel, lanes, warp: write(sel, get(sel))
        window = dt(WINDOWS[space])
        if "to" in parts:
            return lambda sel, lanes, warp: write(sel, np.asarray(get(sel) - window, dt))
        return lambda sel, lanes, warp: write(sel, np.asarray(get(sel) + window, dt))

    def _collective(self, instr: ir.Instruction, opcode: str, root: str) -> Callable:
        """vote, activemask, redux: one value for all participating lanes."""
        parts = opcode.split(".")
        hidden = tuple(instr.implicit)
        negated = set(instr.attrs.get("negated", ()))
        store = self.regs[instr.dest]
        guard = instr.guard
        held = self._guard(guard) if guard else None

        def participants(sel, lanes):
            if held is None:
                return np.ones(len(lanes), dtype=bool)
            return np.broadcast_to(held(sel), lanes.shape)

        if root == "activemask":
            write = register_writer(store, "u32")

            def activemask(sel, lanes, warp):
                mask = participants(sel, lanes)
                write(sel, _ballot(lanes[mask]))
            return activemask
        if root == "vote":
            if not hidden:
                raise Unsupported(f"'{opcode}' without operands")
            pred = self._get(hidden[0], "pred")
            flip = 0 in negated
            mode = next((p for p in parts[1:] if p in ("all", "any", "uni", "ballot")), None)
            if mode is None:
                raise Unsupported(f"unsupported instruction '{opcode}'")
            write = register_writer(store, "u32" if mode == "ballot" else "pred")

            def vote(sel, lanes, warp):
                mask = participants(sel, lanes)
                p = np.broadcast_to(np.asarray(pred(sel)), lanes.shape)
                p = ~p if flip else p
                p = p[mask]
                if mode == "ballot":
                    write(sel, _ballot(lanes[mask][p]))
                elif mode == "all":
                    write(sel, np.bool_(p.all()))
                elif mode == "any":
                    write(sel, np.bool_(p.any()))
                else:
                    write(sel, np.bool_(p.all() or not p.any()))
            return vote
        # redux.sync.op.type d, a, membermask
        types = [p for p in parts[1:] if p in _TYPE_NAMES]
        op_name = next((p for p in parts[1:] if p in ("add", "min", "max", "and", "or",
                                                       "xor")), None)
        if not hidden or op_name is None or not types:
            raise Unsupported(f"unsupported instruction '{opcode}'")
        type_ = canonical(types[-1])
        get = self._get(hidden[0], type_)
        write = register_writer(store, type_)
        reduce = {"add": np.add, "min": np.minimum, "max": np.maximum,
                  "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op_name]

        def redux(sel, lanes, warp):
            mask = participants(sel, lanes)
            values = np.broadcast_to(np.asarray(get(sel)), lanes.shape)[mask]
            write(sel, reduce.reduce(values) if len(values) else dtype(type_)(0))
        return redux

    def _barrier_reduction(self, instr: ir.Instruction,
                           opcode: str) -> tuple[Callable, tuple[str, Callable]]:
        """bar.red.popc.u32 / bar.red.and.pred / bar.red.or.pred d, a{, b}, {!}c: the
        lowering puts the barrier just before this; when it releases, `_release` reduces
        the votes of every thread of the block and this writes the result to all lanes."""
        parts = opcode.split(".")
        mode = next((p for p in parts[1:] if p in ("popc", "and", "or")), None)
        hidden = tuple(instr.implicit)
        if mode is None or len(hidden) < 2 or instr.dest is None:
            raise Unsupported(f"unsupported instruction '{opcode}'")
        pred = self._get(hidden[-1], "pred")
        flip = len(hidden) - 1 in set(instr.attrs.get("negated", ()))
        write = register_writer(self.regs[instr.dest], "u32" if mode == "popc" else "pred")

        def votes(sel, lanes) -> np.ndarray:
            vote = np.broadcast_to(np.asarray(pred(sel), dtype=bool), lanes.shape)
            return ~vote if flip else vote

        def result(sel, lanes, warp):
            write(sel, self.block_reduction)
        return result, (mode, votes)

    # -- memory --------------------------------------------------------------------------
    def _address(self, instr: ir.Instruction, base: ir.Operand) -> tuple[str, Callable]:
        """(space, function from lanes to int64 addresses) of a memory access."""
        attrs = instr.attrs
        disp = int(attrs.get("disp", 0))
        space = instr.space or "generic"
        if attrs.get("generic"):
            space = "generic"
        symbol = attrs.get("symbol")
        if symbol is not None and str(symbol) in self.relocatable:  # a recursive frame's
            read = register_reader(self.specials[str(symbol)], "u64")
            shift = np.int64(disp + (WINDOWS["local"] if space == "generic" else 0))
            return space, lambda sel: read(sel).astype(np.int64) + shift
        if symbol is not None:
            sym_space, address = self.memory.symbol(str(symbol))
            if space == "generic":
                address = generic_address(sym_space, address)
            value = np.int64(address + disp)
            return space, lambda sel: value
        if space in ("texture", "surface"):
            raise Unsupported(f"unsupported instruction '{attrs.get('opcode')}' "
                              f"(texture and surface memory)")
        if isinstance(base, ir.Const):
            value = np.int64(base.value + disp)
            return space, lambda sel: value
        width = storage_bits(self._type_of_operand(base))
        read = register_reader(self._store_of(base), f"u{width}")
        offset = np.int64(disp)
        if disp == 0:
            return space, lambda sel: read(sel).astype(np.int64)
        if width <= 32:  # a 32-bit address: register + displacement wraps at 32 bits
            return space, lambda sel: (read(sel).astype(np.int64) + offset) & 0xFFFFFFFF
        return space, lambda sel: read(sel).astype(np.int64) + offset

    def _type_of_operand(self, operand: ir.Operand) -> str:
        if isinstance(operand, ir.Special):
            store = self.specials.get(operand.name)
            return "u64" if store is not None and store.dtype == np.uint64 else "u32"
        type_ = self.types.get(operand.name, "b64")
        return "u64" if type_ == "pred" else type_

    # -- textures and surfaces (semantics in ptx_texture) --------------------------------
    def _texture_operands(self, instr: ir.Instruction) -> tuple[np.ndarray | None,
                                                                Callable | None, list]:
        """(array bound to a named texture/surface reference, or None; for an object the
        reader of its handle register; the operands after the handle)."""
        attrs = instr.attrs
        name = attrs.get("texture") or (attrs.get("symbol") if instr.kind == ir.STORE
                                        else None)
        if name is None:
            return None, self._get(instr.args[0], "u64"), list(instr.args[1:])
        array = self.memory.named.get(str(name))
        if array is None:
            raise Unsupported(f"no array bound to texture or surface '{name}'")
        operands = list(attrs.get("coords") or instr.args)
        if instr.kind == ir.STORE:
            operands = list(instr.args)
        return array, None, operands

    def _bound(self, named: np.ndarray | None, handles: Callable | None, sel,
               count: int) -> list[tuple[np.ndarray, np.ndarray | None]]:
        """[(array, lanes mask or None for all)] of the handles the `count` lanes hold."""
        if named is not None:
            return [(named, None)]
        values = np.broadcast_to(np.asarray(handles(sel)), (count,))
        groups = []
        for value in np.unique(values).tolist():
            mask = values == value
            index = ptx_texture.handle_index(int(value), len(self.memory.bound))
            if index is None:
                raise Fault(f"handle {int(value):#x} names no bound texture or surface",
                             mask)
            groups.append((self.memory.bound[index], None if mask.all() else mask))
        return groups

    def _query(self, instr: ir.Instruction, opcode: str) -> Callable:
        """txq/suq: a property of the bound array (`ptx_texture.query`)."""
        parts = opcode.split(".")
        what = parts[1] if len(parts) > 1 else ""
        handle = instr.args[0] if instr.args else None
        if isinstance(handle, ir.Special):  # a named reference
            array = self.memory.named.get(handle.name)
            if array is None:
                raise Unsupported(f"no array bound to texture or surface '{handle.name}'")
            named, handles = array, None
        elif handle is not None:
            named, handles = None, self._get(handle, "u64")
        else:
            raise Unsupported(f"'{opcode}' without a texture")
        write = register_writer(self.regs[instr.dest], "u32")

        def query(sel, lanes, warp):
            out = np.zeros(len(lanes), dtype=np.uint32)
            for array, mask in self._bound(named, handles, sel, len(lanes)):
                try:
                    value = ptx_texture.query(array, what)
                except ptx_texture.TextureUnsupported as error:
                    raise Unsupported(f"{error} ({opcode})") from None
                if mask is None:
                    out[:] = value
                else:
                    out[mask] = value
            write(sel, out)
        return query

    def _texture(self, instr: ir.Instruction, opcode: str) -> Callable:
        """tex, tld4 and suld: element `element` of a fetch, per bound array."""
        try:
            form = ptx_texture.parse_form(opcode, _TYPE_NAMES)
        except ptx_texture.TextureUnsupported as error:
            raise Unsupported(str(error)) from None
        if form.root == "sust" or instr.dest is None:
            raise Unsupported(f"unsupported instruction '{opcode}'")
        named, handles, operands = self._texture_operands(instr)
        if len(operands) < form.dims or (form.root == "tld4" and form.dims != 2):
            raise Unsupported(f"'{opcode}' with {len(operands)} coordinates")
        element = int(instr.attrs.get("element") or 0)
        if form.root == "suld":
            size = bits(form.types[0]) // 8
            result = f"u{8 * size}"
            getters = [self._get(c, "s32") for c in operands[:form.dims]]

            def compute(array, coords):
                return ptx_texture.surface_load(array, form, coords, element, size)
        else:
            if len(form.types) != 2:
                raise Unsupported(f"unsupported instruction '{opcode}'")
            result = canonical(form.types[0])
            getters = [self._get(c, canonical(form.types[1])) for c in operands[:form.dims]]
            out_dtype = dtype(result)
            fn = ptx_texture.gather if form.root == "tld4" else ptx_texture.fetch

            def compute(array, coords):
                return fn(array, form, coords, element, out_dtype)
        write = register_writer(self.regs[instr.dest], result)
        guard = instr.attrs.get("guard")
        held = self._guard(str(guard)) if guard else None

        def texture(sel, lanes, warp):
            coords = [np.broadcast_to(np.asarray(g(sel)), lanes.shape) for g in getters]
            if held is not None:  # lanes whose guard fails read texel 0 (never fault)
                skip = ~np.broadcast_to(held(sel), lanes.shape)
                coords = [np.where(skip, np.zeros_like(c), c) for c in coords]
            write(sel, self._per_texture(named, handles, sel, lanes, coords, compute))
        return texture

    def _per_texture(self, named, handles, sel, lanes: np.ndarray, coords: list,
                     compute: Callable) -> np.ndarray:
        """`compute(array, coords)` for each group of lanes holding the same handle."""
        out = None
        for array, mask in self._bound(named, handles, sel, len(lanes)):
            try:
                if mask is None:
                    return compute(array, coords)
                values = compute(array, [c[mask] for c in coords])
            except ptx_texture.TextureFault as fault:
                raise Fault(fault.message, _widen(fault.mask, mask),
                             outside=fault.outside) from None
            if out is None:
                out = np.zeros(len(lanes), dtype=values.dtype)
            out[mask] = values
        return out

    def _surface_store(self, instr: ir.Instruction, opcode: str) -> Callable:
        """sust.b: the values' raw bits at byte x (and y, z) of the bound surface."""
        try:
            form = ptx_texture.parse_form(opcode, _TYPE_NAMES)
        except ptx_texture.TextureUnsupported as error:
            raise Unsupported(str(error)) from None
        if form.root != "sust":
            raise Unsupported(f"unsupported instruction '{opcode}'")
        named, handles, operands = self._texture_operands(instr)
        size = bits(form.types[0]) // 8
        if len(operands) < form.vector + form.dims:
            raise Unsupported(f"'{opcode}' with {len(operands)} operands")
        split = len(operands) - form.vector
        getters = [self._get(c, "s32") for c in operands[:split][:form.dims]]
        values = [self._get(v, f"u{8 * size}") for v in operands[split:]]
        guard = instr.attrs.get("guard")
        held = self._guard(str(guard)) if guard else None

        def store(sel, lanes, warp):
            keep = None
            if held is not None:
                keep = np.broadcast_to(held(sel), lanes.shape)
                if not keep.any():
                    return
            for array, mask in self._bound(named, handles, sel, len(lanes)):
                if keep is not None:
                    mask = keep if mask is None else mask & keep
                pick = (lambda a: a) if mask is None else (lambda a, m=mask: a[m])
                coords = [pick(np.broadcast_to(np.asarray(g(sel)), lanes.shape))
                          for g in getters]
                data = [pick(np.broadcast_to(np.asarray(v(sel)), lanes.shape))
                        for v in values]
                if not len(coords[0]):
                    continue
                try:
                    ptx_texture.surface_store(array, form, coords, data, size)
                except ptx_texture.TextureFault as fault:
                    raise Fault(fault.message, _widen(fault.mask, mask),
                             outside=fault.outside) from None
        return store

    def _load(self, instr: ir.Instruction, opcode: str) -> Callable:
        parts = opcode.split(".")
        if instr.space == "texture":
            return self._texture(instr, opcode)
        types = [p for p in parts[1:] if p in _TYPE_NAMES]
        if not types or instr.dest is None:
            raise Unsupported(f"unsupported instruction '{opcode}'")
        type_ = canonical(types[-1])
        if type_ == "pred" or bits(type_) > 64:
            raise Unsupported(f"unsupported instruction '{opcode}'")
        space, address = self._address(instr, instr.args[0])
        size = bits(type_) // 8
        dt = dtype(type_)
        write = register_writer(self.regs[instr.dest], type_)
        memory = self.memory
        guard = instr.guard
        held = self._guard(guard) if guard else None

        def gather(addr, lanes):
            groups = memory.resolve(space, addr, size, lanes, "load")
            if len(groups) == 1:
                region, index, _ = groups[0]
                return region.view(dt)[index]
            out = np.zeros(len(addr), dtype=dt)
            for region, index, mask in groups:
                out[mask] = region.view(dt)[index]
            return out

        def load(sel, lanes, warp):
            addr = address(sel)
            if addr.ndim == 0 or len(addr) != len(lanes):
                addr = np.broadcast_to(addr, lanes.shape)
            if held is None:
                write(sel, gather(addr, lanes))
                return
            try:
                write(sel, gather(addr, lanes))
            except Fault as fault:
                mask = np.broadcast_to(fault.mask, lanes.shape)
                active = np.broadcast_to(held(sel), lanes.shape)
                if (mask & active).any():
                    raise Fault(fault.message, mask & active) from None
                ok = ~mask
                out = np.zeros(len(lanes), dtype=dt)
                if ok.any():
                    out[ok] = gather(addr[ok], lanes[ok])
                write(sel, out)
        return load

    def _store(self, instr: ir.Instruction, opcode: str) -> Callable:
        if instr.space == "surface":
            return self._surface_store(instr, opcode)
        parts = opcode.split(".")
        types = [p for p in parts[1:] if p in _TYPE_NAMES]
        if parts[0] != "st" or not types or len(instr.args) != 2:
            raise Unsupported(f"unsupported instruction '{opcode}'")
        type_ = canonical(types[-1])
        if type_ == "pred":
            raise Unsupported(f"unsupported instruction '{opcode}'")
        space, address = self._address(instr, instr.args[0])
        size = bits(type_) // 8
        dt = dtype(type_)
        symbols = instr.attrs.get("arg_symbols") or (None, None)
        value = self._get(instr.args[1], type_, symbols[1])
        memory = self.memory
        guard = instr.guard
        held = self._guard(guard) if guard else None

        def store(sel, lanes, warp):
            addr = np.broadcast_to(address(sel), lanes.shape)
            values = np.broadcast_to(np.asarray(value(sel), dtype=dt), lanes.shape)
            if held is not None:
                mask = np.broadcast_to(held(sel), lanes.shape)
                if not mask.all():
                    addr, values, lanes = addr[mask], values[mask], lanes[mask]
                    if not len(lanes):
                        return
            for region, index, group in memory.resolve(space, addr, size, lanes, "store"):
                region.view(dt)[index] = values if group is None else values[group]
        return store

    def _atomic(self, instr: ir.Instruction, opcode: str) -> Callable:
        parts = opcode.split(".")
        types = [p for p in parts[1:] if p in _TYPE_NAMES]
        op_name = next((p for p in parts[1:] if p in _ATOMIC_OPS), None)
        if parts[0] not in ("atom", "red") or not types or op_name is None:
            raise Unsupported(f"unsupported instruction '{opcode}'")
        type_ = canonical(types[-1])
        if "v2" in parts or "v4" in parts or "v8" in parts or bits(type_) < 16:
            raise Unsupported(f"unsupported instruction '{opcode}'")
        if op_name == "add" and kind(type_) == "f" and type_ not in ("f32", "f64"):
            raise Unsupported(f"unsupported instruction '{opcode}'")
        space, address = self._address(instr, instr.args[0])
        size = bits(type_) // 8
        dt = dtype(type_)
        operands = [self._get(a, type_) for a in instr.args[1:]]
        need = 2 if op_name == "cas" else 1
        if len(operands) != need:
            raise Unsupported(f"'{opcode}' with {len(operands)} operands")
        update = _ATOMIC_OPS[op_name]
        write = register_writer(self.regs[instr.dest], type_) if instr.dest else None
        memory = self.memory
        guard = instr.guard
        held = self._guard(guard) if guard else None
        what = "atomic" if parts[0] == "atom" else "reduction"

        def atomic(sel, lanes, warp):
            addr = np.broadcast_to(address(sel), lanes.shape)
            values = [np.broadcast_to(np.asarray(g(sel), dtype=dt), lanes.shape)
                      for g in operands]
            target = sel
            if held is not None:
                mask = np.broadcast_to(held(sel), lanes.shape)
                if not mask.all():
                    addr, lanes = addr[mask], lanes[mask]
                    values = [v[mask] for v in values]
                    target = lanes
                    if not len(lanes):
                        return
            olds = np.zeros(len(lanes), dtype=dt)
            position = np.arange(len(lanes))
            for region, index, group in memory.resolve(space, addr, size, lanes, what):
                view = region.view(dt)
                where = position if group is None else position[group]
                for k, cell in zip(where.tolist(), index.tolist(), strict=True):
                    old = view[cell]
                    olds[k] = old
                    view[cell] = update(old, *(v[k] for v in values))
            if write is not None:
                write(target, olds)
        return atomic

    # -- opaque: shfl ------------------------------------------------------------------
    def _opaque(self, instr: ir.Instruction, opcode: str) -> Callable:
        parts = opcode.split(".")
        root = parts[0]
        if instr.operator == "call" or root == "call":
            raise Unsupported(f"cannot execute '{opcode}': the callee is not inlined (no "
                              f"body in this file, indirect or recursive call)")
        if root != "shfl" or instr.dest is None:
            raise Unsupported(f"unsupported instruction '{opcode}'")
        mode = next((p for p in parts[1:] if p in ("up", "down", "bfly", "idx")), None)
        if mode is None or len(instr.args) < 3:
            raise Unsupported(f"unsupported instruction '{opcode}'")
        a = self._get(instr.args[0], "u32")
        b = self._get(instr.args[1], "u32")
        c = self._get(instr.args[2], "u32")
        predicate = instr.attrs.get("element") == 1
        write = register_writer(self.regs[instr.dest], "pred" if predicate else "u32")

        def shfl(sel, lanes, warp):
            n = lanes.shape
            lane = (lanes % WARP_SIZE).astype(np.int64)
            source = np.zeros(WARP_SIZE, dtype=np.uint32)
            valid = np.zeros(WARP_SIZE, dtype=bool)
            source[lane] = np.broadcast_to(a(sel), n)
            valid[lane] = True
            bval = np.broadcast_to(b(sel), n).astype(np.int64) & 31
            cval = np.broadcast_to(c(sel), n).astype(np.int64)
            segmask = (cval >> 8) & 31
            clamp = cval & 31
            max_lane = (lane & segmask) | (clamp & ~segmask)
            min_lane = lane & segmask
            if mode == "up":
                j = lane - bval
                ok = j >= max_lane
            elif mode == "down":
                j = lane + bval
                ok = j <= max_lane
            elif mode == "bfly":
                j = lane ^ bval
                ok = j <= max_lane
            else:
                j = min_lane | (bval & ~segmask)
                ok = j <= max_lane
            j = np.where(ok, j, lane) & 31
            if predicate:
                write(sel, ok)
            else:
                write(sel, np.where(valid[j], source[j], np.uint32(0)))
        return shfl

    # -- running (the PTX semantics of the shared engine, `gpudiv.interp.engine`) ------
    def run(self) -> PtxRunResult:
        gx, gy, gz = self.launch.grid
        for z in range(gz):
            for y in range(gy):
                for x in range(gx):
                    self._run_block((x, y, z))
        buffers = {}
        for name, address, array in self.memory.buffers:
            start = address - GLOBAL_BASE
            raw = self.memory.glob.buf[start:start + array.nbytes].copy()
            buffers[name] = raw.view(array.dtype).reshape(array.shape)
        for name, array in self.memory.surfaces:
            buffers[name] = array.copy()
        return PtxRunResult(buffers, self.counters, gx * gy * gz, self.steps,
                            self.memory.global_variables())

    @property
    def steps(self) -> int:
        """Warp steps so far (over all blocks)."""
        return self.counters.warp_instructions

    def _run_block(self, index: tuple[int, int, int]) -> None:
        """Run one block: its warps on the engine under the launch's policy."""
        self._set_block(index)
        tids = np.arange(self.threads, dtype=np.int64)
        warps = [Warp(w // WARP_SIZE, control_for(self.policy, tids[w:w + WARP_SIZE].copy(),
                                                  self.counters, self.launch.aware_timeout))
                 for w in range(0, self.threads, WARP_SIZE)]
        self.engine.run_block(warps)

    def execute(self, op: _Op, top: list, warp: int) -> None:
        """Run an EXEC instruction in the lanes of `top`."""
        try:
            op.fn(top[2], top[1], warp)
        except Fault as fault:
            raise self._fault(op.index, top[1], warp, fault) from None
        except Unsupported as error:
            raise self._error(op.index, top[1], warp, str(error)) from None

    def enter(self, op: _Op, top: list, warp: int) -> list[tuple]:
        """A call in the lanes of `top` (those whose guard holds): pass the arguments;
        per function called, (its lanes as a mask of `top`'s, None for all; its entry
        pc; its activation)."""
        lanes, sel = top[1], top[2]
        entering = None
        if op.cond is not None:
            entering = np.broadcast_to(op.cond(sel), lanes.shape)
            if not entering.any():
                return []
            if not entering.all():
                lanes = lanes[entering]
                sel = selector(lanes)
        if op.indirect is not None:
            return self._enter_through_pointer(op, top, warp, entering)
        op.fn(sel, lanes, warp)
        return [(entering, op.target, self._activation(op, op.callee, lanes, sel, warp))]

    def _enter_through_pointer(self, op: _Op, top: list, warp: int,
                               entering: np.ndarray | None) -> list[tuple]:
        """A call through a function pointer: the lanes go to the function their pointer
        names, one group per function."""
        read, reachable, at, chosen = op.indirect
        lanes = top[1]
        pointers = np.broadcast_to(np.asarray(read(top[2])), lanes.shape)
        which = np.array([at.get(int(p), -1) for p in pointers], dtype=np.int64)
        calling = np.ones(len(lanes), dtype=bool) if entering is None else entering
        bad = calling & (which < 0)
        if bad.any():
            raise self._error(op.index, lanes[bad], warp,
                              f"call through address {int(pointers[bad][0]):#x}, which is "
                              f"no function of this file taking these arguments")
        groups = []
        for k in np.unique(which[calling]):
            mask = calling & (which == k)
            some = lanes[mask]
            groups.append((int(k), mask, some, selector(some)))
            reachable[k][1](groups[-1][3], some, warp)  # every argument before any frame
        calls = []
        for k, mask, some, sel in groups:
            function = reachable[k][0]
            chosen[some] = k
            calls.append((None if len(groups) == 1 and entering is None else mask,
                          self.entries[function],
                          self._activation(op, function, some, sel, warp)))
        return calls

    def _activation(self, op: _Op, callee: str, lanes: np.ndarray, sel, warp: int):
        try:
            return self.frames.enter(callee, lanes, sel)
        except StackOverflow as error:
            raise self._error(op.index, lanes, warp, str(error)) from None

    def leave(self, op: _Op, top: list, warp: int, activations: tuple) -> None:
        """A return of the lanes of `top`: pass the outputs, restore what their recursive
        calls saved (`activations`: the calls they return from; lanes of several merge
        under `frontier`)."""
        op.fn(top[2], top[1], warp)
        for activation in activations:
            self.frames.leave(activation, top[1])

    def jumps(self, op: _Op, top: list, warp: int) -> np.ndarray:
        """Which lanes of `top` a branch sends to its target."""
        value = np.broadcast_to(op.cond(top[2]), top[1].shape)
        if op.case is not None:
            return value == op.case
        return value if op.taken_when else ~value

    def barrier_held(self, op: _Op, top: list) -> np.ndarray | None:
        """The guard of a barrier in the lanes of `top` (None: unguarded)."""
        if op.cond is None:
            return None
        return np.broadcast_to(op.cond(top[2]), top[1].shape)

    def record(self, step: int, op: _Op, warp: int, lanes: np.ndarray) -> None:
        """One trace row: (block, warp, PTX line, text, lane ids)."""
        if self.trace is not None:
            self.trace.append((self.block_index, warp, op.instr.loc.line, op.instr.text,
                               lanes.tolist()))

    def reader(self, lanes: np.ndarray) -> Callable[[str], np.ndarray]:
        """Register values in the lanes (for observers)."""
        return self._reading(lanes)

    def error(self, pc: int, lanes, warp: int, message: str) -> PtxExecutionError:
        """An error located at pc."""
        return self._error(pc, lanes, warp, message)

    def state(self) -> list[bytes]:
        """Registers and memories as bytes (for cycle detection)."""
        parts = [store.tobytes() for store in self.regs.values()]
        memory = self.memory
        parts += [memory.shared.buf.tobytes(), memory.local.buf.tobytes(),
                  memory.glob.buf.tobytes(), str(self.block_reduction).encode()]
        parts += [array.tobytes() for _, array in memory.surfaces]
        return parts + self.frames.state()

    def deadlock(self, warp: int, line: int, lanes: np.ndarray,
                 message: str) -> PtxDeadlockError:
        """The error for a block whose state repeats, naming block and warp."""
        block = ", ".join(map(str, self.block_index))
        message += f" (block ({block}), warp {warp})"
        return PtxDeadlockError(self.kernel.name, line, None, [int(t) for t in lanes],
                                message, self.block_index, warp)

    @staticmethod
    def lane_ids(lanes: np.ndarray) -> list[int]:
        """PTX messages name lanes of the warp."""
        return [int(t) % WARP_SIZE for t in lanes]

    def release(self, warps: list[Warp]) -> None:
        """Every warp of the block waits at a barrier: compute a bar.red's value from the
        votes of all threads (each warp's lanes at the barrier)."""
        after = {w.waiting + 1 for w in warps}
        reductions = {self.ops[pc].reduction for pc in after if pc < self.end} - {None}
        if not reductions:
            return
        first = warps[0]
        if len(after) > 1:
            raise self._error(first.waiting, first.control.running()[1], first.index,
                              "warps of the block wait at different barriers, one of "
                              "them a bar.red")
        ((mode, votes),) = reductions
        lane_votes = [votes(top[2], top[1]) for top in (w.control.running() for w in warps)]
        if mode == "popc":
            self.block_reduction = np.uint32(sum(int(v.sum()) for v in lane_votes))
        elif mode == "and":
            self.block_reduction = np.bool_(all(v.all() for v in lane_votes))
        else:
            self.block_reduction = np.bool_(any(v.any() for v in lane_votes))

    def _reading(self, lanes: np.ndarray) -> Callable[[str], np.ndarray]:
        """Values of a register or special register in the lanes, signed at its width
        (dtype bool, int8, int16, int32 or int64: the oracle compares modulo the width)."""
        def read(name: str) -> np.ndarray:
            store = self.regs.get(name)
            if store is None:
                store = self.specials.get(name)
            if store is None:
                return np.zeros(len(lanes), dtype=np.int64)
            if store.dtype == np.bool_:
                return store[lanes]
            return store.view(dtype(f"s{store.dtype.itemsize * 8}"))[lanes]
        return read

    # -- errors --------------------------------------------------------------------------
    def _error(self, pc: int, lanes, warp: int, message: str) -> PtxExecutionError:
        op = self.ops[min(pc, self.end - 1)] if self.ops else None
        line = op.instr.loc.line if op else self.kernel.loc.line
        label = op.label if op else None
        return PtxExecutionError(self.kernel.name, line, label, [int(t) for t in lanes],
                                 message, self.block_index, warp)

    def _fault(self, pc: int, lanes: np.ndarray, warp: int, fault) -> PtxExecutionError:
        mask = fault.mask
        if getattr(fault, "lanes", None) is not None:
            lanes = fault.lanes
        elif mask is not None and np.ndim(mask) and len(mask) == len(lanes):
            lanes = lanes[np.asarray(mask, dtype=bool)]
        opcode = self.ops[pc].instr.attrs.get("opcode", "")
        error = self._error(pc, lanes, warp, f"{fault.message} ({opcode})")
        error.outside = fault.outside
        return error


def _passing(function: str, way: str, slot: tuple[str, int]) -> str:
    """The register a call passes one input ("in") or output ("out") slot through."""
    return f"{function}${way}:{slot[0]}+{slot[1]}"


def _all_of(steps: list[Callable]) -> Callable:
    """One op function running `steps` in order."""
    def run(sel, lanes, warp):
        for step in steps:
            step(sel, lanes, warp)
    return run


def _widen(inner: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """A lanes mask over a group (`mask` of all lanes, None: all) as a mask of all lanes."""
    if mask is None:
        return inner
    full = np.zeros(len(mask), dtype=bool)
    full[mask] = inner
    return full


def _with_copies(fn: Callable, copies: list[tuple[np.ndarray, np.ndarray]]) -> Callable:
    """`fn` after copying registers to their shadows in the active lanes."""
    def run(sel, lanes, warp):
        for source, shadow in copies:
            shadow[sel] = source[sel]
        fn(sel, lanes, warp)
    return run


def _ballot(lanes: np.ndarray) -> np.uint32:
    mask = 0
    for lane in (lanes % WARP_SIZE).tolist():
        mask |= 1 << lane
    return np.uint32(mask)


def _atomic_inc(old, b):
    return type(old)(0) if old >= b else old + type(old)(1)


def _atomic_dec(old, b):
    return b if (old == 0 or old > b) else old - type(old)(1)


_ATOMIC_OPS: dict[str, Callable] = {
    "add": lambda old, b: old + b,
    "exch": lambda old, b: b,
    "cas": lambda old, compare, new: new if old == compare else old,
    "min": lambda old, b: b if b < old else old,
    "max": lambda old, b: b if b > old else old,
    "inc": _atomic_inc,
    "dec": _atomic_dec,
    "and": lambda old, b: old & b,
    "or": lambda old, b: old | b,
    "xor": lambda old, b: old ^ b,
}


# ---------------------------------------------------------------------------------------
# Inputs for `gpudiv check`: launch shapes and synthesised arguments
