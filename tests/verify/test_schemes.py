"""Reconvergence schemes compared (`gpudiv.verify.schemes`): Fig 3 of Wu et al. (2011)
under PDOM, earliest reconvergence and the structurized kernel, the Table-3 upper limit
of the dynamic code expansion, and a μ-SIMD kernel with `sync`."""

from pathlib import Path

from gpudiv.interp.musimd import LaunchConfig
from gpudiv.lang.load import load
from gpudiv.verify.schemes import compare_schemes, default_launches

MUSIMD = Path(__file__).resolve().parents[2] / "samples" / "musimd"


def test_wu_fig3_schemes_and_the_upper_limit_of_dynamic_expansion():
    (kernel,) = load(MUSIMD / "wu_fig3.musimd").kernels
    report = compare_schemes(kernel, "musimd", [LaunchConfig(7, 7)])
    runs = report.runs
    assert list(runs) == ["pdom", "earliest", "structured", "structured_earliest", "mimd"]
    # Fig 3(c): 12 slots; Fig 3(d): 7; the entry block E has 9 instructions, 8 more than
    # the one-instruction blocks of the figure, so lane instructions are 39 + 8 * 7.
    assert (runs["pdom"].slots, runs["earliest"].slots) == (12, 7)
    assert runs["pdom"].lane_instructions == runs["earliest"].lane_instructions == 39 + 8 * 7
    # slots 4-11 run B3, B4, B5 in the divergent warp: the Table 3 method counts 8; the
    # expansion proper (slots 7-11) is 5, as many as Forward Copy's copies (B3 once, B4
    # once, B5 three times): the paper's theorem on this instance.
    assert report.duplicated_blocks == ("B3", "B4", "B5")
    assert (report.upper_bound, report.measured_expansion, report.duplicates) == (8, 5, 5)
    assert report.transform["forward_copy"] == 2
    assert runs["structured"].warp_instructions >= runs["pdom"].warp_instructions
    assert all(r.finished for r in runs.values())
    assert all(r.same_memory for r in runs.values() if r.scheme != "mimd")
    assert all(r.same_as_pdom for r in runs.values() if r.scheme not in ("pdom", "mimd"))


def test_sync_scheme_runs_where_the_kernel_has_sync():
    (kernel,) = load(MUSIMD / "sumTriangle.musimd").kernels
    report = compare_schemes(kernel, "musimd", default_launches("musimd", kernel), count=1)
    assert report.launches == 1 and "sync" in report.runs
    assert report.transform["forward_copy"] == report.transform["cut"] == 0
    assert report.runs["structured"].warp_instructions == report.runs["pdom"].warp_instructions
    assert report.runs["sync"].same_memory and report.upper_bound == 0
