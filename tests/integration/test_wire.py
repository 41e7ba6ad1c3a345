"""The server at the byte level, over a raw socket: ordering, acks=0, bad input, API details.

Uses the embedded broker (`kbroker_broker`); requests are encoded with the
generated codecs and sent as a client would send them.
"""

from __future__ import annotations

import os
import socket
import struct
import time
import uuid

import pytest
from batches import Rec, make_batch

from kbroker.broker import Broker
from kbroker.common.error_code import ErrorCode
from kbroker.config import BrokerConfig, ConfigError
from kbroker.protocol.codec import Reader
from kbroker.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kbroker.protocol.messages.fetch import FetchRequest
from kbroker.protocol.messages.list_offsets import ListOffsetsRequest
from kbroker.protocol.messages.metadata import MetadataRequest
from kbroker.protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest
from kbroker.protocol.messages.produce import ProduceRequest
from kbroker.protocol.messages.response_header import ResponseHeader
from kbroker.server.api_table import API_TABLE
from kbroker.storage.partition_metadata import read_partition_metadata

from .wire import WireClient, encode_request, wait_until_ready

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

MR = MetadataRequest.MetadataRequestTopic
FT = FetchRequest.FetchTopic
FP = FetchRequest.FetchPartition


@pytest.fixture
def kbroker_config() -> dict[str, str]:
    return {"num.partitions": "2", "message.max.bytes": "20000"}


@pytest.fixture
def client(kbroker_broker: Broker):
    with WireClient(kbroker_broker.bootstrap_servers) as c:
        yield c


def create_topic(c: WireClient, name: str) -> uuid.UUID:
    resp = c.call(MetadataRequest(topics=[MR(name=name)], allow_auto_topic_creation=True), 12)
    assert resp.topics[0].error_code == 0
    return resp.topics[0].topic_id


def produce_request(topic: str, partition: int, records: bytes, acks: int = 1) -> ProduceRequest:
    return ProduceRequest(
        acks=acks,
        timeout_ms=5000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=topic,
                partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=records)],
            )
        ],
    )


def produce(c: WireClient, topic: str, partition: int, records: bytes, version: int = 9):
    resp = c.call(produce_request(topic, partition, records), version)
    return resp.responses[0].partition_responses[0]


def fetch_request(topic: str, partitions: dict[int, int], **kw: object) -> FetchRequest:
    return FetchRequest(
        max_wait_ms=int(kw.pop("max_wait_ms", 0)),  # type: ignore[call-overload]
        min_bytes=int(kw.pop("min_bytes", 1)),  # type: ignore[call-overload]
        topics=[
            FT(topic=topic, partitions=[
                FP(partition=p, fetch_offset=o, partition_max_bytes=int(kw.get("pmax", 1 << 20)))  # type: ignore[call-overload]
                for p, o in partitions.items()
            ])
        ],
        **{k: v for k, v in kw.items() if k != "pmax"},
    )


def latest_offset(c: WireClient, topic: str, partition: int, ts: int = -1, version: int = 7):
    req = ListOffsetsRequest(
        replica_id=-1,
        topics=[ListOffsetsRequest.ListOffsetsTopic(
            name=topic, partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=partition, timestamp=ts)]
        )],
    )
    return c.call(req, version).topics[0].partitions[0]


# -- ordering ---------------------------------------------------------------------


def test_pipelined_requests_answer_in_order(client: WireClient) -> None:
    topic = "pipeline"
    create_topic(client, topic)
    # A long-poll Fetch first (nothing to read: it parks ~300 ms), then 4 instant requests.
    frames = [encode_request(fetch_request(topic, {0: 0}, max_wait_ms=300), 12, 100)]
    frames += [encode_request(ApiVersionsRequest(), 0, 101 + i) for i in range(4)]
    client.send_raw(b"".join(frames))
    got = [client.recv(1, 12)[0]] + [client.recv(18, 0)[0] for _ in range(4)]
    assert got == [100, 101, 102, 103, 104]


def test_acks_zero_gets_no_response(client: WireClient) -> None:
    topic = "acks0"
    create_topic(client, topic)
    client.send(produce_request(topic, 0, make_batch([b"a", b"b"]), acks=0), 9, correlation_id=7)
    client.send(ApiVersionsRequest(), 0, correlation_id=8)
    cid, resp = client.recv(18, 0)
    assert cid == 8 and resp.error_code == 0
    assert latest_offset(client, topic, 0).offset == 2


