"""What kernel fusion saves on host programs: per program and input, the dynamic kernel
launches, global-memory transactions, lane accesses and warp instructions of the
original, KF_trad and KFCM results (Fukuhara 2023 Table 5.2 style), each result checked
equal to the original on the interpreter.

    python benchmarks/bench_kfcm.py                      # every samples/host/*.host
    python benchmarks/bench_kfcm.py samples/host/solver.host --json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from gpudiv.verify.host_check import transform_host

ROOT = Path(__file__).resolve().parent.parent
COLUMNS = ("launches", "transactions", "memory_accesses", "warp_instructions")


def measure(path: Path) -> list[dict]:
    """One row per input combination of a host program."""
    trad = transform_host(path, "kf-trad", verify=True)
    kfcm = transform_host(path, "kfcm", verify=True)
    rows = []
    for t, k in zip(trad.runs, kfcm.runs, strict=True):
        row = {"program": path.stem, "inputs": t.inputs,
               "verified": t.status == k.status == "equal"}
        for name in COLUMNS:
            row[name] = [getattr(t.before, name), getattr(t.after, name) if t.after else None,
                         getattr(k.after, name) if k.after else None]
        rows.append(row)
    return rows


def reduction(rows: list[dict], column: str, variant: int) -> float:
    """1 - geomean(after / original) over the rows (the seed's Table 5.2 summary)."""
    ratios = [r[column][variant] / r[column][0] for r in rows if r[column][0]]
    return 1 - math.exp(sum(math.log(x) for x in ratios) / len(ratios)) if ratios else 0.0


def main(argv: list[str] | None = None) -> int:
    """Print the table (or JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", help="host programs (default: samples/host)")
    parser.add_argument("--json", action="store_true", help="print JSON rows")
    args = parser.parse_args(argv)
    files = [Path(f) for f in args.files] or sorted((ROOT / "samples" / "host").glob("*.host"))
    rows = [row for f in files for row in measure(f)]
    if args.json:
        json.dump(rows, sys.stdout, indent=2)
        print()
        return 0
    print("| program | inputs | launches O / trad / KFCM | transactions O / trad / KFCM "
          "| lane accesses O / trad / KFCM | warp instr O / trad / KFCM | verified |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        inputs = ", ".join(f"{k}={v}" for k, v in r["inputs"].items()) or "-"
        cells = [" / ".join(str(x) for x in r[c]) for c in COLUMNS]
        print(f"| {r['program']} | {inputs} | {' | '.join(cells)} | "
              f"{'yes' if r['verified'] else 'NO'} |")
    for column in ("launches", "transactions"):
        print(f"\n{column}: reduction (1 - geomean of after/original) KF_trad "
              f"{reduction(rows, column, 1):.1%}, KFCM {reduction(rows, column, 2):.1%}")
    return 0 if all(r["verified"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
