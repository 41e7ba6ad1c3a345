"""The log side of transactions over the wire: transactional batches written with Produce,
markers written as the partition leader writes them, then what read_committed and
read_uncommitted consumers (librdkafka and the raw protocol) get: records up to the
last stable offset, the aborted transactions, ListOffsets latest = LSO."""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from kbroker.broker import Broker
from kbroker.common.error_code import ErrorCode as E
from kbroker.common.topic_partition import TopicPartition as KTopicPartition
from kbroker.protocol.messages.fetch import FetchRequest
from kbroker.protocol.messages.list_offsets import ListOffsetsRequest
from kbroker.protocol.messages.produce import ProduceRequest
from kbroker.records.batch_header import TRANSACTIONAL_BIT
from kbroker.records.control_record import end_txn_marker
from kbroker.storage.producer_state import AppendOrigin
from tests.batches import make_batch

from .wire import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

TOPIC = "txn-log"


def produce(c: WireClient, batch: bytes, transactional_id: str | None = "tx") -> int:
    req = ProduceRequest(transactional_id=transactional_id, acks=-1, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=batch)])])
    resp = c.call(req, 9)
    p = resp.responses[0].partition_responses[0]
    assert p.error_code == E.NONE, p
    return int(p.base_offset)


def txn(pid: int, seq: int, *values: bytes) -> bytes:
    return make_batch(list(values), producer_id=pid, producer_epoch=0, base_sequence=seq,
                      attributes=TRANSACTIONAL_BIT)


def write_marker(broker: Broker, pid: int, commit: bool) -> None:
    state = broker.state
    assert state is not None and broker._loop is not None

    async def run() -> None:
        plog = state.replica_manager.leader_log(KTopicPartition(TOPIC, 0))
        plog.append_as_leader(end_txn_marker(pid, 0, commit, 0, int(time.time() * 1000)),
                              origin=AppendOrigin.COORDINATOR)
    asyncio.run_coroutine_threadsafe(run(), broker._loop).result(30)


def fetch(c: WireClient, offset: int, committed: bool) -> FetchRequest:
    req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                       isolation_level=1 if committed else 0, topics=[
                           FetchRequest.FetchTopic(topic=TOPIC, partitions=[
                               FetchRequest.FetchPartition(partition=0, fetch_offset=offset,
                                                           partition_max_bytes=1 << 20)])])
    return c.call(req, 11).responses[0].partitions[0]


def latest(c: WireClient, committed: bool) -> int:
    req = ListOffsetsRequest(replica_id=-1, isolation_level=1 if committed else 0, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=TOPIC, partitions=[
            ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])])
    return int(c.call(req, 5).topics[0].partitions[0].offset)


def consume(bs: str, isolation: str, count: int) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bs, "group.id": f"g-{isolation}", "isolation.level": isolation,
                  "enable.partition.eof": True, "enable.auto.commit": False})
    c.assign([TopicPartition(TOPIC, 0, 0)])
    out: list[bytes] = []
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline:
            for m in c.consume(100, 0.5):
                if m.error() is None:
                    out.append(m.value())
                elif len(out) >= count:
                    return out
    finally:
        c.close()
    return out


def test_read_committed_sees_committed_records_only(kbroker_broker: Broker) -> None:
    bs = kbroker_broker.bootstrap_servers
    state = kbroker_broker.state
    assert state is not None
    asyncio.run_coroutine_threadsafe(_create(state), kbroker_broker._loop).result(30)  # type: ignore[arg-type]
    with WireClient(bs) as c:
        produce(c, make_batch([b"plain-0"]), transactional_id=None)           # 0
        produce(c, txn(1, 0, b"c1-a", b"c1-b"))                               # 1-2
        produce(c, txn(2, 0, b"a2-a"))                                        # 3
        produce(c, make_batch([b"plain-1"]), transactional_id=None)           # 4
        assert latest(c, committed=True) == 1 and latest(c, committed=False) == 5
        pd = fetch(c, 0, committed=True)
        assert pd.last_stable_offset == 1 and pd.high_watermark == 5
        write_marker(kbroker_broker, 1, commit=True)                          # 5
        assert latest(c, committed=True) == 3
        write_marker(kbroker_broker, 2, commit=False)                         # 6
        produce(c, txn(1, 2, b"c1-c"))                                        # 7
        write_marker(kbroker_broker, 1, commit=True)                          # 8
        assert latest(c, committed=True) == latest(c, committed=False) == 9
        pd = fetch(c, 0, committed=True)
        assert [(t.producer_id, t.first_offset) for t in pd.aborted_transactions] == [(2, 3)]
        assert fetch(c, 0, committed=False).aborted_transactions is None
        assert fetch(c, 7, committed=True).aborted_transactions == []
        # a transactional batch needs the request's transactional id
        req = ProduceRequest(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
            ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[
                ProduceRequest.PartitionProduceData(index=0, records=txn(3, 0, b"x"))])])
        code = c.call(req, 9).responses[0].partition_responses[0].error_code
        assert code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert consume(bs, "read_committed", 5) == [b"plain-0", b"c1-a", b"c1-b", b"plain-1", b"c1-c"]
    assert consume(bs, "read_uncommitted", 6) == [
        b"plain-0", b"c1-a", b"c1-b", b"a2-a", b"plain-1", b"c1-c"]


async def _create(state: object) -> None:
    state.create_topic(TOPIC, 1)  # type: ignore[attr-defined]
