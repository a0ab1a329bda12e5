"""The host interpreter: values, launches on the SIMD interpreter, counters, errors."""

from pathlib import Path

import pytest

from gpudiv.interp.host import HostRunError, run_host
from gpudiv.lang.host.parse import parse_host

HOST = Path(__file__).parents[2] / "samples" / "host"


def run(body: str, **inputs):
    prog = parse_host('import "fig5_2.musimd"\n' + body, str(HOST / "t.host"))
    return run_host(prog, inputs)


def test_launches_compute_and_count():
    result = run("input k = 2\nn = 64\nh = array(n)\ni = 0\nwhile i < n {\n h[i] = i * k\n"
                 " i = i + 1\n}\na = malloc(n)\nb = malloc(n)\nmemcpy(a, h)\n"
                 "Kernel1<<<2, 32>>>(b, a)\nmemcpy(h, b)\nq = -7 / 2\nr = -7 % 2\n", k=3)
    assert result.arrays["h"][:3] == [0, 9, 18]  # Kernel1: out1[i] = 3 * in1[i]
    assert result.buffers["b"] == result.arrays["h"]
    assert (result.scalars["q"], result.scalars["r"]) == (-3, -1)
    c = result.counters
    assert (c.launches, c.blocks, c.per_kernel) == (1, 2, {"Kernel1": 1})
    assert (c.memory_instructions, c.memory_accesses, c.transactions) == (4, 128, 4)


@pytest.mark.parametrize("body, message", [
    ("n = 4\nd = malloc(n)\nfree(d)\nmemset(d, 1)\n", "5:8: error: use of freed buffer 'd'"),
    ("x = 1 / 0\n", "2:5: error: division by zero"),
    ("d = malloc(4)\ne = malloc(4)\nKernel1<<<1, 32>>>(d, e)\n",
     "4:1: error: launch of Kernel1 failed: kernel Kernel1 wrote address"),
])
def test_run_time_errors_are_located(body, message):
    with pytest.raises(HostRunError) as info:
        run(body)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_host_program_launches_a_kernel_that_recurses():
    """A PTX kernel whose inlined form leaves its recursion opaque runs with its calls as
    calls (`gpudiv.interp.ptx_calls.executable_form`)."""
    prog = parse_host('import "../cuda/recursion.O3.ptx"\nn = 32\nd = malloc(n)\n'
                      'fib_per_thread<<<1, 32>>>(d)\nh = array(n)\nmemcpy(h, d)\n',
                      str(HOST / "t.host"))
    result = run_host(prog, {})
    assert result.arrays["h"][:12] == [0, 1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89]
