"""Generated PTX kernels of about N instructions for the scaling benchmark (issue 16).

Each shape writes one `.entry` kernel (and, for `calls`, one `.func`) whose body holds
about `n` instructions, built from a repeated unit, so that a stage's time against `n`
shows how it scales:

- `straight_line(n)`: a chain of arithmetic on the thread id and a parameter, no branch;
- `loop_nests(n)`: nests of four counted loops (uniform and thread-dependent trip counts)
  one after the other;
- `branches(n)`: if/else diamonds one after the other, on thread-dependent and on uniform
  conditions;
- `calls(n)`: a device function with a branch, called (nvcc's call sequence) from n/25
  places;
- `local_memory(n)`: `-G`-style code: every value goes through `__local_depot` stack slots
  (`st.u32 [%SP+k]` / `ld.u32 [%SP+k]`) between two uses, with a branch now and then.

    python benchmarks/scaling_inputs.py loop_nests 10000 > nests.ptx
"""

from __future__ import annotations

import sys

HEADER = ".version 8.0\n.target sm_80\n.address_size 64\n\n"


def _kernel(name: str, body: list[str], counts: dict[str, int], prologue: str = "",
            extra: str = "") -> str:
    """An `.entry` with parameters `out` and `n`, registers as counted, and `body`."""
    regs = "".join(f"\t.reg .{t} %{r}<{counts[r] + 2}>;\n"
                   for r, t in (("p", "pred"), ("r", "b32"), ("rd", "b64")))
    return (f"{extra}.visible .entry {name}(.param .u64 out, .param .u32 n)\n{{\n{prologue}"
            f"{regs}\tld.param.u64 %rd1, [out];\n\tld.param.u32 %r1, [n];\n"
            "\tcvta.to.global.u64 %rd2, %rd1;\n\tmov.u32 %r2, %tid.x;\n"
            + "".join(f"{line}\n" for line in body)
            + "\tmul.wide.u32 %rd3, %r2, 4;\n\tadd.s64 %rd4, %rd2, %rd3;\n"
            "\tst.global.u32 [%rd4], %r3;\n\tret;\n}\n")


def straight_line(n: int) -> str:
    """About `n` instructions without a branch."""
    body = ["\tadd.s32 %r3, %r2, %r1;"]
    ops = ("add.s32", "mul.lo.s32", "xor.b32", "sub.s32")
    for i in range(4, n + 3):
        body.append(f"\t{ops[i % 4]} %r{i}, %r{i - 1}, %r{2 if i % 3 else 1};")
    body.append(f"\tmov.u32 %r3, %r{n + 2};")
    return HEADER + _kernel("straight", body, {"p": 1, "r": n + 3, "rd": 5})


