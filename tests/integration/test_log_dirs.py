"""DescribeLogDirs and AlterReplicaLogDirs on a broker with two log dirs, over the wire:
a replica moves to the other dir while a producer writes to it, and nothing is lost."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition

from kbroker.broker import Broker
from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.alter_replica_log_dirs import AlterReplicaLogDirsRequest as Alter
from kbroker.protocol.messages.describe_log_dirs import DescribeLogDirsRequest as Describe

from .wire import WireClient


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    dirs = f"{tmp_path / 'a'},{tmp_path / 'b'}"
    b = Broker({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": dirs,
                "log.segment.bytes": "2097152"}).start()
    try:
        yield b
    finally:
        b.stop()


def _where(wire: WireClient, topic: str) -> dict[str, list[tuple[int, bool]]]:
    response = wire.call(Describe(topics=None), 4)
    return {r.log_dir: [(p.partition_index, p.is_future_key) for t in r.topics if t.name == topic
                        for p in t.partitions] for r in response.results}


def test_a_replica_moves_to_another_log_dir_while_written(broker: Broker) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 2,
                         "batch.size": 65536})
    errors: list[object] = []

    def delivered(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    for i in range(20000):
        producer.produce("moving", str(i).encode(), partition=0, on_delivery=delivered)
    assert producer.flush(30) == 0
    wire = WireClient(broker.bootstrap_servers)
    try:
        where = _where(wire, "moving")
        source = next(d for d, parts in where.items() if parts)
        target = next(d for d in where if d != source)
        request = Alter(dirs=[Alter.AlterReplicaLogDir(path=target, topics=[
            Alter.AlterReplicaLogDirTopic(name="moving", partitions=[0])])])
        answer = wire.call(request, 2)
        assert [p.error_code for r in answer.results for p in r.partitions] == [ErrorCode.NONE]
        for i in range(20000, 30000):  # keep writing while it moves
            producer.produce("moving", str(i).encode(), partition=0, on_delivery=delivered)
            if i % 1000 == 0:
                producer.poll(0)
        assert producer.flush(30) == 0 and errors == []
        deadline = time.monotonic() + 60
        while _where(wire, "moving")[target] != [(0, False)]:
            assert time.monotonic() < deadline, "the move did not finish"
            time.sleep(0.05)
        assert _where(wire, "moving")[source] == []
        unknown = wire.call(Alter(dirs=[Alter.AlterReplicaLogDir(path="/nowhere", topics=[
            Alter.AlterReplicaLogDirTopic(name="moving", partitions=[0])])]), 2)
        assert unknown.results[0].partitions[0].error_code == ErrorCode.LOG_DIR_NOT_FOUND
        missing = wire.call(Alter(dirs=[Alter.AlterReplicaLogDir(path=source, topics=[
            Alter.AlterReplicaLogDirTopic(name="nothing", partitions=[0])])]), 2)
        assert missing.results[0].partitions[0].error_code == ErrorCode.REPLICA_NOT_AVAILABLE
    finally:
        wire.close()
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "check",
                         "enable.partition.eof": True})
    consumer.assign([CkTopicPartition("moving", 0, 0)])
    values = []
    deadline = time.monotonic() + 60
    while len(values) < 30000 and time.monotonic() < deadline:
        for m in consumer.consume(1000, 1.0):
            if m.error() is None:
                values.append(int(m.value()))
    consumer.close()
    assert values == list(range(30000))
    assert os.path.isdir(os.path.join(target, "moving-0"))
