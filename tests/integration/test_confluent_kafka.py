"""confluent-kafka (librdkafka 2.x) against a `kbroker serve` subprocess."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_CREATE_TIME,
    Consumer,
    Producer,
    TopicPartition,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def produce_all(bootstrap: str, topic: str, messages: list[dict], **conf: object) -> list:
    delivered: list = []
    errors: list = []

    def on_delivery(err, msg):  # type: ignore[no-untyped-def]
        (errors if err else delivered).append(err or msg)

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    for m in messages:
        p.produce(topic, on_delivery=on_delivery, **m)
    assert p.flush(30) == 0
    assert not errors, errors
    return delivered


def consume_partition(bootstrap: str, topic: str, partition: int, count: int, **conf: object) -> list:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False, **conf})
    try:
        c.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            assert not m.error(), m.error()
            got.append(m)
        return got
    finally:
        c.close()


@pytest.mark.parametrize("codec", CODECS)
def test_codec_roundtrip_byte_exact(broker_process, codec: str) -> None:
    bs = broker_process.bootstrap_servers
    topic = f"ck-{codec}-{uuid.uuid4().hex[:8]}"
    base_ts = 1_700_000_000_000
    messages = [
        {
            "key": f"key-{i % 7}".encode(),
            "value": bytes([i % 256]) * (i * 13 % 300) + f"value-{i}".encode(),
            "headers": [("h1", f"x{i}".encode()), ("h2", None), ("h1", b"dup")],
            "timestamp": base_ts + i,
        }
        for i in range(200)
    ]
    originals = {m["value"]: m for m in messages}
    delivered = produce_all(bs, topic, messages, **{"compression.type": codec})
    by_partition: dict[int, list] = {}
    for msg in delivered:
        by_partition.setdefault(msg.partition(), []).append(msg)
    assert len(by_partition) > 1, "keyed records should spread over the 3 partitions"
    for partition, sent in by_partition.items():
        sent.sort(key=lambda m: m.offset())
        assert [m.offset() for m in sent] == list(range(len(sent)))
        got = consume_partition(bs, topic, partition, len(sent))
        expected = []
        for m in sent:
            orig = originals[m.value()]
            expected.append((m.offset(), orig["key"], orig["value"], orig["headers"], orig["timestamp"]))
        assert [
            (m.offset(), m.key(), m.value(), m.headers(), m.timestamp()[1]) for m in got
        ] == expected
        assert all(m.timestamp()[0] == TIMESTAMP_CREATE_TIME for m in got)


def test_read_committed_default_and_uncommitted(broker_process) -> None:
    bs = broker_process.bootstrap_servers
    topic = f"iso-{uuid.uuid4().hex[:8]}"
    produce_all(bs, topic, [{"value": b"v%d" % i, "partition": 0} for i in range(5)])
    for level in ("read_committed", "read_uncommitted"):
        got = consume_partition(bs, topic, 0, 5, **{"isolation.level": level})
        assert [m.value() for m in got] == [b"v%d" % i for i in range(5)]


def test_watermarks_and_offsets_for_times(broker_process) -> None:
    bs = broker_process.bootstrap_servers
    topic = f"lo-{uuid.uuid4().hex[:8]}"
    base_ts = 1_700_000_000_000
    produce_all(
        bs, topic,
        [{"value": b"v%d" % i, "partition": 0, "timestamp": base_ts + 1000 * i} for i in range(10)],
        **{"linger.ms": 0, "batch.num.messages": 1},
    )
    c = Consumer({"bootstrap.servers": bs, "group.id": "unused", "enable.auto.commit": False})
    try:
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 10)
        found = c.offsets_for_times([TopicPartition(topic, 0, base_ts + 4500)], timeout=10)
        assert found[0].offset == 5
        future = c.offsets_for_times([TopicPartition(topic, 0, base_ts + 10**9)], timeout=10)
        assert future[0].offset in (-1, 10)  # librdkafka maps "none" to the end
    finally:
        c.close()


def test_long_poll_wakes_on_append(broker_process) -> None:
    bs = broker_process.bootstrap_servers
    topic = f"lp-{uuid.uuid4().hex[:8]}"
    produce_all(bs, topic, [{"value": b"first", "partition": 0}])
    # A fetch wait far beyond the deadline below: the record can only arrive in time if the
    # parked Fetch wakes on the append (no timing assertion needed).
    c = Consumer({"bootstrap.servers": bs, "group.id": "unused", "fetch.wait.max.ms": 120000,
                  "socket.timeout.ms": 180000, "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 1)])
        c.poll(1.0)  # consumer is now parked in a long-poll Fetch at offset 1
        start = time.monotonic()
        produce_all(bs, topic, [{"value": b"second", "partition": 0}], **{"linger.ms": 0})
        m = None
        while time.monotonic() - start < 60:
            m = c.poll(0.1)
            if m is not None:
                break
        assert m is not None and m.value() == b"second", "the parked fetch did not wake on append"
    finally:
        c.close()


def test_produce_to_unknown_topic_without_auto_create(broker_factory) -> None:
    bp = broker_factory({"auto.create.topics.enable": "false"}).start()
    p = Producer({"bootstrap.servers": bp.bootstrap_servers, "message.timeout.ms": 3000})
    errors: list = []
    p.produce("does-not-exist", b"x", on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)
    assert errors and errors[0] is not None


def test_admin_list_offsets(broker_process) -> None:
    from confluent_kafka.admin import AdminClient, OffsetSpec

    bs = broker_process.bootstrap_servers
    topic = f"adm-lo-{uuid.uuid4().hex[:8]}"
    base = 1_700_000_000_000
    produce_all(bs, topic, [{"value": b"v", "partition": 0, "timestamp": base + 1000 * i} for i in range(5)],
                **{"linger.ms": 0, "batch.num.messages": 1})
    admin = AdminClient({"bootstrap.servers": bs})
    tp = TopicPartition(topic, 0)
    cases = [
        (OffsetSpec.earliest(), 0, -1),
        (OffsetSpec.latest(), 5, -1),
        (OffsetSpec.max_timestamp(), 4, base + 4000),
        (OffsetSpec.for_timestamp(base + 2500), 3, base + 3000),
    ]
    for spec, offset, timestamp in cases:
        result = admin.list_offsets({tp: spec}, request_timeout=10)[tp].result()
        assert (result.offset, result.timestamp) == (offset, timestamp), spec


def test_legacy_message_set_is_refused_as_an_old_version(broker_process) -> None:
    """librdkafka told the broker is 0.9.0 (no ApiVersions) sends a magic-0 message set
    in Produce v1-v2; a message without a key has its key length (-1) and then its
    value length, 0xff... for a tombstone, where a magic-2 batch keeps its
    transactional bit. Kafka never reads a legacy message as
    transactional; kbroker, which refuses magic 0/1, answers UNSUPPORTED_VERSION,
    not TRANSACTIONAL_ID_AUTHORIZATION_FAILED."""
    from confluent_kafka import KafkaError

    bs = broker_process.bootstrap_servers
    topic = f"ck-legacy-{uuid.uuid4().hex[:8]}"
    produce_all(bs, topic, [{"value": b"create the topic"}])
    errors: list = []
    p = Producer({"bootstrap.servers": bs, "api.version.request": False,
                  "broker.version.fallback": "0.9.0", "message.timeout.ms": 10000})
    p.produce(topic, value=None, partition=0,
              on_delivery=lambda err, msg: errors.append(err))
    assert p.flush(20) == 0
    assert [e.code() if e else None for e in errors] == [KafkaError.UNSUPPORTED_VERSION]
