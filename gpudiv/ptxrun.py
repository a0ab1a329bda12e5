"""`gpudiv run FILE.ptx`: kernel arguments from the command line, outputs and counters.

An argument is `[NAME=]SPEC`, bound to the kernel's parameters in order; NAME labels a
buffer in the output (default: the parameter's name). SPEC is

- a scalar: `TYPE:VALUE` (`u32:512`, `f32:1.5`, `s64:-3`) or a bare number, encoded at
  the parameter's type;
- a buffer in global memory: `TYPE[N]:INIT` or `TYPE[RxC]:INIT` (a 2-D array, row-major)
  with INIT one of `zeros`, `ones`, `random` (uniform in [0, 1) for floats, integers in
  [0, 100) otherwise), `range` (0, 1, 2, …) or a number (every element); or `@FILE.npy`.

TYPE is one of u8 s8 u16 s16 u32 s32 u64 s64 f16 f32 f64 (b8…b64 and i32/i64 are
accepted as aliases). Buffers are written back to `-o DIR` as `NAME.npy` (or `NAME.json`
with `--output-format json`).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np

from gpudiv import ir
from gpudiv.interp.ptx import PtxLaunch, run_ptx_kernel
from gpudiv.interp.simt import ExecutionError

DTYPES = {
    "u8": np.uint8, "s8": np.int8, "u16": np.uint16, "s16": np.int16, "u32": np.uint32,
    "s32": np.int32, "u64": np.uint64, "s64": np.int64, "f16": np.float16,
    "f32": np.float32, "f64": np.float64,
}
ALIASES = {"b8": "u8", "b16": "u16", "b32": "u32", "b64": "u64", "i8": "s8", "i16": "s16",
           "i32": "s32", "i64": "s64"}
_BUFFER = re.compile(r"^(?P<type>\w+)\[(?P<shape>[0-9x]+)\]:(?P<init>.+)$")
_SCALAR = re.compile(r"^(?P<type>\w+):(?P<value>.+)$")
_NAME = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_.]*)=(?P<spec>.+)$")


class ArgumentError(ValueError):
    """A bad `--arg`, `--grid` or `--block`; the message is one line."""


def parse_dims(text: str, what: str) -> tuple[int, int, int]:
    """`4`, `4,2`, `4x2x1` → (x, y, z)."""
    parts = [p for p in re.split(r"[x,]", text.strip()) if p]
    try:
        dims = [int(p) for p in parts]
    except ValueError:
        raise ArgumentError(f"error: bad --{what} '{text}' (expected X, XxY or XxYxZ)") from None
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise ArgumentError(f"error: bad --{what} '{text}' (expected 1 to 3 positive sizes)")
    return (*dims, *[1] * (3 - len(dims)))  # type: ignore[return-value]


def _dtype(name: str, spec: str):
    name = ALIASES.get(name, name)
    if name not in DTYPES:
        raise ArgumentError(f"error: bad --arg '{spec}': unknown type '{name}' (one of "
                            f"{', '.join(DTYPES)})")
    return np.dtype(DTYPES[name])


def parse_arg(spec: str, rng: np.random.Generator) -> tuple[str | None, object]:
    """(label or None, value): a NumPy array for a buffer, an int or float for a scalar."""
    label = None
    named = _NAME.match(spec)
    body = spec
    if named:
        label, body = named.group("name"), named.group("spec")
    if body.startswith("@"):
        try:
            return label, np.load(body[1:], allow_pickle=False)
        except (OSError, ValueError) as error:
            raise ArgumentError(f"error: bad --arg '{spec}': {error}") from None
    buffer = _BUFFER.match(body)
    if buffer:
        dt = _dtype(buffer.group("type"), spec)
        try:
            shape = tuple(int(s) for s in buffer.group("shape").split("x"))
        except ValueError:
            raise ArgumentError(f"error: bad --arg '{spec}': bad shape") from None
        if not shape or any(s < 1 for s in shape) or int(np.prod(shape)) > 1 << 26:
            raise ArgumentError(f"error: bad --arg '{spec}': sizes must be 1 to 2^26 elements")
        return label, _init(buffer.group("init"), dt, shape, rng, spec)
    scalar = _SCALAR.match(body)
    if scalar:
        dt = _dtype(scalar.group("type"), spec)
        return label, _number(scalar.group("value"), dt.kind == "f", spec)
    return label, _number(body, "." in body or "e" in body.lower(), spec)


def _number(text: str, is_float: bool, spec: str) -> int | float:
    try:
        return float(text) if is_float else int(text, 0)
    except ValueError:
        raise ArgumentError(f"error: bad --arg '{spec}': '{text}' is not a number") from None


def _init(init: str, dt: np.dtype, shape: tuple[int, ...], rng: np.random.Generator,
          spec: str) -> np.ndarray:
    size = int(np.prod(shape))
    if init == "zeros":
        return np.zeros(shape, dt)
    if init == "ones":
        return np.ones(shape, dt)
    if init == "range":
        return np.arange(size).astype(dt).reshape(shape)
    if init == "random":
        if dt.kind == "f":
            return rng.random(size).astype(dt).reshape(shape)
        return rng.integers(0, 100, size).astype(dt).reshape(shape)
    value = _number(init, dt.kind == "f", spec)
    return np.full(shape, value, dtype=dt)


def bind(kernel: ir.Kernel, specs: list[str], seed: int) -> tuple[dict, dict[str, str]]:
    """Arguments by parameter name, and the label of each parameter."""
    if len(specs) > len(kernel.params):
        raise ArgumentError(f"error: kernel {kernel.name} has {len(kernel.params)} "
                            f"parameters; got {len(specs)} --arg")
    rng = np.random.default_rng(seed)
    args: dict = {}
    labels: dict[str, str] = {}
    for param, spec in zip(kernel.params, specs, strict=False):
        label, value = parse_arg(spec, rng)
        args[param] = value
        labels[param] = label or param
    return args, labels


def run_command(args, path: str, kernel: ir.Kernel) -> int:
    """Run a PTX kernel as `gpudiv run` asks; 0, or 2 after a one-line error."""
    try:
        grid = parse_dims(args.grid, "grid")
        block = parse_dims(args.block, "block")
        values, labels = bind(kernel, args.arg, args.seed)
        launch = PtxLaunch(grid, block, values, dynamic_shared=args.dynamic_shared,
                           max_steps=args.max_steps, reconvergence=args.reconvergence)
        trace: list | None = [] if args.trace else None
        if getattr(args, "compare_reconvergence", False):
            from gpudiv.api import compare_reconvergence  # the API sits to the right
            from gpudiv.cli import print_comparison
            return print_comparison(kernel.name, compare_reconvergence(kernel, launch),
                                    args.format)
        result = run_ptx_kernel(kernel, launch, trace=trace)
    except ArgumentError as error:
        print(str(error), file=sys.stderr)
        return 2
    except ValueError as error:
        print(f"{path}: error: {error}", file=sys.stderr)
        return 2
    except ExecutionError as error:  # a fault, a SIMT deadlock, the step budget
        print(f"{path}: error: {error}", file=sys.stderr)
        return 2
    outputs = {labels[name]: array for name, array in result.buffers.items()}
    if args.output:
        _write(Path(args.output), outputs, args.output_format)
    counters = result.counters
    summary = {
        "kernel": kernel.name, "grid": list(grid), "block": list(block),
        "reconvergence": launch.reconvergence,
        "counters": counters.as_dict(),
        "buffers": {name: _describe(array) for name, array in outputs.items()},
    }
    if args.format == "json":
        json.dump(summary, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    for block_index, warp, line, text, lanes in trace or ():
        print(f"block {block_index} warp {warp} line {line}: {text}  "
              f"[{len(lanes)} lanes]")
    threads = launch.threads
    print(f"kernel {kernel.name}: grid {'x'.join(map(str, grid))}, block "
          f"{'x'.join(map(str, block))} ({threads} threads, "
          f"{(threads + 31) // 32} warps per block)")
    for line in counter_lines(counters):
        print(line)
    for name, array in outputs.items():
        print(f"  {name}: {_describe(array)}")
    if args.output:
        print(f"  buffers written to {args.output}/")
    return 0


def counter_lines(counters) -> list[str]:
    """The counters of a run as `gpudiv run` prints them."""
    return [f"  warp instructions:  {counters.warp_instructions}",
            f"  lane instructions:  {counters.lane_instructions}",
            f"  SIMD efficiency:    {counters.simd_efficiency:.3f}",
            f"  divergent branches: {counters.divergent_branches}",
            f"  reconvergences:     {counters.reconvergences}",
            f"  max stack depth:    {counters.max_stack_depth}"]


def _describe(array: np.ndarray) -> str:
    shown = ", ".join(_format(v) for v in array.reshape(-1)[:6].tolist())
    more = ", …" if array.size > 6 else ""
    return f"{array.dtype}{list(array.shape)} [{shown}{more}]"


def _format(value) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _write(directory: Path, outputs: dict[str, np.ndarray], fmt: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, array in outputs.items():
        if fmt == "json":
            (directory / f"{name}.json").write_text(json.dumps(array.tolist()) + "\n")
        else:
            np.save(directory / f"{name}.npy", array)
