"""The canonicalization passes of PTX: the forms the analyses read, as explicit steps.

`gpudiv.lang.load` reads PTX in canonical form (both steps applied while reading); a program
read with `load(path, canonical=False)` keeps what PTX says, calls as calls and guarded
definitions as guarded instructions, and these passes make it canonical:

- `inline`: every call to a `.func` body of the file is inlined (the callee's registers
  and labels get the suffix `@N` of the call site, its `.param` variables become slot
  registers). The kernel is lowered again from its PTX with inlining on, so `inline`
  must come before any pass that changes the kernel (it fails clearly otherwise).
- `guard-to-select`: a guarded definition `@p d = op …` becomes the speculated
  computation `d@gN = op …` and `d = select(p, d@gN, d)` (gpudiv.lang.ptx.guards).
  A group that was unchanged before stays printable as its PTX instruction.

`inline` then `guard-to-select` on a program read with `canonical=False` gives the
program `load` gives (structurally equal, `gpudiv.lang.compare.first_difference`).
On a canonical program both passes change nothing.
"""

from __future__ import annotations

from gpudiv import ir
from gpudiv.lang.ptx.guards import guard_to_select
from gpudiv.lang.ptx.parse import inline_calls
from gpudiv.transforms.base import Pass, PassError, register


@register
class Inline(Pass):
    """Inline the calls a PTX kernel kept as calls."""

    name = "inline"
    description = ("inline every call to a .func body of the file (PTX read with "
                   "canonical=False; must come first)")

    def run(self, kernel: ir.Kernel) -> ir.Kernel:
        """The kernel with its calls inlined (a new kernel when there were any)."""
        try:
            return inline_calls(kernel)
        except ValueError as error:
            raise PassError(str(error)) from error


@register
class GuardToSelect(Pass):
    """Turn guarded definitions into selects."""

    name = "guard-to-select"
    description = ("a guarded definition becomes a speculated computation and a select "
                   "(PTX read with canonical=False)")

    def run(self, kernel: ir.Kernel) -> ir.Kernel:
        """The kernel with its guarded definitions rewritten in place."""
        source = kernel.attrs.get("ptx_source")
        unchanged = _unchanged_groups(kernel, source) if isinstance(source, dict) else set()
        guard_to_select(kernel)
        if unchanged:
            current: dict[int, list[tuple]] = {}
            for instr in kernel.instructions():
                if instr.group in unchanged:
                    current.setdefault(instr.group, []).append(instr.form())
            for group, forms in current.items():
                source["group_forms"][group] = tuple(forms)
        return kernel


def _unchanged_groups(kernel: ir.Kernel, source: dict) -> set[int]:
    """The groups whose instructions still have the forms they were read with."""
    current: dict[int, list[tuple]] = {}
    for instr in kernel.instructions():
        if instr.group is not None:
            current.setdefault(instr.group, []).append(instr.form())
    recorded = source["group_forms"]
    return {g for g, forms in current.items() if tuple(forms) == recorded.get(g)}
