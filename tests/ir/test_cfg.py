"""CFG construction, dominance, loops and dedicated loop exits."""

import sys
from pathlib import Path

from gpudiv.ir.cfg import (
    ENTRY,
    EXIT,
    _block_successors,
    build_cfg,
    reconvergence_points,
    successor_labels,
)
from gpudiv.lang.load import load
from gpudiv.lang.musimd.parse import parse_musimd

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
sys.path.insert(0, str(SAMPLES.parent / "benchmarks"))
from size_inputs import loop_continues, loop_nest  # noqa: E402


def cfg_of(text: str):
    program = parse_musimd(text, "t.musimd")
    assert not program.errors
    return build_cfg(program.kernels[0])


def test_if_else_post_dominator_and_edges():
    cfg = cfg_of("kernel k()\n bz tid, E\n x = 1\n jump J\nE: x = 2\nJ: sync\n stop\n")
    assert set(cfg.graph.edges) == {(ENTRY, "bb1"), ("bb1", "bb2"), ("bb1", "E"),
                                    ("bb2", "J"), ("E", "J"), ("J", EXIT)}
    assert cfg.ipdom["bb1"] == "J"
    assert cfg.idom["J"] == "bb1"
    assert cfg.loops == {}


def test_unreachable_blocks_are_removed():
    cfg = cfg_of("kernel k()\n jump B\nDEAD: x = 1\nB: stop\n")
    assert cfg.unreachable == ["DEAD"]
    assert "DEAD" not in cfg.graph


def test_endless_loop_gets_an_exit_for_post_dominance():
    cfg = cfg_of("kernel k()\nL: x = 1\n jump L\n")
    assert cfg.no_exit == ["L"]
    assert cfg.ipdom["L"] == EXIT


def test_every_endless_loop_gets_one_exit_from_one_search(monkeypatch):
    """Each sink among the blocks that cannot reach the exit gets one edge, and the blocks
    that reach the exit are searched once (once per endless loop was quadratic)."""
    from gpudiv.ir import cfg as cfg_module

    searches = []
    reach = cfg_module._reach

    def counted(adjacency, start):
        searches.append(start)
        return reach(adjacency, start)

    monkeypatch.setattr(cfg_module, "_reach", counted)
    lines = ["kernel k(a)", "  t = tid"]
    for i in range(40):
        lines += [f"  c{i} = t == {i}", f"  bnz c{i}, S{i}"]
    lines += ["  bz a, Q", "  stop", "Q: x = 1", "  jump R", "R: jump Q"]
    for i in range(40):
        lines += [f"S{i}: x = x + 1", f"  jump S{i}"]
    cfg = cfg_of("\n".join(lines) + "\n")
    assert len(searches) == 2  # the blocks reached from the entry, those reaching the exit
    assert cfg.no_exit == ["R"] + [f"S{i}" for i in range(40)]
    assert all(cfg.ipdom[f"S{i}"] == EXIT for i in range(40))
    assert cfg.ipdom["Q"] == "R" and cfg.ipdom["R"] == EXIT


def test_a_loop_nest_deeper_than_the_recursion_limit_gets_its_forest():
    """The loop forest is searched with a stack of its own, not by recursion."""
    import sys
    import traceback

    depth = 120
    lines = ["kernel k(a)", "  i0 = 0"]
    for j in range(depth):
        lines += [f"H{j}: c{j} = i{j} < a", f"  bz c{j}, X{j}", f"  i{j + 1} = 0"]
    for j in reversed(range(depth)):
        lines += [f"  i{j} = i{j} + 1", f"  jump H{j}", f"X{j}: sync"]
    lines.append("  stop")
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(traceback.extract_stack()) + 80)  # below the nest's depth
    try:
        cfg = cfg_of("\n".join(lines) + "\n")
    finally:
        sys.setrecursionlimit(limit)
    assert list(cfg.loops) == [f"H{j}" for j in range(depth)]
    assert [cfg.loops[f"H{j}"].depth for j in (0, 1, depth - 1)] == [1, 2, depth]
    assert cfg.loops[f"H{depth - 1}"].parent == f"H{depth - 2}"


def test_nested_loops_forest():
    cfg = cfg_of("kernel k()\nO: bz tid, D\nI: bz laneid, X\n jump I\nX: sync\n jump O\n"
                 "D: sync\n stop\n")
    assert set(cfg.loops) == {"O", "I"}
    assert cfg.loops["I"].parent == "O"
    assert cfg.loops["I"].blocks < cfg.loops["O"].blocks
    assert cfg.loop_exits == {"I": ["X"], "O": ["D"]}


def test_exit_into_a_join_gets_a_dedicated_block():
    # The loop exits into J, which is also reached from before the loop.
    cfg = cfg_of("kernel k(n)\n bz n, J\nH: bz tid, J\n jump H\nJ: sync\n stop\n")
    assert cfg.loop_exits == {"H": ["J^H"]}
    assert cfg.synthetic == {"J^H": "J"}
    assert set(cfg.graph.successors("H")) == {"bb2", "J^H"}
    assert list(cfg.graph.successors("J^H")) == ["J"]


