"""AtomReader: atoms of a model as Python values, the same through clingo's C functions
and through the Symbol accessors; joint solves share atoms out by namespace."""

import pytest

from gpudiv.analyses import atoms as atoms_module
from gpudiv.analyses.atoms import AtomReader
from gpudiv.analyses.solve import NotSeparable, _atom, solve, solve_together

ATOMS = r'''
a("x#1", 1, -5). a("quote\"and\\back", 2, bot). a("new\nline", 0, 2147483647).
a("é←", -2147483648, "").
b(f(1), "s,)"). b((1, "t"), c). c. d(a, b_c'). e(#inf, #sup). -g(1). g(2). k(-c).
h("%r1#2", "$L__BB0_3", "(") . #show (1, 2) : c. #show 7 : c. #show "text" : c.
'''
NOT_PLAIN = {"b", "e", "k"}  # nested terms, #inf/#sup, a negative constant


@pytest.fixture(params=["c", "accessors"])
def reader_path(request, monkeypatch):
    """Each test runs through clingo's C functions and through the Symbol accessors."""
    if request.param == "accessors":
        monkeypatch.setattr(atoms_module, "_lib", None)
    return request.param


def test_plain_atoms_read_as_printed_and_parsed(reader_path):
    symbols = solve([], ATOMS).symbols
    read = AtomReader().read(symbols)
    assert len(read) == len(symbols)
    for symbol, atom in zip(symbols, read, strict=True):
        printed = str(symbol)
        if printed.startswith("-") or symbol.type.name != "Function" or symbol.name in NOT_PLAIN:
            assert atom is None, printed
        else:
            assert atom == _atom(symbol), printed
    assert ("a", ("é←", -2147483648, "")) in read and ("", (1, 2)) in read


def test_solve_reads_other_atoms_as_before(reader_path):
    result = solve([], ATOMS)
    expected: dict[str, list[tuple]] = {}
    for symbol in result.symbols:
        name, values = _atom(symbol)
        expected.setdefault(name, []).append(values)
    assert result.atoms == expected
    assert ("f(1)", "s,)") in result.atoms["b"] and ('(1,"t")', "c") in result.atoms["b"]


def test_joint_solve_shares_atoms_out_by_namespace(reader_path):
    facts = {0: 'p("0|x", 1, "add"). q("0|y").', 3: 'p("3|x", 2, "sub").'}
    solved = solve_together([], facts, "#show p/3. #show q/1.")
    assert solved[0].atoms == {"p": [("x", 1, "add")], "q": [("y",)]}
    assert solved[3].atoms == {"p": [("x", 2, "sub")]}


@pytest.mark.parametrize("program", [
    'r("0|a", "3|b").',   # names two kernels
    'r("a", 1).',         # names none
    'r("0|3|a").',        # a namespace inside a namespace
    'r("0|a", f(1)).',    # a nested term
    'r("9|a").',          # a kernel that is not in the run
])
def test_joint_solve_refuses_atoms_of_no_single_kernel(reader_path, program):
    with pytest.raises(NotSeparable):
        solve_together([], {0: "", 3: ""}, program + "#show r/1. #show r/2.")
