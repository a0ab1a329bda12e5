"""A PTX file read once and lowered function by function, for call summaries.

`gpudiv.analyses.call_summaries` analyses each `.func` once instead of once per call site.
It needs, from one reading of the file: the call graph between the functions that have a
body; each `.func` lowered on its own (`_KernelLowering.lower_function`: parameters as
`call.input` definitions, one `call.return` reading the outputs); each `.entry` lowered
with its calls as the summaries of their callees (`_KernelLowering.summary_call`); and,
for checking the summaries on the interpreter, each `.entry` lowered as `gpudiv analyze`
reads it, with every call inlined (`attrs["call_instances"]` then says which call site
each inlined copy stands for).
"""

from __future__ import annotations

import time

from gpudiv import ir
from gpudiv.ir.perf import paused_gc
from gpudiv.lang.ptx.flatten import _Unit
from gpudiv.lang.ptx.lower import CallSummary, Slot, SummaryOutput  # noqa: F401
from gpudiv.lang.ptx.parse import _Reader


class FunctionReader:
    """One PTX file: parsed once, lowered per function on demand."""

    def __init__(self, text: str, path: str):
        self.path = path
        self.reader = _Reader(text, path, canonical=True)
        start = time.perf_counter()
        with paused_gc():
            self.reader.parse()
        self.parse_ms = (time.perf_counter() - start) * 1000
        self.reader.program.attrs["files"] = dict(self.reader.files)
        self.unit = _Unit(path, self.reader.functions, self.reader.symbols,
                          self.reader.files)

    @property
    def diagnostics(self) -> list[ir.Diagnostic]:
        return self.reader.program.diagnostics

    @property
    def entries(self) -> list[str]:
        """The kernels, in file order."""
        return [fn.name for fn in self.reader.order if fn.kind == "entry"]

    @property
    def functions(self) -> list[str]:
        """The `.func`s with a body, in file order."""
        return [fn.name for fn in self.reader.order
                if fn.kind == "func" and fn.body is not None]

    def callees(self, name: str) -> set[str]:
        """The functions with a body that `name` calls directly."""
        return self.unit.calls(name)[0]

    def lower(self, name: str, summaries: dict[str, CallSummary | None],
              sites: dict[tuple[int, int], dict] | None = None,
              targets: dict[str, CallSummary] | None = None) -> ir.Kernel | None:
        """A kernel or `.func` with its calls as summaries (None: it cannot be lowered;
        the reason is among the diagnostics); `sites`: what is known of the results of
        the call at (line, column) (`_KernelLowering.summary_call`); `targets`: the
        functions a call through a pointer may reach (`_KernelLowering.indirect_call`)."""
        with paused_gc():
            return self.reader.lower_kernel(self.unit, self.unit.functions[name],
                                            inline=False, summaries=summaries, sites=sites,
                                            targets=targets)

    def inlined(self, name: str) -> ir.Kernel | None:
        """A kernel as `gpudiv analyze` reads it: every call inlined."""
        with paused_gc():
            return self.reader.lower_kernel(self.unit, self.unit.functions[name], inline=True)

    def executable(self, name: str) -> ir.Kernel | None:
        """A kernel as the interpreter runs it with calls as calls (None: it cannot be
        lowered). Each call to a function of the file is one `call` instruction (reading
        the arguments by input slot, `attrs["call_inputs"]`) followed by one result
        instruction per output slot (`attrs["output"]`); `attrs["functions"]` holds every
        function the kernel may reach, lowered once (`_KernelLowering.lower_function`),
        its registers renamed `NAME@@FUNCTION` and its instruction ids after the kernel's."""
        reached = self._reachable(name)
        shapes = self._shapes(reached)
        targets = {f: shape for f, shape in shapes.items() if shape is not None}
        kernel = self.lower(name, shapes, targets=targets)
        if kernel is None:
            return None
        functions: dict[str, ir.Kernel] = {}
        next_id = kernel.next_id
        symbols = dict(kernel.attrs["symbols"])
        for function in reached:
            lowered = self.lower(function, shapes, targets=targets) if function in targets \
                else None
            if lowered is None:
                continue
            namespaced(lowered, f"@@{function}", next_id)
            next_id = lowered.next_id
            lowered.attrs["frame_symbols"] = tuple(
                n for n, detail in self.unit.info(function).symbol_details.items()
                if detail[0] == "local")
            symbols.update(lowered.attrs["symbols"])
            functions[function] = lowered
        kernel.attrs["functions"] = functions
        kernel.attrs["symbols"] = symbols
        kernel.attrs["recursive"] = frozenset(f for f in reached if f in self._reachable(f))
        return kernel

    def _reachable(self, name: str) -> list[str]:
        """The functions with a body that `name` may call, directly or not, in file order
        (every one once it calls through a function pointer)."""
        seen: set[str] = set()
        todo = [name]
        while todo:
            callees, indirect = self.unit.calls(todo.pop())
            if indirect:
                return list(self.functions)
            for callee in callees:
                if callee not in seen:
                    seen.add(callee)
                    todo.append(callee)
        return [f for f in self.functions if f in seen]

    def _shapes(self, functions: list[str]) -> dict[str, CallSummary | None]:
        """Per function, the slots its body reads and writes, as a summary that says
        nothing of its outputs (an opaque value each): how a call to it is lowered for
        the interpreter. None for a function that cannot be lowered."""
        diagnostics = self.reader.program.diagnostics
        kept = len(diagnostics)
        shapes: dict[str, CallSummary | None] = {}
        for function in functions:
            lowered = self.lower(function, {})
            if lowered is None:
                shapes[function] = None
                continue
            inputs = tuple(i.attrs["input"] for i in lowered.instructions()
                           if i.operator == "call.input")
            outputs = next((i.attrs["outputs"] for i in lowered.instructions()
                            if i.operator == "call.return"), ())
            opaque = SummaryOutput(frozenset(), intrinsic=True)
            shapes[function] = CallSummary(inputs, dict.fromkeys(outputs, opaque))
        del diagnostics[kept:]  # the lowering below reports what matters once
        return shapes


def namespaced(kernel: ir.Kernel, tag: str, first_id: int) -> None:
    """Rename every register of a lowered function `NAME` → `NAME{tag}` (a function's
    registers must not meet the kernel's or another function's in the interpreter) and
    number its instructions from `first_id`, in place."""
    def rename(operand: ir.Operand) -> ir.Operand:
        return ir.Var(operand.name + tag) if isinstance(operand, ir.Var) else operand

    for instr in kernel.instructions():
        instr.args = tuple(rename(a) for a in instr.args)
        instr.implicit = tuple(rename(a) for a in instr.implicit)
        if instr.dest is not None:
            instr.dest = instr.dest + tag
        if instr.guard is not None:
            instr.guard = ir.Guard(rename(instr.guard.operand), instr.guard.negated)
        instr.id += first_id
    kernel.next_id += first_id
    kernel.registers = {name + tag: type_ for name, type_ in kernel.registers.items()}
    kernel.attrs["reg_types"] = {name + tag: type_
                                 for name, type_ in kernel.attrs["reg_types"].items()}
