"""Inputs for `gpudiv check` on PTX: launch shapes and synthesised arguments (buffers for
the parameters that reach an address, textures for texture objects, small scalars)."""

from __future__ import annotations

import numpy as np

from gpudiv import ir
from gpudiv.interp import ptx_texture
from gpudiv.interp.ptx_calls import executable_form
from gpudiv.interp.ptx_launch import PtxLaunch
from gpudiv.interp.ptx_memory import function_addresses
from gpudiv.interp.ptx_ops import bits, canonical, dtype, kind
from gpudiv.lang.ptx.lower import INDIRECT_CALL
from gpudiv.lang.ptx.types import TYPE_NAMES as _TYPE_NAMES

# (grid, block, buffer fill): one block of one warp, a partial last warp over two blocks,
# 2-D blocks on a 2-D grid, three full-warp blocks, a 3-D block with a partial warp.
CHECK_SHAPES: tuple[tuple[tuple[int, int, int], tuple[int, int, int], str], ...] = (
    ((1, 1, 1), (32, 1, 1), "zeros"),
    ((2, 1, 1), (48, 1, 1), "ints"),
    ((2, 2, 1), (8, 4, 1), "ints"),
    ((3, 1, 1), (64, 1, 1), "floats"),
    ((1, 1, 1), (4, 3, 2), "zeros"),
)
CHECK_BUFFER_BYTES = 128 * 1024
CHECK_DYNAMIC_SHARED = 4096
CHECK_MAX_STEPS = 50_000
_SMALL_SCALARS = (0, 1, 2, 3, 5, 7, 16, 33, 40)


_POINTER_ROOTS = frozenset({"mov", "cvta", "add", "sub", "ld", "st", "call"})


def _param_sources(kernel: ir.Kernel) -> dict[str, set[str]]:
    """The parameters each register's value may come from (through any chain of moves,
    adds, selects and `.param` copies, flow-insensitively)."""
    derived: dict[str, set[str]] = {}
    instructions = kernel.instructions()
    for instr in instructions:
        if (instr.kind == ir.LOAD and instr.space == "param" and instr.dest
                and instr.attrs.get("symbol") in kernel.params):
            derived.setdefault(instr.dest, set()).add(str(instr.attrs["symbol"]))
    changed = True
    while changed:
        changed = False
        for instr in instructions:
            if instr.kind != ir.ASSIGN or not instr.dest:
                continue
            root = str(instr.attrs.get("opcode", "")).split(".", 1)[0]
            if root not in _POINTER_ROOTS and instr.operator not in (
                    "copy", "select", "select.not"):
                continue  # indices (scaled by mul/shl/cvt) are not pointers
            sources = set().union(*(derived.get(v, set()) for v in instr.used_vars))
            if sources - derived.get(instr.dest, set()):
                derived.setdefault(instr.dest, set()).update(sources)
                changed = True
    return derived


def _texture_handle(instr: ir.Instruction) -> ir.Operand | None:
    """The handle operand of a texture/surface instruction on an object (not a named
    reference), else None."""
    if instr.space not in ("texture", "surface") or not instr.args:
        return None
    if instr.attrs.get("texture") or instr.attrs.get("symbol"):
        return None
    return instr.args[0]


def pointer_params(kernel: ir.Kernel) -> list[str]:
    """Parameters whose value reaches a memory address: they get buffers; the others get
    scalars (or, for texture handles, textures: `texture_params`)."""
    derived = _param_sources(kernel)
    pointers: set[str] = set()
    for instr in kernel.instructions():
        address = instr.args[0] if instr.args else None
        if (instr.kind in (ir.LOAD, ir.STORE, ir.ATOMIC)
                and instr.space not in ("param", "texture", "surface")
                and isinstance(address, ir.Var)):
            pointers |= derived.get(address.name, set())
        opcode = str(instr.attrs.get("opcode", ""))
        if opcode.startswith("cvta") and instr.used_vars:
            pointers |= derived.get(instr.used_vars[0], set())
    return [p for p in kernel.params if p in pointers - set(texture_params(kernel))]


def function_params(kernel: ir.Kernel) -> dict[str, list[int]]:
    """Parameters that a call through a function pointer calls, with the addresses of the
    functions of the file such a call may reach (those whose parameters and results fit
    its prototype), for a kernel whose inlining left such a call opaque: the kernel runs
    with its calls as calls (`ptx_calls.executable_form`) and each launch passes one of
    the functions."""
    reasons = kernel.attrs.get("calls_not_inlined", ())
    if not any(str(reason).startswith(INDIRECT_CALL) for reason in reasons):
        return {}
    try:
        kept = executable_form(kernel, "<kernel>")
    except ValueError:
        return {}
    derived = _param_sources(kept)
    addresses = function_addresses(kept)
    found: dict[str, list[int]] = {}
    for instr in kept.instructions():
        pointer = instr.args[0] if "indirect" in instr.attrs and instr.args else None
        if not isinstance(pointer, ir.Var):
            continue
        reachable = [addresses[f] for f, _ in instr.attrs["indirect"] if f in addresses]
        for param in sorted(derived.get(pointer.name, set())):
            listed = found.setdefault(param, [])
            listed.extend(a for a in reachable if a not in listed)
    return {p: found[p] for p in kernel.params if found.get(p)}


