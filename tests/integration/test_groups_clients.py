"""Consumer groups with kafka-python, aiokafka and kcat -G against `kbroker serve`."""

from __future__ import annotations

import asyncio
import os
import selectors
import shutil
import signal
import subprocess
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from .groups_support import produce

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

PARTITIONS = 3  # broker_process's num.partitions


def committed(bs: str, group: str, topic: str) -> list[int]:
    c = Consumer({"bootstrap.servers": bs, "group.id": group})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
        return [tp.offset for tp in tps]
    finally:
        c.close()


def data(tag: str, n: int) -> list[tuple[int, str]]:
    return [(i % PARTITIONS, f"{tag}-{i}") for i in range(n)]


def test_kafka_python_group_consumer(broker_process: Any) -> None:
    from kafka import KafkaConsumer

    bs, topic, group = broker_process.bootstrap_servers, f"kp-g-{uuid.uuid4().hex[:8]}", "kp-group"
    first = data("a", 30)
    produce(bs, topic, first)

    def consume(expected: int) -> list[str]:
        c = KafkaConsumer(topic, bootstrap_servers=bs, group_id=group, auto_offset_reset="earliest",
                          enable_auto_commit=False, consumer_timeout_ms=20000)
        got: list[str] = []
        deadline = time.monotonic() + 60
        try:
            while len(got) < expected and time.monotonic() < deadline:
                for records in c.poll(timeout_ms=500).values():
                    got += [r.value.decode() for r in records]
            c.commit()
            assert len(c.assignment()) == PARTITIONS
        finally:
            c.close()
        return got

    assert sorted(consume(len(first))) == sorted(v for _, v in first)
    assert committed(bs, group, topic) == [10, 10, 10]
    second = data("b", 6)
    produce(bs, topic, second)
    assert sorted(consume(len(second))) == sorted(v for _, v in second)


def test_aiokafka_group_consumer(broker_process: Any) -> None:
    from aiokafka import AIOKafkaConsumer

    bs, topic, group = broker_process.bootstrap_servers, f"aio-g-{uuid.uuid4().hex[:8]}", "aio-group"
    first = data("a", 30)
    produce(bs, topic, first)

    async def consume(expected: int) -> list[str]:
        c = AIOKafkaConsumer(topic, bootstrap_servers=bs, group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False)
        await c.start()
        got: list[str] = []
        try:
            deadline = time.monotonic() + 60
            while len(got) < expected and time.monotonic() < deadline:
                batch = await c.getmany(timeout_ms=500)
                for records in batch.values():
                    got += [r.value.decode() for r in records]
            await c.commit()
            assert len(c.assignment()) == PARTITIONS
        finally:
            await c.stop()
        return got

    assert sorted(asyncio.run(consume(len(first)))) == sorted(v for _, v in first)
    assert committed(bs, group, topic) == [10, 10, 10]
    second = data("b", 6)
    produce(bs, topic, second)
    assert sorted(asyncio.run(consume(len(second)))) == sorted(v for _, v in second)


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_balanced_consumer(broker_process: Any) -> None:
    bs, topic, group = broker_process.bootstrap_servers, f"kc-g-{uuid.uuid4().hex[:8]}", "kcat-group"
    first = data("a", 30)
    produce(bs, topic, first)
    proc = subprocess.Popen(
        ["kcat", "-u", "-b", bs, "-G", group, "-o", "beginning", "-f", "%s\n", "-X", "auto.commit.interval.ms=200",
         topic],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    got: list[str] = []
    try:
        assert proc.stdout is not None
        os.set_blocking(proc.stdout.fileno(), False)
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        buf = b""
        deadline = time.monotonic() + 60
        while len(got) < len(first) and time.monotonic() < deadline:
            if sel.select(0.5):
                buf += proc.stdout.read() or b""
                *lines, buf = buf.split(b"\n")
                got += [line.decode() for line in lines]
        while committed(bs, group, topic) != [10, 10, 10]:  # the consumer's auto commit
            assert time.monotonic() < deadline, "the auto commit never came"
            time.sleep(0.1)
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(5)
    assert sorted(got) == sorted(v for _, v in first)
    assert committed(bs, group, topic) == [10, 10, 10]
