"""Texture and surface instructions of the PTX interpreter: `tex`, `tld4`, `suld.b`,
`sust.b` on NumPy arrays bound to texture/surface references or objects.

A bound array is indexed `[z][y][x]` (as many axes as the geometry has), optionally with
a last axis of channels (r, g, b, a). The modes are fixed to the defaults a
`cudaTextureDesc` / `cudaResourceDesc` left zero-initialised gives, which this module
documents rather than guesses:

- unnormalised coordinates, point filtering (`cudaFilterModePoint`), element-type reads;
- float coordinates address texel `floor(c)`, clamped to the array (wrap and mirror need
  normalised coordinates, so hardware clamps; a NaN coordinate reads texel 0);
- integer coordinates (`tex1Dfetch` of linear memory) out of range read zero in every
  channel;
- channels the array lacks read 0, except alpha (the 4th), which reads 1;
- `tld4.{r,g,b,a}` (`tex2Dgather`) returns that component of the 2×2 footprint of
  bilinear filtering at (x − ½, y − ½) in the order (x0, y1), (x1, y1), (x1, y0), (x0, y0);
- surfaces are byte-addressed in x (`surf2Dread(&v, s, x * sizeof(v), y)`); out of range
  `.trap` faults, `.clamp` clamps, `.zero` reads zero and drops stores; an x that is not a
  multiple of the access size faults.

Texture and surface objects (`cudaTextureObject_t`, a `.u64` kernel parameter) are
handles: `HANDLE_BASE + 16·k` for the k-th bound array of the launch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

HANDLE_BASE = 0x7E00_0000_0000
HANDLE_STRIDE = 16
_GEOMETRY = {"1d": 1, "2d": 2, "3d": 3}
_COMPONENTS = {"r": 0, "g": 1, "b": 2, "a": 3}
_CLAMP_MODES = ("trap", "clamp", "zero")


class TextureFault(Exception):
    """A lane's surface access out of range (`.trap`, `outside`) or misaligned; `mask`
    marks the lanes."""

    def __init__(self, message: str, mask: np.ndarray, outside: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.mask = mask
        self.outside = outside


class TextureUnsupported(Exception):
    """A form of a texture or surface instruction this module does not execute."""


@dataclass
class Texture:
    """An array bound to a texture or surface (object or reference)."""

    array: np.ndarray
    surface: bool = False


@dataclass(frozen=True)
class Form:
    """What an opcode says: `tex.2d.v4.f32.f32`, `tld4.r.2d.v4.f32.f32`, `suld.b.1d.b32.trap`."""

    root: str  # tex, tld4, suld, sust
    dims: int  # coordinates that address the array
    vector: int  # elements read or written
    types: tuple[str, ...]  # the type suffixes (result then coordinate for tex/tld4)
    component: int = 0  # tld4: which channel
    clamp: str = "trap"  # surfaces: out-of-range behaviour
    coords: int = 0  # coordinate operands in the instruction's vector (3d: 4)


def parse_form(opcode: str, type_names: frozenset[str]) -> Form:
    """The parts of a texture/surface opcode that matter; TextureUnsupported otherwise."""
    parts = opcode.split(".")
    root = parts[0]
    geometry = next((p for p in parts[1:] if p in _GEOMETRY), None)
    types = tuple(p for p in parts[1:] if p in type_names)
    if root not in ("tex", "tld4", "suld", "sust") or geometry is None or not types:
        raise TextureUnsupported(f"unsupported instruction '{opcode}'")
    if root in ("suld", "sust") and "b" not in parts[1:2]:
        raise TextureUnsupported(f"unsupported instruction '{opcode}' (formatted surface "
                                 f"access)")
    if any(p in ("lod", "grad", "level", "base", "ms") for p in parts):
        raise TextureUnsupported(f"unsupported instruction '{opcode}' (mipmap levels)")
    dims = _GEOMETRY[geometry]
    vector = next((int(p[1:]) for p in parts if p in ("v2", "v4")), 1)
    component = next((_COMPONENTS[p] for p in parts[1:2] if p in _COMPONENTS), 0)
    clamp = next((p for p in parts if p in _CLAMP_MODES), "trap")
    return Form(root, dims, vector, types, component, clamp, 4 if dims == 3 else dims)


def handle(index: int) -> int:
    """The handle value of the index-th bound texture of a launch."""
    return HANDLE_BASE + HANDLE_STRIDE * index


def handle_index(value: int, count: int) -> int | None:
    """Which bound texture a handle value names, or None."""
    offset = value - HANDLE_BASE
    if offset < 0 or offset % HANDLE_STRIDE or offset // HANDLE_STRIDE >= count:
        return None
    return offset // HANDLE_STRIDE


def _channels(array: np.ndarray, dims: int) -> int:
    return array.shape[-1] if array.ndim > dims else 1


def _channel(array: np.ndarray, dims: int, index: tuple, channel: int, out_dtype) -> np.ndarray:
    """Channel `channel` of the texels at `index` (missing: 0, or 1 for alpha)."""
    count = _channels(array, dims)
    size = len(index[0]) if index else 0
    if channel >= count:
        return np.full(size, 1 if channel == 3 else 0, dtype=out_dtype)
    texels = array[index]
    if array.ndim > dims:
        texels = texels[..., channel]
    return np.asarray(texels).astype(out_dtype)


def _sizes(array: np.ndarray, dims: int) -> list[int]:
    """Sizes along x, y, z."""
    return list(array.shape[:dims][::-1])


def fetch(texture: np.ndarray, form: Form, coords: list[np.ndarray], element: int,
          out_dtype) -> np.ndarray:
    """`tex`: element `element` of the texel each lane addresses."""
    dims = form.dims
    sizes = _sizes(texture, dims)
    integer = form.types[-1][0] in "sub"
    index, inside = [], np.ones(len(coords[0]), dtype=bool)
    for c, size in zip(coords[:dims], sizes, strict=True):
        if integer:
            k = np.asarray(c).astype(np.int64)
            inside &= (k >= 0) & (k < size)
        else:
            k = np.floor(np.nan_to_num(np.asarray(c, dtype=np.float64), nan=0.0,
                                       posinf=size, neginf=-1.0))
        index.append(np.clip(k, 0, size - 1).astype(np.intp))
    values = _channel(texture, dims, tuple(index[::-1]), element, out_dtype)
    if integer and not inside.all():
        values = np.where(inside, values, np.zeros_like(values))
    return values


def gather(texture: np.ndarray, form: Form, coords: list[np.ndarray], element: int,
           out_dtype) -> np.ndarray:
    """`tld4.{r,g,b,a}.2d`: channel `form.component` of footprint texel `element`."""
    width, height = _sizes(texture, 2)
    x = np.floor(np.nan_to_num(np.asarray(coords[0], np.float64)) - 0.5)
    y = np.floor(np.nan_to_num(np.asarray(coords[1], np.float64)) - 0.5)
    dx, dy = ((0, 1), (1, 1), (1, 0), (0, 0))[element]
    xi = np.clip(x + dx, 0, width - 1).astype(np.intp)
    yi = np.clip(y + dy, 0, height - 1).astype(np.intp)
    return _channel(texture, 2, (yi, xi), form.component, out_dtype)


def _surface_cells(surface: np.ndarray, form: Form, coords: list[np.ndarray],
                   size: int) -> tuple[np.ndarray, tuple, np.ndarray]:
    """(bytes of the C-contiguous surface as [z][y][row byte], per-lane byte index
    (z, y, x), lanes inside) of an access of `form.vector` elements of `size` bytes."""
    dims = form.dims
    raw = surface.reshape(-1).view(np.uint8).reshape(*surface.shape[:dims - 1], -1)
    width = size * form.vector
    x = np.asarray(coords[0]).astype(np.int64)
    misaligned = (x % size) != 0
    if misaligned.any():
        raise TextureFault(f"misaligned surface access of {size} bytes at x = "
                           f"{int(x[misaligned][0])}", misaligned)
    axes = [x] + [np.asarray(c).astype(np.int64) for c in coords[1:dims]]
    limits = [raw.shape[-1] - width + 1] + [raw.shape[dims - 1 - a] for a in range(1, dims)]
    inside = np.ones(len(x), dtype=bool)
    for a, limit in zip(axes, limits, strict=True):
        inside &= (a >= 0) & (a < limit)
    if not inside.all() and form.clamp == "trap":
        first = tuple(int(a[~inside][0]) for a in axes)
        raise TextureFault(f"out-of-range surface access at {first} (a surface of "
                           f"{raw.shape[-1]} bytes per row)", ~inside, outside=True)
    clamped = [np.clip(a, 0, max(limit - 1, 0)) for a, limit in zip(axes, limits, strict=True)]
    return raw, (*clamped[1:][::-1], clamped[0]), inside


def surface_load(surface: np.ndarray, form: Form, coords: list[np.ndarray], element: int,
                 size: int) -> np.ndarray:
    """`suld.b`: the raw bits (uint8…uint64) of element `element` at each lane's x, y, z."""
    raw, index, inside = _surface_cells(surface, form, coords, size)
    start = index[-1] + element * size
    out = np.zeros(len(start), dtype=np.uint64)
    for b in range(size):
        byte = raw[(*index[:-1], start + b)].astype(np.uint64)
        out |= byte << np.uint64(8 * b)
    if form.clamp == "zero":
        out = np.where(inside, out, np.uint64(0))
    return out.astype(f"u{size}")


