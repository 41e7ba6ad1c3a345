"""Transactions with kafka-python 3 and aiokafka 0.14 (v0 of every transaction API):
commit and abort seen by their own read_committed consumers, consume-transform-produce
with send_offsets_to_transaction, and (kafka-python) fencing."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AioTopicPartition
from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.errors import KafkaError as KpError

from kbroker.broker import Broker

from .txn_support import read_values

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def kp_read(bs: str, topic: str, isolation: str, partitions: int = 1) -> list[bytes]:
    """All records of the topic as a kafka-python consumer at `isolation` sees them."""
    c = KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, isolation_level=isolation)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        end = c.end_offsets(tps)
        out: list[bytes] = []
        deadline = time.monotonic() + 30
        while any(c.position(tp) < end[tp] for tp in tps) and time.monotonic() < deadline:
            for records in c.poll(timeout_ms=500).values():
                out += [r.value for r in records]
        return out
    finally:
        c.close()


def test_kafka_python_commit_abort_and_fencing(kbroker_broker: Broker) -> None:
    bs = kbroker_broker.bootstrap_servers
    topic = f"kp-tx-{uuid.uuid4().hex[:8]}"
    p = KafkaProducer(bootstrap_servers=bs, transactional_id="kp-tx")
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, b"one", partition=0)
        p.commit_transaction()
        p.begin_transaction()
        p.send(topic, b"aborted", partition=0)
        p.flush()
        p.abort_transaction()
        p.begin_transaction()
        p.send(topic, b"two", partition=0)
        p.commit_transaction()
        assert kp_read(bs, topic, "read_committed") == [b"one", b"two"]
        assert kp_read(bs, topic, "read_uncommitted") == [b"one", b"aborted", b"two"]
        assert read_values(bs, topic) == [b"one", b"two"]  # librdkafka agrees
        p.begin_transaction()
        p.send(topic, b"zombie", partition=0)
        p.flush()
        other = KafkaProducer(bootstrap_servers=bs, transactional_id="kp-tx")
        try:
            other.init_transactions()  # fences `p` and aborts its transaction
            with pytest.raises(KpError):
                p.commit_transaction()
            other.begin_transaction()
            other.send(topic, b"three", partition=0)
            other.commit_transaction()
        finally:
            other.close(timeout=10)
        assert kp_read(bs, topic, "read_committed") == [b"one", b"two", b"three"]
    finally:
        p.close(timeout=10)


def test_kafka_python_consume_transform_produce(kbroker_broker: Broker) -> None:
    bs = kbroker_broker.bootstrap_servers
    src, dst = f"kp-in-{uuid.uuid4().hex[:8]}", f"kp-out-{uuid.uuid4().hex[:8]}"
    seed = KafkaProducer(bootstrap_servers=bs)
    for i in range(50):
        seed.send(src, str(i).encode(), partition=0)
    seed.flush()
    seed.close()
    consumer = KafkaConsumer(src, bootstrap_servers=bs, group_id="kp-ctp", enable_auto_commit=False,
                             isolation_level="read_committed", auto_offset_reset="earliest")
    producer = KafkaProducer(bootstrap_servers=bs, transactional_id="kp-ctp")
    try:
        producer.init_transactions()
        done = 0
        deadline = time.monotonic() + 60
        while done < 50 and time.monotonic() < deadline:
            batches = consumer.poll(timeout_ms=500, max_records=20)
            if not batches:
                continue
            producer.begin_transaction()
            offsets = {}
            for tp, records in batches.items():
                for r in records:
                    producer.send(dst, b"out-" + r.value, partition=0)
                offsets[tp] = OffsetAndMetadata(records[-1].offset + 1, "", -1)
                done += len(records)
            producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
            producer.commit_transaction()
        assert consumer.committed(TopicPartition(src, 0)) == 50
    finally:
        producer.close(timeout=10)
        consumer.close()
    assert read_values(bs, dst) == [b"out-%d" % i for i in range(50)]


async def aio_scenario(bs: str, topic: str, src: str) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bs, transactional_id="aio-tx")
    await producer.start()
    try:
        async with producer.transaction():
            await producer.send(topic, b"one", partition=0)
        await producer.begin_transaction()
        await (await producer.send(topic, b"aborted", partition=0))
        await producer.abort_transaction()
        async with producer.transaction():
            await producer.send(topic, b"two", partition=0)
        seed = AIOKafkaProducer(bootstrap_servers=bs)
        await seed.start()
        try:
            for i in range(10):
                await seed.send(src, str(i).encode(), partition=0)
        finally:
            await seed.stop()
        consumer = AIOKafkaConsumer(src, bootstrap_servers=bs, group_id="aio-ctp", enable_auto_commit=False,
                                    isolation_level="read_committed", auto_offset_reset="earliest")
        await consumer.start()
        try:
            tp = AioTopicPartition(src, 0)
            got = 0
            while got < 10:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=500), 30)
                records = batch.get(tp, [])
                if not records:
                    continue
                async with producer.transaction():
                    for r in records:
                        await producer.send(topic, b"out-" + r.value, partition=0)
                    await producer.send_offsets_to_transaction({tp: records[-1].offset + 1}, "aio-ctp")
                got += len(records)
            assert await consumer.committed(tp) == 10
        finally:
            await consumer.stop()
    finally:
        await producer.stop()
    reader = AIOKafkaConsumer(bootstrap_servers=bs, isolation_level="read_committed", enable_auto_commit=False)
    await reader.start()
    try:
        tp = AioTopicPartition(topic, 0)
        reader.assign([tp])
        await reader.seek_to_beginning(tp)
        values: list[bytes] = []
        while len(values) < 12:
            batch = await asyncio.wait_for(reader.getmany(tp, timeout_ms=500), 30)
            values += [m.value for m in batch.get(tp, [])]
        assert values == [b"one", b"two", *(b"out-%d" % i for i in range(10))]
    finally:
        await reader.stop()


def test_aiokafka_transactions(kbroker_broker: Broker) -> None:
    bs = kbroker_broker.bootstrap_servers
    topic, src = f"aio-tx-{uuid.uuid4().hex[:8]}", f"aio-in-{uuid.uuid4().hex[:8]}"
    asyncio.run(aio_scenario(bs, topic, src))
    assert read_values(bs, topic, isolation="read_uncommitted")[:3] == [b"one", b"aborted", b"two"]
