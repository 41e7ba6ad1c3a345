"""Decode request frames captured from real clients (tests/protocol/fixtures).

Each frame must decode completely with the generated codecs and re-encode to the
very same bytes; key fields are checked per capture.
"""

from __future__ import annotations

import struct
import uuid
from pathlib import Path
from typing import Any

import pytest

from kbroker.protocol.api_key import ApiKey, request_header_version
from kbroker.protocol.codec import Reader, Writer
from kbroker.protocol.messages import REQUESTS
from kbroker.protocol.messages.request_header import RequestHeader

FIXTURES = Path(__file__).resolve().parent / "fixtures"
FRAMES = sorted(FIXTURES.glob("*.bin"))
CAPTURE_TOPIC_ID = uuid.UUID("6b6b6b6b-0000-4000-8000-000000000001")


def decode_frame(data: bytes) -> tuple[RequestHeader, Any]:
    api_key, version = struct.unpack_from(">hh", data)
    r = Reader(data)
    header = RequestHeader.decode(r, request_header_version(api_key, version))
    body = REQUESTS[api_key].decode(r, version)  # type: ignore[attr-defined]
    assert r.remaining() == 0
    return header, body


def load(name: str) -> tuple[RequestHeader, Any]:
    return decode_frame((FIXTURES / name).read_bytes())


def test_fixture_set_is_complete() -> None:
    names = {p.name for p in FRAMES}
    for expected in [
        "confluent_kafka-api_versions-v3.bin",
        "kcat-api_versions-v3.bin",
        "aiokafka-api_versions-v0.bin",
        "kafka_python-produce-v9.bin",
        "confluent_kafka-produce-v10.bin",
        "kcat-fetch-v11.bin",
        "kafka_python-fetch-v12.bin",
        "confluent_kafka-fetch-v16.bin",
    ]:
        assert expected in names


@pytest.mark.parametrize("path", FRAMES, ids=[p.stem for p in FRAMES])
def test_frame_decodes_and_reencodes_identically(path: Path) -> None:
    data = path.read_bytes()
    client, api, version = path.stem.rsplit("-", 2)
    header, body = decode_frame(data)
    assert header.request_api_key == ApiKey[api.upper()]
    assert header.request_api_version == int(version.removeprefix("v"))
    w = Writer()
    header.encode(w, request_header_version(header.request_api_key, header.request_api_version))
    body.encode(w, header.request_api_version)
    assert w.to_bytes() == data


@pytest.mark.parametrize(
    ("name", "software", "software_version"),
    [
        ("confluent_kafka-api_versions-v3.bin", "confluent-kafka-python", "2.16.1-rdkafka-2.16.0"),
        ("kcat-api_versions-v3.bin", "librdkafka", "2.0.2"),
        ("kafka_python-api_versions-v4.bin", "kafka-python", "3.0.12"),
        ("aiokafka-api_versions-v0.bin", "", ""),  # v0 has no software fields
    ],
)
def test_api_versions(name: str, software: str, software_version: str) -> None:
    header, body = load(name)
    assert body.client_software_name == software
    assert body.client_software_version == software_version
    assert header.client_id


def test_request_header_v2_client_id_is_classic_string() -> None:
    header, _ = load("confluent_kafka-api_versions-v3.bin")
    assert header.client_id == "capture"  # read as int16-length string in header v2
    header, _ = load("kcat-api_versions-v3.bin")
    assert header.client_id == "rdkafka"


@pytest.mark.parametrize(
    ("name", "acks"),
    [
        ("confluent_kafka-produce-v9.bin", -1),
        ("confluent_kafka-produce-v10.bin", -1),
        ("kcat-produce-v7.bin", -1),
        ("kafka_python-produce-v9.bin", 1),
        ("aiokafka-produce-v7.bin", 1),
    ],
)
def test_produce(name: str, acks: int) -> None:
    _, body = load(name)
    assert body.acks == acks
    assert body.transactional_id is None
    assert body.timeout_ms > 0
    (topic,) = body.topic_data
    assert topic.name == "t"
    (partition,) = topic.partition_data
    assert partition.index == 0
    records = partition.records
    assert isinstance(records, memoryview)
    assert records[16] == 2  # record batch magic v2
    batch_length = struct.unpack_from(">i", records, 8)[0]
    assert batch_length + 12 == len(records)
    assert struct.unpack_from(">i", records, 57)[0] == 1  # one record


@pytest.mark.parametrize(
    ("name", "isolation_level", "by_topic_id"),
    [
        ("confluent_kafka-fetch-v12.bin", 1, False),
        ("confluent_kafka-fetch-v16.bin", 1, True),
        ("kcat-fetch-v11.bin", 1, False),
        ("kafka_python-fetch-v12.bin", 0, False),
        ("aiokafka-fetch-v11.bin", 0, False),
    ],
)
def test_fetch(name: str, isolation_level: int, by_topic_id: bool) -> None:
    _, body = load(name)
    assert body.isolation_level == isolation_level
    assert body.replica_id == -1 and body.replica_state.replica_id == -1
    assert body.max_wait_ms > 0 and body.max_bytes > 0
    (topic,) = body.topics
    if by_topic_id:
        assert topic.topic_id == CAPTURE_TOPIC_ID and topic.topic == ""
    else:
        assert topic.topic == "t"
    (partition,) = topic.partitions
    assert partition.partition == 0 and partition.fetch_offset == 0
    assert partition.partition_max_bytes > 0


def test_metadata() -> None:
    _, body = load("confluent_kafka-metadata-v12.bin")
    assert [t.name for t in body.topics] == ["t"]
    assert body.allow_auto_topic_creation is True
    _, body = load("kcat-metadata-v4.bin")
    assert body.topics == [] and body.allow_auto_topic_creation is False
    _, body = load("aiokafka-metadata-v5.bin")
    assert body.topics == []


def test_find_coordinator() -> None:
    _, body = load("confluent_kafka-find_coordinator-v2.bin")
    assert body.key == "g" and body.key_type == 0
