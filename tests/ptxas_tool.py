"""Run ptxas, the real assembler, as a judge of PTX that gpudiv prints."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

PTXAS = shutil.which("ptxas")


def ptxas_arch(text: str) -> str:
    """The -arch for a PTX text: its .target when newer than sm_80, else sm_80."""
    target = re.search(r"^\s*\.target\s+(sm_(\d+))", text, re.M)
    return target.group(1) if target and int(target.group(2)) > 80 else "sm_80"


def ptxas_errors(path: Path) -> str | None:
    """None when ptxas accepts the PTX file; its error text otherwise."""
    arch = ptxas_arch(path.read_text())
    done = subprocess.run([PTXAS or "ptxas", f"-arch={arch}", str(path), "-o", "/dev/null"],
                          capture_output=True, text=True, timeout=120, check=False)
    return None if done.returncode == 0 else done.stderr or f"exit {done.returncode}"
