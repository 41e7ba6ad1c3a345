"""Runtime support shared by the generated message classes.

Every generated struct class derives from Struct and carries a FIELDS table of
FieldSpec rows (one per JSON field, in wire order) so that tests and tools can walk
the schema: which fields exist in a version, which are nullable or tagged.
"""

from __future__ import annotations

import operator
from typing import Any, ClassVar, NamedTuple

from kbroker.protocol.codec import SliceLike

Records = bytes | bytearray | memoryview | SliceLike

VersionRange = tuple[int, int] | None


class _Unset:
    __slots__ = ()

    def __repr__(self) -> str:
        return "UNSET"


# Default argument of array and struct fields: "use a fresh default value".
UNSET: Any = _Unset()


def in_range(version: int, versions: VersionRange) -> bool:
    return versions is not None and versions[0] <= version <= versions[1]


class FieldSpec(NamedTuple):
    """One field of a generated struct.

    type is the spec's type: "int32", "string", "records", "uuid", ..., "[]int32",
    "[]SomeStruct" or "SomeStruct" (struct names are nested classes of the message).
    Version ranges are inclusive (lo, hi); an open range has hi = 32767.
    """

    name: str
    type: str
    versions: VersionRange
    nullable_versions: VersionRange = None
    tagged_versions: VersionRange = None
    tag: int | None = None

    def present(self, version: int) -> bool:
        return in_range(version, self.versions)

    def nullable(self, version: int) -> bool:
        return in_range(version, self.nullable_versions)

    def tagged(self, version: int) -> bool:
        return in_range(version, self.tagged_versions)


class Struct:
    """Base of generated message and struct classes: field-wise ==, and repr."""

    __slots__ = ()
    FIELDS: ClassVar[tuple[FieldSpec, ...]] = ()
    _values: ClassVar[Any] = staticmethod(lambda _: ())
    _default: ClassVar[Any] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        names = [f.name for f in cls.FIELDS]
        if names:
            cls._values = staticmethod(operator.attrgetter(*names))
        cls._default = None

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return bool(self._values(self) == self._values(other))

    def _is_default(self) -> bool:
        """True if every field holds its default (used to skip tagged fields)."""
        cls = type(self)
        if cls._default is None:
            cls._default = cls()
        return self == cls._default

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        args = ", ".join(f"{f.name}={_short(getattr(self, f.name))}" for f in self.FIELDS)
        return f"{type(self).__qualname__}({args})"


def _short(value: object) -> str:
    if isinstance(value, memoryview):
        return f"<memoryview of {value.nbytes} bytes>"
    return repr(value)
