"""Bounded fuzz: mutated frames of every implemented API; the broker answers or closes, and lives.

Valid frames of each API in the API table (the core data APIs with real
content at several versions, the others default-constructed at their lowest
and highest version) are mutated by hypothesis (byte flips, truncation, insertion,
length-prefix changes); each mutated frame is sent on a fresh connection. Whatever happens to that connection, a normal
client must still get an ApiVersions answer afterwards.

The default run sends 200 mutated frames; the long run (10,000, marked `slow`)
runs with `scripts/test -m slow tests/integration/test_fuzz.py`.
"""

from __future__ import annotations

import socket
import struct

import pytest
from batches import make_batch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kbroker.broker import Broker
from kbroker.protocol.messages import REQUESTS
from kbroker.protocol.messages.api_versions import ApiVersionsRequest
from kbroker.protocol.messages.fetch import FetchRequest
from kbroker.protocol.messages.list_offsets import ListOffsetsRequest
from kbroker.protocol.messages.metadata import MetadataRequest
from kbroker.protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest
from kbroker.protocol.messages.produce import ProduceRequest
from kbroker.server.api_table import API_TABLE

from .wire import WireClient, encode_request

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def seed_frames() -> list[bytes]:
    batch = make_batch([b"a", b"bb"])
    produce = ProduceRequest(acks=1, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
        name="fuzz", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])])
    fetch = FetchRequest(max_wait_ms=10, min_bytes=1, topics=[FetchRequest.FetchTopic(
        topic="fuzz", partitions=[FetchRequest.FetchPartition(partition=0, partition_max_bytes=1 << 16)])])
    metadata = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="fuzz")])
    list_offsets = ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(
        name="fuzz", partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])])
    ofle = OffsetForLeaderEpochRequest(topics=[OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
        topic="fuzz", partitions=[OffsetForLeaderEpochRequest.OffsetForLeaderPartition(partition=0)])])
    api_versions = ApiVersionsRequest(client_software_name="fuzz", client_software_version="1")
    seeds = []
    # Every other API in the table, default-constructed, at its lowest and highest version.
    covered = {0, 1, 2, 3, 18, 23}
    for key, spec in sorted(API_TABLE.items()):
        if key in covered:
            continue
        for v in {spec.min_version, spec.max_version}:
            seeds.append(encode_request(REQUESTS[key](), v, 42))
    for req, versions in [
        (produce, (3, 8, 9, 11)), (fetch, (4, 11, 12, 13, 17)), (metadata, (0, 4, 9, 12)),
        (list_offsets, (1, 5, 7)), (ofle, (2, 4)), (api_versions, (0, 3, 4)),
    ]:
        for v in versions:
            seeds.append(encode_request(req, v, 42))
    return seeds


SEEDS = seed_frames()


@st.composite
def mutated_frame(draw: st.DrawFn) -> bytes:
    frame = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "truncate", "insert", "resize"]))
        if kind == "flip" and len(frame) > 4:
            i = draw(st.integers(4, len(frame) - 1))
            frame[i] = draw(st.integers(0, 255))
        elif kind == "truncate" and len(frame) > 4:
            del frame[draw(st.integers(4, len(frame) - 1)):]
            frame[0:4] = struct.pack(">i", len(frame) - 4)
        elif kind == "insert":
            i = draw(st.integers(4, len(frame)))
            frame[i:i] = draw(st.binary(min_size=1, max_size=8))
            frame[0:4] = struct.pack(">i", len(frame) - 4)
        elif kind == "resize":
            frame[0:4] = struct.pack(">i", draw(st.integers(-5, len(frame) + 5)))
    return bytes(frame)


@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("fuzz")
    with Broker({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp)}) as b:
        yield b


def survives(broker: Broker, frame: bytes) -> None:
    """Send one frame on a fresh connection; a normal client is answered afterwards."""
    bs = broker.bootstrap_servers
    host, port = bs.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=2) as s:
        s.sendall(frame)
        s.shutdown(socket.SHUT_WR)
        try:
            while s.recv(65536):
                pass
        except (TimeoutError, ConnectionResetError):
            pass
    with WireClient(bs, timeout=5) as c:
        assert c.call(ApiVersionsRequest(), 0).error_code == 0


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(frame=mutated_frame())
def test_mutated_frames_never_break_the_broker(fuzz_broker: Broker, frame: bytes) -> None:
    survives(fuzz_broker, frame)


@pytest.mark.slow
@settings(max_examples=10_000, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(frame=mutated_frame())
def test_mutated_frames_never_break_the_broker_long(fuzz_broker: Broker, frame: bytes) -> None:
    survives(fuzz_broker, frame)
