"""`gpudiv run FILE.ptx`: kernel arguments from the command line, outputs and counters.

An argument is `[NAME=]SPEC`, bound to the kernel's parameters in order; NAME labels a
buffer in the output (default: the parameter's name). SPEC is

- a scalar: `TYPE:VALUE` (`u32:512`, `f32:1.5`, `s64:-3`) or a bare number, encoded at
  the parameter's type;
- a buffer in global memory: `TYPE[N]:INIT` or `TYPE[RxC]:INIT` (a 2-D array, row-major)
  with INIT one of `zeros`, `ones`, `random` (uniform in [0, 1) for floats, integers in
  [0, 100) otherwise), `range` (0, 1, 2, …) or a number (every element); or `@FILE.npy`;
- a function pointer: `&FUNCTION`, the address of a `.func` of the file, for a kernel that
  runs with its calls as calls (`--calls call`, or `auto` when it calls through pointers).

TYPE is one of u8 s8 u16 s16 u32 s32 u64 s64 f16 f32 f64 (b8…b64 and i32/i64 are
accepted as aliases). Buffers are written back to `-o DIR` as `NAME.npy` (or `NAME.json`
with `--output-format json`).
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import numpy as np

from gpudiv import ir
from gpudiv.interp.policies import AWARE_TIMEOUT
from gpudiv.interp.ptx import PtxLaunch, run_ptx_kernel
from gpudiv.interp.ptx_launch import MAX_THREADS
from gpudiv.interp.ptx_memory import function_addresses
from gpudiv.interp.ptx_synthesis import pointer_params
from gpudiv.interp.simt import ExecutionError

DTYPES = {
    "u8": np.uint8, "s8": np.int8, "u16": np.uint16, "s16": np.int16, "u32": np.uint32,
    "s32": np.int32, "u64": np.uint64, "s64": np.int64, "f16": np.float16,
    "f32": np.float32, "f64": np.float64,
}
ALIASES = {"b8": "u8", "b16": "u16", "b32": "u32", "b64": "u64", "i8": "s8", "i16": "s16",
           "i32": "s32", "i64": "s64"}
_BUFFER = re.compile(r"^(?P<type>\w+)\[(?P<shape>[^\]]*)\]:(?P<init>.+)$")
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


class FunctionPointer(str):
    """An `&FUNCTION` argument: the function's name, its address known once bound."""


def parse_arg(spec: str, rng: np.random.Generator) -> tuple[str | None, object]:
    """(label or None, value): a NumPy array for a buffer, an int or float for a scalar,
    a `FunctionPointer` for `&FUNCTION`."""
    label = None
    named = _NAME.match(spec)
    body = spec
    if named:
        label, body = named.group("name"), named.group("spec")
    if body.startswith("&"):
        return label, FunctionPointer(body[1:])
    if body.startswith("@"):
        return label, _load_npy(body[1:], spec)
    buffer = _BUFFER.match(body)
    if buffer:
        dt = _dtype(buffer.group("type"), spec)
        try:
            shape = tuple(int(s) for s in buffer.group("shape").split("x"))
        except ValueError:
            shape = ()
        if not shape or any(s < 1 for s in shape):
            raise ArgumentError(f"error: bad --arg '{spec}': the size in [...] must be one "
                                "to three positive integers, e.g. f32[1024] or f32[64x64]")
        if int(np.prod(shape)) > 1 << 26:
            raise ArgumentError(f"error: bad --arg '{spec}': at most 2^26 elements")
        return label, _init(buffer.group("init"), dt, shape, rng, spec)
    scalar = _SCALAR.match(body)
    if scalar:
        dt = _dtype(scalar.group("type"), spec)
        return label, _number(scalar.group("value"), dt.kind == "f", spec)
    return label, _number(body, "." in body or "e" in body.lower(), spec)


