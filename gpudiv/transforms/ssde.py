"""`ssde`: Static SIMT Deadlock Elimination (ElTantawy & Aamodt, MICRO 2016, Alg. 3).

For every loop that `gpudiv deadlock` flags (rules/deadlock.lp, Algorithm 1), the back
edge goes through a switch block BB_S placed at the loop's safe reconvergence point
(SafePDom, Algorithm 2): the latch sets the loop's flag and goes to BB_S, BB_S sends the
lanes whose flag is set back to the loop header and the others on to SafePDom. Lanes
that would spin now wait at BB_S, the reconvergence point of the loop's exit branches,
for the lanes that left the loop, which release the lock (or set the flag) on their way
there; then everyone retries. One BB_S per distinct safe point, shared by the loops that
have it (one case each, tested in loop order).

The IR is not in SSA form, so instead of the paper's φ `cond` each flagged loop gets a
flag register: 0 at the kernel's entry and at every entry to the loop's headers, 1 only
on the back edge (on the latch's jump, or in a block of its own on a branch edge). A lane
that reaches BB_S other than through a back edge therefore has every flag at 0, which is
the paper's "fake paths never execute" argument. BB_S is a chain of `bnz flag, header`
blocks that falls through to SafePDom, so the reconvergence point of every branch whose
paths meet at SafePDom becomes BB_S for the ipdom stack, the PTX interpreter, GPUs and
the printed PTX alike. The pass also writes it into the IR: every branch whose lanes now
meet at a BB_S names it as its reconvergence point (`ir.RECONVERGE`, printed as
`# gpudiv: reconverge BB_S` / `// gpudiv: reconverge BB_S`), which the `sync` and
`aware` policies honour; a kernel written for `sync` gets `sync`s instead (`resync`).
A safe point in the middle of a block splits it; a safe point at the kernel's end gets
one exit block that every normal `stop`/`ret` jumps to. Kernels that the deadlock
report assumes safe (`gpudiv: warp-synchronous` pragma, `assume_safe` option) are left
as they are, as are kernels with no flagged loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpudiv import ir
from gpudiv.analyses import deadlock
from gpudiv.analyses.results import KernelResult
from gpudiv.analyses.solve import RuleError
from gpudiv.ir.cfg import EXIT, build_cfg, reconvergence_points, successor_labels
from gpudiv.transforms.base import Pass, PassError, register
from gpudiv.transforms.builder import Rewriter, flag_type, set_flag

STATS = "transform_stats"

# A point of the kernel where a BB_S goes: ("block", X) the start of block X (every edge
# into X), ("after", B) the fall-through edge out of block B, ("exit", "") the kernel's end.
Point = tuple[str, str]


@dataclass
class Plan:
    """A flagged loop to rewrite: its name (first header), headers and safe point."""

    loop: str
    headers: list[str]
    anchor: tuple  # ("before", id) | ("after", id) | ("start", label) | ("exit",)


def flagged_loops(result: KernelResult) -> list[Plan]:
    """The loops Algorithm 1 flags, with Algorithm 2's safe point as an anchor that
    survives splitting (an instruction id, or a block label)."""
    rel = result.relations
    cfg = result.ssa.cfg
    flagged = {loop for loop, verdict, _ in rel.get("dl_loop_verdict", [])
               if verdict == "may-deadlock"}
    unsettled = {loop for (loop,) in rel.get("dl_unsettled", [])}
    safe = {loop: (block, pos) for loop, block, pos in rel.get("dl_safe_point", [])}
    order = {label: n for n, label in enumerate(cfg.order)}
    plans = []
    for loop in sorted(flagged, key=lambda name: (order.get(name, len(order)), name)):
        block, pos = (EXIT, 0) if loop in unsettled else safe.get(loop, (EXIT, 0))
        while block in cfg.synthetic:
            block, pos = cfg.synthetic[block], 0
        plans.append(Plan(loop, list(cfg.loops[loop].headers), _anchor(cfg.kernel, block, pos)))
    return plans


def _anchor(kernel: ir.Kernel, block: str, pos: int) -> tuple:
    """The safe point before instruction `pos` of `block` as an anchor."""
    if block == EXIT:
        return ("exit",)
    instructions = kernel.block(block).instructions
    if pos == 0:
        return ("start", block)
    if pos < len(instructions):
        return ("before", instructions[pos].id)
    return ("after", instructions[-1].id)


def _jump(target: str, loc: ir.Loc) -> ir.Instruction:
    """`jump target`."""
    return ir.Instruction(ir.JUMP, loc, target=target, text=f"jump {target}")


def _locate(kernel: ir.Kernel, instr_id: int) -> tuple[int, int]:
    """(block index, position) of the instruction with this id."""
    for b, block in enumerate(kernel.blocks):
        for n, instr in enumerate(block.instructions):
            if instr.id == instr_id:
                return b, n
    raise PassError(f"kernel {kernel.name}: instruction {instr_id} vanished")


def _normal_stop(kernel: ir.Kernel) -> ir.Instruction:
    """The kernel's normal end (`stop`, PTX `ret`, else `exit`), which lanes that finish
    run; a kernel that only traps has none."""
    stops = [i for i in kernel.instructions() if i.kind == ir.STOP and i.guard is None]
    for opcode in ("", "ret", "exit"):
        for stop in stops:
            if str(stop.attrs.get("opcode", "")) == opcode and not stop.args:
                return stop
    raise PassError(f"kernel {kernel.name}: no normal end to reconverge at")


def _exit_point(rewriter: Rewriter) -> Point:
    """One exit block that every normal end of the kernel jumps to."""
    kernel = rewriter.kernel
    model = _normal_stop(kernel)
    label = rewriter.fresh_label("ssde_exit")
    stop = ir.Instruction(ir.STOP, model.loc, attrs=dict(model.attrs), text=model.text)
    for block in kernel.blocks:
        term = block.terminator
        if term is not None and term.kind == ir.STOP and term.form() == model.form() \
                and term.attrs.get("opcode") == model.attrs.get("opcode"):
            jump = rewriter.new(_jump(label, term.loc))
            if term.attrs.get("origin"):
                jump.attrs["origin"] = term.attrs["origin"]
            block.instructions[-1] = jump
    last = kernel.blocks[-1].label
    rewriter.add_block(label, [stop], after=last)
    return ("block", label)


def _materialize(rewriter: Rewriter, anchor: tuple, exits: dict[str, Point]) -> Point:
    """The point of an anchor, splitting a block at a safe point inside it."""
    kernel = rewriter.kernel
    if anchor[0] == "exit":
        if "exit" not in exits:
            exits["exit"] = _exit_point(rewriter)
        return exits["exit"]
    if anchor[0] == "start":
        return ("block", anchor[1])
    b, n = _locate(kernel, anchor[1])
    block = kernel.blocks[b]
    if anchor[0] == "before":
        return ("block", block.label if n == 0 else
                rewriter.split_block(block.instructions[n]).label)
    if n < len(block.instructions) - 1:  # split since: the point is before the next one
        return ("block", rewriter.split_block(block.instructions[n + 1]).label)
    if block.terminator is not None:
        raise PassError(f"kernel {kernel.name}: a safe point after the branch or jump "
                        f"ending block {block.label}")
    return ("after", block.label)


def _latches(kernel: ir.Kernel, plan: Plan) -> list[tuple[str, str]]:
    """The back edges (latch, header) of a planned loop in the kernel as it is now."""
    cfg = build_cfg(kernel)
    if cfg.incomplete:
        raise PassError(f"kernel {kernel.name}: too large: {cfg.incomplete}")
    loop = cfg.loops.get(plan.loop)
    if loop is None:
        raise PassError(f"kernel {kernel.name}: loop {plan.loop} not found after splitting")
    edges = []
    for index, block in enumerate(kernel.blocks):
        if block.label not in loop.blocks:
            continue
        edges += [(block.label, h) for h in successor_labels(kernel, index)
                  if h in loop.headers]
    return edges


def _chain(rewriter: Rewriter, point: Point, cases: list[tuple[str, str]],
           loc: ir.Loc, loop_first: bool = False) -> str:
    """The switch blocks of one safe point, placed so that the chain ends at the point;
    every edge into the point goes to the first one. Its label.

    By default one `bnz flag, header` per case, the last falling through to the point
    (the lanes that go on run first under `ipdom`). With `loop_first` (kernels written
    for the `sync` policy, whose stack merges the lanes that leave a loop only when the
    leaving lanes are the ones that jump): `bz flag, next` then `jump header` per case."""
    kernel = rewriter.kernel
    where, label = point
    after = label if where == "after" else kernel.blocks[rewriter.index(label) - 1].label
    if loop_first and where == "after":
        following = rewriter.fall_through(rewriter.index(label))
        if following is None:
            raise PassError(f"kernel {kernel.name}: no block after {label}")
        goal = following
    else:
        goal = label
    names: list[str] = []
    for n in range(len(cases)):
        name = rewriter.fresh_label(f"ssde_switch_{label}")
        while name in names:
            name = rewriter.fresh_label(f"ssde_switch_{label}_{n}")
        names.append(name)
    for n, (flag, header) in enumerate(cases):
        if loop_first:
            nxt = names[n + 1] if n + 1 < len(cases) else goal
            test = ir.Instruction(ir.BRANCH, loc, args=(ir.Var(flag),), operator="bz",
                                  target=nxt, text=f"bz {flag}, {nxt}")
            after = rewriter.add_block(names[n], [test], after=after).label
            after = rewriter.add_block(rewriter.fresh_label(f"{names[n]}_loop"),
                                       [_jump(header, loc)], after=after).label
        else:
            test = ir.Instruction(ir.BRANCH, loc, args=(ir.Var(flag),), operator="bnz",
                                  target=header, text=f"bnz {flag}, {header}")
            after = rewriter.add_block(names[n], [test], after=after).label
    if where == "block":
        for block in kernel.blocks:
            if block.label not in names:
                rewriter.retarget(block.label, label, names[0])
    return names[0]


def _route_latch(rewriter: Rewriter, latch: str, header: str, flag: str,
                 switch: str) -> int:
    """Make the back edge latch → header set `flag` and go to `switch`; the number of
    blocks added (a branch edge gets a block of its own)."""
    term = rewriter.kernel.block(latch).terminator
    if term is not None and term.kind == ir.JUMP and term.target == header:
        rewriter.insert_before(term, set_flag(flag, 1, term.loc))
        rewriter.retarget(latch, header, switch)
        return 0
    edge = rewriter.split_edge(latch, header, rewriter.fresh_label(f"ssde_latch_{latch}"))
    rewriter.insert_at_start(edge.label, set_flag(flag, 1, edge.loc))
    rewriter.retarget(edge.label, header, switch)
    return 1


def rewrite(kernel: ir.Kernel, plans: list[Plan], loop_first: bool = False
            ) -> dict[str, object]:
    """Algorithm 3 on the kernel (in place); what it added. `loop_first`: see `_chain`."""
    rewriter = Rewriter(kernel)
    size, blocks = kernel.instruction_count, len(kernel.blocks)
    loc = kernel.blocks[0].loc
    entry = ir.Block(rewriter.fresh_label("ssde_entry"), [], loc, user_label=False)
    kernel.blocks.insert(0, entry)
    exits: dict[str, Point] = {}
    points = {plan.loop: _materialize(rewriter, plan.anchor, exits) for plan in plans}
    latches = {plan.loop: _latches(kernel, plan) for plan in plans}
    groups: dict[Point, list[Plan]] = {}
    for plan in plans:
        groups.setdefault(points[plan.loop], []).append(plan)
    register_type = flag_type(kernel)
    registers = edge_blocks = 0
    safe_points = []
    for point, members in groups.items():
        cases, routes = [], []
        for plan in members:
            for header in dict.fromkeys(h for _, h in latches[plan.loop]):
                flag = rewriter.fresh_register("ssde_flag", register_type)
                registers += 1
                entry.instructions.append(rewriter.new(set_flag(flag, 0, loc)))
                head = kernel.block(header)
                rewriter.insert_at_start(header, set_flag(flag, 0, head.loc))
                cases.append((flag, header))
                routes += [(t, header, flag) for t, h in latches[plan.loop] if h == header]
        switch = _chain(rewriter, point, cases, loc, loop_first)
        for latch, header, flag in routes:
            edge_blocks += _route_latch(rewriter, latch, header, flag, switch)
        safe_points.append({"switch": switch, "point": point[1] if point[0] == "block"
                            else f"after {point[1]}",
                            "loops": [plan.loop for plan in members]})
    marks = 0 if loop_first else mark_reconvergence(
        kernel, {p["switch"]: p["point"] for p in safe_points})
    return {"flagged_loops": len(plans), "switch_blocks": len(groups),
            "registers_added": registers, "latch_blocks": edge_blocks,
            "instructions_before": size, "instructions_after": kernel.instruction_count,
            "instructions_added": kernel.instruction_count - size,
            "blocks_before": blocks, "blocks_after": len(kernel.blocks),
            "safe_points": safe_points, "marked_branches": marks}


def mark_reconvergence(kernel: ir.Kernel, switches: dict[str, str]) -> int:
    """Write the new reconvergence points into the IR (`ir.RECONVERGE`): every
    conditional branch whose lanes now meet at a switch block names it, and a mark
    that named the block a switch now stands before names the switch. The number of
    branches marked."""
    points = reconvergence_points(build_cfg(kernel))
    moved = {point: switch for switch, point in switches.items()}
    count = 0
    for block in kernel.blocks:
        term = block.terminator
        if term is None or term.kind != ir.BRANCH:
            continue
        label = points.get(block.label)
        old = term.attrs.get(ir.RECONVERGE)
        if label in switches:
            term.attrs[ir.RECONVERGE] = label
        elif old is not None and str(old) in moved:
            term.attrs[ir.RECONVERGE] = moved[str(old)]
        else:
            continue
        count += 1
    return count


def resync(kernel: ir.Kernel) -> int:
    """Write the reconvergence points of the rewritten CFG into a μ-SIMD kernel that
    says its own (the `sync` policy): every `sync` goes, then each conditional branch
    gets one at the start of its immediate post-dominator (Sampaio's pairing, which the
    samples written for `sync` follow). The number of `sync`s written."""
    for block in kernel.blocks:
        block.instructions = [i for i in block.instructions if i.kind != ir.SYNC]
    cfg = build_cfg(kernel)
    rewriter = Rewriter(kernel)
    count = 0
    for block in list(kernel.blocks):
        term = block.terminator
        if term is None or term.kind != ir.BRANCH or block.label not in cfg.ipdom:
            continue
        meet = cfg.ipdom[block.label]
        while meet in cfg.synthetic:
            meet = cfg.synthetic[meet]
        if meet == EXIT:
            raise PassError(f"kernel {kernel.name}: the branch ending {block.label} has "
                            "no block to reconverge at (its paths end in different stops)")
        rewriter.insert_at_start(meet, ir.Instruction(ir.SYNC, term.loc, text="sync"))
        count += 1
    return count


def plan_kernel(kernel: ir.Kernel) -> list[Plan]:
    """The loops of a kernel that `gpudiv deadlock` flags, with their safe points."""
    (result,) = deadlock.analysis().run([kernel])
    if isinstance(result, RuleError):
        raise PassError(f"kernel {kernel.name}: the deadlock analysis failed: {result}")
    return flagged_loops(result)


@register
class SSDE(Pass):
    """Route the back edge of every loop that may deadlock through its safe point."""

    name = "ssde"
    description = ("SIMT deadlock elimination: the back edge of every loop `gpudiv "
                   "deadlock` flags goes through a switch block at its safe "
                   "reconvergence point (ElTantawy & Aamodt 2016, Alg. 3)")

    def run(self, kernel: ir.Kernel) -> ir.Kernel:
        """The kernel with its flagged loops rewritten (unchanged when none is, or when
        it is assumed safe)."""
        if kernel.name in set(self.options.get("assume_safe", ())):  # type: ignore[arg-type]
            kernel.attrs[STATS] = {"flagged_loops": 0, "assumed_safe": True}
            return kernel
        plans = plan_kernel(kernel)
        if not plans:
            kernel.attrs[STATS] = {"flagged_loops": 0}
            return kernel
        explicit = any(i.kind == ir.SYNC for i in kernel.instructions())
        kernel.attrs[STATS] = rewrite(kernel, plans, loop_first=explicit)
        if explicit:
            kernel.attrs[STATS]["syncs"] = resync(kernel)
        return kernel

    def run_program(self, program: ir.Program, kernels: set[str] | None = None) -> None:
        """Rewrite the program's kernels, leaving those its `gpudiv: warp-synchronous`
        pragmas name (all of them for a pragma without a name)."""
        named, everything = _pragmas(program.path)
        trusted = set(self.options.get("assume_safe", ())) | named  # type: ignore[arg-type]
        if everything:
            trusted |= {k.name for k in program.kernels}
        one = SSDE(**{**self.options, "assume_safe": tuple(trusted)})
        program.kernels = [one.run(k) if kernels is None or k.name in kernels else k
                           for k in program.kernels]


def _pragmas(path: str) -> tuple[set[str], bool]:
    """The kernels a file's pragmas name, and whether one names none."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set(), False
    return deadlock.pragma_kernels(text)
