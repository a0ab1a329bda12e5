"""AtomReader: atoms of a model as Python values through clingo's C functions, the same
as clingo's `Symbol` accessors give them; joint solves share atoms out by namespace."""

import clingo
import pytest

from gpudiv.analyses.atoms import NOT_PLAIN as NOT_PLAIN_VALUE
from gpudiv.analyses.atoms import AtomReader, plain_value
from gpudiv.analyses.solve import NotSeparable, _atom, solve, solve_together

ATOMS = r'''
a("x#1", 1, -5). a("quote\"and\\back", 2, bot). a("new\nline", 0, 2147483647).
a("é←", -2147483648, "").
b(f(1), "s,)"). b((1, "t"), c). c. d(a, b_c'). e(#inf, #sup). -g(1). g(2). k(-c).
h("%r1#2", "$L__BB0_3", "(") . #show (1, 2) : c. #show 7 : c. #show "text" : c.
'''
NOT_PLAIN = {"b", "e", "k"}  # nested terms, #inf/#sup, a negative constant


def accessor_value(symbol: clingo.Symbol):
    """What `plain_value` must give, through clingo's public accessors."""
    if symbol.type == clingo.SymbolType.Number:
        return symbol.number
    if symbol.type == clingo.SymbolType.String:
        return symbol.string
    if symbol.type == clingo.SymbolType.Function and symbol.positive and not symbol.arguments:
        return symbol.name
    return NOT_PLAIN_VALUE


def test_plain_atoms_read_as_printed_and_parsed():
    result = solve([], ATOMS)
    read = AtomReader().read(result.symbol_ids)
    assert len(read) == len(result.symbol_ids)
    for identifier, symbol, atom in zip(result.symbol_ids, result.symbols, read, strict=True):
        printed = str(symbol)
        if printed.startswith("-") or symbol.type.name != "Function" or symbol.name in NOT_PLAIN:
            assert atom is None, printed
        else:
            assert atom == _atom(identifier), printed
            assert atom == (symbol.name, tuple(accessor_value(a) for a in symbol.arguments))
    assert ("a", ("é←", -2147483648, "")) in read and ("", (1, 2)) in read


def test_argument_values_agree_with_clingos_accessors():
    symbols = solve([], ATOMS).symbols
    arguments = [a for s in symbols for a in [s, *(s.arguments if s.type.name == "Function"
                                                   else ())]]
    assert len(arguments) > 30
    for argument in arguments:
        assert plain_value(argument._rep) == accessor_value(argument), str(argument)


def test_solve_reads_other_atoms_as_before():
    result = solve([], ATOMS)
    expected: dict[str, list[tuple]] = {}
    for symbol in result.symbol_ids:
        name, values = _atom(symbol)
        expected.setdefault(name, []).append(values)
    assert result.atoms == expected
    assert ("f(1)", "s,)") in result.atoms["b"] and ('(1,"t")', "c") in result.atoms["b"]


def test_joint_solve_shares_atoms_out_by_namespace():
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
def test_joint_solve_refuses_atoms_of_no_single_kernel(program):
    with pytest.raises(NotSeparable):
        solve_together([], {0: "", 3: ""}, program + "#show r/1. #show r/2.")