def _load_npy(name: str, spec: str) -> np.ndarray:
    """A buffer from a `.npy` file, with a message that names the file."""
    try:
        return np.load(name, allow_pickle=False)
    except OSError as error:
        if isinstance(error, FileNotFoundError) or not Path(name).exists():
            raise ArgumentError(f"{name}: error: no such file (--arg '{spec}')") from None
        raise ArgumentError(f"{name}: error: cannot read it as a NumPy .npy array "
                            f"(--arg '{spec}'): {error.strerror or 'not a .npy file'}"
                            ) from None
    except ValueError:
        raise ArgumentError(f"{name}: error: not a NumPy .npy array of numbers "
                            f"(--arg '{spec}')") from None


def integer_range(type_name: str) -> tuple[int, int] | None:
    """The integers a PTX/NumPy type holds (bit types: signed or unsigned); None for
    floats and unknown names."""
    name = type_name if type_name.startswith("b") else ALIASES.get(type_name, type_name)
    match = re.fullmatch(r"([usb])(8|16|32|64)", name)
    if not match:
        return None
    bits = int(match[2])
    if match[1] == "u":
        return 0, (1 << bits) - 1
    if match[1] == "s":
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return -(1 << (bits - 1)), (1 << bits) - 1


def fit(value: int, type_name: str) -> tuple[int, str | None]:
    """The value as the type stores it (two's complement wrap), and a warning if changed."""
    span = integer_range(type_name)
    if span is None or span[0] <= value <= span[1]:
        return value, None
    bits = int(re.sub(r"\D", "", type_name))
    wrapped = value & ((1 << bits) - 1)
    if span[0] < 0 and wrapped > span[1]:
        wrapped -= 1 << bits
    return wrapped, (f"{value} does not fit in {type_name} ({span[0]} to {span[1]}); "
                     f"the kernel gets {wrapped}")


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
    if dt.kind in "iu" and isinstance(value, int):
        span = integer_range(dt.name.replace("uint", "u").replace("int", "s"))
        if span and not span[0] <= value <= span[1]:
            raise ArgumentError(f"error: bad --arg '{spec}': {value} does not fit in "
                                f"{dt.name} ({span[0]} to {span[1]})")
    if dt.kind == "f" and isinstance(value, int):
        value = float(value)
    return np.full(shape, value, dtype=dt)


def _param_kinds(kernel: ir.Kernel) -> dict[str, str]:
    """Each parameter's type, and `pointer` for those the kernel reads or writes through."""
    types = {name: type_ for name, type_, _, _ in kernel.attrs.get("params", ())}
    kinds = {p: types.get(p, "") for p in kernel.params}
    for p in pointer_params(kernel):
        kinds[p] = "pointer"
    return kinds


def _expects(kind: str) -> str:
    if kind == "pointer":
        return "a buffer (the kernel accesses memory through it): TYPE[N]:INIT or @FILE.npy"
    if kind in ("f16", "f32", "f64"):
        return f"a number (.{kind})"
    if integer_range(kind):
        return f"an integer (.{kind})"
    return f"a value (.{kind})" if kind else "a value"


