"""Records: classes of named fields with value equality, a repr and (frozen) a hash.

What `@dataclass` gives, without its cost when a process starts. A dataclass is made
anew in every process: `dataclasses` imports `inspect` (with `ast`, `dis`, `tokenize`:
about 9 ms), and each class costs about 0.12 ms even with its generated methods
compiled once per machine (`gpudiv.lang.method_cache`), 0.5 ms without. A small `gpudiv
analyze` run imports 54 such classes; as dataclasses they cost it 15–18 ms of its 65–70
ms (docs/design.md, "Start-up"). A record's class writes its own `__init__`, ordinary
code in the module's bytecode cache; `Record` derives the rest from the class's
annotations, the fields, in order:

- `__repr__` (`Name(field=value, ...)`, as a dataclass's),
- `__eq__` (same class and equal fields) and, for a non-frozen record, no hash,
- with `frozen=True` (`class Loc(Record, frozen=True)`): `__hash__` over the fields and
  assignment refused (`FrozenRecordError`, an `AttributeError`); its `__init__` sets the
  fields through `object.__setattr__`.

`__init__` takes every field, in field order, under the field's name: `replace` builds a
changed copy through it. Pickling and copying work as for a dataclass (a frozen record
with `__slots__` brings its own state methods, as a frozen dataclass with slots does).
"""

from __future__ import annotations

from operator import attrgetter
from reprlib import recursive_repr

_MISSING = object()


class FrozenRecordError(AttributeError):
    """An assignment to (or deletion of) a field of a frozen record."""


class Record:
    """Base of record classes (see the module)."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()

    def __init_subclass__(cls, frozen: bool = False, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        own = tuple(cls.__dict__.get("__annotations__", {}))
        cls._fields = cls._fields + tuple(name for name in own if name not in cls._fields)
        values = _values_of(cls._fields)
        if "__eq__" not in cls.__dict__:
            cls.__eq__ = _equality(values)
        if frozen:
            cls.__setattr__ = _refuse_assignment
            cls.__delattr__ = _refuse_deletion
            if not _defines_hash(cls):
                cls.__hash__ = _hashing(values)
            if "__slots__" in cls.__dict__:
                cls.__getstate__ = _state_of_slots
                cls.__setstate__ = _set_state_of_slots

    @recursive_repr()
    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__qualname__}({inner})"

    __hash__ = None  # type: ignore[assignment]  # mutable records are not hashable


def _values_of(fields: tuple[str, ...]):
    """A function from a record to what its equality and hash compare: its one field's
    value, or the tuple of its fields' values (`attrgetter`, in C)."""
    if not fields:
        return lambda _record: ()
    return attrgetter(*fields)


def _defines_hash(cls: type) -> bool:
    """Whether the class body defines `__hash__` (not the None that Python puts there when
    the body defines `__eq__` alone), as `dataclasses` decides."""
    own = cls.__dict__.get("__hash__", _MISSING)
    return own is not _MISSING and not (own is None and "__eq__" in cls.__dict__)


def _equality(values):
    """`__eq__` of a record class whose compared values `values` gives: equal when of the
    same class with equal values (a closure, so that a comparison is one Python call)."""
    def __eq__(self: Record, other: object) -> bool:
        if other.__class__ is self.__class__:
            return values(self) == values(other)
        return NotImplemented
    return __eq__


def _hashing(values):
    """`__hash__` of a frozen record class: the hash of its compared values."""
    def __hash__(self: Record) -> int:
        return hash(values(self))
    return __hash__


def _refuse_assignment(self: Record, name: str, value: object) -> None:
    """`__setattr__` of a frozen record."""
    raise FrozenRecordError(f"cannot assign to field '{name}' of frozen "
                            f"{type(self).__qualname__}")


def _refuse_deletion(self: Record, name: str) -> None:
    """`__delattr__` of a frozen record."""
    raise FrozenRecordError(f"cannot delete field '{name}' of frozen "
                            f"{type(self).__qualname__}")


def _state_of_slots(self: Record) -> tuple:
    """`__getstate__` of a frozen record with slots: its fields' values."""
    return tuple(getattr(self, name) for name in self._fields)


def _set_state_of_slots(self: Record, state: tuple) -> None:
    """`__setstate__` of a frozen record with slots (pickle and copy)."""
    for name, value in zip(self._fields, state, strict=True):
        object.__setattr__(self, name, value)


def replace(record, /, **changes):
    """A copy of `record` with `changes` to its fields, made through its `__init__` (a
    dataclass goes to `dataclasses.replace`)."""
    if not isinstance(record, Record):
        import dataclasses

        return dataclasses.replace(record, **changes)
    unknown = set(changes) - set(record._fields)
    if unknown:
        raise TypeError(f"{type(record).__qualname__} has no field "
                        f"{', '.join(sorted(unknown))}")
    return type(record)(**{name: changes[name] if name in changes else getattr(record, name)
                           for name in record._fields})