def test_failed_acks_zero_closes_after_earlier_responses(kbroker_broker: Broker, client: WireClient) -> None:
    frames = encode_request(ApiVersionsRequest(), 0, 1)
    frames += encode_request(produce_request("no-such-topic", 0, make_batch([b"a"]), acks=0), 9, 2)
    frames += encode_request(ApiVersionsRequest(), 0, 3)
    client.send_raw(frames)
    assert client.recv(18, 0)[0] == 1
    assert_closed_and_broker_alive(client, kbroker_broker)


# -- ApiVersions ------------------------------------------------------------------


def test_api_versions_advertises_only_implemented_apis(client: WireClient) -> None:
    resp = client.call(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
    ranges = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert ranges == {key: (s.min_version, s.max_version) for key, s in API_TABLE.items()}
    core = {0: (0, 11), 1: (4, 17), 2: (1, 7), 3: (0, 13), 18: (0, 5), 23: (2, 4)}
    assert {k: ranges[k] for k in core} == core


def test_api_versions_v3_response_header_is_v0(client: WireClient) -> None:
    cid = client.send(ApiVersionsRequest(client_software_name="kcat", client_software_version="1.7.1"), 3)
    frame = client.recv_frame()
    r = Reader(frame)
    assert ResponseHeader.decode(r, 0).correlation_id == cid
    ApiVersionsResponse.decode(r, 3)
    assert r.remaining() == 0, "a tagged-field byte after the correlation id breaks librdkafka"


def test_api_versions_too_new_gets_error_35_with_v0_body(client: WireClient) -> None:
    frame = struct.pack(">hhih", 18, 99, 5, 1) + b"x" + b"\xff garbage body"
    client.send_raw(struct.pack(">i", len(frame)) + frame)
    r = Reader(client.recv_frame())
    assert ResponseHeader.decode(r, 0).correlation_id == 5
    resp = ApiVersionsResponse.decode(r, 0)
    assert resp.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == [(18, 0, 5)]


def test_api_versions_v3_invalid_software_name(client: WireClient) -> None:
    resp = client.call(ApiVersionsRequest(client_software_name="bad name!", client_software_version="1"), 3)
    assert resp.error_code == ErrorCode.INVALID_REQUEST


# -- bad input ----------------------------------------------------------------------


def assert_closed_and_broker_alive(c: WireClient, broker: Broker) -> None:
    assert c.is_closed_by_peer(), "the broker should close this connection"
    wait_until_ready(broker.bootstrap_servers, timeout=5)


@pytest.mark.parametrize(
    "payload",
    [
        b"\x00\x00\x00\x10" + os.urandom(16),  # garbage header
        struct.pack(">i", -1) + b"abcd",  # negative size
        struct.pack(">i", 2**31 - 1),  # huge size: closed before buffering anything
        struct.pack(">i", 104857601),  # just above socket.request.max.bytes
        struct.pack(">i", 3) + b"\x00\x03\x00",  # frame too short for a header
        struct.pack(">ihhi", 8, 999, 0, 1),  # unknown API key
        struct.pack(">ihhih", 10, 3, 13, 1, -1),  # Metadata v13: unsupported
        struct.pack(">ihhih", 10, 0, 12, 1, -1),  # Produce v12: unsupported
        struct.pack(">ihhih", 10, 1, 3, 1, -1),  # Fetch v3: below our minimum
        struct.pack(">ihhih", 10, 3, 1, 1, -1),  # Metadata v1 with the body cut off
    ],
    ids=["garbage", "negative", "huge", "over-max", "short", "unknown-key", "metadata-v13",
         "produce-v12", "fetch-v3", "truncated-body"],
)
def test_bad_input_closes_connection(kbroker_broker: Broker, client: WireClient, payload: bytes) -> None:
    client.send_raw(payload)
    assert_closed_and_broker_alive(client, kbroker_broker)


def test_truncated_frame_then_disconnect(kbroker_broker: Broker) -> None:
    with WireClient(kbroker_broker.bootstrap_servers) as c:
        c.send_raw(struct.pack(">i", 1000) + b"\x00\x12\x00\x00")
    wait_until_ready(kbroker_broker.bootstrap_servers, timeout=5)


def test_bad_crc_is_corrupt_message_and_nothing_stored(client: WireClient) -> None:
    topic = "badcrc"
    create_topic(client, topic)
    batch = bytearray(make_batch([b"one", b"two"]))
    batch[-1] ^= 0xFF
    p = produce(client, topic, 0, bytes(batch))
    assert p.error_code == ErrorCode.CORRUPT_MESSAGE
    assert latest_offset(client, topic, 0).offset == 0
    ok = produce(client, topic, 0, make_batch([b"fine"]))
    assert (ok.error_code, ok.base_offset) == (0, 0)


def test_record_larger_than_message_max_bytes(client: WireClient) -> None:
    topic = "toolarge"
    create_topic(client, topic)
    p = produce(client, topic, 0, make_batch([b"x" * 30000]))
    assert p.error_code == ErrorCode.MESSAGE_TOO_LARGE
    assert latest_offset(client, topic, 0).offset == 0


def test_produce_to_unknown_topic_and_partition(client: WireClient) -> None:
    assert produce(client, "nope", 0, make_batch([b"x"])).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    create_topic(client, "two-parts")
    assert produce(client, "two-parts", 5, make_batch([b"x"])).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_invalid_topic_names(client: WireClient) -> None:
    names = ["bad name", "..", "a" * 250, "x/y"]
    resp = client.call(MetadataRequest(topics=[MR(name=n) for n in names]), 12)
    assert [t.error_code for t in resp.topics] == [ErrorCode.INVALID_TOPIC_EXCEPTION] * 4


# -- Metadata, Fetch, ListOffsets, OffsetForLeaderEpoch ------------------------------------


def test_metadata_topic_ids_match_partition_metadata(kbroker_broker: Broker, client: WireClient) -> None:
    topic_id = create_topic(client, "ids")
    assert topic_id.int != 0
    for partition in (0, 1):
        path = os.path.join(kbroker_broker.config.log_dirs[0], f"ids-{partition}")
        assert read_partition_metadata(path) == topic_id
    resp = client.call(MetadataRequest(topics=None), 1)
    assert "ids" in [t.name for t in resp.topics]
    v0 = client.call(MetadataRequest(topics=[]), 0)
    assert "ids" in [t.name for t in v0.topics]
    none = client.call(MetadataRequest(topics=[]), 1)
    assert none.topics == []
    assert resp.controller_id == 0 and resp.brokers[0].node_id == 0


def test_metadata_without_auto_create(client: WireClient) -> None:
    resp = client.call(MetadataRequest(topics=[MR(name="not-created")], allow_auto_topic_creation=False), 12)
    assert resp.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_fetch_by_topic_id_and_unknown_id(client: WireClient) -> None:
    topic_id = create_topic(client, "byid")
    produce(client, "byid", 0, make_batch([Rec(b"v", key=b"k")]))
    req = FetchRequest(max_wait_ms=0, min_bytes=1, topics=[
        FT(topic_id=topic_id, partitions=[FP(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)]),
        FT(topic_id=uuid.uuid4(), partitions=[FP(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)]),
    ])
    resp = client.call(req, 17)
    known, unknown = resp.responses
    assert known.topic_id == topic_id and known.partitions[0].error_code == 0
    assert known.partitions[0].high_watermark == 1 and len(known.partitions[0].records) > 61
    assert unknown.partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID


def test_fetch_offset_out_of_range(client: WireClient) -> None:
    create_topic(client, "oor")
    produce(client, "oor", 0, make_batch([b"a", b"b", b"c"]))
    p = client.call(fetch_request("oor", {0: 10}), 11).responses[0].partitions[0]
    assert p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert (p.log_start_offset, p.high_watermark) == (0, 3)


def test_fetch_returns_whole_batch_and_respects_max_bytes(client: WireClient) -> None:
    create_topic(client, "sizes")
    batch = make_batch([b"x" * 1000 for _ in range(5)])
    for p in (0, 1):
        produce(client, "sizes", p, batch)
    # Offset 2 lies inside the batch: the whole batch comes back, even past max_bytes.
    resp = client.call(fetch_request("sizes", {0: 2, 1: 0}, max_bytes=100, pmax=100), 12)
    first, second = resp.responses[0].partitions
    assert len(first.records) == len(batch)
    assert bytes(first.records)[12:16] == batch[12:16]  # same leader epoch 0, then the CRC-covered rest
    assert bytes(first.records)[17:] == batch[17:]
    assert len(second.records) == 0, "the response must stay within max_bytes after the first batch"


def test_parked_fetch_is_woken_by_an_append_in_the_same_read(client: WireClient) -> None:
    """A Fetch that finds nothing parks at once, not when its task first runs: a Produce
    read in the same loop turn (here: pipelined behind it) wakes it. Were the wake-up lost,
    the Fetch would wait its two minutes and the test time out."""
    topic = "same-turn"
    create_topic(client, topic)
    frames = [encode_request(fetch_request(topic, {0: 0}, max_wait_ms=120_000), 12, 200),
              encode_request(produce_request(topic, 0, make_batch([b"wake"])), 9, 201)]
    client.send_raw(b"".join(frames))
    correlation_id, fetched = client.recv(1, 12)
    assert correlation_id == 200
    assert len(fetched.responses[0].partitions[0].records) > 0
    assert client.recv(0, 9)[0] == 201


def test_read_committed_fetch(client: WireClient) -> None:
    create_topic(client, "committed")
    produce(client, "committed", 0, make_batch([b"a"]))
    p = client.call(fetch_request("committed", {0: 0}, isolation_level=1), 11).responses[0].partitions[0]
    assert p.error_code == 0 and p.last_stable_offset == 1 and p.aborted_transactions == []
    assert len(p.records) > 0


def test_long_poll_waits_for_min_bytes(client: WireClient, kbroker_broker: Broker) -> None:

    create_topic(client, "lpw")
    start = time.monotonic()
    p = client.call(fetch_request("lpw", {0: 0}, max_wait_ms=400, min_bytes=1), 12).responses[0].partitions[0]
    assert time.monotonic() - start >= 0.35  # a lower bound: only an early answer can fail it
    assert p.error_code == 0 and len(p.records) == 0


def test_list_offsets(client: WireClient) -> None:
    create_topic(client, "lo")
    base = 1_700_000_000_000
    for i in range(5):
        produce(client, "lo", 0, make_batch([b"v%d" % i], base_timestamp=base + 1000 * i))
    assert latest_offset(client, "lo", 0, -1).offset == 5
    assert latest_offset(client, "lo", 0, -2).offset == 0
    mx = latest_offset(client, "lo", 0, -3)
    assert (mx.offset, mx.timestamp) == (4, base + 4000)
    by_time = latest_offset(client, "lo", 0, base + 2500)
    assert (by_time.offset, by_time.timestamp) == (3, base + 3000)
    assert latest_offset(client, "lo", 0, base + 10**6).offset == -1
    assert latest_offset(client, "lo", 0, -1, version=1).offset == 5
    assert latest_offset(client, "nope", 0).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_offset_for_leader_epoch(client: WireClient) -> None:
    create_topic(client, "ofle")
    produce(client, "ofle", 0, make_batch([b"a", b"b"]))
    req = OffsetForLeaderEpochRequest(replica_id=-1, topics=[
        OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic="ofle", partitions=[
            OffsetForLeaderEpochRequest.OffsetForLeaderPartition(partition=0, current_leader_epoch=0, leader_epoch=0),
            OffsetForLeaderEpochRequest.OffsetForLeaderPartition(partition=1, current_leader_epoch=-1, leader_epoch=7),
        ])
    ])
    resp = client.call(req, 4)
    a, b = resp.topics[0].partitions
    assert (a.error_code, a.leader_epoch, a.end_offset) == (0, 0, 2)
    assert (b.error_code, b.end_offset) == (0, -1)


