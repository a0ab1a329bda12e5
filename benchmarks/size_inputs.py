"""Generated inputs of a given size for the size benchmarks and the size regression tests.

The shapes that made gpudiv super-linear (issue 17, item 8):

- `nested_ifs(depth)`: μ-SIMD, `depth` nested `if`s on thread-dependent conditions, each
  updating a variable before and after its inner `if` (a γ at every join);
- `straight_line(n)`: μ-SIMD, `n` instructions without a branch;
- `brx_switch(targets)`: one PTX kernel whose `brx.idx` on `%tid.x % targets` jumps to one
  of `targets` cases, which all meet at one exit;
- `big_ptx(kernels)`: a PTX file of `kernels` copies of a small kernel with a loop and a
  branch (`big_ptx_of_bytes` picks the count for a file size);
- `endless_loops(loops)`: μ-SIMD, one kernel whose lanes each may spin forever in one of
  `loops` endless loops (post-dominance searched the exit once per loop);
- `musimd_kernels(kernels)`: a μ-SIMD file of `kernels` small kernels (each was parsed
  padded to its line in the file);
- `many_functions(functions)`: a PTX kernel that calls each of `functions` functions once
  (the lowering compared every function it had inlined at every call);
- `skipped_loops(loops)`: μ-SIMD, `loops` loops one after the other, each skipped by a
  branch to its exit (each exit gets a dedicated block, which went through every loop);
- `loop_continues(branches, to_header)`: μ-SIMD, one loop of `branches` `continue`s, to
  the header of a while loop or to the latch of a do-while loop (the search for rejoin
  points walked the rest of the body from each);
- `loop_nest(depth)`: μ-SIMD, `depth` nested loops (the loop forest's output is
  quadratic: each loop holds its inner loops' blocks).

    python benchmarks/size_inputs.py nested_ifs 2000 > nest.musimd
"""

from __future__ import annotations

import sys

PTX_HEADER = ".version 7.0\n.target sm_80\n.address_size 64\n\n"


def nested_ifs(depth: int) -> str:
    """A μ-SIMD kernel of `depth` nested ifs (sync at every join)."""
    lines = ["kernel nest(n)", "      x = tid", "      s = 0"]
    for level in range(depth):
        lines += [f"      c{level} = x < {level + 1}", f"      bz c{level}, E{level}",
                  "      s = s + x"]
    lines.append("      s = s * 2")
    for level in reversed(range(depth)):
        lines += [f"E{level}: sync", "      s = s + 1"]
    lines += ["      shared[x] = s", "      stop"]
    return "\n".join(lines) + "\n"


def straight_line(size: int) -> str:
    """A μ-SIMD kernel of `size` instructions and no branch."""
    lines = ["kernel line(n)", "      v0 = tid"]
    operators = ("+", "*", "^", "-")
    for i in range(1, size - 1):
        lines.append(f"      v{i} = v{i - 1} {operators[i % 4]} v{i // 2}")
    lines += [f"      shared[v0] = v{max(size - 2, 0)}", "      stop"]
    return "\n".join(lines) + "\n"


def brx_switch(targets: int) -> str:
    """A PTX kernel with one `brx.idx` over `targets` cases."""
    names = ", ".join(f"L{i}" for i in range(targets))
    body = [".visible .entry sw(.param .u64 out)\n{",
            "\t.reg .b32 %r<8>;\n\t.reg .b64 %rd<4>;",
            "\tld.param.u64 %rd1, [out];\n\tcvta.to.global.u64 %rd2, %rd1;",
            "\tmov.u32 %r1, %tid.x;",
            f"\trem.u32 %r2, %r1, {targets};",
            f"ts: .branchtargets {names};",
            "\tbrx.idx %r2, ts;"]
    for i in range(targets):
        body += [f"L{i}:", f"\tadd.s32 %r3, %r1, {i};", "\tbra.uni END;"]
    body += ["END:", "\tmul.wide.u32 %rd3, %r1, 4;", "\tadd.s64 %rd3, %rd2, %rd3;",
             "\tst.global.u32 [%rd3], %r3;", "\tret;", "}"]
    return PTX_HEADER + "\n".join(body) + "\n"


