"""Transactions with confluent-kafka (librdkafka) against an embedded broker: commit and
abort as read_committed and read_uncommitted consumers see them, fencing by a second
producer with the same transactional id, the abort of a transaction that outlives its
timeout, and the timeouts the broker refuses."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kbroker.broker import Broker

from .txn_support import offsets, read_values, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
def kbroker_config() -> dict[str, str]:
    return {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
            "transaction.max.timeout.ms": "60000"}


def create(bs: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bs})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(30)


def producer(bs: str, transactional_id: str, **conf: object) -> Producer:
    p = Producer({"bootstrap.servers": bs, "transactional.id": transactional_id, "linger.ms": 5, **conf})
    p.init_transactions(30)
    return p


def test_read_committed_sees_committed_transactions_in_order(kbroker_broker: Broker) -> None:
    bs = kbroker_broker.bootstrap_servers
    topic = f"tx-{uuid.uuid4().hex[:8]}"
    create(bs, topic, 3)
    p = producer(bs, "ordered")
    committed: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    everything: dict[int, list[bytes]] = {0: [], 1: [], 2: []}
    for txn in range(12):
        p.begin_transaction()
        for i in range(30):
            value = f"{txn}-{i}".encode()
            p.produce(topic, value, partition=i % 3)
            everything[i % 3].append(value)
            if txn % 3 != 1:
                committed[i % 3].append(value)
        if txn % 3 == 1:
            p.flush(30)  # written, then aborted (abort_transaction drops what is not sent yet)
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
    for partition in range(3):
        assert read_values(bs, topic, partition) == committed[partition]
        assert read_values(bs, topic, partition, isolation="read_uncommitted") == everything[partition]
        lso, hw = offsets(bs, topic, partition)
        assert lso == hw  # one marker per transaction after the 120 records
    p.flush(10)


def test_open_transaction_holds_back_read_committed(kbroker_broker: Broker) -> None:
    bs = kbroker_broker.bootstrap_servers
    topic = f"tx-{uuid.uuid4().hex[:8]}"
    create(bs, topic)
    p = producer(bs, "holding")
    p.begin_transaction()
    p.produce(topic, b"first")
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce(topic, b"pending")
    p.flush(30)
    lso, hw = offsets(bs, topic)
    assert (lso, hw) == (2, 3)  # b"first" and its marker; b"pending" is open
    assert read_values(bs, topic) == [b"first"]
    assert read_values(bs, topic, isolation="read_uncommitted") == [b"first", b"pending"]
    p.commit_transaction(30)
    assert read_values(bs, topic) == [b"first", b"pending"]


def test_second_producer_fences_the_first(kbroker_broker: Broker) -> None:
    bs = kbroker_broker.bootstrap_servers
    topic = f"tx-{uuid.uuid4().hex[:8]}"
    create(bs, topic)
    old = producer(bs, "fenced-id")
    old.begin_transaction()
    old.produce(topic, b"zombie")
    old.flush(30)
    new = producer(bs, "fenced-id")  # bumps the epoch and aborts the old one's transaction
    with pytest.raises(KafkaException) as info:
        old.produce(topic, b"zombie-2")
        old.commit_transaction(30)
    error = info.value.args[0]
    assert error.fatal() and error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                              KafkaError.INVALID_PRODUCER_EPOCH)
    new.begin_transaction()
    new.produce(topic, b"fresh")
    new.commit_transaction(30)
    assert read_values(bs, topic) == [b"fresh"]
    assert b"zombie" in read_values(bs, topic, isolation="read_uncommitted")


def test_timed_out_transaction_is_aborted(kbroker_broker: Broker) -> None:
    bs = kbroker_broker.bootstrap_servers
    topic = f"tx-{uuid.uuid4().hex[:8]}"
    create(bs, topic)
    stuck = producer(bs, "stuck", **{"transaction.timeout.ms": 2000})
    stuck.begin_transaction()
    stuck.produce(topic, b"never")
    stuck.flush(30)
    assert offsets(bs, topic) == (0, 1)
    # the coordinator fences the producer and writes an ABORT marker: the LSO moves on
    wait_until(lambda: offsets(bs, topic) == (2, 2), "the timed-out transaction to be aborted")
    assert read_values(bs, topic) == []
    with pytest.raises(KafkaException):
        stuck.commit_transaction(30)


def test_transaction_timeout_above_the_maximum_is_refused(kbroker_broker: Broker) -> None:
    p = Producer({"bootstrap.servers": kbroker_broker.bootstrap_servers, "transactional.id": "too-long",
                  "transaction.timeout.ms": 120000})
    with pytest.raises(KafkaException) as info:
        p.init_transactions(30)
    assert info.value.args[0].code() == KafkaError.INVALID_TRANSACTION_TIMEOUT
