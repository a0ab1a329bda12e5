"""Host program (CFG) → text in the flat form of `grammar/host.lark`: one labelled
statement per node (`nK: ...`) in source-line order (ties in reverse postorder), `goto`
where the next node is not the successor, `if c goto nT else nF` for branches. It
parses back to the same CFG."""

from __future__ import annotations

from gpudiv.ir import host as h
from gpudiv.lang.musimd.printer import print_kernel


def print_host(prog: h.HostProgram, imports: list[str]) -> str:
    """The program importing `imports` (paths as the printed file should say them)."""
    lines = [f'import "{path}"' for path in imports]
    lines += [f"input {name} = {' | '.join(map(str, values))}"
              for name, values in prog.inputs.items()]
    rpo = {n: i for i, n in enumerate(prog.rpo())}
    order = sorted((n for n in rpo if n != prog.end),
                   key=lambda n: (n != prog.start, prog.nodes[n].loc.line, rpo[n]))
    order.append(prog.end)
    for i, n in enumerate(order):
        stmt = prog.nodes[n].stmt
        following = order[i + 1] if i + 1 < len(order) else None
        if isinstance(stmt, h.Branch):
            yes, no = prog.succ[n]
            lines.append(f"n{n}: {stmt} goto n{yes} else n{no}")
            continue
        lines.append(f"n{n}: {stmt}")
        if prog.succ[n] and prog.succ[n][0] != following:
            lines.append(f"    goto n{prog.succ[n][0]}")
    return "\n".join(lines) + "\n"


def print_fused(prog: h.HostProgram, names: list[str]) -> str:
    """The fused μ-SIMD kernels."""
    return "\n".join(print_kernel(prog.kernels[n].kernel) for n in names)
