"""SIMT-induced deadlocks (ElTantawy & Aamodt, MICRO 2016) as a thin driver.

The affine analysis (degree 2) and rules/deadlock.lp are solved together: Algorithm 1 (may a
loop hang because the lanes that could release it wait at a reconvergence point?),
Algorithm 2 (SafePDom, the earliest safe reconvergence point) and divergent barriers are
all rules; this module only turns their atoms into typed per-loop verdicts with places.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpudiv import ir
from gpudiv.analyses import affine
from gpudiv.analyses.driver import Analysis
from gpudiv.analyses.results import KernelResult
from gpudiv.analyses.solve import shipped_rule
from gpudiv.ir.cfg import EXIT

RULE_FILE = "deadlock.lp"

# `// gpudiv: warp-synchronous [KERNEL]` (or `#` in μ-SIMD) anywhere in a file: the user
# vouches that the kernel (all kernels of the file when none is named) relies on lockstep
# execution and must not be reported.
PRAGMA = re.compile(r"gpudiv:\s*warp-synchronous\b[ \t]*([A-Za-z_$][\w$]*)?")


@dataclass(frozen=True)
class Place:
    """An instruction or point of a kernel: block, line and column in the analysed file,
    and the CUDA place (file, line, column) when a PTX `.loc` gives one."""

    block: str
    line: int | None
    column: int = 1
    text: str = ""
    origin: tuple | None = None

    def as_dict(self) -> dict:
        """JSON form."""
        out: dict = {"block": self.block, "line": self.line}
        if self.text:
            out["instruction"] = self.text
        if self.origin:
            out["origin"] = {"path": self.origin[0], "line": self.origin[1],
                             "column": self.origin[2]}
        return out


@dataclass(frozen=True)
class Write:
    """A write that may release a loop: where it is and how the loop's lanes reach it."""

    place: Place
    path: str  # "reachable" or "parallel"
    reads: tuple[str, ...]  # blocks of the shared reads it may alias

    def as_dict(self) -> dict:
        """JSON form."""
        return {**self.place.as_dict(), "path": self.path}


@dataclass
class LoopVerdict:
    """Algorithm 1's verdict on one loop, and Algorithm 2's safe reconvergence point."""

    header: str
    line: int | None
    verdict: str  # "may-deadlock" or "safe"
    reason: str
    exit_branches: list[Place] = field(default_factory=list)
    shared_reads: list[Place] = field(default_factory=list)
    releasing_writes: list[Write] = field(default_factory=list)
    safe_reconvergence: Place | None = None
    unsettled: bool = False

    @property
    def may_deadlock(self) -> bool:
        """Whether Algorithm 1 flags the loop."""
        return self.verdict == "may-deadlock"

    def as_dict(self) -> dict:
        """JSON form (issue 11's shape)."""
        return {"header": self.header, "line": self.line, "verdict": self.verdict,
                "reason": self.reason,
                "exit_branch": self.exit_branches[0].as_dict() if self.exit_branches else None,
                "exit_branches": [b.as_dict() for b in self.exit_branches],
                "shared_reads": [r.as_dict() for r in self.shared_reads],
                "releasing_writes": [w.as_dict() for w in self.releasing_writes],
                "safe_reconvergence": (self.safe_reconvergence.as_dict()
                                       if self.safe_reconvergence else None)}


@dataclass
class DivergentBarrier:
    """A barrier inside the region of a branch that may diverge."""

    barrier: Place
    branch: Place

    def as_dict(self) -> dict:
        """JSON form."""
        return {"barrier": self.barrier.as_dict(), "branch": self.branch.as_dict()}


@dataclass
class KernelDeadlocks:
    """The deadlock report of one kernel."""

    name: str
    loops: list[LoopVerdict]
    barriers: list[DivergentBarrier]
    branches: int
    assumed_safe: bool = False
    result: KernelResult | None = None

    @property
    def detections(self) -> list[LoopVerdict]:
        """The loops that may deadlock (none when the kernel is assumed safe)."""
        return [] if self.assumed_safe else [lp for lp in self.loops if lp.may_deadlock]

    def as_dict(self) -> dict:
        """JSON form: `{"name", "loops": [...], ...}`."""
        return {"name": self.name, "assumed_safe": self.assumed_safe,
                "branches": self.branches, "loops": [lp.as_dict() for lp in self.loops],
                "divergent_barriers": [b.as_dict() for b in self.barriers]}


def analysis(name: str = "deadlock") -> Analysis:
    """The affine analysis (degree 2) with rules/deadlock.lp, as a driver."""
    return affine.analysis(name, 2, extra_rules=(shipped_rule(RULE_FILE),))


def pragma_kernels(text: str) -> tuple[set[str], bool]:
    """Kernels a file's `gpudiv: warp-synchronous NAME` pragmas name, and whether one
    names none (then every kernel of the file)."""
    named, everything = set(), False
    for match in PRAGMA.finditer(text):
        if match[1]:
            named.add(match[1])
        else:
            everything = True
    return named, everything


