"""Copy folding: the shipped divergence analyses solve a plain copy as its source.

A `-G` build, and any kernel whose calls are inlined, is mostly copies: `mov`, the
parameter and return-value passing of every inlined call, widening `cvt`s (5,247 of the
8,176 variables of particle_library.G's largest kernel). Each shipped divergence
analysis gives a plain copy `V = U` exactly what it gives U: divergence.lp reads only
its operand (`divergent`, and `constant` through `copy/2`), affine.lp's `af_pcopy` takes
U's coefficients and ⊥ (Sampaio 2013 §3.4 and §4, the rules of copies). So the driver
leaves plain copies out of the facts, writes each one's root (its first source that is
not a plain copy) wherever it is read, and after solving gives every copy what its root
got (`unfold`). The answer is the one the rules give the whole program: a copy's reason
is `operand` from the variable it copies when its root is not uniform, and a variable that
reads a copy has `operand` reasons from the copy, as the rules would have said.

Only assignments qualify: a phi-like variable (φ, η, rejoin copy) is gated, and the
launch-shape and invariance facts (`warp_index/1`, `lane_index/1`, `invariant_value/1`)
are never about assignments of one operand. A zero-extending copy (affine.lp's `af_zx`),
one with hidden operands and one whose result the calling context gives (call summaries)
is analysed as written.
"""

from __future__ import annotations

from gpudiv import ir
from gpudiv.ir.operators import normalise, zero_extended_bits
from gpudiv.ir.record import Record
from gpudiv.ir.ssa import SSAForm

# Relations whose first argument is a variable and whose other arguments describe its
# value: a copy has its root's rows.
VALUE_RELATIONS = ("divergent", "uniform", "constant", "affine_coef", "affine_bot",
                   "affine_class", "affine_constant")
# Relations of reasons `(V, Why, From)` and the classes of a root whose copies are not
# uniform under that analysis (reason/3: divergent/1; affine_reason/3: the classes that
# affine_nonuniform/1 gives).
NONUNIFORM_AFFINE_CLASSES = frozenset({"constaffine", "affine", "divergent"})


class Folding(Record, frozen=True):
    """The plain copies of a kernel: each one's source and root, and those whose every
    step to the root is a `copy/2` (μ-SIMD's `copy` operator), through which
    divergence.lp passes constants (`mov` in PTX passes none)."""

    source: dict[str, str]
    root: dict[str, str]
    constant_copies: frozenset[str]

    def __init__(self, source: dict[str, str] | None = None, root: dict[str, str] | None = None,
                       constant_copies: frozenset[str] = frozenset()) -> None:
        object.__setattr__(self, "source", {} if source is None else source)
        object.__setattr__(self, "root", {} if root is None else root)
        object.__setattr__(self, "constant_copies", constant_copies)

    def __bool__(self) -> bool:
        return bool(self.root)


def plain_copies(ssa: SSAForm) -> Folding:
    """The assignments of a kernel that copy one SSA variable unchanged (see the module)."""
    kernel = ssa.cfg.kernel
    if "call_return" in kernel.attrs:  # a `.func` analysed on its own: left as written
        return Folding()
    instrs = kernel.by_id()
    source: dict[str, str] = {}
    copy_facts: set[str] = set()  # copies that divergence.lp knows as copy/2
    for var in ssa.variables.values():
        if var.kind != ir.ASSIGN or var.instruction is None:
            continue
        instr = instrs[var.instruction]
        if (instr.kind != ir.ASSIGN or len(instr.args) != 1 or instr.implicit
                or instr.guard is not None or "affine" in instr.attrs
                or instr.attrs.get("via_inputs")):
            continue
        used = ssa.uses[var.instruction][0]
        if (used is not None and used != var.name and normalise(instr) == "copy"
                and zero_extended_bits(instr) is None):
            source[var.name] = used
            if instr.operator == "copy":
                copy_facts.add(var.name)
    root, constant = _roots(source, copy_facts)
    return Folding(source, root, frozenset(constant))


def _roots(source: dict[str, str], copy_facts: set[str]) -> tuple[dict[str, str], set[str]]:
    """Each copy's root (the end of `_chain`), and the copies whose every step to it is
    a `copy/2`; each chain is walked once, its tail's answer reused."""
    root: dict[str, str] = {}
    constant: set[str] = set()
    for name in source:
        path: list[str] = []
        seen: set[str] = set()
        node = name
        while node in source and node not in root and node not in seen:
            seen.add(node)
            path.append(node)
            node = source[node]
        if node in seen:  # a cycle (SSA has none): each member as `_chain` says
            for step in path:
                chain = _chain(step, source)
                root[step] = chain[-1]
                if all(link in copy_facts for link in chain[:-1]):
                    constant.add(step)
            continue
        end, through = (root[node], node in constant) if node in root else (node, True)
        for step in reversed(path):
            through = through and step in copy_facts
            root[step] = end
            if through:
                constant.add(step)
    return root, constant


def _chain(name: str, source: dict[str, str]) -> list[str]:
    """The variables along the copies from `name` to the first that is not a plain copy
    (its root, last)."""
    chain = [name]
    while name in source and source[name] not in chain:
        name = source[name]
        chain.append(name)
    return chain


def unfold(atoms: dict[str, list[tuple]], folding: Folding, ssa: SSAForm) -> None:
    """Give each folded copy its root's rows of the value relations and its reasons, and
    the readers of copies their reasons from the copies (in place)."""
    roots = set(folding.root.values())
    for name in VALUE_RELATIONS:
        rows = atoms.get(name)
        if not rows:
            continue
        of_root: dict[str, list[tuple]] = {}
        for row in rows:
            if row[0] in roots:
                of_root.setdefault(row[0], []).append(row[1:])
        copies = folding.root.items() if name != "constant" else \
            ((copy, root) for copy, root in folding.root.items()
             if copy in folding.constant_copies)
        rows.extend((copy, *rest) for copy, root in copies for rest in of_root.get(root, ()))
    if "reason" in atoms:
        divergent = {row[0] for row in atoms.get("divergent", ())}
        _unfold_reasons(atoms["reason"], folding, ssa, divergent)
    if "affine_reason" in atoms:
        nonuniform = {var for var, klass in atoms.get("affine_class", ())
                      if klass in NONUNIFORM_AFFINE_CLASSES}
        _unfold_reasons(atoms["affine_reason"], folding, ssa, nonuniform)


def _unfold_reasons(rows: list[tuple], folding: Folding, ssa: SSAForm,
                    nonuniform: set[str]) -> None:
    """`reason(V, operand, U)` as the rules give it on the unfolded program: for a reader
    of copies, from each operand whose root it has a reason from; for a copy whose root
    is not uniform, from the variable it copies."""
    root = folding.root
    readers = {name for name, var in ssa.variables.items()
               if name not in root and not root.keys().isdisjoint(var.operands)}
    kept = [row for row in rows if row[0] not in readers]
    own: dict[str, list[tuple]] = {}
    for row in rows:
        if row[0] in readers:
            own.setdefault(row[0], []).append(row)
    for name in readers:
        reasons = own.get(name, [])
        kept.extend(row for row in reasons if row[1] != "operand")
        from_roots = {row[2] for row in reasons if row[1] == "operand"}
        kept.extend((name, "operand", used)
                    for used in dict.fromkeys(ssa.variables[name].operands)
                    if root.get(used, used) in from_roots)
    kept.extend((copy, "operand", folding.source[copy]) for copy, first in root.items()
                if first in nonuniform)
    rows[:] = kept