def _small_kernel(index: int) -> str:
    """A PTX kernel with a thread-dependent loop and branch (about 25 instructions)."""
    return f""".visible .entry k{index}(.param .u64 out, .param .u32 n)
{{
\t.reg .pred %p<4>;
\t.reg .b32 %r<12>;
\t.reg .b64 %rd<6>;
\tld.param.u64 %rd1, [out];
\tld.param.u32 %r1, [n];
\tcvta.to.global.u64 %rd2, %rd1;
\tmov.u32 %r2, %tid.x;
\tmov.u32 %r3, %ctaid.x;
\tmov.u32 %r4, %ntid.x;
\tmad.lo.s32 %r5, %r3, %r4, %r2;
\tmov.u32 %r6, 0;
\tmov.u32 %r7, %r5;
LOOP:
\tsetp.ge.u32 %p1, %r7, %r1;
\t@%p1 bra DONE;
\tand.b32 %r8, %r7, 1;
\tsetp.eq.s32 %p2, %r8, 0;
\t@%p2 bra EVEN;
\tadd.s32 %r6, %r6, %r7;
\tbra.uni NEXT;
EVEN:
\tsub.s32 %r6, %r6, {index % 7};
NEXT:
\tadd.s32 %r7, %r7, %r4;
\tbra.uni LOOP;
DONE:
\tmul.wide.u32 %rd3, %r5, 4;
\tadd.s64 %rd4, %rd2, %rd3;
\tst.global.u32 [%rd4], %r6;
\tret;
}}
"""


def big_ptx(kernels: int) -> str:
    """A PTX file of `kernels` small kernels."""
    return PTX_HEADER + "\n".join(_small_kernel(i) for i in range(kernels))