def _instruction_place(kernel: ir.Kernel, block: str, index: int) -> Place:
    """The place of instruction `index` of `block`."""
    instr = kernel.block(block).instructions[index]
    origin = instr.attrs.get("origin")
    return Place(block, instr.loc.line, instr.loc.column, instr.text.strip(),
                 tuple(origin) if isinstance(origin, tuple | list) else None)


def _point_place(result: KernelResult, block: str, position: int) -> Place:
    """The place of the point before instruction `position` of `block` (its end when
    `position` is its length; the kernel's end for the virtual exit)."""
    cfg = result.ssa.cfg
    while block in cfg.synthetic:
        block, position = cfg.synthetic[block], 0
    if block == EXIT:
        return Place("end of kernel", None)
    instructions = cfg.kernel.block(block).instructions
    if position < len(instructions):
        return _instruction_place(cfg.kernel, block, position)
    if instructions:
        last = _instruction_place(cfg.kernel, block, len(instructions) - 1)
        return Place(block, last.line, last.column, f"after {last.text}", last.origin)
    return Place(block, cfg.kernel.block(block).loc.line)


def _access_place(result: KernelResult, instruction: str, positions: dict) -> Place:
    """The place of a memory instruction named `"i17"`."""
    block, position = positions[instruction]
    return _instruction_place(result.ssa.cfg.kernel, block, position)


def _loop_line(result: KernelResult, header: str) -> int | None:
    """The line of a loop's header block."""
    kernel = result.ssa.cfg.kernel
    block = kernel.block(header)
    return block.instructions[0].loc.line if block.instructions else block.loc.line


def kernel_deadlocks(result: KernelResult, assumed_safe: bool = False) -> KernelDeadlocks:
    """The deadlock report of one kernel from its solved relations."""
    rel = result.relations
    kernel = result.ssa.cfg.kernel
    positions = _positions(kernel)
    branch_places = {b.label: Place(b.label, b.line, b.column, "",
                                    tuple(b.origin) if b.origin else None)
                     for b in result.branches}
    exits: dict[str, list[str]] = {}
    for loop, block in sorted(rel.get("dl_exit_branch", [])):
        exits.setdefault(loop, []).append(block)
    reads: dict[str, list[str]] = {}
    for loop, instr in rel.get("dl_shared_read", []):
        reads.setdefault(loop, []).append(instr)
    paths = {(loop, w): how for loop, w, how in rel.get("dl_write_path", [])}
    redefs: dict[str, dict[str, list[str]]] = {}
    for loop, write, read in rel.get("dl_redef", []):
        redefs.setdefault(loop, {}).setdefault(write, []).append(read)
    safe = {loop: (block, pos) for loop, block, pos in rel.get("dl_safe_point", [])}
    unsettled = {loop for (loop,) in rel.get("dl_unsettled", [])}
    order = {block.label: n for n, block in enumerate(kernel.blocks)}
    loops = []
    for loop, verdict, reason in sorted(rel.get("dl_loop_verdict", []),
                                        key=lambda t: (order.get(t[0], len(order)), t[0])):
        entry = LoopVerdict(loop, _loop_line(result, loop), verdict, reason)
        entry.exit_branches = [branch_places[b] for b in exits.get(loop, [])
                               if b in branch_places]
        ordered = sorted(reads.get(loop, []), key=lambda i: int(i[1:]))
        entry.shared_reads = [_access_place(result, i, positions) for i in ordered]
        for write, read_ids in sorted(redefs.get(loop, {}).items(),
                                      key=lambda kv: int(kv[0][1:])):
            entry.releasing_writes.append(Write(
                _access_place(result, write, positions), paths.get((loop, write), "?"),
                tuple(positions[r][0] for r in sorted(read_ids))))
        if verdict == "may-deadlock":
            entry.unsettled = loop in unsettled
            block, pos = (EXIT, 0) if entry.unsettled else safe.get(loop, (EXIT, 0))
            entry.safe_reconvergence = _point_place(result, block, pos)
        loops.append(entry)
    barriers = [DivergentBarrier(_access_place(result, i, positions),
                                 branch_places.get(b, Place(b, None)))
                for i, b in sorted(rel.get("dl_divergent_barrier", []),
                                   key=lambda t: int(t[0][1:]))]
    return KernelDeadlocks(result.name, loops, barriers, len(result.branches), assumed_safe,
                           result)


def _positions(kernel: ir.Kernel) -> dict[str, tuple[str, int]]:
    """Instruction name (`"i17"`: id 17) → (block, position in block)."""
    out: dict[str, tuple[str, int]] = {}
    for block in kernel.blocks:
        for index, instr in enumerate(block.instructions):
            out[f"i{instr.id}"] = (block.label, index)
    return out
