"""Copy coalescing for the temporaries code motion makes (`cm_t…`, `sr_t…`, `sr_h…`).

Code motion leaves copies: a replaced occurrence `d := E` becomes `d := t`, a saved
load gets `t := d`. Where the temporary `t` and the other register `d` of such a copy
do not interfere, every `t` is renamed `d` and the copy, now `d := d`, goes (Chaitin's
coalescing). Interference is copy-aware: the definition of `V` interferes with every
register live after it, except the source of a copy `V := W` (the two hold the same
value there). Liveness is rules/liveness.lp's. After a merge the register inherits the
interference of both (conservative), so one liveness solution serves every merge.

Only temporaries the pass created are renamed (never a register of the input program,
a parameter or a register of another type), so every instruction that changes is one
the pass wrote, and the printers write it from its IR form.
"""

from __future__ import annotations

from gpudiv import ir
from gpudiv.transforms.base import kernel_language
from gpudiv.transforms.builder import Rewriter
from gpudiv.transforms.liveness import liveness


def _copy_pair(instr: ir.Instruction) -> tuple[str, str] | None:
    """(dest, source) of an unguarded register copy."""
    if instr.kind != ir.ASSIGN or instr.operator != "copy" or instr.guard is not None:
        return None
    if instr.dest is None or len(instr.args) != 1 or not isinstance(instr.args[0], ir.Var):
        return None
    return instr.dest, instr.args[0].name


def interference(kernel: ir.Kernel) -> dict[str, set[str]]:
    """Copy-aware interference: register → the registers it may not share with."""
    live = liveness(kernel)
    graph: dict[str, set[str]] = {}
    for instr in kernel.instructions():
        if instr.dest is None:
            continue
        pair = _copy_pair(instr)
        for other in live.live_out.get(instr.id, set()):
            if other == instr.dest or (pair is not None and other == pair[1]):
                continue
            graph.setdefault(instr.dest, set()).add(other)
            graph.setdefault(other, set()).add(instr.dest)
    return graph


def _renamable(kernel: ir.Kernel, temp: str) -> bool:
    """A temporary read only as an ordinary argument (no guard, no implicit read)."""
    old = ir.Var(temp)
    return not any((instr.guard is not None and instr.guard.operand == old)
                   or old in instr.implicit for instr in kernel.instructions())


def _rename(kernel: ir.Kernel, temp: str, target: str) -> None:
    """Every `temp` becomes `target`; the copies `target := target` go."""
    rewriter = Rewriter(kernel)
    rewriter.replace_all_uses(temp, ir.Var(target))
    for instr in list(kernel.instructions()):
        if instr.dest == temp:
            instr.dest = target
        pair = _copy_pair(instr)
        if pair is not None and pair[0] == pair[1]:
            rewriter.erase(instr)
        elif temp in instr.text:
            instr.text = " ".join(target if w == temp else w for w in instr.text.split(" "))
    kernel.registers.pop(temp, None)


def coalesce_copies(kernel: ir.Kernel, temps: set[str]) -> int:
    """Merge each temporary of `temps` into a register it is copied to or from, where
    they do not interfere; the number of copies removed."""
    candidates = [(d, s) for i in kernel.instructions() if (pair := _copy_pair(i))
                  for d, s in [pair] if (d in temps) != (s in temps) or
                  (d in temps and s in temps and d != s)]
    if not candidates:
        return 0
    graph = interference(kernel)
    params = set(kernel.params)
    ptx = kernel_language(kernel) == "ptx"  # μ-SIMD registers are untyped
    merged: dict[str, str] = {}
    removed = 0
    for dest, source in candidates:
        dest, source = merged.get(dest, dest), merged.get(source, source)
        if dest == source:
            continue
        temp, other = (source, dest) if source in temps else (dest, source)
        if temp not in temps:
            continue  # both are registers of the input program by now
        if other in params or temp in params or (
                ptx and kernel.registers.get(temp) != kernel.registers.get(other)):
            continue
        if other in graph.get(temp, set()) or not _renamable(kernel, temp):
            continue
        before = sum(1 for _ in kernel.instructions())
        _rename(kernel, temp, other)
        removed += before - sum(1 for _ in kernel.instructions())
        for x in graph.pop(temp, set()):
            graph.setdefault(other, set()).add(x)
            graph.setdefault(x, set()).discard(temp)
            graph[x].add(other)
        merged = {k: (other if v == temp else v) for k, v in merged.items()}
        merged[temp] = other
    return removed


def coalesce_new(work: ir.Kernel, original: ir.Kernel, enabled: bool = True) -> int:
    """Coalesce the copies of the temporaries `work` has and `original` had not."""
    if not enabled:
        return 0
    return coalesce_copies(work, set(work.registers) - set(original.registers))
