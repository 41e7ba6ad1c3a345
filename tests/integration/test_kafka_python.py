"""kafka-python 3.x against a `kbroker serve` subprocess.

The codec matrix runs with enable_idempotence=False to test the plain
Produce/Fetch path; `test_default_producer_settings` runs kafka-python 3's
defaults (idempotence on, acks=all), which need InitProducerId.
"""

from __future__ import annotations

import uuid

import kafka.codec
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_produce_and_consume_with_assign(broker_process, codec: str | None) -> None:
    if codec == "snappy" and not kafka.codec.has_snappy():
        pytest.skip("kafka-python needs python-snappy for snappy, which is not installed")
    bs = broker_process.bootstrap_servers
    topic = f"kp-{codec}-{uuid.uuid4().hex[:8]}"
    p = KafkaProducer(bootstrap_servers=bs, enable_idempotence=False, acks="all",
                      compression_type=codec, linger_ms=5)
    try:
        futures = [
            p.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % 2,
                   headers=[("h", b"%d" % i)], timestamp_ms=1_700_000_000_000 + i)
            for i in range(40)
        ]
        metas = [f.get(timeout=30) for f in futures]
    finally:
        p.close(timeout=10)
    assert sorted(m.offset for m in metas if m.partition == 0) == list(range(20))
    c = KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, consumer_timeout_ms=5000)
    try:
        assert c.config["api_version"] >= (3, 9) or c._client.get_broker_version() >= (3, 9)  # type: ignore[attr-defined]
        tp = TopicPartition(topic, 1)
        c.assign([tp])
        c.seek_to_beginning(tp)
        got = []
        for m in c:
            got.append((m.offset, m.key, m.value, list(m.headers), m.timestamp))
            if len(got) == 20:
                break
    finally:
        c.close()
    expected = [
        (j, b"k%d" % i, b"v%d" % i, [("h", b"%d" % i)], 1_700_000_000_000 + i)
        for j, i in enumerate(range(1, 40, 2))
    ]
    assert got == expected


def test_default_producer_settings(broker_process) -> None:
    bs = broker_process.bootstrap_servers
    topic = f"kp-default-{uuid.uuid4().hex[:8]}"
    p = KafkaProducer(bootstrap_servers=bs)
    try:
        assert p.config["enable_idempotence"] is True
        offsets = [p.send(topic, b"v%d" % i, partition=0).get(timeout=30).offset for i in range(10)]
    finally:
        p.close(timeout=10)
    assert offsets == list(range(10))
    c = KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, consumer_timeout_ms=5000)
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        values = [m.value for _, m in zip(range(10), c, strict=False)]
    finally:
        c.close()
    assert values == [b"v%d" % i for i in range(10)]
