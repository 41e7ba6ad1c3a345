"""flush.messages: the fsync runs off the event loop, and the producer is answered after it.

The disk is made slow or failing for one topic's segment files by wrapping os.fsync
in this process (the broker is embedded): while one topic's fsync hangs, other
clients are still answered, and the producer waiting on it is not (Kafka answers
after its flush too); a failing fsync answers KAFKA_STORAGE_ERROR.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kbroker.broker import Broker
from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.metadata import MetadataRequest
from kbroker.protocol.messages.produce import ProduceRequest
from tests.batches import values_batch

from .wire import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


@pytest.fixture
def kbroker_config() -> dict[str, str]:
    return {"num.partitions": "1", "log.flush.interval.messages": "1"}


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Callable[[], None]]]:
    """Per topic-directory behaviour of fsync: {"/slow-0/": blocker, ...}."""
    rules: dict[str, Callable[[], None]] = {}
    real_fsync = os.fsync

    def fsync(fd: Any) -> None:
        fd = fd if isinstance(fd, int) else fd.fileno()
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            target = ""
        for marker, rule in list(rules.items()):
            if marker in target:
                rule()
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    yield rules


def produce_request(topic: str) -> ProduceRequest:
    return ProduceRequest(acks=1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=values_batch(1))])])


def test_a_hanging_fsync_stalls_only_its_producer(kbroker_broker: Broker, disk: dict[str, Any]) -> None:
    state = kbroker_broker.state
    assert state is not None
    state.create_topic("slow")
    release, entered = threading.Event(), threading.Event()

    def hang() -> None:
        entered.set()
        release.wait(30)

    disk["/slow-0/00000000000000000000.log"] = hang
    with WireClient(kbroker_broker.bootstrap_servers) as producer, \
            WireClient(kbroker_broker.bootstrap_servers) as other:
        cid = producer.send(produce_request("slow"), 9)
        assert entered.wait(10), "flush.messages=1 did not fsync"
        # The loop is free: another client is answered while that fsync hangs ...
        metadata = other.call(MetadataRequest(topics=None), 9)
        assert [t.name for t in metadata.topics] == ["slow"]
        # ... and the producer is not answered before its data is on disk.
        producer.sock.settimeout(0.5)
        with pytest.raises(TimeoutError):
            producer.recv_frame()
        producer.sock.settimeout(10)
        release.set()
        got, response = producer.recv(ProduceRequest.API_KEY, 9)
        assert got == cid
        part = response.responses[0].partition_responses[0]
        assert (part.error_code, part.base_offset) == (ErrorCode.NONE, 0)
    log = state.get_log("slow", 0)
    assert log is not None and log.recovery_point == 1


def test_a_failing_fsync_answers_kafka_storage_error(kbroker_broker: Broker, disk: dict[str, Any]) -> None:
    state = kbroker_broker.state
    assert state is not None
    state.create_topic("bad")

    def fail() -> None:
        raise OSError(errno.EIO, "Input/output error")

    disk["/bad-0/"] = fail
    with WireClient(kbroker_broker.bootstrap_servers) as producer:
        part = producer.call(produce_request("bad"), 9).responses[0].partition_responses[0]
    assert part.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert "Input/output error" in (part.error_message or "")
    log = state.get_log("bad", 0)
    assert log is not None and log.recovery_point == 0  # never claimed durable