def surface_store(surface: np.ndarray, form: Form, coords: list[np.ndarray],
                  values: list[np.ndarray], size: int) -> None:
    """`sust.b`: write the raw bits of each element, lane by lane in lane order."""
    raw, index, inside = _surface_cells(surface, form, coords, size)
    keep = inside if form.clamp == "zero" else np.ones(len(inside), dtype=bool)
    for element, value in enumerate(values):
        bits_ = np.broadcast_to(np.asarray(value).astype(f"u{size}"), keep.shape)
        start = index[-1] + element * size
        for b in range(size):
            byte = ((bits_.astype(np.uint64) >> np.uint64(8 * b)) & np.uint64(0xFF)).astype(
                np.uint8)
            where = tuple(i[keep] for i in index[:-1]) + (start[keep] + b,)
            raw[where] = byte[keep]


_DEFAULTS = {"normalized_coords": 0, "filter_mode": 0, "addr_mode_0": 1, "addr_mode_1": 1,
             "addr_mode_2": 1, "num_mipmap_levels": 1, "num_samples": 1, "array_size": 1}


def query(array: np.ndarray, what: str) -> int:
    """`txq`/`suq`: width, height and depth (in elements; a 2-D array is [y][x], a 3-D one
    [z][y][x]; a 1-D array with a channel axis cannot be told from a 2-D one, so give 1-D
    textures one channel), and the fixed modes: unnormalised (0), point filter (0), clamp
    (1), one mipmap level, one sample, array size 1."""
    if what in _DEFAULTS:
        return _DEFAULTS[what]
    axes = {"width": 1, "height": 2, "depth": 3}
    if what not in axes:
        raise TextureUnsupported(f"unsupported texture query '{what}'")
    dims = min(array.ndim, 3)
    axis = axes[what]
    return int(array.shape[dims - axis]) if axis <= dims else 0

