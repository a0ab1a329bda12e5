"""Where a spilled variable goes: the rewriting rules of Sampaio 2013 Fig 4.3.

| rule | state of the variable (a2·tid² + a1·tid + a0) | reload | store |
|---|---|---|---|
| local | anything else (divergent) | `v = local[k]` | `local[k] = v` |
| (i) constant | (0, 0, c) | `v = c` | none |
| (ii) shared | (0, 0, ⊥) uniform | `v = shared[b + k]` | `shared[b + k] = v` |
| (iii) remat | (0, c1, c2), c1 ≠ 0 | `v = c1·tid + c2` | none |
| (iv) shared+mad | (0,c,⊥), c≠0 | `t = shared[b+k]; v = c·tid+t` | `t = v−c·tid; shared[b+k] = t` |

The state of a variable is the meet of the states of all its SSA versions (its μ, γ and
η included): one spill slot holds every version, so sumTriangle's `d` (uniform inside
the loop, divergent after it) is divergent here and stays in local memory. The four
allocators of §5.3 differ only in the rules they may use.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpudiv.analyses.results import KernelResult

LOCAL, CONSTANT, SHARED, REMAT, SHARED_AFFINE = "local", "constant", "shared", "remat", \
    "shared_affine"
RULE_NAMES = {LOCAL: "local", CONSTANT: "(i) (0,c)", SHARED: "(ii) (0,⊥)↓",
              REMAT: "(iii) (c1,c2) remat", SHARED_AFFINE: "(iv) (c,⊥) shared + mad"}
ALLOCATORS: dict[str, tuple[str | None, frozenset[str]]] = {
    "linear": (None, frozenset()),
    "divergence": ("simple", frozenset({SHARED})),
    "remat": ("affine2", frozenset({CONSTANT, REMAT})),
    "affine": ("affine2", frozenset({CONSTANT, SHARED, REMAT, SHARED_AFFINE})),
}

State = tuple[int | None, int | None, int | None]  # (a2, a1, a0), None for ⊥
BOTTOM: State = (None, None, None)


@dataclass(frozen=True)
class SpillPlan:
    """How one spilled variable is stored and reloaded."""

    name: str
    rule: str
    coefficient: int = 0  # c1 (rules iii, iv)
    constant: int = 0  # c (rule i) or c2 (rule iii)

    @property
    def needs_slot(self) -> bool:
        """Whether the variable lives in memory (rules i and iii recompute it)."""
        return self.rule in (LOCAL, SHARED, SHARED_AFFINE)

    @property
    def space(self) -> str | None:
        """The memory of its slot."""
        if self.rule == LOCAL:
            return "local"
        return "shared" if self.rule in (SHARED, SHARED_AFFINE) else None


def _meet(a: int | None, b: int | None) -> int | None:
    return a if a == b else None


def slot_state(result: KernelResult, name: str) -> State:
    """The meet of the affine states of every SSA version of source variable `name`."""
    versions = result.by_source(name)
    if not versions:
        return BOTTOM
    state: State | None = None
    for version in versions:
        one = version.affine if version.affine is not None else (
            (0, 0, None) if version.uniform else BOTTOM)
        state = one if state is None else \
            tuple(_meet(x, y) for x, y in zip(state, one, strict=True))
    return state  # type: ignore[return-value]


def uniform_everywhere(result: KernelResult, name: str) -> bool:
    """Whether every SSA version of `name` is uniform (the simple analysis' test)."""
    versions = result.by_source(name)
    return bool(versions) and all(v.uniform for v in versions)


def rule_for(state: State, allowed: frozenset[str]) -> tuple[str, int, int]:
    """(rule, coefficient, constant) for a slot state, among the `allowed` rules."""
    a2, a1, a0 = state
    if a2 == 0 and a1 == 0 and a0 is not None and CONSTANT in allowed:
        return CONSTANT, 0, a0
    if a2 == 0 and a1 == 0 and SHARED in allowed:
        return SHARED, 0, 0
    if a2 == 0 and a1 not in (None, 0) and a0 is not None and REMAT in allowed:
        return REMAT, a1, a0
    if a2 == 0 and a1 not in (None, 0) and SHARED_AFFINE in allowed:
        return SHARED_AFFINE, a1, 0
    return LOCAL, 0, 0


def plan(allocator: str, spilled: list[str], result: KernelResult | None) -> list[SpillPlan]:
    """The spill plan of each spilled variable under an allocator."""
    _, allowed = ALLOCATORS[allocator]
    plans = []
    for name in spilled:
        if result is None or not allowed:
            plans.append(SpillPlan(name, LOCAL))
        elif result.analysis == "simple":
            rule = SHARED if uniform_everywhere(result, name) else LOCAL
            plans.append(SpillPlan(name, rule))
        else:
            rule, coefficient, constant = rule_for(slot_state(result, name), allowed)
            plans.append(SpillPlan(name, rule, coefficient, constant))
    return plans
