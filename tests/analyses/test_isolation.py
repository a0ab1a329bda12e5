"""Per-kernel time limits: items analysed in forked children, each under a deadline."""

import os
import time

from gpudiv.analyses.isolation import KernelCrash, KernelTimeout, each_in_child
from gpudiv.api import analyze, analyze_text
from gpudiv.lang.load import parse_text


def _work(i: int):
    """Item 1 never finishes, item 3 kills its process, item 4 is a rule error (data)."""
    if i == 1:
        time.sleep(600)
    if i == 3:
        os._exit(3)
    if i == 4:
        return KernelTimeout("as data")
    return i * i


def test_each_item_gets_its_own_deadline_and_the_run_goes_on():
    results = each_in_child(6, _work, 0.5)
    assert [results[i] for i in (0, 2, 5)] == [0, 4, 25]
    assert isinstance(results[1], KernelTimeout)
    assert "took more than 0.5 s (the limit of --kernel-timeout)" in str(results[1])
    assert isinstance(results[3], KernelCrash) and "status" in str(results[3])
    assert str(results[4]) == "as data"


def test_analyze_with_a_limit_matches_analyze_without():
    text = ("kernel k(n)\n  a = tid + n\n  p = a < n\n  bz p, L\n  b = n * 2\n"
            "L: sync\n  c = a + 1\n  stop\n")
    free = analyze_text(text)
    limited = analyze(parse_text(text, "<string>"), kernel_timeout=60)
    assert [(v.name, v.klass) for v in limited.kernels[0].variables] == \
        [(v.name, v.klass) for v in free.kernels[0].variables]
    skipped = analyze(parse_text(text, "<string>"), kernel_timeout=1e-6)
    assert skipped.kernels == [] and "kernel k: not analysed" in str(skipped.errors[0])