def texture_params(kernel: ir.Kernel) -> dict[str, ptx_texture.Form]:
    """Parameters that are texture or surface objects, with the first instruction form
    that uses each (it says the geometry, element type and whether it is a surface)."""
    derived = _param_sources(kernel)
    found: dict[str, ptx_texture.Form] = {}
    for name, form in _texture_uses(kernel):
        for param in sorted(derived.get(name, set())):
            found.setdefault(param, form)
    return {p: found[p] for p in kernel.params if p in found}


def texture_refs(kernel: ir.Kernel) -> dict[str, ptx_texture.Form]:
    """Texture and surface references (`.global .texref t`) the kernel fetches from."""
    found: dict[str, ptx_texture.Form] = {}
    for instr in kernel.instructions():
        if instr.space not in ("texture", "surface"):
            continue
        name = instr.attrs.get("texture") or instr.attrs.get("symbol")
        form = _form_of(instr)
        if name and form is not None:
            found.setdefault(str(name), form)
    return found


def _form_of(instr: ir.Instruction) -> ptx_texture.Form | None:
    try:
        return ptx_texture.parse_form(str(instr.attrs.get("opcode", "")), _TYPE_NAMES)
    except ptx_texture.TextureUnsupported:
        return None


def _texture_uses(kernel: ir.Kernel) -> list[tuple[str, ptx_texture.Form]]:
    """(handle register, form) of every texture/surface instruction on an object."""
    uses = []
    for instr in kernel.instructions():
        handle = _texture_handle(instr)
        form = _form_of(instr) if handle is not None else None
        if isinstance(handle, ir.Var) and form is not None:
            uses.append((handle.name, form))
    return uses


def synthesized_texture(rng: np.random.Generator, form: ptx_texture.Form, fill: str,
                        scale: int = 1) -> ptx_texture.Texture:
    """An array for a texture or surface the kernel uses as `form` says: 8192·scale texels
    (1-D), 128×128·scale (2-D) or 32×32×32·scale (3-D); one channel of the fetched type
    for textures, `vector` channels of the accessed width for surfaces."""
    shape = {1: (8192 * scale,), 2: (128 * scale, 128), 3: (32 * scale, 32, 32)}[form.dims]
    surface = form.root in ("suld", "sust")
    if surface:
        type_ = f"u{bits(form.types[0])}"
        if form.vector > 1:
            shape = (*shape, form.vector)
    else:
        type_ = canonical(form.types[0])
    dt = dtype(type_)
    if fill == "zeros":
        array = np.zeros(shape, dtype=dt)
    elif kind(type_) == "f":
        array = rng.uniform(-2.0, 2.0, size=shape).astype(dt)
    else:
        array = rng.integers(0, 16, size=shape).astype(dt)
    return ptx_texture.Texture(array, surface=surface)


def synthesize_launches(kernel: ir.Kernel, seed: int = 0,
                        shapes=CHECK_SHAPES, max_steps: int = CHECK_MAX_STEPS,
                        buffer_bytes: int = CHECK_BUFFER_BYTES) -> list[PtxLaunch]:
    """Launches with generous buffers for pointer parameters (zeros, small integers or
    small floats), a function of the file for each function pointer (`function_params`;
    the launches take them in turn) and small random scalars for the others."""
    rng = np.random.default_rng(seed)
    pointers = set(pointer_params(kernel))
    functions = function_params(kernel)
    textures = texture_params(kernel)
    references = texture_refs(kernel)
    types = {name: type_ for name, type_, _, _ in kernel.attrs.get("params", ())}
    sizes = {name: size for name, _, size, _ in kernel.attrs.get("params", ())}
    launches = []
    for index, (grid, block, fill) in enumerate(shapes):
        args: dict[str | int, object] = {}
        for name in kernel.params:
            type_ = types.get(name, "")
            if name in functions:
                args[name] = functions[name][index % len(functions[name])]
            elif name in textures:
                args[name] = synthesized_texture(rng, textures[name], fill)
            elif name in pointers:
                args[name] = _fill(rng, fill, buffer_bytes)
            elif type_ in ("f32", "f64", "f16"):
                args[name] = float(rng.choice([0.5, 1.0, 1.5, 2.0, -1.0, 3.0]))
            elif type_ in _TYPE_NAMES and type_ != "pred":
                args[name] = int(rng.choice(_SMALL_SCALARS))
            else:  # an array parameter (a struct by value): small random bytes
                args[name] = bytes(rng.integers(0, 8, size=sizes.get(name, 8),
                                                dtype=np.uint8))
        bound = {name: synthesized_texture(rng, form, fill) for name, form in references.items()}
        launches.append(PtxLaunch(grid=grid, block=block, args=args, textures=bound,
                                  dynamic_shared=CHECK_DYNAMIC_SHARED, max_steps=max_steps))
    return launches


def _fill(rng: np.random.Generator, fill: str, size: int) -> np.ndarray:
    if fill == "zeros":
        return np.zeros(size // 4, dtype=np.int32)
    if fill == "ints":
        return rng.integers(0, 16, size=size // 4, dtype=np.int32)
    return rng.uniform(-2.0, 2.0, size=size // 4).astype(np.float32)
