"""A PTX file read once and lowered function by function (gpudiv/lang/ptx/functions.py,
`_KernelLowering.lower_function` and `summary_call`; issue 16, item 1)."""

from gpudiv import ir
from gpudiv.lang.ptx.functions import CallSummary, FunctionReader, SummaryOutput

PTX = """
.version 7.0
.target sm_80
.address_size 64

.func (.param .b32 func_retval0) pick(.param .b32 pick_param_0, .param .b32 pick_param_1)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    ld.param.u32 %r1, [pick_param_0];
    ld.param.u32 %r2, [pick_param_1];
    setp.lt.s32 %p1, %r1, 0;
    @%p1 bra $L_neg;
    st.param.b32 [func_retval0], %r1;
    ret;
$L_neg:
    st.param.b32 [func_retval0], %r2;
    ret;
}

.visible .entry k(.param .u32 k_param_0)
{
    .reg .b32 %r<5>;
    ld.param.u32 %r1, [k_param_0];
    mov.u32 %r2, %tid.x;
    {
    .param .b32 param0;
    st.param.b32 [param0], %r1;
    .param .b32 param1;
    st.param.b32 [param1], %r2;
    .param .b32 retval0;
    call.uni (retval0), pick, (param0, param1);
    ld.param.b32 %r3, [retval0];
    }
    ret;
}
"""


def reader() -> FunctionReader:
    return FunctionReader(PTX, "calls.ptx")


def test_the_call_graph_and_the_functions_of_a_file():
    found = reader()
    assert found.entries == ["k"] and found.functions == ["pick"]
    assert found.callees("k") == {"pick"} and found.callees("pick") == set()


def test_a_function_on_its_own_has_inputs_one_return_and_no_parameters():
    kernel = reader().lower("pick", {})
    instrs = kernel.instructions()
    inputs = [i for i in instrs if i.operator == "call.input"]
    assert [i.attrs["input"] for i in inputs] == [("pick_param_0", 0), ("pick_param_1", 0)]
    assert all(i.kind == ir.OPAQUE and not i.args for i in inputs)
    (ret,) = [i for i in instrs if i.operator == "call.return"]
    assert ret.attrs["outputs"] == (("func_retval0", 0),)
    assert kernel.params == [] and kernel.attrs["call_return"] == (ret.id,)
    # both `ret`s meet at the one return block
    assert sum(i.target == "$ret" for i in instrs) == 2


def test_a_call_lowered_as_its_summary_reads_only_what_the_result_depends_on():
    summary = CallSummary((("pick_param_0", 0), ("pick_param_1", 0)), {
        ("func_retval0", 0): SummaryOutput(frozenset({("pick_param_0", 0)}))})
    kernel = reader().lower("k", {"pick": summary})
    instrs = kernel.instructions()
    (effects,) = [i for i in instrs if i.operator == "call" and i.dest is None]
    assert effects.attrs["callee"] == "pick"
    assert [a.name for a in effects.args] == ["param0", "param1"]
    (result,) = [i for i in instrs if i.operator == "call.result"]
    assert result.dest == "retval0" and [a.name for a in result.args] == ["param0"]


def test_a_result_that_differs_whatever_the_arguments_is_opaque_and_a_literal_is_a_copy():
    for output, kind, operator in ((SummaryOutput(frozenset(), intrinsic=True), ir.OPAQUE,
                                    "call"),
                                   (SummaryOutput(frozenset(), constant=7), ir.ASSIGN, "copy")):
        summary = CallSummary((), {("func_retval0", 0): output})
        kernel = reader().lower("k", {"pick": summary})
        (result,) = [i for i in kernel.instructions() if i.dest == "retval0"]
        assert (result.kind, result.operator) == (kind, operator)


def test_the_inlined_kernel_records_which_call_each_copy_stands_for():
    """Copy `@1` stands for the kernel's (frame "") call of `pick` at its line and
    column."""
    line = PTX.splitlines().index("    call.uni (retval0), pick, (param0, param1);") + 1
    kernel = reader().inlined("k")
    assert kernel.attrs["call_instances"] == {"@1": ("", line, 5, "pick")}


def _many_functions(count: int) -> str:
    """A kernel that calls each of `count` functions once, each on the last one's result."""
    funcs = "".join(
        f".func (.param .b32 r) f{i}(.param .b32 a)\n{{\n .reg .b32 %r<3>;\n"
        f" ld.param.u32 %r1, [a];\n add.s32 %r2, %r1, {i};\n st.param.b32 [r], %r2;\n ret;\n}}\n"
        for i in range(count))
    calls = "".join(
        f" {{\n .param .b32 p;\n st.param.b32 [p], %r{i + 1};\n .param .b32 v;\n"
        f" call.uni (v), f{i}, (p);\n ld.param.b32 %r{i + 2}, [v];\n }}\n"
        for i in range(count))
    return (".version 7.0\n.target sm_80\n.address_size 64\n" + funcs
            + f".visible .entry k(.param .u64 out)\n{{\n .reg .b32 %r<{count + 3}>;\n"
            + " mov.u32 %r1, %tid.x;\n" + calls + " ret;\n}\n")


def test_inlining_many_functions_does_not_compare_them(monkeypatch):
    """Which functions a kernel inlined is kept by name: a list's `in` compared their
    records at every call, quadratic in the functions called (29 s for 4,000)."""
    from gpudiv.lang.ptx import flatten
    from gpudiv.lang.ptx.parse import parse_ptx

    compared = []
    equal = flatten._FuncInfo.__eq__
    monkeypatch.setattr(flatten._FuncInfo, "__eq__",
                        lambda self, other: compared.append(1) or equal(self, other))
    program = parse_ptx(_many_functions(60), "many.ptx")
    (kernel,) = program.kernels
    assert not program.errors
    assert sum(i.kind == ir.OPAQUE for i in kernel.instructions()) == 0
    assert compared == []
