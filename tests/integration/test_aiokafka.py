"""aiokafka 0.14 (ApiVersions v0, no flexible versions) against a `kbroker serve` subprocess."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


async def roundtrip(bs: str, topic: str, codec: str | None) -> list:
    p = AIOKafkaProducer(bootstrap_servers=bs, compression_type=codec, linger_ms=5)
    await p.start()
    try:
        futs = [
            await p.send(topic, value=b"v%d" % i, key=b"k%d" % i, partition=0,
                         headers=[("h", b"%d" % i)], timestamp_ms=1_700_000_000_000 + i)
            for i in range(30)
        ]
        metas = await asyncio.gather(*futs)
    finally:
        await p.stop()
    assert [m.offset for m in metas] == list(range(30))
    c = AIOKafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False)
    await c.start()
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        await c.seek_to_beginning(tp)
        got: list = []
        while len(got) < 30:
            batch = await asyncio.wait_for(c.getmany(tp, timeout_ms=1000), 10)
            for msg in batch.get(tp, []):
                got.append((msg.offset, msg.key, msg.value, list(msg.headers), msg.timestamp))
        return got
    finally:
        await c.stop()


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_produce_and_consume_with_assign(broker_process, codec: str | None) -> None:
    topic = f"aio-{codec}-{uuid.uuid4().hex[:8]}"
    got = asyncio.run(roundtrip(broker_process.bootstrap_servers, topic, codec))
    assert got == [
        (i, b"k%d" % i, b"v%d" % i, [("h", b"%d" % i)], 1_700_000_000_000 + i) for i in range(30)
    ]
