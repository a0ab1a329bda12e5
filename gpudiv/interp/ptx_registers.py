"""PTX registers: the type of every register of a kernel and typed reads and writes of
the raw bits a register holds."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from gpudiv import ir
from gpudiv.interp.ptx_ops import bits, canonical, dtype, kind, signed, unsigned
from gpudiv.lang.ptx.types import TYPE_NAMES as _TYPE_NAMES
from gpudiv.lang.ptx.types import infer_types

STORAGE = {1: np.bool_, 8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def register_types(kernel: ir.Kernel) -> dict[str, str]:
    """The PTX type of every register the kernel reads or writes."""
    instructions = kernel.instructions()
    types = infer_types(instructions, {**kernel.registers, **dict.fromkeys(kernel.params, "b64")})
    for instr in instructions:
        for name in (*instr.used_vars, *([instr.dest] if instr.dest else [])):
            types.setdefault(name, "b64")
    return types


def storage_bits(type_: str) -> int:
    """The bits a register of PTX type `type_` is stored in (1 for predicates)."""
    return 1 if type_ == "pred" else bits(type_) if type_ in _TYPE_NAMES else 64


def register_reader(store: np.ndarray, want: str) -> Callable:
    """A function from lanes to the values of a register read as PTX type `want`."""
    want = canonical(want)
    if want == "pred":
        if store.dtype == np.bool_:
            return store.__getitem__
        return lambda sel: store[sel] != 0
    dt = dtype(want)
    if store.dtype == np.bool_:
        return lambda sel: store[sel].astype(dt)
    width = store.dtype.itemsize * 8
    want_bits = bits(want)
    if width == want_bits:
        return store.view(dt).__getitem__
    if width > want_bits:
        udt = dtype(unsigned(want))
        return lambda sel: store[sel].astype(udt).view(dt)
    if kind(want) == "s":
        narrow = store.view(dtype(f"s{width}"))
        return lambda sel: narrow[sel].astype(dt)
    return lambda sel: store[sel].astype(dtype(unsigned(want))).view(dt)


def register_writer(store: np.ndarray, result: str, sign_extend: bool | None = None) -> Callable:
    """A function (lanes, values) writing a result of PTX type `result` into a register."""
    result = canonical(result)
    if store.dtype == np.bool_:
        if result == "pred":
            return store.__setitem__
        return lambda sel, v: store.__setitem__(sel, np.asarray(v) != 0)
    if result == "pred":
        return lambda sel, v: store.__setitem__(sel, np.asarray(v).astype(store.dtype))
    width = store.dtype.itemsize * 8
    result_bits = bits(result)
    if width == result_bits:
        view = store.view(dtype(result))
        return view.__setitem__
    if width > result_bits:
        extend_signed = kind(result) == "s" if sign_extend is None else sign_extend
        if kind(result) == "f":
            udt = dtype(unsigned(result))
            return lambda sel, v: store.__setitem__(sel, np.asarray(v).view(udt).astype(
                store.dtype))
        if extend_signed:
            sdt = dtype(f"s{width}")
            source = dtype(signed(result))
            return lambda sel, v: store.__setitem__(
                sel, np.asarray(v).view(source).astype(sdt).view(store.dtype))
        return lambda sel, v: store.__setitem__(sel, np.asarray(v).astype(
            dtype(unsigned(result))).astype(store.dtype))
    udt = dtype(unsigned(result))
    return lambda sel, v: store.__setitem__(sel, np.asarray(v).view(udt).astype(store.dtype))


# ---------------------------------------------------------------------------------------
# Prepared instructions
# ---------------------------------------------------------------------------------------

