"""Time of the code-motion passes (by default every variant: LCM, SCM, SSCM, SPRE, SRQP,
ESRQP, SSRQP_S, SSRQP) on a generated μ-SIMD kernel of about N instructions: a chain of
divergent ifs, each side loading one of a few shared-memory forms (its address computed
on both sides: partially redundant computations), a join loading it again, and an
index increment.

    python benchmarks/bench_srqp_size.py [N] [--passes P,P…]     # default 5000

Prints the instructions, forms and statement nodes, then per pass the wall and CPU
seconds of the whole pass (divergence analysis, critical edges, model, clingo, rewrite;
CPU includes clingo's child process) and the loads before and after.
"""

from __future__ import annotations

import resource
import sys
import time

from gpudiv import ir
from gpudiv.lang.load import parse_text
from gpudiv.transforms import get_pass
from gpudiv.transforms.loads import build_load_model

PASSES = ("lcm", "scm", "sscm", "spre", "srqp", "esrqp", "ssrqp-s", "ssrqp")


def chain(size: int) -> str:
    """A kernel of about `size` instructions (12 per link)."""
    lines = ["kernel chain(n)", "      i = n", "      s = 0"]
    for k in range(max(size // 12, 1)):
        form = k % 8
        lines += [f"      p{k} = tid % {k % 5 + 2}", f"      bz p{k}, E{k}",
                  f"      x{k} = i + {form}", f"      a{k} = shared[x{k}]",
                  f"      s = s + a{k}", f"      jump J{k}",
                  f"E{k}:  s = s + 1", f"J{k}:  sync", f"      y{k} = i + {form}",
                  f"      b{k} = shared[y{k}]", f"      s = s + b{k}"]
        if k % 4 == 3:
            lines.append("      i = i + 1")
    lines += ["      o = tid + 64", "      shared[o] = s"]
    return "\n".join(lines) + "\n"


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (clingo runs in a child)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def loads(kernel: ir.Kernel) -> int:
    """Static loads."""
    return sum(1 for i in kernel.instructions() if i.kind == ir.LOAD)


def main(argv: list[str]) -> int:
    """Run and time each pass once."""
    passes = PASSES
    if "--passes" in argv:
        at = argv.index("--passes")
        passes = tuple(argv[at + 1].split(","))
        argv = argv[:at] + argv[at + 2:]
    size = int(argv[0]) if argv else 5000
    program = parse_text(chain(size), "chain.musimd")
    (kernel,) = program.kernels
    model = build_load_model(kernel, "musimd")
    print(f"{len(list(kernel.instructions()))} instructions, {len(model.forms)} forms, "
          f"{len(model.nodes)} statement nodes")
    for name in passes:
        start, cpu = time.perf_counter(), cpu_seconds()
        result = get_pass(name).run(kernel)
        seconds, cpu = time.perf_counter() - start, cpu_seconds() - cpu
        print(f"{name:8} {seconds:6.1f} s wall {cpu:6.1f} s cpu   "
              f"loads {loads(kernel)} -> {loads(result)}   instructions "
              f"{len(list(kernel.instructions()))} -> {len(list(result.instructions()))}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
