"""Idempotent producers: real clients producing 100k records with no duplicates, in order,
across connections the broker drops; and the exact dedupe/sequence answers on the wire."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from kbroker.common.error_code import ErrorCode as E
from kbroker.protocol.messages.init_producer_id import InitProducerIdRequest
from kbroker.protocol.messages.metadata import MetadataRequest
from kbroker.protocol.messages.produce import ProduceRequest
from tests.batches import Rec, make_batch

from .wire import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

N = 100_000


def read_values(bs: str, topic: str, count: int) -> list[int]:
    c = Consumer({"bootstrap.servers": bs, "group.id": "verify", "enable.auto.commit": False,
                  "fetch.max.bytes": 8 << 20})
    out: list[int] = []
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 90
        while len(out) < count and time.monotonic() < deadline:
            for m in c.consume(10000, 0.5):
                assert not m.error(), m.error()
                out.append(int(m.value()))
        end = time.monotonic() + 1.0
        while time.monotonic() < end:  # anything extra would be a duplicate
            out += [int(m.value()) for m in c.consume(10000, 0.2) if not m.error()]
    finally:
        c.close()
    return out


def assert_exactly_once_in_order(values: list[int]) -> None:
    assert len(values) == N, f"{len(values)} records, expected {N}"
    assert values == list(range(N))


class Progress:
    """Records acknowledged so far (delivery callbacks run on client threads)."""

    def __init__(self) -> None:
        self.acked = 0

    def ack(self, *_: object) -> None:
        self.acked += 1


class ConnectionKiller:
    """Closes every client connection from the broker side each time the producer has had
    another `every` records acknowledged: drops land mid-stream however fast or slow the
    machine is, and never before the client has made progress on its new connections."""

    def __init__(self, broker: Any, progress: Progress, every: int = 10_000) -> None:
        self.broker = broker
        self.progress = progress
        self.every = every
        self.kills = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        next_kill = self.every
        while not self._stop.wait(0.005):
            if self.progress.acked >= next_kill:
                next_kill = self.progress.acked + self.every
                self.broker._loop.call_soon_threadsafe(self._kill_all)

    def _kill_all(self) -> None:
        for conn in list(self.broker.server.connections):
            conn.close()
        self.kills += 1

    def __enter__(self) -> ConnectionKiller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


def confluent_produce(bs: str, topic: str, progress: Progress | None = None, **conf: Any) -> None:
    errors: list[Any] = []
    acked = progress or Progress()

    def on_delivery(err: Any, msg: Any) -> None:
        if err:
            errors.append(err)
        else:
            acked.ack()

    p = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "linger.ms": 2,
                  "batch.num.messages": 2000, **conf})
    for i in range(N):
        while True:
            try:
                p.produce(topic, str(i).encode(), partition=0, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(120) == 0
    assert not errors, errors[:5]


def test_confluent_idempotent_100k(kbroker_broker: Any) -> None:
    bs, topic = kbroker_broker.bootstrap_servers, f"idem-ck-{uuid.uuid4().hex[:8]}"
    confluent_produce(bs, topic)
    assert_exactly_once_in_order(read_values(bs, topic, N))


def test_confluent_idempotent_across_dropped_connections(kbroker_broker: Any) -> None:
    bs, topic = kbroker_broker.bootstrap_servers, f"idem-drop-{uuid.uuid4().hex[:8]}"
    progress = Progress()
    with ConnectionKiller(kbroker_broker, progress) as killer:
        confluent_produce(bs, topic, progress, **{"message.send.max.retries": 1000000,
                                                  "retry.backoff.ms": 20,
                                                  "reconnect.backoff.max.ms": 200,
                                                  "max.in.flight.requests.per.connection": 5})
    assert killer.kills >= 3
    assert_exactly_once_in_order(read_values(bs, topic, N))


def test_kafka_python_defaults_100k_across_dropped_connections(kbroker_broker: Any) -> None:
    from kafka import KafkaProducer

    bs, topic = kbroker_broker.bootstrap_servers, f"idem-kp-{uuid.uuid4().hex[:8]}"
    p = KafkaProducer(bootstrap_servers=bs, retries=1000000, retry_backoff_ms=20)
    assert p.config["enable_idempotence"] is True and p.config["acks"] == -1
    progress = Progress()
    try:
        with ConnectionKiller(kbroker_broker, progress, every=20_000) as killer:
            futures = [p.send(topic, str(i).encode(), partition=0).add_callback(progress.ack)
                       for i in range(N)]
            p.flush(180)
        for f in futures[:: N // 100]:
            f.get(timeout=30)
    finally:
        p.close(10)
    assert killer.kills > 0
    assert_exactly_once_in_order(read_values(bs, topic, N))


# -- the wire: exact answers -------------------------------------------------------


def init_pid(c: WireClient, version: int = 4, pid: int = -1, epoch: int = -1) -> tuple[int, int]:
    r = c.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000,
                                     producer_id=pid, producer_epoch=epoch), version)
    assert r.error_code == E.NONE
    return r.producer_id, r.producer_epoch


def create_topic(c: WireClient, topic: str) -> None:
    """Metadata v4 with auto-creation (num.partitions is 1 for these brokers)."""
    r = c.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                               allow_auto_topic_creation=True), 4)
    assert r.topics[0].error_code == E.NONE


def produce(c: WireClient, topic: str, pid: int, epoch: int, seq: int, n: int = 3) -> tuple[int, int]:
    batch = make_batch([Rec(f"{seq}-{i}".encode()) for i in range(n)], producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq)
    req = ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])])
    r = c.call(req, 9)
    p = r.responses[0].partition_responses[0]
    return p.error_code, p.base_offset


def test_wire_dedupe_and_sequence_errors(kbroker_broker: Any) -> None:
    bs, topic = kbroker_broker.bootstrap_servers, f"idem-wire-{uuid.uuid4().hex[:8]}"
    with WireClient(bs) as c:
        pid, epoch = init_pid(c)
        create_topic(c, topic)
        offsets = [produce(c, topic, pid, epoch, seq) for seq in range(0, 24, 3)]
        assert offsets == [(E.NONE, 3 * i) for i in range(8)]
        # a retry of any of the last 5 batches: the original offset, no error, nothing appended
        assert produce(c, topic, pid, epoch, 21) == (E.NONE, 21)
        assert produce(c, topic, pid, epoch, 9) == (E.NONE, 9)
        assert produce(c, topic, pid, epoch, 3)[0] == E.DUPLICATE_SEQUENCE_NUMBER  # older than 5
        assert produce(c, topic, pid, epoch, 30)[0] == E.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce(c, topic, pid + 1000, 0, 7)[0] == E.UNKNOWN_PRODUCER_ID
        # A producer without a transactional id that sends its current id and epoch (KIP-360)
        # gets a new id with epoch 0, as Kafka's TransactionCoordinator answers; its old id
        # still holds its sequences.
        pid2, epoch2 = init_pid(c, 4, pid, epoch)
        assert pid2 > pid and epoch2 == 0
        code, base = produce(c, topic, pid2, epoch2, 0)
        assert code == E.NONE
        assert produce(c, topic, pid, epoch, 24) == (E.NONE, base + 3)
        assert kbroker_broker.state.get_log(topic, 0).log_end_offset == base + 6
        # An id without its epoch (or the reverse) is a malformed request.
        r = c.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000,
                                         producer_id=pid, producer_epoch=-1), 4)
        assert r.error_code == E.INVALID_REQUEST


@pytest.mark.parametrize("how", ["restart", "sigkill"])
def test_producer_state_and_ids_survive_restart(broker_factory: Any, how: str) -> None:
    bp = broker_factory({"num.partitions": "1"}).start()
    topic = f"idem-{how}-{uuid.uuid4().hex[:8]}"
    with WireClient(bp.bootstrap_servers) as c:
        pid, epoch = init_pid(c)
        create_topic(c, topic)
        assert [produce(c, topic, pid, epoch, s) for s in (0, 3, 6)] == [(E.NONE, 0), (E.NONE, 3), (E.NONE, 6)]
    if how == "sigkill":
        bp.kill()
    else:
        assert bp.stop() == 0
    bp2 = broker_factory({"num.partitions": "1"}, log_dir=bp.log_dir).start()
    with WireClient(bp2.bootstrap_servers) as c:
        assert produce(c, topic, pid, epoch, 6) == (E.NONE, 6), "the retry is still recognized"
        assert produce(c, topic, pid, epoch, 9) == (E.NONE, 9)
        new_pid, _ = init_pid(c)
        assert new_pid > pid, "producer ids never repeat"