def bind(kernel: ir.Kernel, specs: list[str], seed: int
         ) -> tuple[dict, dict[str, str], list[str]]:
    """Arguments by parameter name, the label of each parameter, and warnings about
    values that were changed to fit their type."""
    kinds = _param_kinds(kernel)
    rng = np.random.default_rng(seed)
    parsed = [parse_arg(spec, rng) for spec in specs]  # a bad spec first: it says more
    if len(specs) != len(kernel.params):
        listing = "; ".join(f"{i + 1}. {p}: {_expects(kinds[p])}"
                            for i, p in enumerate(kernel.params)) or "none"
        if len(specs) > len(kernel.params):
            raise ArgumentError(f"error: kernel {kernel.name} has {len(kernel.params)} "
                                f"parameters; got {len(specs)} --arg ({listing})")
        missing = kernel.params[len(specs):]
        raise ArgumentError(f"error: kernel {kernel.name}: no --arg for parameter"
                            f"{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                            f"(one --arg per parameter, in order: {listing})")
    args: dict = {}
    labels: dict[str, str] = {}
    warnings: list[str] = []
    for index, (param, spec) in enumerate(zip(kernel.params, specs, strict=True)):
        label, value = parsed[index]
        kind = kinds[param]
        where = f"--arg {index + 1} ('{spec}') for parameter {param}"
        if isinstance(value, np.ndarray) and kind not in ("pointer", "u64", "b64", "s64"):
            raise ArgumentError(f"error: {where}: a buffer, but the kernel expects "
                                f"{_expects(kind)}")
        if isinstance(value, FunctionPointer):
            value = _function_address(kernel, value, where)
        elif not isinstance(value, np.ndarray) and kind == "pointer":
            raise ArgumentError(f"error: {where}: a number, but the kernel expects "
                                f"{_expects(kind)}")
        if isinstance(value, int):
            scalar = _SCALAR.match(_NAME.match(spec)["spec"] if _NAME.match(spec) else spec)
            type_name = scalar["type"] if scalar else kind
            value, warning = fit(value, type_name)
            if warning is None and type_name != kind:
                value, warning = fit(value, kind)
            if warning:
                warnings.append(f"warning: {where}: {warning}")
        args[param] = value
        labels[param] = label or param
    return args, labels, warnings


def _function_address(kernel: ir.Kernel, name: str, where: str) -> int:
    """The address `&NAME` passes: that of a function the kernel reaches with its calls
    kept (ArgumentError otherwise)."""
    addresses = function_addresses(kernel)
    if not addresses:
        raise ArgumentError(f"error: {where}: a function pointer, but kernel {kernel.name} "
                            "runs with its calls inlined (run it with --calls call)")
    if name not in addresses:
        raise ArgumentError(f"error: {where}: no function '{name}' in this file's functions "
                            f"({', '.join(addresses)})")
    return addresses[name]


def check_output_dir(path: str) -> None:
    """Fail before the run if `-o DIR` cannot hold the buffers: it must be a writable folder
    or a name that can be created as one."""
    directory = Path(path)
    existing = directory
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        what = "is not a folder" if existing == directory else f"'{existing}' is not a folder"
        raise ArgumentError(f"{path}: error: cannot write the buffers here: {what}")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ArgumentError(f"{path}: error: cannot write the buffers here: "
                            f"'{existing}' is not writable")


def run_command(args, path: str, kernel: ir.Kernel) -> int:
    """Run a PTX kernel as `gpudiv run` asks; 0, or 2 after a one-line error."""
    try:
        if args.output:
            check_output_dir(args.output)
        grid = parse_dims(args.grid, "grid")
        block = parse_dims(args.block, "block")
        threads = block[0] * block[1] * block[2]
        if threads > MAX_THREADS:
            raise ArgumentError(f"error: bad --block '{args.block}': a block has at most "
                                f"{MAX_THREADS} threads (got {threads})")
        values, labels, warnings = bind(kernel, args.arg, args.seed)
        for warning in warnings:
            print(f"{path}: {warning}", file=sys.stderr)
        launch = PtxLaunch(grid, block, values, dynamic_shared=args.dynamic_shared,
                           max_steps=args.max_steps, reconvergence=args.reconvergence,
                           stack_size=args.stack_size,
                           aware_timeout=getattr(args, "aware_timeout", AWARE_TIMEOUT) or None)
        trace: list | None = [] if args.trace else None
        if getattr(args, "compare_reconvergence", False):
            from gpudiv.api import compare_reconvergence  # the API sits to the right
            from gpudiv.cli.run import print_comparison
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
        if args.format == "text":
            _print_trace(trace or ())  # the steps up to the fault
        print(f"{path}: error: {error}", file=sys.stderr)
        return 2
    outputs = {labels[name]: array for name, array in result.buffers.items()}
    if args.output:
        try:
            _write(Path(args.output), outputs, args.output_format)
        except OSError as error:
            print(f"{args.output}: error: cannot write the buffers: "
                  f"{error.strerror or error}", file=sys.stderr)
            return 2
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
    _print_trace(trace or ())
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


def _print_trace(trace) -> None:
    """One line per warp step: block, warp, PTX line, instruction, active lanes."""
    for block_index, warp, line, text, lanes in trace:
        print(f"block {block_index} warp {warp} line {line}: {text}  "
              f"[{len(lanes)} lanes]")


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
