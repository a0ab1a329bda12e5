"""The fast path of the PTX parser (gpudiv.lang.ptx.fast) on whole chunks: module
directives, declarations and prototypes are read without Lark, exactly as Lark reads them,
and anything else is left to Lark (its result and its error messages)."""

import random
from pathlib import Path

import pytest

from gpudiv.lang.ptx import fast as ptx_fast
from gpudiv.lang.ptx import parse as ptx
from gpudiv.lang.ptx import syntax

SAMPLES = Path(__file__).parents[3] / "samples"


def test_terminals_are_the_grammars():
    """The fast path's copy of the terminal regexes is what Lark builds from grammar/ptx.lark
    (a changed terminal must be changed in `TERMINALS` too)."""
    lark = syntax.parser()
    for name, regex in ptx_fast.TERMINALS.items():
        assert regex == lark.get_terminal(name).pattern.to_regexp(), name


# The section body as it was written first: one character per step of the loop.
_SECTION_BODY_PER_CHARACTER = (r'\{([^}"\/]|\/(?![\/*])|\/\/[^' + "\n"
                               + r']*|\/\*[\s\S]*?\*\/|"(\\.|[^"\\' + "\n" + r'])*")*\}')


@pytest.mark.parametrize("body", [
    '{ a "}" b }', '{ // } \n }', '{ /* } */ }', '{ // }', '{ "unterminated }', '{ a / b }',
    '{ /x }', '{', '{ "a\\"}" }', '{ /* open }', '{}', '{ // a }\n b }',
    "{\n\t.b8 1\n\t.b8 0\n}\n}", "{" + "\t.b32 7\n" * 5000])
def test_section_body_takes_runs_and_matches_as_one_character_at_a_time(body):
    """SECTION_BODY reads runs of plain characters possessively (a DWARF section of a `-G`
    build was a fifth of its parse, one loop step per character): a run can only be
    followed by `}`, `"` or `/`, so it ends exactly where the per-character loop's
    steps would, and the matches are the same."""
    import re

    per_character = re.compile(_SECTION_BODY_PER_CHARACTER).match(body)
    runs = re.compile(ptx_fast.TERMINALS["SECTION_BODY"]).match(body)
    assert (runs and runs.span()) == (per_character and per_character.span())


def test_patterns_compile_when_first_used():
    patterns = ptx_fast.build_patterns(ptx_fast.TERMINALS.__getitem__)
    assert "statement" not in vars(patterns)
    assert patterns.statement.match("add.s32 %r1, %r2, 1;").group("op") == "add.s32"
    assert patterns.statement is patterns.statement and "statement" in vars(patterns)
    with pytest.raises(AttributeError):
        patterns.no_such_pattern  # noqa: B018


def chunk_items(source: str) -> list | None:
    """What the fast path alone makes of one chunk (None: it leaves the chunk to Lark)."""
    return ptx_fast.BodyReader(ptx_fast.patterns(), source, 1, 1).chunk()


@pytest.mark.parametrize("build", ["O3", "G"])
def test_every_chunk_of_the_cuda_samples_is_read_without_lark(build):
    """nvcc's output — module directives, the .file table, DWARF sections, global
    declarations, prototypes, functions — needs no Lark at all (a sample that does says
    which shape the fast path should learn; results stay right either way)."""
    for path in sorted(SAMPLES.glob(f"cuda*/*.{build}.ptx")):
        text = path.read_text()
        for start, end in ptx._chunks(text):
            assert chunk_items(text[start:end]) is not None, (path.name, text[start:end][:200])


def parsed_forms(text: str, fast: bool) -> tuple:
    """What parsing alone gives: functions, module symbols, the .file table, diagnostics
    and what is kept for printing."""
    reader = ptx._Reader(text, "t.ptx")
    reader.parse(fast)
    return (reader.order, reader.functions, reader.symbols, reader.symbol_details,
            reader.files, [str(d) for d in reader.program.diagnostics],
            reader.program.attrs.get("module"))


MODULE_ITEMS = [
    ".version 8.0", ".version 7.10", ".target sm_80", ".target sm_90a, texmode_independent",
    ".address_size 64", ".address_size 32", '.file 1 "a.cu"',
    '.file 2 "/usr/include/b.h", 1700000000, 1234', '.file "c.cu"', '.file 0x3 "d\\"e.cu"',
    "// .globl k", "/* note */", ";", '.pragma "nounroll";',
    ".global .align 4 .b8 tab[16];", ".visible .global .u32 g, h;", ".const .f32 c[2][3];",
    ".extern .shared .align 16 .b8 smem[];", ".shared .v2 .u32 pair;", ".global .texref t;",
    ".global .u32 init = 7;", ".global .align 1 .b8 $str[3] = {65, 66, 0};",
    ".global .align 8 .u64 ops[3] = {_Z1fi, _Z1gi, h};", ".global .u64 at = tab+8;",
    ".const .f32 k2[2][2] = {{0f3F800000, 1.5}, {-2, 0x10}};", ".global .u64 gp = generic(t);",
    ".global .u32 e[2] = {};",
    ".extern .func (.param .b32 r) f (.param .b64 a, .param .b32 b);",
    ".weak .func g ();", ".visible .func h\n(\n\t.param .u32 h_0\n)\n;",
    ".func (.param .align 16 .b8 r[16]) v () .noreturn;",
    ".section .debug_str\n{\n$L__info_string0:\n.b8 95,90,0\n}",
    ".section .debug_abbrev { .b8 1 // }\n}", ".loc 1 2 3",
]
ITEM_MUTATIONS = [" ", "\n", ";", ",", ".", "{", "}", "(", ")", "[", "]", "=", '"', "/*", "*/",
                  "//", "1", "x", "%r1", ".b32", ".visible", ".global", ".func", ".entry",
                  ".file", ".align", "-", "u", "0x", "e", "$"]
KERNEL = """.visible .entry k(.param .u64 p)
{
\t.reg .b32 %r<3>;
\tmov.u32 %r1, %tid.x;
\tret;
}
"""


def random_module(rng: random.Random) -> str:
    """A run of module items, each mutated at most twice, then a kernel."""
    lines = []
    for _ in range(rng.randint(1, 5)):
        text = rng.choice(MODULE_ITEMS)
        for _ in range(rng.choice((0, 0, 0, 1, 2))):
            pos = rng.randrange(len(text) + 1)
            if rng.random() < 0.3:
                text = text[:pos] + text[pos + 1:]
            else:
                text = text[:pos] + rng.choice(ITEM_MUTATIONS) + text[pos:]
        lines.append(text)
    return "\n".join(lines) + rng.choice(["\n", " ", ""]) + KERNEL


def test_fast_path_matches_lark_on_mutated_module_items():
    """Whatever module text the fast path accepts it reads exactly as Lark does; what it
    does not accept gets Lark's reading or Lark's own error."""
    rng = random.Random(1611)
    read = errors = 0
    for _ in range(300):
        text = random_module(rng)
        forms = parsed_forms(text, True)
        assert forms == parsed_forms(text, False), text
        read += all(chunk_items(text[s:e]) is not None for s, e in ptx._chunks(text))
        errors += bool(forms[5])
    # Both outcomes are well represented.
    assert read > 60 and errors > 60, (read, errors)
