"""Passes: registry, pipeline hook, what each shipped pass does, traits; every pass keeps
kernels well formed, printable and equivalent on the interpreter."""

from pathlib import Path

import pytest

from gpudiv import ir
from gpudiv.ir.cfg import build_cfg
from gpudiv.ir.verify import verify_kernel
from gpudiv.lang.load import load, parse_text
from gpudiv.lang.printing import print_program
from gpudiv.transforms import PASSES, Pass, PassError, Pipeline, available, get_pass
from gpudiv.transforms import traits as t
from gpudiv.transforms.builder import Rewriter
from gpudiv.transforms.critical_edges import critical_edges
from gpudiv.verify.equivalence import compare_kernels

ROOT = Path(__file__).resolve().parents[2] / "samples"
# The samples written to hang under ipdom are left out: each launch of theirs runs until
# the interpreter sees its state repeat (minutes in all) and compares nothing.
MUSIMD = sorted(p for p in ROOT.glob("musimd/*.musimd")
                if not p.name.startswith(("deadlock_", "spin_")))
PTX = [ROOT / "cuda/scan.O3.ptx", ROOT / "cuda/sorting.O3.ptx", ROOT / "cuda/locks_spin.G.ptx"]
SHIPPED = ["identity", "canonicalize", "dedicated-exits", "split-critical-edges"]


def test_registry_lists_every_pass_with_a_description():
    names = [name for name, _ in available()]
    assert set(SHIPPED) <= set(names)
    assert all(description for _, description in available())
    with pytest.raises(PassError, match="unknown pass 'nope'"):
        get_pass("nope")


def test_pipeline_leaves_the_original_alone_and_calls_the_hook():
    program = load(ROOT / "musimd/break_and_stop.musimd")
    seen = []
    result = Pipeline.parse("identity,dedicated-exits",
                            lambda p, prog: seen.append((p.name, len(prog.kernels[0].blocks))))
    out = result.run(program)
    assert [name for name, _ in seen] == ["identity", "dedicated-exits"]
    assert len(out.kernels[0].blocks) == len(program.kernels[0].blocks) + 1


@pytest.mark.parametrize("name", SHIPPED)
@pytest.mark.parametrize("path", [*MUSIMD, PTX[0], *(pytest.param(p, marks=pytest.mark.slow)
                                                     for p in PTX[1:])],
                         ids=lambda p: p.name)
def test_passes_keep_kernels_well_formed_printable_and_equivalent(name, path):
    program = load(path)
    result = Pipeline.parse(name).run(program)
    for kernel in result.kernels:
        assert verify_kernel(kernel) == []
    reread = parse_text(print_program(result), program.path, program.language)
    assert reread.errors == []
    for before, after in zip(program.kernels, reread.kernels, strict=True):
        outcome = compare_kernels(before, after, program.language)
        assert outcome.status in ("verified", "not-executed"), outcome.difference
        if path.suffix == ".musimd":
            assert outcome.status == "verified"


def test_dedicated_exits_makes_the_virtual_exit_blocks_real():
    program = load(ROOT / "musimd/break_and_stop.musimd")
    assert build_cfg(program.kernels[0]).synthetic
    result = Pipeline.parse("dedicated-exits").run(program)
    assert build_cfg(result.kernels[0]).synthetic == {}


def test_canonicalize_drops_unreachable_blocks_and_jumps_to_the_next_block():
    source = "kernel k(a)\n  x = a\n  jump NEXT\nDEAD:\n  y = 1\n  jump NEXT\nNEXT:\n  stop\n"
    program = parse_text(source, "k.musimd")
    result = Pipeline.parse("canonicalize").run(program)
    kernel = result.kernels[0]
    assert [b.label for b in kernel.blocks] == ["bb1", "NEXT"]
    assert all(i.kind != ir.JUMP for i in kernel.instructions())


def test_split_critical_edges_leaves_none():
    program = load(ROOT / "musimd/sumTriangle.musimd")
    assert critical_edges(program.kernels[0])
    result = Pipeline.parse("split-critical-edges").run(program)
    assert critical_edges(result.kernels[0]) == []
    assert len(result.kernels[0].blocks) == len(program.kernels[0].blocks) + len(
        critical_edges(program.kernels[0]))


def test_traits_of_operations():
    ptx = load(ROOT / "cuda/warp_primitives.O3.ptx").kernels
    instrs = [i for k in ptx for i in k.instructions()]
    shfl = next(i for i in instrs if str(i.attrs.get("opcode", "")).startswith("shfl"))
    assert t.is_convergent(shfl) and not t.is_speculatable(shfl)
    load_ = next(i for i in instrs if i.kind == ir.LOAD)
    assert t.MAY_TRAP in t.traits(load_)
    add = next(i for i in instrs if str(i.attrs.get("opcode", "")).startswith("add"))
    assert t.is_speculatable(add)
    musimd = load(ROOT / "musimd/barrier_exchange.musimd").kernels[0].instructions()
    barrier = next(i for i in musimd if i.kind == ir.BARRIER)
    assert {t.BARRIER, t.CONVERGENT, t.SIDE_EFFECTS} <= t.traits(barrier)
    store = next(i for i in musimd if i.kind == ir.STORE)
    assert t.SIDE_EFFECTS in t.traits(store) and not t.is_speculatable(store)


class SwapBranchTargets(Pass):
    """A deliberately wrong pass (tests only): a conditional branch now jumps where it
    fell through and falls through where it jumped."""

    name = "test-swap-branches"
    description = "miscompile: swap the two successors of every conditional branch"

    def run(self, kernel):
        for block in kernel.blocks:
            term = block.terminator
            if term is not None and term.kind == ir.BRANCH and term.operator in ("bz", "bnz"):
                term.operator = "bnz" if term.operator == "bz" else "bz"
        return kernel


class CopyInsideInlinedCalls(Pass):
    """A harmless rewrite inside inlined calls (tests only): after every plain definition
    of a register in an inlined body, a copy of the register to itself."""

    name = "test-copy-inside-calls"
    description = "add `r = copy r` after each definition inside inlined calls"

    def run(self, kernel):
        rewriter = Rewriter(kernel)
        for instr in list(kernel.instructions()):
            dest = instr.dest or ""
            if (instr.attrs.get("function") and instr.kind == ir.ASSIGN and dest
                    and instr.guard is None and dest in kernel.registers
                    and not dest.startswith("%%") and "@g" not in dest):
                rewriter.insert_after(instr, ir.Instruction(
                    ir.ASSIGN, instr.loc, dest=dest, args=(ir.Var(dest),), operator="copy"))
        return kernel


@pytest.fixture
def swap_pass():
    PASSES[SwapBranchTargets.name] = SwapBranchTargets
    yield SwapBranchTargets.name
    del PASSES[SwapBranchTargets.name]


def test_a_miscompiling_pass_is_caught(swap_pass):
    program = load(ROOT / "musimd/sumTriangle.musimd")
    result = Pipeline.parse(swap_pass).run(program)
    outcome = compare_kernels(program.kernels[0], result.kernels[0], "musimd")
    assert outcome.status == "differs"
    assert outcome.difference is not None
    assert outcome.difference.memory == "shared" or outcome.difference.memory == "outcome"
