"""Code motion on the samples: per pass, how many kernels change, whether each changed
kernel verifies on the interpreter, and the dynamic cost (warp instructions issued,
SIMD efficiency) before and after, summed over the changed kernels.

    python benchmarks/bench_code_motion.py [--passes lcm,scm,sscm] [PATH ...]
    python benchmarks/bench_code_motion.py --passes srqp,esrqp,ssrqp-s,ssrqp
    python benchmarks/bench_code_motion.py --coalescing both   # with and without

Prints one line per changed kernel and a table per pass (Markdown). `--coalescing`
chooses whether the passes coalesce the copies of their temporaries afterwards (`on`,
the default, `off`, or `both`: one row each).
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

from gpudiv import ir
from gpudiv.interp.musimd import ExecutionError, run_kernel
from gpudiv.interp.ptx import run_ptx_kernel
from gpudiv.lang.load import load
from gpudiv.report.corpus import collect_inputs
from gpudiv.verify.equivalence import launches_for
from gpudiv.verify.transform_check import TransformError, transform

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = [ROOT / "samples" / "musimd", ROOT / "samples" / "cuda"]


def changed(before: ir.Kernel, after: ir.Kernel) -> bool:
    """Whether a pass changed the kernel (its instructions or blocks)."""
    return ([b.label for b in before.blocks] != [b.label for b in after.blocks]
            or [i.form() for i in before.instructions()]
            != [i.form() for i in after.instructions()])


def computations(kernel: ir.Kernel) -> int:
    """Static non-copy computations (what code motion moves or removes)."""
    return sum(1 for i in kernel.instructions()
               if i.kind == ir.ASSIGN and i.operator not in (None, "copy"))


class _Issues:
    """Observer: warp issues of the kernel's computations (non-copy assignments) and
    of its loads."""

    def __init__(self, ids: set[int], loads: set[int], copies: set[int]):
        self.ids, self.loads, self.copies = ids, loads, copies
        self.count = self.total = self.load_count = self.copy_count = 0

    def before(self, warp, instruction, active, read) -> None:
        """Count one warp issue (and one of a computation, a load or a copy)."""
        self.total += 1
        self.count += instruction in self.ids
        self.load_count += instruction in self.loads
        self.copy_count += instruction in self.copies

    def branch(self, warp, instruction, active, jumps) -> None:
        """Branches are not counted."""


def computation_issues(kernel: ir.Kernel, language: str) -> tuple[int, int, int, int]:
    """(warp issues of all instructions, of computations, of loads, of copies) over the
    launches `--verify` uses (seed 0). Computations are what code motion changes,
    without the copies and jumps."""
    ids = {i.id for i in kernel.instructions()
           if i.kind == ir.ASSIGN and i.operator not in (None, "copy")}
    observer = _Issues(ids, {i.id for i in kernel.instructions() if i.kind == ir.LOAD},
                       {i.id for i in kernel.instructions()
                        if i.kind == ir.ASSIGN and i.operator == "copy"})
    for launch in launches_for(language, kernel, 0):
        try:
            if language == "ptx":
                run_ptx_kernel(kernel, copy.deepcopy(launch), observer)
            else:
                run_kernel(kernel, copy.deepcopy(launch), observer)
        except ExecutionError:
            continue
    return observer.total, observer.count, observer.load_count, observer.copy_count


def static_loads(kernel: ir.Kernel) -> int:
    """Static load instructions (what scalar replacement removes)."""
    return sum(1 for i in kernel.instructions() if i.kind == ir.LOAD)


def measure(paths: list[str], name: str, coalesce: bool = True) -> dict[str, object]:
    """Changed, verified and dynamic totals of one pass over the files."""
    label = name if coalesce else f"{name} (copies kept)"
    row = {"pass": label, "kernels": 0, "changed": 0, "verified": 0, "other": [],
           "copies_before": 0, "copies_after": 0,
           "warp_before": 0, "warp_after": 0, "comp_before": 0, "comp_after": 0,
           "worse": 0, "better": 0, "issues_before": 0, "issues_after": 0,
           "loads_before": 0, "loads_after": 0, "sloads_before": 0, "sloads_after": 0}
    for path in paths:
        try:
            original = load(path)
            out = transform(original, name, verify=True,
                            options={name: {"coalesce": coalesce}})
        except TransformError as error:
            row["other"].append(f"{path}: {error}")
            continue
        for report, before, after in zip(out.kernels, original.kernels, out.program.kernels,
                                         strict=True):
            row["kernels"] += 1
            if not changed(before, after):
                continue
            row["changed"] += 1
            if report.status != "verified" or report.oracle_violations:
                row["other"].append(f"{path}:{report.name}: {report.status} "
                                    f"{report.difference or report.reason} "
                                    f"{report.oracle_violations}")
                continue
            row["verified"] += 1
            wb, ib, lb, cb = computation_issues(before, original.language)
            wa, ia, la, ca = computation_issues(after, original.language)
            row["copies_before"] += cb
            row["copies_after"] += ca
            row["loads_before"] += lb
            row["loads_after"] += la
            row["sloads_before"] += static_loads(before)
            row["sloads_after"] += static_loads(after)
            row["warp_before"] += wb
            row["warp_after"] += wa
            row["worse"] += wa > wb
            row["better"] += wa < wb
            row["issues_before"] += ib
            row["issues_after"] += ia
            row["comp_before"] += computations(before)
            row["comp_after"] += computations(after)
            print(f"{label}\t{path}:{report.name}\twarp {wb} -> {wa}\t"
                  f"computations {computations(before)} -> {computations(after)}\t"
                  f"computation issues {ib} -> {ia}\tload issues {lb} -> {la}\t"
                  f"static loads {static_loads(before)} -> {static_loads(after)}\t"
                  f"copy issues {cb} -> {ca}", flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    """Run the passes over the samples and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", default=[str(p) for p in DEFAULT])
    parser.add_argument("--passes", default="lcm,scm,sscm")
    parser.add_argument("--coalescing", choices=("on", "off", "both"), default="on",
                        help="coalesce the copies of the passes' temporaries (both: a row "
                             "each)")
    args = parser.parse_args(argv)
    files = [str(p) for p in collect_inputs(args.paths)]
    modes = {"on": [True], "off": [False], "both": [False, True]}[args.coalescing]
    rows = [measure(files, name, mode) for name in args.passes.split(",") for mode in modes]
    print("\n| pass | kernels | changed | verified | warp instr. before → after (changed) "
          "| fewer / more warp instr. | computation warp issues before → after "
          "| static computations before → after | load warp issues before → after "
          "| static loads before → after | copy warp issues before → after |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['pass']} | {r['kernels']} | {r['changed']} | {r['verified']} | "
              f"{r['warp_before']} → {r['warp_after']} | {r['better']} / {r['worse']} | "
              f"{r['issues_before']} → {r['issues_after']} | "
              f"{r['comp_before']} → {r['comp_after']} | "
              f"{r['loads_before']} → {r['loads_after']} | "
              f"{r['sloads_before']} → {r['sloads_after']} | "
              f"{r['copies_before']} → {r['copies_after']} |")
    for r in rows:
        for line in r["other"]:
            print(f"{r['pass']}: not verified: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