def big_ptx_of_bytes(size: int) -> str:
    """A PTX file of about `size` bytes (`big_ptx` with as many kernels as fit)."""
    return big_ptx(max(1, size // len(_small_kernel(10_000))))


def endless_loops(loops: int) -> str:
    """A μ-SIMD kernel whose lane `i` spins forever in loop `i` (`loops` of them)."""
    lines = ["kernel spin(n)", "      t = tid"]
    for i in range(loops):
        lines += [f"      c{i} = t == {i}", f"      bnz c{i}, S{i}"]
    lines += ["      shared[t] = n", "      stop"]
    for i in range(loops):
        lines += [f"S{i}:   t = t + 1", f"      jump S{i}"]
    return "\n".join(lines) + "\n"


def musimd_kernels(kernels: int) -> str:
    """A μ-SIMD file of `kernels` kernels with a divergent if each."""
    return "".join(f"kernel k{i}(a)\n      t = tid\n      c = t < a\n      bz c, L\n"
                   f"      x = t * {i}\n      jump M\nL:    x = a\nM:    sync\n"
                   "      shared[t] = x\n      stop\n" for i in range(kernels))


def many_functions(functions: int) -> str:
    """A PTX kernel that calls each of `functions` functions once, each on the result of
    the one before."""
    bodies = "".join(
        f".func (.param .b32 r) f{i}(.param .b32 a)\n{{\n\t.reg .pred %p<2>;\n"
        f"\t.reg .b32 %r<4>;\n\tld.param.u32 %r1, [a];\n\tsetp.lt.s32 %p1, %r1, {i};\n"
        f"\tmov.u32 %r2, {i};\n\t@%p1 bra L;\n\tadd.s32 %r2, %r1, {i};\nL:\n"
        "\tst.param.b32 [r], %r2;\n\tret;\n}\n\n" for i in range(functions))
    calls = "".join(
        f"\t{{\n\t.param .b32 p;\n\tst.param.b32 [p], %r{i + 1};\n\t.param .b32 v;\n"
        f"\tcall.uni (v), f{i}, (p);\n\tld.param.b32 %r{i + 2}, [v];\n\t}}\n"
        for i in range(functions))
    return (PTX_HEADER + bodies
            + f".visible .entry chain(.param .u64 out)\n{{\n\t.reg .b32 %r<{functions + 3}>;\n"
            "\t.reg .b64 %rd<3>;\n\tld.param.u64 %rd1, [out];\n"
            "\tcvta.to.global.u64 %rd2, %rd1;\n\tmov.u32 %r1, %tid.x;\n" + calls
            + f"\tst.global.u32 [%rd2], %r{functions + 1};\n\tret;\n}}\n")


def skipped_loops(loops: int) -> str:
    """A μ-SIMD kernel of `loops` loops in sequence, each skipped by a branch to its exit."""
    lines = ["kernel skipped(a)", "      i = 0"]
    for j in range(loops):
        lines += [f"      bz a, X{j}", f"L{j}:   i = i + 1", f"      c{j} = i < a",
                  f"      bnz c{j}, L{j}", f"X{j}:   i = i + 2"]
    return "\n".join([*lines, "      shared[0] = i", "      stop"]) + "\n"


def loop_continues(branches: int, to_header: bool = True) -> str:
    """A μ-SIMD loop of `branches` thread-dependent `continue`s: to the header of a while
    loop, or (`to_header` false) to the latch of a do-while loop."""
    target = "H" if to_header else "L"
    lines = ["kernel continues(a)", "      t = tid", "      i = 0", "H:    i = i + 1"]
    if to_header:
        lines += ["      d = i < a", "      bz d, X"]
    for j in range(branches):
        lines += [f"      c{j} = t == {j}", f"      bnz c{j}, {target}"]
    lines += ["      jump H"] if to_header else ["L:    e = i < a", "      bnz e, H"]
    return "\n".join([*lines, "X:    shared[t] = i", "      stop"]) + "\n"


def latch_continues(branches: int) -> str:
    """`loop_continues` to the latch of a do-while loop."""
    return loop_continues(branches, to_header=False)


def loop_nest(depth: int) -> str:
    """A μ-SIMD kernel of `depth` nested loops around one thread-dependent statement."""
    lines = ["kernel nest(a)", "      t = tid"]
    for j in range(depth):
        lines += [f"      i{j} = 0", f"H{j}:   i{j} = i{j} + 1"]
    lines += ["      x = t + 1"]
    for j in reversed(range(depth)):
        lines += [f"      c{j} = i{j} < a", f"      bnz c{j}, H{j}"]
    return "\n".join([*lines, "      shared[t] = x", "      stop"]) + "\n"


SHAPES = {"nested_ifs": nested_ifs, "straight_line": straight_line,
          "brx_switch": brx_switch, "big_ptx": big_ptx, "big_ptx_bytes": big_ptx_of_bytes,
          "endless_loops": endless_loops, "musimd_kernels": musimd_kernels,
          "many_functions": many_functions, "skipped_loops": skipped_loops,
          "loop_continues": loop_continues,
          "latch_continues": latch_continues,
          "loop_nest": loop_nest}
SUFFIX = {"nested_ifs": ".musimd", "straight_line": ".musimd", "brx_switch": ".ptx",
          "big_ptx": ".ptx", "big_ptx_bytes": ".ptx", "endless_loops": ".musimd",
          "musimd_kernels": ".musimd", "many_functions": ".ptx", "skipped_loops": ".musimd",
          "loop_continues": ".musimd", "latch_continues": ".musimd", "loop_nest": ".musimd"}


def main(argv: list[str]) -> int:
    """Print one generated input: `size_inputs.py SHAPE SIZE`."""
    if len(argv) != 2 or argv[0] not in SHAPES:
        print(f"usage: size_inputs.py {{{','.join(SHAPES)}}} SIZE", file=sys.stderr)
        return 2
    sys.stdout.write(SHAPES[argv[0]](int(argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
