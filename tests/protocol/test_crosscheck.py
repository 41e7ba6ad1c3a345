"""Cross-check the generated codecs against an independent implementation.

kafka-python 3 carries its own JSON-spec-driven codecs. For every message both
define, at every version both support: encode a random instance with ours, decode
and re-encode it with kafka-python, and require the same bytes.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbroker.protocol import messages
from kbroker.protocol.codec import Writer

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


@pytest.mark.parametrize(("ours", "theirs", "version"), CASES)
@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(data=st.data())
def test_kafka_python_reads_what_we_write(
    ours: type, theirs: Any, version: int, data: st.DataObject
) -> None:
    msg = data.draw(instances(ours, ours, version))
    w = Writer()
    msg.encode(w, version)
    encoded = w.to_bytes()
    decoded = theirs.decode(encoded, version=version)
    assert bytes(decoded.encode()) == encoded


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
