"""Header versions per API and version, and the header codecs."""

from __future__ import annotations

import pytest

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.api_key import (
    FLEXIBLE_VERSIONS,
    VALID_VERSIONS,
    ApiKey,
    request_header_version,
    response_header_version,
)
from kbroker.protocol.codec import Reader, Writer
from kbroker.protocol.messages import REQUESTS, RESPONSES
from kbroker.protocol.messages.request_header import RequestHeader
from kbroker.protocol.messages.response_header import ResponseHeader


@pytest.mark.parametrize(
    ("key", "version", "req", "resp"),
    [
        (ApiKey.API_VERSIONS, 0, 1, 0),
        (ApiKey.API_VERSIONS, 2, 1, 0),
        (ApiKey.API_VERSIONS, 3, 2, 0),  # KIP-511: response header stays v0
        (ApiKey.API_VERSIONS, 4, 2, 0),
        (ApiKey.PRODUCE, 8, 1, 0),
        (ApiKey.PRODUCE, 9, 2, 1),
        (ApiKey.FETCH, 11, 1, 0),
        (ApiKey.FETCH, 12, 2, 1),
        (ApiKey.METADATA, 8, 1, 0),
        (ApiKey.METADATA, 9, 2, 1),
        (ApiKey.CONTROLLED_SHUTDOWN, 0, 0, 0),
        (ApiKey.CONTROLLED_SHUTDOWN, 1, 1, 0),
        (ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, 2, 1),
        (ApiKey.SASL_HANDSHAKE, 1, 1, 0),  # never flexible
    ],
)
def test_header_versions(key: int, version: int, req: int, resp: int) -> None:
    assert request_header_version(key, version) == req
    assert response_header_version(key, version) == resp


def test_api_key_table() -> None:
    assert ApiKey.PRODUCE == 0 and ApiKey.FETCH == 1 and ApiKey.LIST_OFFSETS == 2
    assert ApiKey.METADATA == 3 and ApiKey.API_VERSIONS == 18
    assert ApiKey.DESCRIBE_TOPIC_PARTITIONS == 75
    assert VALID_VERSIONS[ApiKey.PRODUCE] == (0, 13)  # 3.9: 0-11, 4.x: 3-13
    assert VALID_VERSIONS[ApiKey.FETCH] == (0, 18)  # 3.9: 0-17, 4.x: 4-18
    assert FLEXIBLE_VERSIONS[ApiKey.PRODUCE] == 9
    assert FLEXIBLE_VERSIONS[ApiKey.SASL_HANDSHAKE] is None
    for key in ApiKey:
        assert REQUESTS[key].VALID_VERSIONS == VALID_VERSIONS[key]  # type: ignore[attr-defined]
        assert RESPONSES[key].FLEXIBLE_VERSION == FLEXIBLE_VERSIONS[key]  # type: ignore[attr-defined]
        assert REQUESTS[key].API_KEY == key  # type: ignore[attr-defined]


def test_error_codes() -> None:
    assert ErrorCode.UNKNOWN_SERVER_ERROR == -1 and ErrorCode.NONE == 0
    assert ErrorCode.OFFSET_OUT_OF_RANGE == 1 and ErrorCode.CORRUPT_MESSAGE == 2
    assert ErrorCode.UNSUPPORTED_VERSION == 35
    assert ErrorCode(42) is ErrorCode.INVALID_REQUEST
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER.message.startswith("For requests intended only")


def test_request_header_v2_keeps_classic_client_id() -> None:
    h = RequestHeader(
        request_api_key=18, request_api_version=3, correlation_id=1, client_id="rdkafka"
    )
    w = Writer()
    h.encode(w, 2)
    # int16 length string (not compact), then an empty tagged-fields block
    assert w.to_bytes() == bytes.fromhex("00120003000000010007") + b"rdkafka" + b"\x00"
    w1 = Writer()
    h.encode(w1, 1)
    assert w1.to_bytes() == w.to_bytes()[:-1]
    assert RequestHeader.decode(Reader(w.to_bytes()), 2) == h


def test_request_header_null_client_id() -> None:
    data = bytes.fromhex("000000090000002affff00")
    h = RequestHeader.decode(Reader(data), 2)
    assert (h.request_api_key, h.request_api_version, h.correlation_id) == (0, 9, 42)
    assert h.client_id is None


def test_response_header() -> None:
    w = Writer()
    ResponseHeader(correlation_id=5).encode(w, 0)
    assert w.to_bytes() == b"\x00\x00\x00\x05"
    w = Writer()
    ResponseHeader(correlation_id=5).encode(w, 1)
    assert w.to_bytes() == b"\x00\x00\x00\x05\x00"
