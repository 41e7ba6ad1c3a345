"""Every generated message round-trips at every valid version (hypothesis).

A random instance holds only fields present in the version (None only where the
field is nullable in that version); encode -> decode must give an equal object,
consume every byte, and re-encode to the same bytes.
"""

from __future__ import annotations

import functools
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbroker.protocol import messages
from kbroker.protocol.codec import Reader, Writer
from kbroker.protocol.messages import internal_records
from kbroker.protocol.messages.request_header import RequestHeader
from kbroker.protocol.messages.response_header import ResponseHeader
from kbroker.protocol.schema import FieldSpec, Struct

_PRIMITIVES = {
    "bool": st.booleans(),
    "int8": st.integers(-(2**7), 2**7 - 1),
    "int16": st.integers(-(2**15), 2**15 - 1),
    "uint16": st.integers(0, 2**16 - 1),
    "int32": st.integers(-(2**31), 2**31 - 1),
    "uint32": st.integers(0, 2**32 - 1),
    "int64": st.integers(-(2**63), 2**63 - 1),
    "float64": st.floats(allow_nan=False),
    "string": st.text(max_size=4),
    "bytes": st.binary(max_size=4),
    "records": st.binary(max_size=16),
    "uuid": st.integers(0, 2**128 - 1).map(lambda i: uuid.UUID(int=i)),
}


def _all_classes() -> list[type[Struct]]:
    seen: dict[str, type[Struct]] = {}
    for module in (messages, internal_records):
        for name in module.__all__:
            obj = getattr(module, name)
            if isinstance(obj, type) and issubclass(obj, Struct):
                seen[name] = obj
    return [seen[n] for n in sorted(seen)]


CASES = [
    pytest.param(cls, v, id=f"{cls.__name__}-v{v}")
    for cls in _all_classes()
    for v in range(cls.VALID_VERSIONS[0], cls.VALID_VERSIONS[1] + 1)  # type: ignore[attr-defined]
]


def _field_strategy(f: FieldSpec, top: type, version: int) -> st.SearchStrategy:
    etype = f.type[2:] if f.type.startswith("[]") else f.type
    if etype in _PRIMITIVES:
        elem = _PRIMITIVES[etype]
    else:
        elem = st.deferred(lambda: instances(getattr(top, etype), top, version))
    value = st.lists(elem, max_size=2) if f.type.startswith("[]") else elem
    if f.nullable(version):
        value = st.none() | value
    return value


@functools.cache
def instances(cls: type, top: type, version: int) -> st.SearchStrategy:
    kwargs = {f.name: _field_strategy(f, top, version) for f in cls.FIELDS if f.present(version)}
    return st.builds(cls, **kwargs)


def test_every_api_key_has_request_and_response() -> None:
    assert set(messages.REQUESTS) == set(messages.RESPONSES) == set(range(95))
    assert len(CASES) > 600


@pytest.mark.parametrize(("cls", "version"), CASES)
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(data=st.data())
def test_roundtrip(cls: type, version: int, data: st.DataObject) -> None:
    msg = data.draw(instances(cls, cls, version))
    w = Writer()
    msg.encode(w, version)
    encoded = w.to_bytes()
    assert len(w) == len(encoded)
    r = Reader(encoded)
    decoded = cls.decode(r, version)  # type: ignore[attr-defined]
    assert r.remaining() == 0
    assert decoded == msg
    w2 = Writer()
    decoded.encode(w2, version)
    assert w2.to_bytes() == encoded


def test_default_instances_roundtrip_at_every_version() -> None:
    for param in CASES:
        cls, version = param.values
        w = Writer()
        cls().encode(w, version)
        r = Reader(w.to_bytes())
        assert cls.decode(r, version) == cls(), (cls, version)
        assert r.remaining() == 0


def test_headers_are_generated() -> None:
    assert RequestHeader.VALID_VERSIONS == (0, 2)
    assert ResponseHeader.VALID_VERSIONS == (0, 1)


def test_field_names_do_not_shadow_struct_attributes() -> None:
    reserved = set(dir(Struct)) | {
        "API_KEY",
        "VALID_VERSIONS",
        "FLEXIBLE_VERSION",
        "decode",
        "encode",
    }
    for param in CASES:
        cls = param.values[0]
        todo = [cls]
        while todo:
            c = todo.pop()
            names = {f.name for f in c.FIELDS}
            assert not names & reserved, (c, names & reserved)
            todo += [
                getattr(cls, f.type.removeprefix("[]"))
                for f in c.FIELDS
                if hasattr(cls, f.type.removeprefix("[]"))
            ]
