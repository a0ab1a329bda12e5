"""The dynamic spill profile and its latency model; the equivalence check's scratch
areas (what it ignores and what it still compares)."""

from gpudiv.interp.musimd import LaunchConfig
from gpudiv.lang.load import parse_text
from gpudiv.verify.equivalence import compare_kernels
from gpudiv.verify.spill_cost import LATENCY, profile, speedup

SOURCE = """kernel k(n)
      a = tid + n
      local[5] = a
      b = local[5]
      shared[tid] = b
      c = shared[tid]
      stop
"""


def test_profile_counts_warp_instructions_by_kind_and_costs_them():
    (kernel,) = parse_text(SOURCE, "k.musimd").kernels
    launches = [LaunchConfig(threads=8, warp_width=4, params={"n": 1})]
    one = profile(kernel, launches)
    # two warps, each: 1 add, 1 local store, 1 local load, 1 shared store, 1 load, stop
    assert one.counts == {"local_loads": 2, "local_stores": 2, "shared_loads": 2,
                          "shared_stores": 2, "other": 4}
    assert one.cost == 4 * LATENCY["local"] + 4 * LATENCY["shared"] + 4 * LATENCY["alu"]
    assert one.runs == 1
    assert speedup(one, one) == 0.0


def test_scratch_words_are_ignored_only_where_the_original_never_wrote():
    (before,) = parse_text(SOURCE, "k.musimd").kernels
    spill = SOURCE.replace("      stop", "      shared[1000] = tid\n      stop")
    (after,) = parse_text(spill, "k.musimd").kernels
    assert compare_kernels(before, after, "musimd").status == "differs"
    assert compare_kernels(before, after, "musimd", 0,
                           scratch={"shared": (1000, 1001)}).status == "verified"
    # the original's own word 5 of local memory is compared even inside a scratch area
    clobber = SOURCE.replace("      stop", "      local[5] = 7\n      stop")
    (after,) = parse_text(clobber, "k.musimd").kernels
    assert compare_kernels(before, after, "musimd", 0,
                           scratch={"local": (0, 10)}).status == "differs"
