"""`--verify` for the `ssde` pass: what issue 11 asks a SIMT-deadlock rewrite to prove.

Per kernel: (1) how many launches of the original hang under `ipdom` (a SIMT deadlock,
an endless loop or an exhausted step budget); (2) the result, run under `ipdom`, must
finish wherever the original finishes under `mimd` (every thread on its own: the MIMD
reference) and leave the same memory, bit for bit; (3) `gpudiv deadlock` must find no
loop that may deadlock in the result. The launches are those of `gpudiv check` and, for
μ-SIMD, the same shapes again with zeroed shared memory (locks start free), all with a
smaller step budget than `check` (a lock taken at random never frees: such launches are
skipped when both programs hang).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from gpudiv import ir
from gpudiv.analyses import deadlock
from gpudiv.analyses.results import KernelResult
from gpudiv.interp.musimd import ExecutionError, LaunchConfig
from gpudiv.verify.equivalence import Equivalence, _run, compare_kernels, launches_for

# Warp steps per launch: μ-SIMD launches have up to 100 threads, which under `mimd` take
# one step each per instruction; PTX launches are bigger.
MUSIMD_STEPS = 20_000
PTX_STEPS = 400_000


@dataclass
class SsdeEvidence:
    """The three facts `--verify` establishes for one rewritten kernel."""

    launches: int
    hangs_before: int
    detections_after: int
    equivalence: Equivalence

    def to_json(self) -> dict[str, int]:
        """JSON form (under `ssde` in a kernel of `transform --format json`)."""
        return {"launches": self.launches, "original_hangs_under_ipdom": self.hangs_before,
                "compared_runs": self.equivalence.runs,
                "detections_after": self.detections_after}

    def summary(self) -> str:
        """One line for the text report."""
        return (f"original hangs under ipdom in {self.hangs_before} of {self.launches} "
                f"launches; result under ipdom = original under mimd in "
                f"{self.equivalence.runs}; {self.detections_after} loops may deadlock "
                "after")


def ssde_launches(kernel: ir.Kernel, language: str, seed: int) -> list:
    """The launches of `gpudiv check` (μ-SIMD: with zeroed shared memory), with the
    step budget of this check."""
    launches = launches_for(language, kernel, seed)
    if language != "ptx":
        launches = [LaunchConfig(threads=lc.threads, warp_width=lc.warp_width,
                                 params=dict(lc.params), shared=dict.fromkeys(lc.shared, 0))
                    for lc in launches]
    budget = PTX_STEPS if language == "ptx" else MUSIMD_STEPS
    for launch in launches:
        launch.max_steps = min(launch.max_steps, budget)
    return launches


def hangs(message: str) -> bool:
    """Whether a run's error says it could not finish (rather than faulted)."""
    return (message.startswith(("SIMT deadlock", "infinite loop"))
            or "did not finish" in message)


def _hang_count(kernel: ir.Kernel, language: str, launches: list) -> int:
    """Launches of the kernel that hang under `ipdom`."""
    count = 0
    for launch in launches:
        try:
            _run(language, kernel, copy.deepcopy(launch), "ipdom")
        except ExecutionError as error:
            count += hangs(str(error))
    return count


def detections(kernel: ir.Kernel) -> int:
    """Loops of the kernel that `gpudiv deadlock` says may deadlock."""
    (result,) = deadlock.analysis().run([kernel])
    if not isinstance(result, KernelResult):
        return -1
    return len(deadlock.kernel_deadlocks(result).detections)


def check_ssde(before: ir.Kernel, after: ir.Kernel, language: str,
               seed: int = 0) -> SsdeEvidence:
    """Establish the three facts for one kernel and its rewrite."""
    launches = ssde_launches(before, language, seed)
    equal = compare_kernels(before, after, language, seed, policies=("mimd", "ipdom"),
                            launches=launches)
    return SsdeEvidence(len(launches), _hang_count(before, language, launches),
                        detections(after), equal)
