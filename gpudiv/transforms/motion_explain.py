"""Why code motion put each computation or load where it did (`transform --explain`).

The code-motion passes (lcm, scm, sscm, spre, srqp, esrqp, ssrqp-s, ssrqp) record, per
expression and per solving step, the points where they insert it and the occurrences
they replace, each with the values of the predicates that justify the rewrite there (the
relations of rules/SCHEMA.md "Code motion" and "Scalar replacement"). Only data here:
the CLI formats it.

Steps: `lcm` (the LCM step of lcm/scm/sscm/spre: insert = latest ∧ live, replace =
computed and (inserted or not latest)), `region` (the sparse step of scm/sscm/spre:
insert at the R-Earliest points of the chosen down-safety region, delete the RelComp
computations), `availability` (srqp/esrqp: insert where a successor is available after
insertion and down-safe, replace where available), `speculation` (ssrqp/ssrqp-s: hoist
a load that is not available above the branches the query stops at, and at the
predecessors Algorithm 2.1 compensates).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpudiv import ir
from gpudiv.transforms.base import PassError, get_pass
from gpudiv.transforms.builder import clone_kernel
from gpudiv.transforms.loads import LoadModel
from gpudiv.transforms.motion import Model

MOTION_PASSES = ("lcm", "scm", "sscm", "sscm-simple", "sscm-affine", "spre", "srqp",
                 "esrqp", "ssrqp-s", "ssrqp")


@dataclass
class Point:
    """One insertion or replacement point and the predicate values that justify it."""

    block: str
    place: str  # entry, exit, end (after the statement), before-branch
    predicates: dict[str, bool]
    statement: str = ""  # the statement rewritten or anchored to, as written

    def to_json(self) -> dict:
        """The point as JSON data."""
        return {"block": self.block, "place": self.place, "statement": self.statement,
                "predicates": dict(self.predicates)}


@dataclass
class ExpressionMotion:
    """What one solving step did with one expression (or load form)."""

    step: str
    expression: str
    insertions: list[Point] = field(default_factory=list)
    replacements: list[Point] = field(default_factory=list)

    def to_json(self) -> dict:
        """The record as JSON data."""
        return {"step": self.step, "expression": self.expression,
                "insertions": [p.to_json() for p in self.insertions],
                "replacements": [p.to_json() for p in self.replacements]}


@dataclass
class MotionExplanation:
    """Every record of one pass on one kernel, and the blocks where it may speculate."""

    kernel: str
    pass_name: str
    divergence: str | None
    speculate: list[str]
    expressions: list[ExpressionMotion]

    def to_json(self) -> dict:
        """The explanation as JSON data."""
        return {"kernel": self.kernel, "pass": self.pass_name,
                "divergence": self.divergence, "speculate": list(self.speculate),
                "expressions": [e.to_json() for e in self.expressions]}


def expression_text(instr: ir.Instruction) -> str:
    """The right-hand side of a computation as written (PTX: opcode and operands)."""
    opcode = instr.attrs.get("opcode")
    if opcode is not None:
        return f"{opcode} {', '.join(map(str, instr.args))}"
    text = instr.text or ""
    return text.split(" = ", 1)[1] if " = " in text else text


def form_text(form: tuple) -> str:
    """A load form `(space, base, offset, opcode)` as an address expression."""
    space, base, offset, opcode = form
    if base is None:
        address = str(offset)
    elif offset:
        address = f"{base}{'+' if offset > 0 else '-'}{abs(offset)}"
    else:
        address = str(base)
    return f"{space}[{address}]" if opcode == "load" else f"{opcode} [{address}]"


def _has(relations: dict, name: str, e: int, label: str) -> bool:
    """Whether relation `name` holds for (expression, block)."""
    return (e, label) in relations.get(name, ())


def _occurrences(instrs: list[ir.Instruction]) -> str:
    """The texts of a segment's occurrences."""
    return "; ".join(i.text for i in instrs)


def lcm_records(model: Model, relations: dict) -> list[ExpressionMotion]:
    """The LCM step: insertions (latest and live) and replacements per expression."""
    records = []
    for e in range(len(model.keys)):
        record = ExpressionMotion("lcm", expression_text(model.sample[e]))
        for side in ("n", "x"):
            place = "entry" if side == "n" else "exit"
            for label in model.labels:
                if _has(relations, f"{side}insert", e, label):
                    names = ("dsafe", "usafe", "earliest", "delayed", "latest", "live")
                    record.insertions.append(Point(label, place, {
                        f"{side}{n}": _has(relations, f"{side}{n}", e, label)
                        for n in names}))
                if _has(relations, f"{side}replace", e, label):
                    view = model.views[(e, label)]
                    record.replacements.append(Point(label, place, {
                        f"{side}comp": True,
                        f"{side}insert": _has(relations, f"{side}insert", e, label),
                        f"{side}latest": _has(relations, f"{side}latest", e, label)},
                        _occurrences(view.entry if side == "n" else view.exit)))
        if record.insertions or record.replacements:
            records.append(record)
    return records


