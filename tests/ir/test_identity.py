"""Instruction ids: stable under rewrites, and what SSA, facts, results and the oracle
use to name instructions (never positions)."""

from pathlib import Path

from gpudiv import ir
from gpudiv.analyses import get_analysis
from gpudiv.analyses.facts import facts_text
from gpudiv.ir.cfg import build_cfg
from gpudiv.ir.ssa import build_ssa
from gpudiv.lang.load import load
from gpudiv.transforms import Pipeline, Rewriter
from gpudiv.verify.oracle import check_kernel, random_launches

ROOT = Path(__file__).resolve().parents[2] / "samples"


def shifted_kernel() -> ir.Kernel:
    """sumTriangle with a new first instruction: ids and positions no longer agree."""
    kernel = load(ROOT / "musimd/sumTriangle.musimd").kernels[0]
    first = kernel.blocks[0].instructions[0]
    Rewriter(kernel).insert_before(first, ir.Instruction(
        ir.ASSIGN, first.loc, dest="unused", args=(ir.Const(7),), operator="copy"))
    kernel.registers["unused"] = "s32"
    return kernel


def test_ssa_and_facts_name_instructions_by_id():
    kernel = shifted_kernel()
    ssa = build_ssa(build_cfg(kernel))
    by_id = kernel.by_id()
    for branch in ssa.branches:
        assert by_id[branch.instruction].kind == ir.BRANCH
    for instr in kernel.instructions():
        assert len(ssa.uses[instr.id]) == len(instr.reads)
    text = facts_text(ssa)
    branch_ids = {i.id for i in kernel.instructions() if i.kind == ir.BRANCH}
    emitted = {int(line.split(",")[1].rstrip(").")) for line in text.splitlines()
               if line.startswith("branch(")}
    assert emitted == branch_ids


def test_results_and_the_oracle_follow_ids():
    kernel = shifted_kernel()
    result = get_analysis("simple")(kernel)
    by_id = kernel.by_id()
    assert all(by_id[b.instruction].kind == ir.BRANCH for b in result.branches)
    report = check_kernel(result, random_launches(kernel, seed=1))
    assert report.runs > 0 and report.uses_checked > 0
    assert report.violations == []


def test_ids_survive_a_pipeline():
    program = load(ROOT / "musimd/break_and_stop.musimd")
    before = {i.id: i.form() for i in program.kernels[0].instructions()}
    after = Pipeline.parse("dedicated-exits,split-critical-edges").run(program)
    kept = {i.id: i.form() for i in after.kernels[0].instructions() if i.id in before}
    assert set(kept) == set(before)
    assert all(kept[n] == before[n] or kept[n][0] in (ir.BRANCH, ir.JUMP) for n in kept)
    new = [i.id for i in after.kernels[0].instructions() if i.id not in before]
    assert new and min(new) >= len(before)


class Recorder:
    """An interpreter observer that notes which instruction ids run."""

    def __init__(self):
        self.ids: list[int] = []
        self.branches: list[int] = []

    def before(self, warp, instruction, active, read):
        self.ids.append(instruction)

    def branch(self, warp, instruction, active, jumps):
        self.branches.append(instruction)


def test_interpreters_report_instruction_ids():
    from gpudiv.interp.musimd import run_kernel

    kernel = shifted_kernel()
    inserted = kernel.blocks[0].instructions[0].id
    assert inserted != 0
    recorder = Recorder()
    run_kernel(kernel, random_launches(kernel, seed=0)[2], observer=recorder)
    assert recorder.ids[0] == inserted
    by_id = kernel.by_id()
    assert recorder.branches and all(by_id[n].kind == ir.BRANCH for n in recorder.branches)


def test_ptx_interpreter_reports_instruction_ids():
    from gpudiv.interp.ptx import run_ptx_kernel
    from gpudiv.verify.oracle import ptx_launches

    kernel = load(ROOT / "cuda/control_flow.O3.ptx").kernels[0]
    rewriter = Rewriter(kernel)
    first = kernel.blocks[0].instructions[0]
    rewriter.insert_before(first, ir.Instruction(ir.FENCE, first.loc, operator="membar.cta"))
    recorder = Recorder()
    run_ptx_kernel(kernel, ptx_launches(kernel, 0)[0], observer=recorder)
    by_id = kernel.by_id()
    assert recorder.ids[0] == kernel.blocks[0].instructions[0].id != 0
    assert all(by_id[n].kind == ir.BRANCH for n in recorder.branches)
