"""`regalloc` on PTX (issue 15): at most N registers per class, `.local` and per-warp
`.shared` spills, the hazards of note §4.8, `ptxas` and `--verify` as judges."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpudiv.analyses import get_analysis
from gpudiv.lang.load import load
from gpudiv.transforms import regalloc_ptx
from gpudiv.transforms.spill_rules import LOCAL, SHARED, SpillPlan
from gpudiv.verify.randptx import random_ptx
from gpudiv.verify.transform_check import TransformError, transform
from tests.ptxas_tool import PTXAS, ptxas_errors

CUDA = Path(__file__).resolve().parents[2] / "samples" / "cuda"
SAMPLE = CUDA / "control_flow.O3.ptx"
KERNEL = "find_first_negative"
BUDGET = 5


def allocate(allocator: str, verify: bool = True, path: Path = SAMPLE, kernel: str = KERNEL,
             registers: int = BUDGET):
    return transform(path, "regalloc", kernel=kernel, verify=verify,
                     options={"regalloc": {"allocator": allocator, "registers": registers}})


def entry(text: str, name: str) -> str:
    start = text.index(f".entry {name}(")
    return text[start:text.index("\n}", start)]


def declared(text: str, name: str) -> dict[str, int]:
    """Registers each class declares in the kernel's body (`%x<N>` counts N)."""
    counts: dict[str, int] = {}
    for type_, _reg, many in re.findall(r"\.reg \.(\w+) (%[\w$]+?)(?:<(\d+)>)?;",
                                       entry(text, name)):
        counts[type_] = counts.get(type_, 0) + int(many or 1)
    return counts


@pytest.fixture(scope="module")
def affine():
    return allocate("affine")


def test_affine_allocation_verifies_within_the_budget_and_uses_every_memory(affine, tmp_path):
    (kernel,) = affine.kernels
    assert kernel.status == "verified" and not kernel.oracle_violations
    assert max(declared(affine.text, KERNEL).values()) <= BUDGET
    stats = kernel.static
    assert stats["spills_shared"] and stats["spills_local"] and stats["spills_constant"]
    assert stats["spills_shared_affine"] and stats["base_registers"] == 1
    assert ".reg .b32 %sb;" in affine.text and "ld.shared.b32" in affine.text
    spills = kernel.dynamic["spills"]["after"]
    assert spills["shared_loads"] and spills["local_loads"] and spills["runs"] >= 2
    if PTXAS:
        path = tmp_path / "out.ptx"
        path.write_text(affine.text)
        assert ptxas_errors(path) is None


def test_a_register_with_a_divergent_version_is_never_shared(affine):
    """Note §4.8 item 1: %r16 is -1 (uniform) or %r15 on the divergent loop exit; its
    slot state is the meet of its versions, so it stays in local memory."""
    rules = affine.kernels[0].static["spill_rules"]
    assert rules["%r16"] == LOCAL
    program = load(SAMPLE)
    (result,) = get_analysis("affine2").run([program.kernel(KERNEL)])
    for name, rule in rules.items():
        if rule == SHARED:
            assert all(v.uniform for v in result.by_source(name)), name


def test_only_32_bit_integer_classes_are_recomputed(affine):
    """Note §4.8 item 4: affine2's coefficients hold modulo 2^32."""
    program = load(SAMPLE)
    types = program.kernel(KERNEL).registers
    for name, rule in affine.kernels[0].static["spill_rules"].items():
        if types[name] not in regalloc_ptx.REMAT_TYPES:
            assert rule in (LOCAL, SHARED), name


def test_too_small_a_budget_is_refused_in_one_line():
    with pytest.raises(TransformError) as error:
        allocate("linear", verify=False, registers=2)
    message = str(error.value)
    assert "\n" not in message and f"kernel {KERNEL}:" in message and "too few" in message


@pytest.mark.slow
@pytest.mark.parametrize("allocator", ["linear", "divergence", "remat"])
def test_other_allocators_verify_within_the_budget(allocator, tmp_path):
    done = allocate(allocator)
    (kernel,) = done.kernels
    assert kernel.status == "verified" and kernel.static["spilled"]
    assert max(declared(done.text, KERNEL).values()) <= BUDGET
    if allocator == "linear":
        assert "__gpudiv_spill_shared" not in done.text
        assert kernel.static["spills_local"] == kernel.static["spilled"]
    if PTXAS:
        path = tmp_path / "out.ptx"
        path.write_text(done.text)
        assert ptxas_errors(path) is None


@pytest.mark.slow
def test_sharing_a_divergent_register_or_one_area_for_all_warps_is_caught(monkeypatch):
    """The hazards are real: every spilled register in shared memory, or every warp on
    one area (reduce_max_interleaved spills warp-uniform values), and --verify reports a
    difference (the launches have 2 warps and 2 blocks)."""
    def share_all(allocator, spilled, types, result):
        return {n: SpillPlan(n, SHARED) for n in spilled}

    with monkeypatch.context() as patch:
        patch.setattr(regalloc_ptx, "_plans", share_all)
        assert allocate("affine").kernels[0].status == "differs"
    original = regalloc_ptx._setup_base

    def one_area(slots):  # the warp index forced to 0
        return [("mov.u32 %sb, 0;" if line == "shr.u32 %sb, %sb, 5;" else line)
                for line in original(slots)]

    other = {"path": CUDA / "reductions.O3.ptx", "kernel": "reduce_max_interleaved",
             "registers": 6}
    assert allocate("divergence", **other).kernels[0].status == "verified"
    monkeypatch.setattr(regalloc_ptx, "_setup_base", one_area)
    assert allocate("divergence", **other).kernels[0].status == "differs"


@pytest.mark.slow
def test_benchmark_over_ptx_lists_verified_allocations(tmp_path):
    path = tmp_path / "rand.ptx"
    path.write_text(random_ptx(11, 8))
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "benchmarks/bench_regalloc.py", "--ptx",
                           "--registers", "min", str(path)], cwd=root, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("| rand.ptx:")]
    assert len(rows) == 4 and all("| verified |" in row for row in rows), done.stdout
    assert "verified: 4" in done.stdout


def test_registers_of_an_inline_asm_scope_keep_their_declarations():
    """half2_axpy's inline asm declares `.reg .f16 low;` in a nested scope: not a `%`
    register, not allocated, and its declaration (with its type) stays."""
    done = allocate("linear", path=CUDA / "half_precision.O3.ptx", kernel="half2_axpy",
                    registers=3)
    (kernel,) = done.kernels
    assert kernel.status == "verified" and kernel.static["spilled"]
    assert ".reg .f16 low;" in entry(done.text, "half2_axpy")