def region_records(model: Model, relations: dict, chosen: set[int],
                   speculate: set[str]) -> list[ExpressionMotion]:
    """The sparse step: R-Earliest insertions and RelComp deletions of the expressions
    that move."""
    records = []
    for e in sorted(chosen):
        record = ExpressionMotion("region", expression_text(model.sample[e]))
        for label in model.labels:
            values = {name: _has(relations, name, e, label)
                      for name in ("rearliest", "dsregion", "relcomp", "ndsafe",
                                   "xdsafe", "upsafe")}
            values["speculate"] = label in speculate
            if values["rearliest"]:
                place = "entry" if values["ndsafe"] else "exit"
                record.insertions.append(Point(label, place, values))
            if values["relcomp"]:
                record.replacements.append(Point(
                    label, "entry", values, _occurrences(model.views[(e, label)].entry)))
        records.append(record)
    return records


def _statement(model: LoadModel, n: int) -> tuple[str, str]:
    """The block and text of a statement node."""
    label, instr = model.nodes[n]
    return label, (instr.text if instr is not None else "")


def _at(found: dict, name: str, n: int, f: int) -> bool:
    """Whether relation `name` holds for (statement, form)."""
    return (n, f) in found.get(name, ())


def availability_records(model: LoadModel, found: dict,
                         cdrnd: set[int]) -> list[ExpressionMotion]:
    """The (E)SRQP step: insertions, saves and conversions, and replaced loads per form."""
    records = []
    for f, form in enumerate(model.forms):
        record = ExpressionMotion("availability", form_text(form))
        for n, g in sorted(found.get("insert", ())):
            if g != f:
                continue
            m = next((m for m in model.succ[n] if _at(found, "avin", m, f)), None)
            label, text = _statement(model, n)
            record.insertions.append(Point(label, "end", {
                "avout": False, "successor_avin": m is not None,
                "successor_antin": m is not None and _at(found, "antin", m, f),
                "successor_realin": m is not None and _at(found, "realin", m, f),
                "cdrnd": n in cdrnd}, text))
        for n, g in sorted(found.get("save", ())):
            if g == f:
                label, text = _statement(model, n)
                record.insertions.append(Point(label, "end", {"save": True}, text))
        for n, after, before in sorted(found.get("convert", ())):
            if after == f:
                label, text = _statement(model, n)
                carried = form_text(model.forms[before])
                record.insertions.append(Point(label, "end", {"convert": True},
                                               f"{text} (carries {carried})"))
        for n, g in sorted(found.get("replace", ())):
            if g == f:
                label, text = _statement(model, n)
                record.replacements.append(Point(label, "statement", {
                    "occ": True, "avin": True, "antin": _at(found, "antin", n, f)}, text))
        if record.replacements:
            records.append(record)
    return records


def speculation_records(model: LoadModel, found: dict,
                        hoist_at: set[str]) -> list[ExpressionMotion]:
    """The speculation step: per hoisted load, the branches it goes above and the
    predecessors Algorithm 2.1 compensates."""
    records = []
    for (o,) in sorted(found.get("hoist", ())):
        f = model.occurrences[o]
        record = ExpressionMotion("speculation", form_text(model.forms[f]))
        for origin, n in sorted(found.get("hnode", ())):
            if origin == o:
                label, text = _statement(model, n)
                record.insertions.append(Point(label, "before-branch", {
                    "divbranch": label in hoist_at, "origin_control_dependent": True,
                    "antin": _at(found, "antin", n, f)}, text))
        for origin, n in sorted(found.get("cnode", ())):
            if origin == o:
                label, text = _statement(model, n)
                record.insertions.append(Point(label, "end", {
                    "can_hoist": False, "cdrnd": True, "successor_antin": True}, text))
        label, text = _statement(model, o)
        record.replacements.append(Point(label, "statement", {
            "occ": True, "avin": False, "hoist": True}, text))
        records.append(record)
    return records


def explain_kernel(kernel: ir.Kernel, pass_name: str,
                   options: dict[str, object] | None = None) -> MotionExplanation:
    """Run one code-motion pass on a copy of the kernel and return what it recorded."""
    if pass_name not in MOTION_PASSES:
        raise PassError(f"pass {pass_name} is not a code-motion pass (--explain takes "
                        f"one of {', '.join(MOTION_PASSES)})")
    one = get_pass(pass_name, **(options or {}))
    one.run(clone_kernel(kernel))
    divergence = None if pass_name in ("lcm", "scm", "srqp") else \
        str((options or {}).get("divergence", getattr(one, "divergence", "affine2")))
    return MotionExplanation(kernel.name, pass_name, divergence,
                             sorted(one.speculate_blocks), list(one.records))
