"""The protocol's per-request work: request frames as clients send them, and the
Produce and Fetch codecs (generated, kbroker/protocol/messages) through the
connection's own calls (kbroker/server/request_frame.py: decode_request for each
frame, encode_response for each answer)."""

from __future__ import annotations

import os
import struct
import uuid
from pathlib import Path
from typing import Any

import pytest
from micro_inputs import CAPTURES, payload, timed

from kbroker.protocol.api_key import request_header_version
from kbroker.protocol.codec import Writer
from kbroker.protocol.messages.fetch import FetchRequest, FetchResponse
from kbroker.protocol.messages.produce import ProduceRequest, ProduceResponse
from kbroker.protocol.messages.request_header import RequestHeader
from kbroker.records.file_slice import FileSlice, SegmentFile
from kbroker.server.request_frame import decode_request, encode_response

_PREFIX = struct.Struct(">i")
_HEAD = struct.Struct(">hhi")


def decode_frame(frame: bytes | bytearray) -> tuple[Any, Any]:
    """A request frame (after its size prefix) as Connection._handle_frame decodes it."""
    api_key, version, _ = _HEAD.unpack_from(frame, 0)
    return decode_request(frame, api_key, version)


def request_frame(request: Any, api_key: int, version: int) -> bytes:
    w = Writer()
    RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=7,
                  client_id="bench").encode(w, request_header_version(api_key, version))
    request.encode(w, version)
    return w.to_bytes()


# ---- request frames captured from real clients (Produce and Fetch) ----

_FRAMES = sorted(p for p in CAPTURES.glob("*.bin") if "-produce-" in p.name or "-fetch-" in p.name)


@pytest.mark.parametrize("path", _FRAMES, ids=[p.stem for p in _FRAMES])
def test_decode_captured_frame(benchmark, path: Path) -> None:  # type: ignore[no-untyped-def]
    frame = path.read_bytes()
    benchmark.group = "frame decode (captured)"
    header, body = timed(benchmark, decode_frame, frame)
    assert header.request_api_key == _HEAD.unpack_from(frame)[0]


# ---- Produce ----

PRODUCE_VERSION = 9  # librdkafka 2.x and kafka-python send v9 (flexible)
_PRODUCE_SHAPES = {  # name -> (partitions, batches per partition, records, value bytes)
    "1p-1MiB": (1, 1, 1024, 1024),
    "64p-16KiB": (64, 1, 16, 1024),
}


def produce_request(partitions: int, batches: int, records: int, size: int) -> ProduceRequest:
    data = payload(batches, records, size)
    return ProduceRequest(acks=1, timeout_ms=30000, topic_data=[ProduceRequest.TopicProduceData(
        name="bench", partition_data=[ProduceRequest.PartitionProduceData(index=i, records=data)
                                      for i in range(partitions)])])


@pytest.mark.parametrize("shape", list(_PRODUCE_SHAPES))
def test_produce_request_decode(benchmark, shape: str) -> None:  # type: ignore[no-untyped-def]
    partitions, batches, records, size = _PRODUCE_SHAPES[shape]
    frame = bytearray(request_frame(produce_request(*_PRODUCE_SHAPES[shape]), 0, PRODUCE_VERSION))
    benchmark.group = "produce codec"
    benchmark.extra_info["bytes"] = len(frame)
    _, request = timed(benchmark, decode_frame, frame)
    parts = request.topic_data[0].partition_data
    assert len(parts) == partitions and isinstance(parts[0].records, memoryview)  # never copied


@pytest.mark.parametrize("partitions", [1, 64])
def test_produce_response_encode(benchmark, partitions: int) -> None:  # type: ignore[no-untyped-def]
    response = ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(
        name="bench", partition_responses=[
            ProduceResponse.PartitionProduceResponse(index=i, base_offset=1_000_000 + i)
            for i in range(partitions)])])
    benchmark.group = "produce codec"
    parts = timed(benchmark, encode_response, response, 0, PRODUCE_VERSION, 7)
    assert _PREFIX.unpack_from(parts[0])[0] == sum(len(p) for p in parts) - 4


# ---- Fetch ----

FETCH_VERSION = 12  # librdkafka 2.x with topic names (v13+ use topic ids)


def fetch_request(partitions: int) -> FetchRequest:
    return FetchRequest(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=52428800,
                        isolation_level=0, session_id=0, session_epoch=-1, topics=[
                            FetchRequest.FetchTopic(topic="bench", partitions=[
                                FetchRequest.FetchPartition(partition=i, fetch_offset=1_000_000 * i,
                                                            partition_max_bytes=1048576)
                                for i in range(partitions)])])


@pytest.mark.parametrize("partitions", [1, 64, 1000])
def test_fetch_request_decode(benchmark, partitions: int) -> None:  # type: ignore[no-untyped-def]
    frame = bytearray(request_frame(fetch_request(partitions), 1, FETCH_VERSION))
    benchmark.group = "fetch codec"
    _, request = timed(benchmark, decode_frame, frame)
    assert len(request.topics[0].partitions) == partitions


@pytest.fixture(scope="module")
def segment_file(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    path = tmp_path_factory.mktemp("segment") / "00000000000000000000.log"
    path.write_bytes(payload(16, 64, 1024))
    file = SegmentFile(os.open(path, os.O_RDONLY))
    yield file
    del file


@pytest.mark.parametrize("partitions", [1, 64, 1000])
def test_fetch_response_encode(benchmark, partitions: int, segment_file: SegmentFile) -> None:  # type: ignore[no-untyped-def]
    # Each partition's records are a file slice (sendfile), as Log.read returns them.
    response = FetchResponse(session_id=0, responses=[FetchResponse.FetchableTopicResponse(
        topic="bench", topic_id=uuid.UUID(int=1), partitions=[
            FetchResponse.PartitionData(partition_index=i, high_watermark=10_000_000,
                                        last_stable_offset=10_000_000, log_start_offset=0,
                                        aborted_transactions=[],
                                        records=FileSlice(segment_file, 0, 65536))
            for i in range(partitions)])])
    benchmark.group = "fetch codec"
    parts = timed(benchmark, encode_response, response, 1, FETCH_VERSION, 7)
    assert sum(isinstance(p, FileSlice) for p in parts) == partitions