# -- connection limits -------------------------------------------------------------------


@pytest.mark.parametrize("kbroker_config", [{"connections.max.idle.ms": "300"}])
def test_idle_connection_is_closed(client: WireClient) -> None:
    client.call(ApiVersionsRequest(), 0)
    assert client.is_closed_by_peer(timeout=5)


@pytest.mark.parametrize("kbroker_config", [{"max.connections": "2"}])
def test_max_connections(kbroker_broker: Broker) -> None:
    bs = kbroker_broker.bootstrap_servers
    with WireClient(bs) as a, WireClient(bs) as b:
        a.call(ApiVersionsRequest(), 0)
        b.call(ApiVersionsRequest(), 0)
        with WireClient(bs) as c:
            assert c.is_closed_by_peer(timeout=5)
    wait_until_ready(bs, timeout=5)


def _served_from(bootstrap: str, source_ip: str) -> socket.socket | None:
    """A connection from source_ip that the broker answers (ApiVersions), or None when
    the broker closes it."""
    host, port = bootstrap.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=5, source_address=(source_ip, 0))
    try:
        s.sendall(encode_request(ApiVersionsRequest(), 0, 1))
        if s.recv(4):
            return s
    except (ConnectionResetError, BrokenPipeError):
        pass
    s.close()
    return None


