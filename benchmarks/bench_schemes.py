"""Reconvergence schemes compared on the kernels with unstructured control flow (Wu et al.
2011, B.6 and Table 3): warp instructions, SIMD efficiency and time slots under PDOM
(ipdom), earliest reconvergence (frontier), the structurized kernel under a structured
predicate stack (ipdom on structured code) and under earliest reconvergence, and mimd;
the Table-3-style upper limit of the dynamic code expansion of Forward Copy next to the
measured one (PDOM minus earliest). Every scheme's memory is compared with mimd's.

    python benchmarks/bench_schemes.py                        # samples/musimd, samples/cuda
    python benchmarks/bench_schemes.py FILE|DIR... [--launches 2] [--all] [--json|--markdown]

Launches are the first `--launches` of those `gpudiv check` uses (seed 0) that the kernel
finishes under mimd (a launch that traps or spins forever compares nothing) and whose
result does not depend on the schedule (PDOM and mimd leave the same memory; a racy
launch is counted and left out); wu_fig3 runs
the paper's warp of 7 threads on its 7 paths. `--all` includes structured kernels.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gpudiv.analyses.structure import analyze_kernel
from gpudiv.interp.musimd import LaunchConfig
from gpudiv.lang.load import load
from gpudiv.report.corpus import collect_inputs
from gpudiv.verify.schemes import compare_schemes, default_launches

ROOT = Path(__file__).resolve().parents[1]
PAPER_LAUNCHES = {"wu_fig3": [LaunchConfig(7, 7)]}  # Fig 3: 7 threads, 7 paths


def measure(paths: list[str], launches: int, everything: bool) -> list[dict]:
    """One row per kernel: the comparison as JSON, with its file."""
    rows = []
    for path in collect_inputs(paths):
        program = load(path)
        if program.errors:
            continue
        language = "ptx" if str(path).endswith(".ptx") else "musimd"
        for kernel in program.kernels:
            if not everything and analyze_kernel(kernel).structured:
                continue
            chosen = PAPER_LAUNCHES.get(kernel.name) or default_launches(language, kernel)
            row = compare_schemes(kernel, language, chosen, launches).as_dict()
            rows.append({"file": Path(path).name, **row})
    return rows


def _cell(row: dict, scheme: str, key: str) -> str:
    run = next((r for r in row["runs"] if r["scheme"] == scheme), None)
    if run is None:
        return "–"
    if not run["finished"]:
        return "stopped"
    value = run[key]
    return "–" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def _percent(part: int | None, whole: int) -> str:
    return "–" if part is None or not whole else f"{100.0 * part / whole:.1f}"


def markdown(rows: list[dict]) -> str:
    """The Table-3-style table."""
    lines = ["| file | kernel | launches (racy left out) | PDOM warp instr | earliest "
             "| structured | structured+earliest "
             "| SIMD eff. PDOM / earliest / structured | slots PDOM / earliest / structured "
             "| FC upper bound | measured expansion (PDOM − earliest) | % of PDOM | memory = PDOM "
             "| = mimd |",
             "|" + "---|" * 14]
    for row in rows:
        pdom = next((r for r in row["runs"] if r["scheme"] == "pdom"), {})
        same = all(r["same_memory"] is not False for r in row["runs"])
        as_pdom = all(r["same_as_pdom"] is not False for r in row["runs"])
        lines.append(
            f"| {row['file']} | {row['kernel']} | {row['launches']} ({row['racy_launches']}) "
            f"| {_cell(row, 'pdom', 'warp_instructions')} "
            f"| {_cell(row, 'earliest', 'warp_instructions')} "
            f"| {_cell(row, 'structured', 'warp_instructions')} "
            f"| {_cell(row, 'structured_earliest', 'warp_instructions')} "
            f"| {_cell(row, 'pdom', 'simd_efficiency')} / "
            f"{_cell(row, 'earliest', 'simd_efficiency')} / "
            f"{_cell(row, 'structured', 'simd_efficiency')} "
            f"| {_cell(row, 'pdom', 'time_slots')} / {_cell(row, 'earliest', 'time_slots')} / "
            f"{_cell(row, 'structured', 'time_slots')} "
            f"| {row['upper_bound']} | {_str(row['measured_expansion'])} "
            f"| {_percent(row['measured_expansion'], pdom.get('warp_instructions', 0))} "
            f"| {'yes' if as_pdom else 'NO'} | {'yes' if same else 'NO'} |")
    return "\n".join(lines)


def _str(value: object) -> str:
    return "–" if value is None else str(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*",
                        default=[str(ROOT / "samples/musimd"), str(ROOT / "samples/cuda")])
    parser.add_argument("--launches", type=int, default=2)
    parser.add_argument("--all", action="store_true", help="structured kernels too")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    rows = measure(args.paths, args.launches, args.all)
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        print()
    else:
        print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
