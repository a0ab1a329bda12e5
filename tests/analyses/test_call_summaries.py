"""Call summaries (gpudiv/analyses/call_summaries.py, rules/call_summary.lp; issue 16,
item 1): each `.func` summarised once, analysed once per calling context."""

from itertools import combinations
from pathlib import Path

import pytest

from gpudiv.analyses.call_summaries import (
    SUMMARY_RULES,
    Context,
    _in_context,
    _levels,
    analyze_calls,
    summarise,
)
from gpudiv.analyses.driver import Analysis
from gpudiv.analyses.simple import analysis as simple_analysis
from gpudiv.analyses.solve import shipped_rule
from gpudiv.lang.ptx.functions import FunctionReader
from gpudiv.verify.randptx import random_ptx

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
MANY_CALLS = SAMPLES / "cuda" / "many_calls.G.ptx"


def reader_of(path: Path) -> FunctionReader:
    return FunctionReader(path.read_text(), str(path))


def test_summaries_of_many_calls_say_which_parameters_each_result_depends_on():
    """`clamp(x, lo, hi)` returns one of its three arguments; `lane_offset(i)` reads
    %laneid: its result differs between lanes whatever the argument."""
    summaries, _ = summarise(reader_of(MANY_CALLS))
    clamp = summaries["_Z6clampiiii"].outputs[("func_retval0", 0)]
    assert clamp.depends == {(f"_Z6clampiiii_param_{k}", 0) for k in range(3)}
    assert not clamp.intrinsic and clamp.constant is None
    lane = summaries["_Z11lane_offseti"].outputs[("func_retval0", 0)]
    assert lane.intrinsic


def test_a_function_is_analysed_once_per_context_not_once_per_call_site():
    """many_calls.G calls `mix` from 8 places, one of them inside `clamp_mix`, which is
    itself analysed in two contexts: 9 call sites in 3 calling contexts."""
    calls = analyze_calls(reader_of(MANY_CALLS))
    mixes = [c for c in calls.functions if c.function == "_Z3mixii"]
    assert {str(c.context) for c in mixes} == {
        "uniform inputs", "divergent: _Z3mixii_param_0",
        "divergent: _Z3mixii_param_0, _Z3mixii_param_1"}
    assert sum(len(c.call_sites) for c in mixes) == 9
    uniform = calls.context("_Z3mixii", Context())
    assert all(v.uniform for v in uniform.result.variables)
    assert uniform.result.calling_context.function == "_Z3mixii"


def test_kernels_read_only_the_arguments_a_result_depends_on():
    """In calls_uniform every helper gets uniform arguments: only the lane test diverges
    (as with inlining), and the call results are `call.result` definitions."""
    calls = analyze_calls(reader_of(MANY_CALLS))
    kernel = next(k for k in calls.kernels if k.name == "calls_uniform")
    assert [b.divergent for b in kernel.branches] == [True]
    instrs = kernel.ssa.cfg.kernel.instructions()
    assert sum(i.operator == "call.result" for i in instrs) >= 10
    assert all(i.attrs.get("callee") for i in instrs if i.operator == "call.result")


def _tainted(kernel) -> dict[str, set]:
    """Every tainted(V, S) of call_summary.lp for one function: V → its sources."""
    shown = Analysis("taint", tuple(shipped_rule(f) for f in SUMMARY_RULES),
                     lambda name, k, ssa, solved, timing: solved,
                     extra="#show tainted/2.")
    solved = shown.run([kernel])[0]
    found: dict[str, set] = {}
    for var, source in solved.relation("tainted"):
        found.setdefault(var, set()).add(source)
    return found


@pytest.mark.parametrize("seed", [3, 11])
def test_one_summary_solve_equals_divergence_lp_in_every_context(seed):
    """The union property the summaries rest on: for every set of divergent inputs, what
    divergence.lp finds divergent in a function is exactly what call_summary.lp taints by
    `body` or by one of those inputs (random programs with calls; every context of up to
    two divergent inputs)."""
    ptx = random_ptx(seed, 20, calls=True)
    reader = FunctionReader(ptx, "rand.ptx")
    _, lowered = summarise(reader)
    driver = simple_analysis()
    checked = 0
    for name, kernel in lowered.items():
        tainted = _tainted(kernel)
        inputs = [i.attrs["input"] for i in kernel.instructions()
                  if i.operator == "call.input"]
        for size in range(min(len(inputs), 2) + 1):
            for chosen in combinations(inputs, size):
                result = driver.run([_in_context(kernel, Context(frozenset(chosen)))])[0]
                divergent = {a[0] for a in result.relations.get("divergent", ())}
                seeds = {"body"} | {f"{p}#1" if o == 0 else f"{p}+{o}#1" for p, o in chosen}
                expected = {v for v, sources in tainted.items() if sources & seeds}
                assert divergent == expected, (name, chosen)
                checked += 1
    assert checked >= 5


def test_a_pointer_into_the_callers_stack_frame_makes_loads_through_it_thread_private():
    """half_precision.G passes `__half2` by address: the callee's load through the
    pointer reads the caller's thread-private frame, so its result depends on the
    pointer's locality (`local`), and in the context that passes a `.local` address the
    load is a source of divergence (it once was claimed uniform: the oracle caught it)."""
    calls = analyze_calls(reader_of(SAMPLES / "cuda" / "half_precision.G.ptx"))
    name = next(f for f in calls.summaries if "low2float" in f)
    output = calls.summaries[name].outputs[("func_retval0", 0)]
    assert output.local and not output.intrinsic
    contexts = [c for c in calls.functions if c.function == name]
    assert contexts and all(c.context.local for c in contexts)
    for found in contexts:
        assert not any(v.uniform for v in found.result.variables if v.source == "%r1")


def test_a_kernel_the_rules_fail_on_is_an_error_diagnostic_not_an_exception(monkeypatch):
    """A kernel that overruns its time limit is left out with an error; the rest stays."""
    calls = analyze_calls(reader_of(SAMPLES / "cuda" / "device_functions.G.ptx"),
                          kernel_timeout=1e-9)
    assert not calls.kernels
    assert calls.diagnostics and all(d.severity == "error" for d in calls.diagnostics)


def _calls(name: str, callees: list[str]) -> str:
    body = "\n".join(f"    call.uni {callee}, ();" for callee in callees)
    return f".func {name}()\n{{\n{body}\n    ret;\n}}\n"


def test_functions_are_summarised_callees_first_and_cycles_one_member_at_a_time():
    """`c` calls `a`; `a` and `b` call each other; `d` calls nothing: `d` comes first;
    of the cycle, `a` (first in the file) goes alone, then `b`; `c` after both."""
    ptx = (".version 7.0\n.target sm_80\n.address_size 64\n"
           + _calls("a", ["b"]) + _calls("b", ["a"]) + _calls("c", ["a"]) + _calls("d", [])
           + ".visible .entry k()\n{\n    call.uni c, ();\n    ret;\n}\n")
    assert _levels(FunctionReader(ptx, "cycle.ptx")) == [["a", "d"], ["b"], ["c"]]