@pytest.mark.parametrize("kbroker_config", [{
    "max.connections.per.ip": "2", "max.connections.per.ip.overrides": "127.0.0.2:3"}])
def test_max_connections_per_ip(kbroker_broker: Broker) -> None:
    bs = kbroker_broker.bootstrap_servers
    ones = [_served_from(bs, "127.0.0.1") for _ in range(3)]
    twos = [_served_from(bs, "127.0.0.2") for _ in range(4)]
    try:
        assert [s is not None for s in ones] == [True, True, False]
        assert [s is not None for s in twos] == [True, True, True, False]  # its override
        assert ones[0] is not None
        ones[0].close()  # a place for 127.0.0.1 again, once the broker saw the close
        deadline = time.monotonic() + 10
        while (again := _served_from(bs, "127.0.0.1")) is None:
            assert time.monotonic() < deadline, "the closed connection was never given back"
            time.sleep(0.05)
        again.close()
    finally:
        for s in ones[1:] + twos:
            if s is not None:
                s.close()


@pytest.mark.parametrize("props", [
    {"max.connections.per.ip": "0"},  # nobody could connect
    {"max.connections.per.ip.overrides": "127.0.0.1"},
    {"max.connections.per.ip.overrides": "host:-1"},
])
def test_max_connections_per_ip_refused(props: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="max.connections.per.ip"):
        BrokerConfig.from_props(props)