def loop_nests(n: int) -> str:
    """Nests of four loops, one after the other (about 22 instructions per nest)."""
    body, reg, label = ["\tmov.u32 %r3, 0;"], 4, 0
    pred = 1
    for nest in range(max(1, n // 22)):
        counters = []
        for depth in range(4):
            bound = "%r2" if (nest + depth) % 2 else "%r1"  # divergent or uniform trips
            body += [f"\tmov.u32 %r{reg}, 0;", f"L{label}:",
                     f"\tsetp.ge.u32 %p{pred}, %r{reg}, {bound};",
                     f"\t@%p{pred} bra X{label};"]
            counters.append((reg, label))
            reg, label, pred = reg + 1, label + 1, pred + 1
        body += [f"\tadd.s32 %r3, %r3, %r{reg - 1};", f"\txor.b32 %r3, %r3, {nest};"]
        for counter, loop in reversed(counters):
            body += [f"\tadd.s32 %r{counter}, %r{counter}, 1;", f"\tbra.uni L{loop};",
                     f"X{loop}:"]
    return HEADER + _kernel("nests", body, {"p": pred, "r": reg, "rd": 5})


def branches(n: int) -> str:
    """If/else diamonds one after the other (about 8 instructions each)."""
    body, reg = ["\tmov.u32 %r3, 0;"], 4
    for i in range(max(1, n // 8)):
        condition = "%r2" if i % 2 else "%r1"
        body += [f"\tand.b32 %r{reg}, {condition}, {1 << (i % 8)};",
                 f"\tsetp.eq.s32 %p{i + 1}, %r{reg}, 0;", f"\t@%p{i + 1} bra E{i};",
                 f"\tadd.s32 %r3, %r3, {i};", f"\tbra.uni J{i};", f"E{i}:",
                 f"\tmul.lo.s32 %r3, %r3, {i % 5 + 2};", f"J{i}:",
                 f"\tadd.s32 %r3, %r3, %r{reg};"]
        reg += 1
    return HEADER + _kernel("branches", body, {"p": n // 8 + 1, "r": reg, "rd": 5})


FUNCTION = """.func (.param .b32 ret) clamp(.param .b32 a, .param .b32 b)
{
\t.reg .pred %p<3>;
\t.reg .b32 %r<8>;
\tld.param.u32 %r1, [a];
\tld.param.u32 %r2, [b];
\tsetp.lt.s32 %p1, %r1, %r2;
\tmov.u32 %r3, %r2;
\t@%p1 bra DONE;
\tsub.s32 %r4, %r1, %r2;
\tmul.lo.s32 %r3, %r4, 3;
DONE:
\tadd.s32 %r5, %r3, 1;
\tst.param.b32 [ret], %r5;
\tret;
}

"""


def calls(n: int) -> str:
    """A device function called from about n/25 places (nvcc's call sequence)."""
    body, reg = ["\tmov.u32 %r3, 0;"], 4
    for i in range(max(1, n // 25)):
        argument = "%r2" if i % 2 else "%r1"
        body += [f"\tadd.s32 %r{reg}, {argument}, {i};",
                 f"\t{{ // callseq {i}", "\t.param .b32 param0;",
                 f"\tst.param.b32 [param0], %r{reg};", "\t.param .b32 param1;",
                 "\tst.param.b32 [param1], %r3;", "\t.param .b32 retval0;",
                 "\tcall.uni (retval0), clamp, (param0, param1);",
                 f"\tld.param.b32 %r{reg + 1}, [retval0];", f"\t}} // callseq {i}",
                 f"\tadd.s32 %r3, %r3, %r{reg + 1};"]
        reg += 2
    return HEADER + _kernel("calls", body, {"p": 1, "r": reg, "rd": 5}, extra=FUNCTION)


def local_memory(n: int) -> str:
    """`-G`-style stack-slot traffic: loads and stores of `__local_depot` around each step."""
    slots = 16
    prologue = (f"\t.local .align 4 .b8 __local_depot0[{4 * slots}];\n\t.reg .b64 %SP;\n"
                "\t.reg .b64 %SPL;\n\tmov.u64 %SPL, __local_depot0;\n"
                "\tcvta.local.u64 %SP, %SPL;\n")
    body = ["\tmov.u32 %r3, 0;", "\tst.u32 [%SP+0], %r2;", "\tst.u32 [%SP+4], %r1;"]
    reg, pred = 4, 1
    for i in range(max(1, n // 6)):
        slot, source = 4 * (i % slots), 4 * ((i * 7 + 1) % 2)
        body += [f"\tld.u32 %r{reg}, [%SP+{source}];",
                 f"\tadd.s32 %r{reg + 1}, %r{reg}, {'%r2' if i % 3 == 0 else i};",
                 f"\tst.u32 [%SP+{slot}], %r{reg + 1};",
                 f"\tld.u32 %r{reg + 2}, [%SP+{slot}];",
                 f"\tadd.s32 %r3, %r3, %r{reg + 2};"]
        if i % 8 == 7:
            body += [f"\tsetp.eq.s32 %p{pred}, %r{reg + 2}, 0;", f"\t@%p{pred} bra S{i};",
                     f"\tst.u32 [%SP+{slot}], %r3;", f"S{i}:"]
            pred += 1
        reg += 3
    return HEADER + _kernel("locals", body, {"p": pred, "r": reg, "rd": 5}, prologue)


SHAPES = {"straight_line": straight_line, "loop_nests": loop_nests, "branches": branches,
          "calls": calls, "local_memory": local_memory}


def main(argv: list[str]) -> int:
    """Print one generated kernel: `scaling_inputs.py SHAPE N`."""
    if len(argv) != 2 or argv[0] not in SHAPES or not argv[1].isdigit():
        print(f"usage: scaling_inputs.py {{{','.join(SHAPES)}}} N", file=sys.stderr)
        return 2
    sys.stdout.write(SHAPES[argv[0]](int(argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
