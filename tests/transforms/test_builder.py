"""The rewriter: insertion points, blocks, edges, uses, names; ids stay stable."""

import pytest

from gpudiv import ir
from gpudiv.ir.verify import verify_kernel
from gpudiv.lang.load import parse_text
from gpudiv.lang.musimd.printer import print_kernel
from gpudiv.transforms import RewriteError, Rewriter, clone_kernel

SOURCE = """kernel k(n)
    t = tid < n
    bz t, SKIP
    shared[tid] = n
SKIP:
    sync
    x = tid + 1
    stop
"""


def kernel():
    return parse_text(SOURCE, "k.musimd").kernels[0]


def test_ids_are_positions_when_read_and_stay_when_code_moves():
    k = kernel()
    assert [i.id for i in k.instructions()] == list(range(k.instruction_count))
    store = next(i for i in k.instructions() if i.kind == ir.STORE)
    Rewriter(k).insert_before(store, ir.Instruction(ir.ASSIGN, store.loc, dest="y",
                                                    args=(ir.Const(1),), operator="copy"))
    assert store.id == 2
    assert [i.id for i in k.instructions()] == [0, 1, 6, 2, 3, 4, 5]
    assert sorted(i.id for i in k.instructions()) == list(range(7))


def test_insert_points_and_split_block():
    k = kernel()
    r = Rewriter(k)
    nop = ir.Instruction(ir.ASSIGN, k.loc, dest="z", args=(ir.Const(0),), operator="copy")
    r.insert_at_start("SKIP", nop)
    r.insert_at_end("SKIP", nop)  # a copy with its own id, before the stop
    skip = k.block("SKIP")
    assert skip.instructions[0].dest == "z" and skip.instructions[-1].kind == ir.STOP
    assert skip.instructions[-2].dest == "z"
    assert skip.instructions[0].id != skip.instructions[-2].id
    tail = r.split_block(skip.instructions[2])
    assert k.blocks[k.blocks.index(skip) + 1] is tail
    k.registers["z"] = "s32"
    assert verify_kernel(k) == []
    with pytest.raises(RewriteError):
        r.insert_after(tail.instructions[-1], nop)


def test_split_edge_on_the_branch_edge_and_the_fall_through_edge():
    k = kernel()
    r = Rewriter(k)
    first = k.blocks[0].label
    taken = r.split_edge(first, "SKIP")
    assert k.blocks[0].terminator.target == taken.label
    assert taken.instructions[-1].kind == ir.JUMP and taken.instructions[-1].target == "SKIP"
    fall = r.split_edge(first, k.blocks[1].label)
    assert k.blocks[1] is fall
    assert verify_kernel(k) == []
    again = parse_text(print_kernel(k), "k.musimd")
    assert again.errors == []


def test_replace_all_uses_sees_guards_and_implicit_reads():
    k = kernel()
    k.blocks[0].instructions.append(ir.Instruction(
        ir.FENCE, k.loc, implicit=(ir.Var("t"),), guard=ir.Guard(ir.Var("t")), id=99))
    changed = Rewriter(k).replace_all_uses("t", ir.Const(1))
    assert changed == 2
    fence = next(i for i in k.instructions() if i.kind == ir.FENCE)
    assert fence.implicit == (ir.Const(1),) and fence.guard.operand == ir.Const(1)


def test_fresh_names_and_clone():
    k = kernel()
    r = Rewriter(k)
    assert r.fresh_label("SKIP") == "SKIP_1"
    assert r.fresh_label("a^b.c") == "a_b_c"
    assert r.fresh_register("x", "s32") == "x_1" and k.registers["x_1"] == "s32"
    copy = clone_kernel(k)
    copy.blocks[0].instructions.clear()
    assert k.blocks[0].instructions, "the clone is independent"
    assert [i.id for i in clone_kernel(k).instructions()] == [i.id for i in k.instructions()]


def test_clone_region_copies_blocks_and_keeps_the_kernel_equivalent():
    from gpudiv.verify.equivalence import compare_kernels

    source = """kernel k(n)
    i = 0
HEAD:
    p = i < n
    bz p, DONE
    shared[i] = i
    i = i + 1
    jump HEAD
DONE:
    sync
    stop
"""
    original = parse_text(source, "k.musimd").kernels[0]
    k = clone_kernel(original)
    r = Rewriter(k)
    names = r.clone_region(["HEAD", "bb2"])
    assert set(names) == {"HEAD", "bb2"}
    head_copy = k.block(names["HEAD"])
    assert head_copy.terminator.target == "DONE", "an exit keeps its target"
    body_copy = k.block(names["bb2"])
    assert body_copy.terminator.target == names["HEAD"], "the back edge goes to the copy"
    ids = [i.id for i in k.instructions()]
    assert len(ids) == len(set(ids))
    assert verify_kernel(k) == []
    # enter the copy instead of the original loop: same behaviour
    r.split_edge(k.blocks[0].label, "HEAD")
    entry_edge = k.blocks[1]
    entry_edge.instructions[-1].target = names["HEAD"]
    assert verify_kernel(k) == []
    assert compare_kernels(original, k, "musimd").status == "verified"
    again = parse_text(print_kernel(k), "k.musimd")
    assert again.errors == []
