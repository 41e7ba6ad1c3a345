"""Cross-check the generated codecs against an independent implementation.

kafka-python 3 carries its own JSON-spec-driven codecs (3.0.x vendors Kafka 4.3's
schemas). For every message both define, at every version both support: encode a
random instance with ours, decode and re-encode it with kafka-python, and require the
same bytes; for requests, decode kafka-python's bytes with ours too (what a broker
does). Every version kafka-python has must be one of ours, the Kafka 4 versions
included (Metadata 13, Fetch 18, Produce 12-13, OffsetCommit/OffsetFetch 10, ...).
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbroker.protocol import messages
from kbroker.protocol.codec import Reader, Writer

from .test_roundtrip import instances

kafka_protocol = pytest.importorskip("kafka.protocol")
from kafka.protocol.api_message import ApiMessage  # noqa: E402


def _kafka_python_messages() -> dict[str, Any]:
    for info in pkgutil.walk_packages(kafka_protocol.__path__, "kafka.protocol."):
        if ".old" not in info.name and "generate" not in info.name:
            importlib.import_module(info.name)
    found: dict[str, Any] = {}
    todo = list(ApiMessage.__subclasses__())
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if "_v" not in cls.__name__:
            found[cls.__name__] = cls
    return found


# kafka-python overrides these on purpose: it decodes an ApiVersionsResponse with an
# error as v0 (client-side KIP-511 handling), and rewrites DeleteTopicsRequest fields.
QUIRKS = {"ApiVersionsResponse", "DeleteTopicsRequest"}
THEIRS = {k: v for k, v in _kafka_python_messages().items() if k not in QUIRKS}
CASES = [
    pytest.param(getattr(messages, name), THEIRS[name], v, id=f"{name}-v{v}")
    for name in sorted(set(messages.__all__) & set(THEIRS))
    for v in range(
        max(getattr(messages, name).VALID_VERSIONS[0], THEIRS[name].min_version),
        min(getattr(messages, name).VALID_VERSIONS[1], THEIRS[name].max_version) + 1,
    )
]


def test_enough_overlap() -> None:
    assert len(CASES) > 400


def test_every_kafka_python_version_is_one_of_ours() -> None:
    for name in sorted(set(messages.__all__) & set(THEIRS)):
        lo, hi = getattr(messages, name).VALID_VERSIONS
        assert lo <= THEIRS[name].min_version and THEIRS[name].max_version <= hi, name
    covered = {(p.values[0].__name__, p.values[2]) for p in CASES}
    for case in [("MetadataRequest", 13), ("MetadataResponse", 13), ("FetchRequest", 18),
                 ("ProduceRequest", 13), ("ProduceResponse", 12), ("OffsetCommitRequest", 10),
                 ("OffsetFetchResponse", 10), ("DescribeGroupsResponse", 6),
                 ("DescribeClusterRequest", 2), ("ListOffsetsRequest", 11),
                 ("ListConfigResourcesRequest", 1)]:
        assert case in covered, case


REQUEST_CASES = [p for p in CASES if p.values[0].__name__.endswith("Request")]


@pytest.mark.parametrize(("ours", "theirs", "version"), REQUEST_CASES)
@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(data=st.data())
def test_we_read_what_kafka_python_writes(
    ours: type, theirs: Any, version: int, data: st.DataObject
) -> None:
    msg, _, written = _through_kafka_python(ours, theirs, version, data)
    r = Reader(written)
    assert ours.decode(r, version) == msg
    assert r.remaining() == 0


@pytest.mark.parametrize(("ours", "theirs", "version"), CASES)
@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(data=st.data())
def test_kafka_python_reads_what_we_write(
    ours: type, theirs: Any, version: int, data: st.DataObject
) -> None:
    _, encoded, rewritten = _through_kafka_python(ours, theirs, version, data)
    assert rewritten == encoded


def _through_kafka_python(ours: type, theirs: Any, version: int, data: st.DataObject) -> tuple[Any, bytes, bytes]:
    """A random message of ours, our bytes, and kafka-python's bytes for what it read."""
    msg = data.draw(instances(ours, ours, version))
    w = Writer()
    msg.encode(w, version)
    encoded = w.to_bytes()
    return msg, encoded, bytes(theirs.decode(encoded, version=version).encode())


@pytest.mark.parametrize("version", range(5))
def test_api_versions_response_against_kafka_python(version: int) -> None:
    from kafka.protocol.metadata.api_versions import ApiVersionsResponse as Theirs

    from kbroker.protocol.messages.api_versions import ApiVersionsResponse

    resp = ApiVersionsResponse(
        api_keys=[
            ApiVersionsResponse.ApiVersion(api_key=k, min_version=0, max_version=m)
            for k, m in [(0, 9), (1, 12), (3, 12), (18, 4)]
        ],
        throttle_time_ms=7,
        finalized_features_epoch=3,
        supported_features=[
            ApiVersionsResponse.SupportedFeatureKey(name="f", min_version=1, max_version=2)
        ],
    )
    w = Writer()
    resp.encode(w, version)
    decoded = Theirs.decode(w.to_bytes(), version=version)
    assert [(k.api_key, k.max_version) for k in decoded.api_keys] == [
        (0, 9),
        (1, 12),
        (3, 12),
        (18, 4),
    ]
    assert bytes(decoded.encode()) == w.to_bytes()
    # UNSUPPORTED_VERSION: a v0 body, which clients parse whatever version they sent
    err = ApiVersionsResponse(
        error_code=35,
        api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=3)],
    )
    w = Writer()
    err.encode(w, 0)
    decoded = Theirs.decode(w.to_bytes(), version=version)
    assert decoded.error_code == 35 and decoded.api_keys[0].max_version == 3
