"""The typed tuple the package's values are made of: a class that names
its fields with annotations, as ``typing.NamedTuple`` does, and builds as
cheaply as a plain class.

A ``typing.NamedTuple`` costs, each time its module loads (on every run):
a ``compile`` of every annotation written as a string (``ForwardRef``
checks it is an expression, though nothing here ever evaluates it), then
``collections.namedtuple``'s ``eval`` of a ``__new__`` of its own and a
dozen methods made for it.  A run loads about sixty of them: some 4-7 ms.

:class:`Record` keeps what the package uses of a named tuple, the same
way: fields in annotation order with defaults, construction by position
or keyword, attribute and tuple access, equality, hashing, ``_replace``,
``_asdict``, ``_fields``, ``_field_defaults``, ``__match_args__`` and the
``repr``; the annotations stay as written, never evaluated.  The methods
are shared by every record; a record class adds only its field getters.

A record's module says ``from __future__ import annotations``: its class
body then holds its annotations, as strings, on every Python.  Without it,
Python 3.14 and later hold only a function that makes them on demand
(PEP 649), and the class is refused rather than left with no fields.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any

try:  # the getter collections.namedtuple itself uses; any itemgetter will do
    from _collections import _tuplegetter
except ImportError:  # pragma: no cover (not CPython)

    def _tuplegetter(index: int, doc: str | None) -> property:
        return property(itemgetter(index), doc=doc)


def _annotated_lazily(namespace: dict[str, Any]) -> bool:
    """The class body annotated fields but holds only the function that
    makes the annotations (Python 3.14's names for it)."""
    return "__annotate__" in namespace or "__annotate_func__" in namespace


class _RecordClass(type):
    """Makes each subclass of :class:`Record` a tuple of its annotated fields."""

    def __new__(mcls, name: str, bases: tuple[type, ...], namespace: dict[str, Any]):
        if not any(isinstance(base, _RecordClass) for base in bases):
            return super().__new__(mcls, name, bases, namespace)  # Record itself
        if "__annotations__" not in namespace and _annotated_lazily(namespace):
            raise TypeError(f"{name}: a record's module needs 'from __future__ import annotations'")
        fields = tuple(namespace.get("__annotations__", {}))
        defaults = {field: namespace.pop(field) for field in fields if field in namespace}
        required = [field for field in fields if field not in defaults]
        if fields[: len(required)] != tuple(required):
            raise TypeError(f"{name}: a field without a default follows one with a default")
        for index, field in enumerate(fields):
            namespace[field] = _tuplegetter(index, None)
        namespace.update(
            __slots__=(), _fields=fields, _field_defaults=defaults, __match_args__=fields
        )
        return super().__new__(mcls, name, bases, namespace)


class Record(tuple, metaclass=_RecordClass):
    """A named tuple whose fields are the annotated names of its class body
    (a value after the annotation is the field's default)."""

    __slots__ = ()
    _fields = ()  # per record: its field names, and their defaults
    _field_defaults: dict = {}

    def __new__(cls, *values: Any, **named: Any):
        fields = cls._fields
        if not named and len(values) == len(fields):
            return tuple.__new__(cls, values)
        if len(values) > len(fields):
            raise TypeError(f"{cls.__name__}() takes {len(fields)} values, {len(values)} given")
        given = list(values)
        for field in fields[len(values) :]:
            if field in named:
                given.append(named.pop(field))
            elif field in cls._field_defaults:
                given.append(cls._field_defaults[field])
            else:
                raise TypeError(f"{cls.__name__}() missing required argument: {field!r}")
        if named:
            raise TypeError(f"{cls.__name__}() got unexpected or repeated fields {sorted(named)}")
        return tuple.__new__(cls, given)

    def _replace(self, /, **changes: Any):
        """A copy with ``changes`` (field name: new value)."""
        values = [
            changes.pop(field, value) for field, value in zip(self._fields, self, strict=True)
        ]
        if changes:
            raise ValueError(f"got unexpected field names: {sorted(changes)!r}")
        return tuple.__new__(type(self), values)

    def _asdict(self) -> dict[str, Any]:
        """Field name: value, in field order."""
        return dict(zip(self._fields, self, strict=True))

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{field}={value!r}" for field, value in zip(self._fields, self, strict=True)
        )
        return f"{type(self).__name__}({shown})"

    def __getnewargs__(self) -> tuple[Any, ...]:
        return tuple(self)
