"""Partitions are bounded by disk, not by the open-file limit.

A broker under `ulimit -n 1024` (soft and hard) holds 2,000 partitions, restarts on
them and reads every one back; with log.open.segment.files.max=200, 5,000 partitions
take produce and fetch in random order while the broker's descriptor count stays
within the budget plus its connections and a fixed margin.
"""

from __future__ import annotations

import os
import random
import resource
import threading
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=120).values():
        f.result(180)


def produce_each(bootstrap: str, topic: str, partitions: list[int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": False})
    failed: list[Any] = []
    for p in partitions:
        producer.produce(topic, value=b"p%d" % p, partition=p,
                         on_delivery=lambda err, _msg: failed.append(err) if err else None)
        producer.poll(0)
    assert producer.flush(120) == 0 and not failed, failed[:3]


def read_each(bootstrap: str, topic: str, partitions: list[int]) -> dict[int, bytes]:
    """One record from each partition, the partitions assigned in the order given."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "budget",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 10})
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    got: dict[int, bytes] = {}
    try:
        misses = 0
        while len(got) < len(partitions):
            batch = consumer.consume(1000, timeout=5)
            misses = misses + 1 if not batch else 0
            assert misses < 6, f"only {len(got)} of {len(partitions)} partitions came back"
            for msg in batch:
                assert msg.error() is None, msg.error()
                got[msg.partition()] = msg.value()
    finally:
        consumer.close()
    return got


def descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_2000_partitions_under_ulimit_1024(broker_factory: Any) -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 1024:
        pytest.skip("hard limit below 1024")
    broker = broker_factory({"num.partitions": "1"})
    broker.preexec = lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))
    broker.start()
    partitions = list(range(2000))
    create(broker.bootstrap_servers, "many", 2000)
    produce_each(broker.bootstrap_servers, "many", partitions)
    assert broker.stop() == 0
    broker.start(timeout=120)
    assert resource.prlimit(broker.proc.pid, resource.RLIMIT_NOFILE) == (1024, 1024)
    random.shuffle(partitions)
    got = read_each(broker.bootstrap_servers, "many", partitions)
    assert got == {p: b"p%d" % p for p in partitions}
    assert "Too many open files" not in broker.output()


def test_descriptor_budget_holds_over_5000_partitions(broker_factory: Any, tmp_path: Path) -> None:
    budget = 200
    broker = broker_factory({"num.partitions": "1", "log.open.segment.files.max": str(budget)}).start()
    pid = broker.proc.pid
    baseline = descriptors(pid)
    peak = [baseline]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], descriptors(pid))
            stop.wait(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        partitions = list(range(5000))
        create(broker.bootstrap_servers, "wide", 5000)
        random.shuffle(partitions)
        produce_each(broker.bootstrap_servers, "wide", partitions)
        random.shuffle(partitions)
        got = read_each(broker.bootstrap_servers, "wide", partitions)
        assert got == {p: b"p%d" % p for p in partitions}
    finally:
        stop.set()
        sampler.join(10)
    connections = 8  # admin, producer, consumer (+ their bootstrap and coordinator links)
    margin = 32  # listeners, epoll, checkpoint and registry writes, stdio
    assert peak[0] <= baseline + budget + connections + margin, (peak[0], baseline)
