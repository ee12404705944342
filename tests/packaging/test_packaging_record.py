"""The package's values are :class:`~git_isopatch.git.record.Record`\\ s: named
tuples as ``typing.NamedTuple`` makes them, built without compiling their
annotations (the start-up test of named tuples keeps them so)."""

from __future__ import annotations

import pickle
import re
from pathlib import Path
from typing import Generic, NamedTuple, TypeVar

import pytest

import git_isopatch
from git_isopatch.git.record import Record

T = TypeVar("T")


class Point(Record):
    """A record with defaults, a method and a property."""

    x: int
    y: "Unknown"  # noqa: F821 (never evaluated)
    tags: tuple[str, ...] = ()
    flag: bool = False

    def both(self) -> tuple[int, object]:
        return (self.x, self.y)

    @property
    def next_x(self) -> int:
        return self.x + 1


class Twin(NamedTuple):
    x: int
    y: object
    tags: tuple[str, ...] = ()
    flag: bool = False


class Box(Record, Generic[T]):
    value: T


def test_a_record_behaves_as_the_named_tuple_it_replaces() -> None:
    record, twin = Point(1, "a"), Twin(1, "a")
    assert record == twin == (1, "a", (), False) and hash(record) == hash(twin)
    assert Point(y="a", x=1, flag=True) == Twin(y="a", x=1, flag=True)
    assert (record.x, record.y, record.tags, record.flag) == (1, "a", (), False)
    assert record.both() == (1, "a") and record.next_x == 2
    assert record._replace(flag=True) == twin._replace(flag=True)
    assert type(record._replace(x=2)) is Point
    assert record._asdict() == twin._asdict()
    assert Point._fields == Twin._fields and Point._field_defaults == Twin._field_defaults
    assert repr(record) == repr(twin).replace("Twin", "Point")
    assert pickle.loads(pickle.dumps(record)) == record
    assert Point.__doc__ == "A record with defaults, a method and a property."
    assert Point.__annotations__["tags"] == "tuple[str, ...]"  # as written, never evaluated
    x, y, tags, flag = record
    assert (x, y, tags, flag) == tuple(twin)
    match Box(5):
        case Box(value):
            assert value == 5
    assert Box[int](3).value == 3


@pytest.mark.parametrize(
    "make",
    [
        lambda: Point(1),
        lambda: Point(1, "a", x=2),
        lambda: Point(1, "a", (), False, 5),
        lambda: Point(1, "a", colour="red"),
    ],
    ids=["missing", "repeated", "too many", "unknown"],
)
def test_a_record_refuses_what_a_named_tuple_refuses(make) -> None:
    with pytest.raises(TypeError):
        make()


def test_a_record_is_immutable_and_holds_no_other_attribute() -> None:
    record = Point(1, "a")
    with pytest.raises(AttributeError):
        record.x = 2  # type: ignore[misc]
    with pytest.raises(AttributeError):
        record.colour = "red"  # type: ignore[attr-defined]
    with pytest.raises(ValueError):
        record._replace(colour="red")


def test_a_field_without_a_default_after_one_with_a_default_is_refused() -> None:
    with pytest.raises(TypeError, match="without a default"):

        class Bad(Record):
            a: int = 0
            b: int


def test_a_record_whose_annotations_are_made_on_demand_is_refused() -> None:
    """Python 3.14's class body without the future import: annotations
    behind a function, none in the namespace."""
    with pytest.raises(TypeError, match="from __future__ import annotations"):
        type(Record)("Lazy", (Record,), {"__annotate__": lambda format: {"a": "int"}})


def test_every_module_defining_a_record_holds_its_annotations_as_strings() -> None:
    """Each module with a record says ``from __future__ import annotations``,
    so that its records have their fields on Python 3.14 too."""
    package = Path(git_isopatch.__file__).parent
    missing = [
        str(path.relative_to(package))
        for path in sorted(package.rglob("*.py"))
        if re.search(r"^class \w+\((?:[\w.]+, )*Record\b", path.read_text(), re.M)
        and not re.search(r"^from __future__ import annotations$", path.read_text(), re.M)
        and path.name != "record.py"
    ]
    assert missing == []