def test_reconvergence_points_skip_synthetic_loop_exits():
    text = ("kernel k(n)\n i = 0\n bz n, OUT\nLOOP: c = i < tid\n bz c, OUT\n i = i + 1\n"
            " jump LOOP\nOUT: shared[0] = i\n stop\n")
    cfg = build_cfg(parse_musimd(text, "k.musimd").kernels[0])
    assert cfg.ipdom["LOOP"] == "OUT^LOOP" and cfg.synthetic == {"OUT^LOOP": "OUT"}
    points = reconvergence_points(cfg)
    assert points["LOOP"] == "OUT"  # not the dedicated exit block cfg.synthetic adds
    assert points["OUT"] == EXIT
    assert not set(points) & set(cfg.synthetic)


def test_block_successors_by_index_are_the_successor_labels_of_every_sample_block():
    """`build_cfg` finds each block's successors by index on its own; on every kernel of
    the μ-SIMD and CUDA `-O3` samples they are `successor_labels` (the exit as the index past the
    last block)."""
    checked = 0
    for path in sorted([*SAMPLES.glob("musimd/*.musimd"), *SAMPLES.glob("cuda/*.O3.ptx")]):
        for kernel in load(path).kernels:
            labels = [b.label for b in kernel.blocks]
            by_index = _block_successors(kernel, labels)
            targets = [*labels, EXIT]
            assert [[targets[s] for s in succ] for succ in by_index[:-1]] == [
                successor_labels(kernel, i) for i in range(len(labels))], (path, kernel.name)
            assert by_index[-1] == []
            checked += len(labels)
    assert checked > 1_000


def test_rejoin_search_skips_cycles_whose_one_header_is_the_meeting_point(monkeypatch):
    """A `continue` to the header of a while loop: lanes meet at the header, which the
    region stops before, so no region is walked (each walk ran to the loop's end: 4,000
    continues took 7 s)."""
    from gpudiv.ir import cfg as cfg_module

    walked = []
    monkeypatch.setattr(cfg_module, "branch_region",
                        lambda *args: walked.append(args) or set())
    cfg = cfg_of(loop_continues(300))
    assert walked == [] and cfg.rejoins == {} and cfg.incomplete is None


def test_rejoin_search_stops_at_its_limit_and_the_kernel_is_refused(monkeypatch, tmp_path,
                                                                   capsys):
    """`continue`s to the latch of a do-while loop: each branch's region runs to the
    latch, so the walks add up quadratically; past `MAX_REJOIN_WALK` blocks the search
    stops, SSA refuses the CFG, and `gpudiv analyze` reports the kernel with its place."""
    from gpudiv.cli.main import main
    from gpudiv.ir import cfg as cfg_module
    from gpudiv.ir.ssa import build_ssa

    text = loop_continues(60, to_header=False)
    assert cfg_of(text).incomplete is None  # (well under the real limit)
    monkeypatch.setattr(cfg_module, "MAX_REJOIN_WALK", 500)
    sizes = []
    region = cfg_module.branch_region
    monkeypatch.setattr(cfg_module, "branch_region",
                        lambda *args: sizes.append(len(found := region(*args))) or found)
    cfg = cfg_of(text)
    assert "rejoin points" in cfg.incomplete and cfg.rejoins == {}
    assert 500 < sum(sizes) <= 500 + max(sizes) and len(sizes) < 60
    try:
        build_ssa(cfg)
    except cfg_module.CFGLimit as error:
        assert "rejoin points" in str(error)
    else:
        raise AssertionError("SSA built from an incomplete rejoin search")
    path = tmp_path / "continues.musimd"
    path.write_text(text)
    assert main(["analyze", str(path)]) == 2
    assert f"{path}:1:1: error: kernel continues: too large to analyse" in capsys.readouterr().err


def test_loop_forest_stops_at_its_limit_and_reconvergence_points_stay(monkeypatch, tmp_path,
                                                                       capsys):
    """A nest of 20 loops holds 400 (block, loop) memberships; with the forest's limit
    lowered to 50 the search stops (a nest of 2,000 loops took 31 s, one of 4,000 more
    than 5 minutes), the CFG says why and keeps no loops, the reconvergence points the
    interpreter uses are those of the whole CFG, and `gpudiv analyze` refuses the kernel
    at its place."""
    from gpudiv.cli.main import main
    from gpudiv.ir import cfg as cfg_module

    text = loop_nest(20)
    whole = cfg_of(text)
    assert len(whole.loops) == 20 and whole.incomplete is None
    monkeypatch.setattr(cfg_module, "MAX_LOOP_BLOCKS", 50)
    cut = cfg_of(text)
    assert "loops hold more than 50 blocks" in cut.incomplete
    assert cut.loops == {} and cut.rejoins == {} and cut.synthetic == {}
    assert reconvergence_points(cut) == reconvergence_points(whole)
    path = tmp_path / "nest.musimd"
    path.write_text(text)
    assert main(["analyze", str(path)]) == 2
    assert f"{path}:1:1: error: kernel nest: too large to analyse: its loops hold more than 50" \
        in capsys.readouterr().err