@pytest.mark.parametrize("version", [0, 2])
def test_produce_v0_to_v2_is_advertised_but_refused(client: WireClient, version: int) -> None:
    create_topic(client, "old")
    p = produce(client, "old", 0, make_batch([b"x"]), version=version)
    assert p.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert latest_offset(client, "old", 0).offset == 0


@pytest.mark.parametrize("version", [3, 7, 8, 9, 10, 11])
def test_produce_versions(client: WireClient, version: int) -> None:
    create_topic(client, "versions")
    before = latest_offset(client, "versions", 0).offset
    p = produce(client, "versions", 0, make_batch([b"x", b"y"]), version=version)
    assert (p.error_code, p.base_offset) == (0, before)
    if version >= 5:
        assert p.log_start_offset == 0
    if version >= 8:
        assert p.record_errors == [] and p.error_message is None


def test_handler_exception_answers_unknown_server_error(
    client: WireClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dataclasses

    def boom(ctx: object, request: object) -> None:
        raise RuntimeError("handler bug")

    monkeypatch.setitem(API_TABLE, 0, dataclasses.replace(API_TABLE[0], handler=boom))
    p = produce(client, "any", 0, make_batch([b"x"]))
    assert p.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert client.call(ApiVersionsRequest(), 0).error_code == 0  # the connection lives on


def test_handler_exception_without_error_shape_closes(
    kbroker_broker: Broker, client: WireClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dataclasses

    async def boom(ctx: object, request: object) -> None:
        raise RuntimeError("handler bug")

    monkeypatch.setitem(API_TABLE, 3, dataclasses.replace(API_TABLE[3], handler=boom, error_response=None))
    client.send(MetadataRequest(topics=None), 1)
    assert_closed_and_broker_alive(client, kbroker_broker)


@pytest.mark.parametrize("kbroker_config", [{"message.max.bytes": "2000000",
                                              "fetch.partition.response.max.records": "0"}])
def test_large_produce_and_fetch_through_a_slow_reader(client: WireClient, kbroker_broker: Broker) -> None:

    create_topic(client, "big")
    batches = [make_batch([os.urandom(900_000)]) for _ in range(8)]
    # One 7 MB Produce request of 8 batches, arriving in many recv chunks.
    records = b"".join(batches)
    assert produce(client, "big", 0, records).error_code == 0
    cid = client.send(fetch_request("big", {0: 0}, max_bytes=16 << 20, pmax=16 << 20), 12)
    # Not reading yet: the broker's socket buffer fills, sendfile hits EAGAIN and the writer
    # waits for the socket to become writable (the path under test), then resumes.
    deadline = time.monotonic() + 20
    while not any(c.writer._waiting for c in kbroker_broker.server.connections):
        assert time.monotonic() < deadline, "the response never filled the socket"
        time.sleep(0.01)
    got, resp = client.recv(1, 12)
    p = resp.responses[0].partitions[0]
    assert got == cid and p.error_code == 0 and p.high_watermark == 8
    data = bytes(p.records)
    assert len(data) == len(records)
    for i, batch in enumerate(batches):
        chunk = data[i * len(batch):(i + 1) * len(batch)]
        assert struct.unpack(">q", chunk[:8])[0] == i
        assert chunk[12:] == batch[12:]
