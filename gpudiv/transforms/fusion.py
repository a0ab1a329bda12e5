"""Vertical fusion of two μ-SIMD kernels launched one after the other (Fukuhara 2023
Fig 5.1; shared/notes §5.6 item 7), and the checks that decide whether they may fuse.

- **Body**: the first kernel's blocks, each `stop` turned into a jump to a join block
  holding `barrier`, then the second kernel's blocks. Registers and labels of the second
  kernel that the first already uses are renamed (`x` → `x_2`).
- **Parameters**: the union; the parameters of both kernels that receive the same host
  argument (or the implicit `ctaid`/`nctaid`) become one, and clashing names are renamed.
- **Launch shapes**: the identical-shape rule. Both launches must write the same grid
  and block expressions (the KFCM kill set keeps their variables unchanged in between),
  so the fused kernel runs with that shape and needs no guards.
- **Dependence**: a block barrier orders the two bodies inside a block only. So every
  pair of accesses to one buffer, one of each kernel and one of them a store, must
  touch an address that only the same block touches: the addresses of both must be
  `base + ctaid*ntid + tid + c` with the same constant c (per-thread data). An address
  that is not such a polynomial (it depends on a load, or on a register defined more
  than once) refuses the fusion, unless the grid is the literal 1 (one block).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpudiv import ir
from gpudiv.ir import host as h
from gpudiv.ir.record import replace
from gpudiv.lang.host.parse import IMPLICIT_PARAMS, explicit_params, pointer_params
from gpudiv.lang.load import parse_text
from gpudiv.transforms.builder import clone_kernel
from gpudiv.transforms.ptx_fusion import PtxFusionError, fuse_ptx, module_header

Poly = dict[tuple[str, ...], int]  # monomial (sorted factor names) → coefficient


@dataclass
class Fused:
    """A fused kernel, the launch that runs it, and the global-memory accesses it saves:
    loads of the intermediate buffer read from a register, stores of it removed."""

    ref: h.KernelRef
    launch: h.Launch
    forwarded: int = 0
    removed: int = 0


def _poly_add(a: Poly, b: Poly, sign: int = 1) -> Poly:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + sign * v
    return {k: v for k, v in out.items() if v}


def _poly_mul(a: Poly, b: Poly) -> Poly:
    out: Poly = {}
    for ka, va in a.items():
        for kb, vb in b.items():
            k = tuple(sorted(ka + kb))
            out[k] = out.get(k, 0) + va * vb
    return {k: v for k, v in out.items() if v}


def _definitions(kernel: ir.Kernel) -> dict[str, list[ir.Instruction]]:
    """Every instruction that writes each register."""
    defs: dict[str, list[ir.Instruction]] = {}
    for instr in kernel.instructions():
        if instr.dest is not None:
            defs.setdefault(instr.dest, []).append(instr)
    return defs


# Special registers an address may use, by the name the polynomial gives them.
SPECIALS = {"tid": "tid", "ntid": "ntid", "%tid.x": "tid", "%ntid.x": "ntid",
            "%ctaid.x": "ctaid"}
# PTX opcodes (their first part) as the μ-SIMD operators they compute on addresses.
PTX_OPERATORS = {"mov": "copy", "cvta": "copy", "cvt": "copy", "add": "+", "sub": "-",
                 "mul": "*", "shl": "<<", "mad": "mad"}


def _operator(instr: ir.Instruction) -> str | None:
    """The address arithmetic an instruction does (None: something else)."""
    opcode = instr.attrs.get("opcode")
    if opcode is None:
        return instr.operator
    root = str(opcode).split(".")
    if root[0] in ("mul", "mad") and "hi" in root:
        return None
    return PTX_OPERATORS.get(root[0])


def address_poly(operand: ir.Operand, kernel: ir.Kernel,
                 defs: dict[str, list[ir.Instruction]], depth: int = 0) -> Poly | None:
    """An address as a polynomial in parameters, `tid`, `ctaid` and `ntid` (None: not
    one): traced through registers defined once by copies, +, -, *, << and PTX mad."""
    if isinstance(operand, ir.Const):
        return {(): operand.value} if isinstance(operand.value, int) and operand.value else {}
    if isinstance(operand, ir.Special):
        return {(SPECIALS[operand.name],): 1} if operand.name in SPECIALS else None
    if operand.name in kernel.params:
        return {(operand.name,): 1}
    found = defs.get(operand.name, [])
    if len(found) != 1 or depth > 64 or found[0].guard is not None:
        return None
    instr = found[0]
    if instr.kind == ir.LOAD and instr.space == "param" and len(instr.args) == 1 \
            and isinstance(instr.args[0], ir.Var) and instr.args[0].name in kernel.params:
        return {(instr.args[0].name,): 1}
    op = _operator(instr)
    if instr.kind != ir.ASSIGN or op is None:
        return None
    parts = [address_poly(a, kernel, defs, depth + 1) for a in instr.args]
    if any(p is None for p in parts):
        return None
    if op == "copy" and len(parts) == 1:
        return parts[0]
    if op in ("+", "-") and len(parts) == 2:
        return _poly_add(parts[0], parts[1], 1 if op == "+" else -1)
    if op == "*" and len(parts) == 2:
        return _poly_mul(parts[0], parts[1])
    if op == "mad" and len(parts) == 3:
        return _poly_add(_poly_mul(parts[0], parts[1]), parts[2])
    if op == "<<" and len(parts) == 2 and isinstance(instr.args[1], ir.Const) \
            and 0 <= instr.args[1].value < 31:
        return _poly_mul(parts[0], {(): 1 << instr.args[1].value})
    return None


@dataclass
class Access:
    """A memory instruction of a kernel and its address (None: unknown)."""

    instr: ir.Instruction
    writes: bool
    poly: Poly | None


def _global(instr: ir.Instruction, ptx: bool) -> bool:
    """Whether a memory instruction may touch device buffers (μ-SIMD: `shared`, the
    host's device memory; PTX: global or generic)."""
    if instr.kind not in (ir.LOAD, ir.STORE, ir.ATOMIC) or not instr.args:
        return False
    if ptx:
        return instr.space not in ("local", "param", "shared", "const", "texture", "surface")
    return instr.space != "local"


def accesses(kernel: ir.Kernel) -> list[Access]:
    """Every load, store and atomic of a kernel's device buffers, with its address."""
    defs = _definitions(kernel)
    ptx = "ptx_source" in kernel.attrs
    return [Access(i, i.kind != ir.LOAD, address_poly(i.args[0], kernel, defs))
            for i in kernel.instructions() if _global(i, ptx)]


def _per_thread(index: Poly) -> bool:
    """`s*(ctaid*ntid + tid) + c`: an address only one thread of one block touches (s is
    the element size: 1 word in μ-SIMD, bytes in PTX)."""
    step = index.get(("tid",), 0)
    return (step != 0 and index.get(("ctaid", "ntid"), 0) == step
            and all(k in (("tid",), ("ctaid", "ntid"), ()) for k in index))


def _base(acc: Access, param: str) -> Poly | None:
    """The index part of an access based on buffer `param` (None: based elsewhere)."""
    if acc.poly is None or acc.poly.get((param,), 0) != 1:
        return None
    return _poly_add(acc.poly, {(param,): 1}, -1)


def _where(ref: h.KernelRef, acc: Access) -> str:
    verb = "writes" if acc.writes else "reads"
    text = acc.instr.text or acc.instr.kind
    return f"{ref.kernel.name} {verb} '{text}' at line {acc.instr.loc.line}"


def dependence_problem(first: h.KernelRef, a: h.Launch, second: h.KernelRef, b: h.Launch,
                       alias: dict[str, str]) -> str | None:
    """Why the fused kernel would need communication between blocks (None: it does not)."""
    if isinstance(a.grid, h.Num) and a.grid.value == 1:
        return None
    bound_a = {p: alias.get(str(x), str(x)) for p, x in zip(explicit_params(first), a.args,
                                                             strict=True)
               if p in first.pointer_params}
    bound_b = {p: alias.get(str(x), str(x)) for p, x in zip(explicit_params(second), b.args,
                                                             strict=True)
               if p in second.pointer_params}
    acc_a, acc_b = accesses(first.kernel), accesses(second.kernel)
    for ref, accs in ((first, acc_a), (second, acc_b)):
        for acc in accs:
            if acc.poly is None:
                return (f"cannot tell which block touches an address: {_where(ref, acc)} "
                        "(not a polynomial in parameters, ctaid, ntid and tid)")
    for pa, buffer in bound_a.items():
        for pb in [p for p, x in bound_b.items() if x == buffer]:
            for x in acc_a:
                ia = _base(x, pa)
                if ia is None:
                    continue
                for y in acc_b:
                    ib = _base(y, pb)
                    if ib is None or not (x.writes or y.writes):
                        continue
                    if ia != ib or not _per_thread(ia):
                        return (f"blocks would communicate through '{buffer}': "
                                f"{_where(first, x)} and {_where(second, y)}, and another "
                                "block's thread may touch the same element")
    return None


def shape_problem(a: h.Launch, b: h.Launch) -> str | None:
    """Why two launches do not have the identical shape the fused kernel needs."""
    if str(a.grid) == str(b.grid) and str(a.block) == str(b.block):
        return None
    return (f"different launch shapes <<<{a.grid}, {a.block}>>> and <<<{b.grid}, "
            f"{b.block}>>> (fusion needs identical shapes)")


def fusion_problem(first: h.KernelRef, a: h.Launch, second: h.KernelRef, b: h.Launch,
                   alias: dict[str, str]) -> str | None:
    """Why launch `a` then launch `b` must not become one fused launch (None: they may)."""
    if first.language != second.language:
        return (f"kernel {first.kernel.name} is {first.language} and kernel "
                f"{second.kernel.name} is {second.language}")
    problem = shape_problem(a, b) or dependence_problem(first, a, second, b, alias)
    if problem is None and first.language == "ptx":
        try:
            _fuse_ptx(first, a, second, b, "fusion_check")
        except PtxFusionError as error:
            return str(error)
    return problem


def _fresh(name: str, taken: set[str]) -> str:
    """`name`, or `name_2`, `name_3`, … whichever is not taken."""
    if name not in taken:
        return name
    k = 2
    while f"{name}_{k}" in taken:
        k += 1
    return f"{name}_{k}"


def _rename(kernel: ir.Kernel, names: dict[str, str], labels: dict[str, str]) -> None:
    """Rename registers (and parameters) and labels of a kernel in place."""
    def op(o: ir.Operand) -> ir.Operand:
        return ir.Var(names.get(o.name, o.name)) if isinstance(o, ir.Var) else o
    for block in kernel.blocks:
        block.label = labels.get(block.label, block.label)
        for instr in block.instructions:
            instr.args = tuple(op(a) for a in instr.args)
            if instr.dest is not None:
                instr.dest = names.get(instr.dest, instr.dest)
            if instr.target is not None:
                instr.target = labels.get(instr.target, instr.target)
    kernel.params = [names.get(p, p) for p in kernel.params]


def _names(kernel: ir.Kernel) -> set[str]:
    """Registers and parameters a kernel uses."""
    found = set(kernel.params)
    for instr in kernel.instructions():
        found |= set(instr.used_vars)
        if instr.dest is not None:
            found.add(instr.dest)
    return found


def _straight(kernel: ir.Kernel, after: str | None = None) -> bool:
    """No branch, and every jump goes to the next block (or, from the last, to `after`):
    every instruction runs once in every thread, in program order."""
    if any(i.kind == ir.BRANCH for i in kernel.instructions()):
        return False
    nexts = [b.label for b in kernel.blocks[1:]] + [after]
    return all(b.terminator is None or b.terminator.kind != ir.JUMP
               or b.terminator.target == following
               for b, following in zip(kernel.blocks, nexts, strict=True))


def _based(accs: list[Access], param: str) -> list[tuple[Access, Poly | None]]:
    """The accesses of a kernel whose address has `param` in it, with their index."""
    return [(x, _base(x, param)) for x in accs
            if x.poly is None or any(param in k for k in x.poly)]


def _forwardable(two: ir.Kernel, theirs: list[tuple[Access, Poly | None]],
                 index: Poly) -> list[ir.Instruction] | None:
    """The loads of the second body that read what the first body's store left: those at
    the same index before the second body writes the buffer (None: none may be)."""
    if not any(x.writes for x, _ in theirs):
        return [x.instr for x, i in theirs if i == index and x.instr.kind == ir.LOAD]
    if not _straight(two):
        return None
    order = {id(i): k for k, i in enumerate(two.instructions())}
    first_write = min(order[id(x.instr)] for x, _ in theirs if x.writes)
    return [x.instr for x, i in theirs if i == index and x.instr.kind == ir.LOAD
            and order[id(x.instr)] < first_write]


def forward_stores(one: ir.Kernel, two: ir.Kernel, buffers: dict[str, str],
                   dead: set[str], join: str) -> tuple[int, int]:
    """Store-to-load forwarding from the first body to the second, and removal of the
    forwarded stores whose buffer is dead on the host afterwards (Fig 5.1). `buffers`:
    pointer parameter → host buffer (alias class); the first body ends by jumping to
    `join`. Returns (loads forwarded, stores removed). Only a straight first body whose
    one store to a buffer is at a per-thread address, into a buffer no other parameter
    names, qualifies; the second body's loads at that address before it writes the
    buffer then read what the same thread stored."""
    if not _straight(one, join):
        return 0, 0
    forwarded = removed = 0
    body = one.instructions()
    place = {id(i): k for k, i in enumerate(body)}
    for param, buffer in buffers.items():
        if list(buffers.values()).count(buffer) != 1:
            continue
        mine, theirs = _based(accesses(one), param), _based(accesses(two), param)
        stores = [(x, i) for x, i in mine if x.writes]
        if len(stores) != 1:
            continue
        (store, index), = stores
        value, at = store.instr.args[1], place[id(store.instr)]
        if index is None or not _per_thread(index) or (isinstance(value, ir.Var) and any(
                i.dest == value.name for i in body[at + 1:])):
            continue
        for instr in _forwardable(two, theirs, index) or []:
            instr.kind, instr.operator, instr.args, instr.space = \
                ir.ASSIGN, "copy", (value,), None
            instr.text = f"{instr.dest} = {value}"
            forwarded += 1
        later_loads = any(not x.writes and place[id(x.instr)] > at for x, _ in mine)
        still_read = any(x.instr.kind != ir.STORE for x, _ in _based(accesses(two), param))
        if buffer in dead and not later_loads and not still_read:
            for block in one.blocks:
                block.instructions = [i for i in block.instructions if i is not store.instr]
            removed += 1
    return forwarded, removed


def fuse(first: h.KernelRef, a: h.Launch, second: h.KernelRef, b: h.Launch,
         name: str, alias: dict[str, str] | None = None,
         dead: set[str] = frozenset()) -> Fused:
    """The kernel that runs `first`'s body, a barrier, then `second`'s body, and its launch
    (with store-to-load forwarding, and dead-store removal for buffers in `dead`)."""
    if first.language == "ptx":
        return _fuse_ptx(first, a, second, b, name)
    one, two = clone_kernel(first.kernel), clone_kernel(second.kernel)
    params_a, params_b = explicit_params(first), explicit_params(second)
    arg_of = {p: str(x) for p, x in zip(params_a, a.args, strict=True)}
    taken = _names(one) | {blk.label for blk in one.blocks}
    names: dict[str, str] = {}
    args = list(a.args)
    params = list(params_a)
    for p, x in zip(params_b, b.args, strict=True):
        same = [q for q, text in arg_of.items() if text == str(x)
                and (q in first.pointer_params) == (p in second.pointer_params)]
        if same:
            names[p] = same[0]
            continue
        names[p] = _fresh(p, taken | set(names.values()))
        params.append(names[p])
        args.append(x)
    implicit = [p for p in IMPLICIT_PARAMS if p in one.params or p in two.params]
    for reg in _names(two) - set(two.params):
        names[reg] = _fresh(reg, taken | set(names.values()))
    labels = {blk.label: _fresh(blk.label, taken | {x.label for x in two.blocks} - {blk.label})
              for blk in two.blocks}
    _rename(two, names, labels)
    join = _fresh("FUSED_JOIN", taken | {blk.label for blk in two.blocks})
    for block in one.blocks:
        for i, instr in enumerate(block.instructions):
            if instr.kind == ir.STOP:
                block.instructions[i] = replace(instr, kind=ir.JUMP, target=join,
                                                text=f"jump {join}", id=ir.NO_ID)
    pointers = frozenset({p for p in params_a if p in first.pointer_params}
                         | {names[p] for p in params_b if p in second.pointer_params})
    alias = alias or {}
    bound = {p: alias.get(str(x), str(x)) for p, x in zip(params, args, strict=True)
             if p in pointers}
    forwarded, removed = forward_stores(one, two, bound, set(dead), join)
    barrier = ir.Instruction(ir.BARRIER, one.loc, text="barrier")
    blocks = [*one.blocks, ir.Block(join, [barrier], one.loc), *two.blocks]
    for block in blocks:  # the two bodies numbered their instructions separately
        for instr in block.instructions:
            instr.id = ir.NO_ID
    registers = {**one.registers, **{names.get(r, r): t for r, t in two.registers.items()}}
    kernel = ir.Kernel(name, params + implicit, blocks, one.loc, dict(one.specials),
                       registers=registers)
    ref = h.KernelRef(kernel, "musimd", f"{first.source}+{second.source}", pointers,
                      fused=True)
    return Fused(ref, h.Launch(name, a.grid, a.block, tuple(args)), forwarded, removed)


def _ptx_text(ref: h.KernelRef) -> str:
    """The module text a PTX kernel is in."""
    return ref.text or Path(ref.source).read_text()


def _fuse_ptx(first: h.KernelRef, a: h.Launch, second: h.KernelRef, b: h.Launch,
              name: str) -> Fused:
    """Fuse two PTX kernels on their text and read the result back."""
    arg_of = {str(x): p for p, x in zip(explicit_params(first), a.args, strict=True)
              if p in first.pointer_params}
    shared = {p: arg_of[str(x)] for p, x in zip(explicit_params(second), b.args, strict=True)
              if p in second.pointer_params and str(x) in arg_of}
    text_a = _ptx_text(first)
    entry = fuse_ptx(first.kernel, text_a, second.kernel, _ptx_text(second), shared, name)
    module = module_header(text_a) + "\n" + entry
    program = parse_text(module, f"{name}.ptx", "ptx")
    if program.errors or len(program.kernels) != 1:
        raise PtxFusionError(f"the fused kernel {name} does not read back: "
                             f"{program.errors[0] if program.errors else 'no kernel'}")
    kernel = program.kernels[0]
    args = list(a.args) + [x for p, x in zip(explicit_params(second), b.args, strict=True)
                           if p not in shared]
    ref = h.KernelRef(kernel, "ptx", f"{first.source}+{second.source}",
                      pointer_params(kernel), text=module, fused=True)
    return Fused(ref, h.Launch(name, a.grid, a.block, tuple(args)))
