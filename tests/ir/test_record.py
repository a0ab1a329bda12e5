"""Records (`gpudiv.ir.record`): what a dataclass would do, and the contract every record
class keeps (its `__init__` takes its fields, in order, under their names)."""

from __future__ import annotations

import copy
import dataclasses
import importlib
import inspect
import pickle
from functools import cached_property

import pytest

from gpudiv import ir
from gpudiv.ir.record import FrozenRecordError, Record, replace

# Every module whose classes are records (the modules an `analyze` command imports).
RECORD_MODULES = (
    "gpudiv.ir.core", "gpudiv.ir.cfg", "gpudiv.ir.ssa", "gpudiv.lang.ptx.forms",
    "gpudiv.lang.ptx.flatten", "gpudiv.lang.ptx.lower", "gpudiv.lang.ptx.inline_reuse",
    "gpudiv.analyses.copies", "gpudiv.analyses.driver", "gpudiv.analyses.findings",
    "gpudiv.analyses.launch_shape", "gpudiv.analyses.results", "gpudiv.analyses.solve",
    "gpudiv.analyses.stack_slots", "gpudiv.api", "gpudiv.report.corpus",
)


class Point(Record, frozen=True):
    """A frozen record with slots."""

    x: int
    y: int

    __slots__ = ("x", "y")

    def __init__(self, x: int, y: int = 0) -> None:
        object.__setattr__(self, "x", x)
        object.__setattr__(self, "y", y)


class Bag(Record):
    """A mutable record with a __dict__."""

    name: str
    items: list[int]

    def __init__(self, name: str, items: list[int] | None = None) -> None:
        self.name = name
        self.items = [] if items is None else items


class Named(Record, frozen=True):
    """A frozen record without slots, with a cached property."""

    name: str

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "name", name)

    @cached_property
    def shout(self) -> str:
        return self.name.upper()


@dataclasses.dataclass(frozen=True)
class DataPoint:
    x: int
    y: int = 0


def test_repr_equality_and_hash_are_a_dataclasses():
    assert repr(Point(1, 2)) == repr(DataPoint(1, 2)).replace("DataPoint", "Point")
    assert repr(Bag("b", [1])) == "Bag(name='b', items=[1])"
    assert Point(1) == Point(1, 0) and Point(1) != Point(2) and Point(1) != DataPoint(1)
    assert hash(Point(3, 4)) == hash(Point(3, 4)) and len({Point(1), Point(1, 0)}) == 1
    assert Bag("a") == Bag("a", []) and Bag("a") != Bag("a", [1])
    with pytest.raises(TypeError):
        hash(Bag("a"))  # mutable records are unhashable, like dataclasses with eq


class Folded(Record, frozen=True):
    """A frozen record with an equality of its own: still hashable, as a dataclass."""

    text: str

    def __init__(self, text: str) -> None:
        object.__setattr__(self, "text", text)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Folded) and self.text.lower() == other.text.lower()


def test_an_own_equality_is_kept_and_a_frozen_record_stays_hashable():
    assert Folded("A") == Folded("a")
    assert hash(Folded("a")) == hash(Folded("a"))


def test_frozen_records_refuse_assignment_but_cache_properties():
    point = Point(1)
    with pytest.raises(FrozenRecordError, match="cannot assign to field 'x' of frozen Point"):
        point.x = 2
    with pytest.raises(AttributeError):
        del point.y
    named = Named("n")
    assert named.shout == "N" and named.shout == "N"
    assert Named("n") == named  # the cached value is not a field
    bag = Bag("b")
    bag.items.append(1)
    bag.name = "c"
    assert bag == Bag("c", [1])


def test_replace_copies_records_and_dataclasses():
    point = Point(1, 2)
    assert replace(point, y=5) == Point(1, 5) and point == Point(1, 2)
    assert replace(DataPoint(1), y=3) == DataPoint(1, 3)
    shared = Bag("b", [1])
    assert replace(shared).items is shared.items  # fields are not copied, as a dataclass's
    with pytest.raises(TypeError, match="Point has no field z"):
        replace(point, z=1)


@pytest.mark.parametrize("record", [Point(1, 2), Bag("b", [1, 2]), Named("n"),
                                    ir.Instruction(ir.ASSIGN, ir.Loc(3, 4), dest="x",
                                                   args=(ir.Var("a"), ir.Const(2)),
                                                   operator="+", guard=ir.Guard(ir.Var("p")))],
                         ids=["frozen-slots", "mutable", "frozen-dict", "instruction"])
def test_pickle_and_copies_keep_the_fields(record):
    for again in (pickle.loads(pickle.dumps(record)), copy.copy(record),
                  copy.deepcopy(record)):
        assert again == record and type(again) is type(record)


def _record_classes() -> list[type]:
    """Every record class of the record modules."""
    for name in RECORD_MODULES:
        importlib.import_module(name)
    found, pending = [], list(Record.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls.__module__.startswith("gpudiv."):
            found.append(cls)
    return found


def test_every_record_takes_its_fields_in_order_under_their_names():
    """`replace`, equality and the repr rest on it: a field added to the annotations but
    not to `__init__` (or the other way round) fails here."""
    classes = _record_classes()
    assert len(classes) >= 54
    wrong = {}
    for cls in classes:
        parameters = list(inspect.signature(cls.__init__).parameters)[1:]
        if parameters != list(cls._fields):
            wrong[cls.__qualname__] = (parameters, cls._fields)
        slots = cls.__dict__.get("__slots__")
        if slots is not None and tuple(slots) != cls._fields:
            wrong[cls.__qualname__] = ("slots", slots, cls._fields)
    assert wrong == {}


def test_no_record_module_defines_a_dataclass():
    """Importing `dataclasses` (and `inspect`) is what records save a process."""
    for name in RECORD_MODULES:
        module = importlib.import_module(name)
        made_here = [value for value in vars(module).values()
                     if isinstance(value, type) and value.__module__ == name
                     and dataclasses.is_dataclass(value)]
        assert made_here == [], name
