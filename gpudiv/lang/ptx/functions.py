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
from gpudiv.lang.ptx.flatten import _Unit
from gpudiv.lang.ptx.forms import PInstr
from gpudiv.lang.ptx.lower import CallSummary, Slot, SummaryOutput  # noqa: F401
from gpudiv.lang.ptx.parse import _gc_paused, _Reader


class FunctionReader:
    """One PTX file: parsed once, lowered per function on demand."""

    def __init__(self, text: str, path: str):
        self.path = path
        self.reader = _Reader(text, path, canonical=True)
        start = time.perf_counter()
        with _gc_paused():
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
        info = self.unit.info(name)
        found: set[str] = set()
        for stmt in info.stmts:
            if not isinstance(stmt, PInstr) or not stmt.opcode.startswith("call"):
                continue
            ops = stmt.operands
            position = 1 if ops and ops[0][0] == "p" else 0
            if position < len(ops) and ops[position][0] == "i":
                callee = self.unit.functions.get(ops[position][1])
                if callee is not None and callee.body is not None:
                    found.add(callee.name)
        return found

    def lower(self, name: str, summaries: dict[str, CallSummary | None],
              sites: dict[tuple[int, int], dict] | None = None) -> ir.Kernel | None:
        """A kernel or `.func` with its calls as summaries (None: it cannot be lowered;
        the reason is among the diagnostics); `sites`: what is known of the results of
        the call at (line, column) (`_KernelLowering.summary_call`)."""
        with _gc_paused():
            return self.reader.lower_kernel(self.unit, self.unit.functions[name],
                                            inline=False, summaries=summaries, sites=sites)

    def inlined(self, name: str) -> ir.Kernel | None:
        """A kernel as `gpudiv analyze` reads it: every call inlined."""
        with _gc_paused():
            return self.reader.lower_kernel(self.unit, self.unit.functions[name], inline=True)
