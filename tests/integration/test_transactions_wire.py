"""The transaction APIs on the wire: the exact answers of the coordinator to each request
and its mistakes (Kafka's error codes, never a crash), pending transactional offsets and
require_stable, and the version-dependent errors older clients get."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kbroker.broker import Broker
from kbroker.common.error_code import ErrorCode as E
from kbroker.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from kbroker.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from kbroker.protocol.messages.describe_transactions import DescribeTransactionsRequest
from kbroker.protocol.messages.end_txn import EndTxnRequest
from kbroker.protocol.messages.find_coordinator import FindCoordinatorRequest
from kbroker.protocol.messages.init_producer_id import InitProducerIdRequest
from kbroker.protocol.messages.list_transactions import ListTransactionsRequest
from kbroker.protocol.messages.offset_fetch import OffsetFetchRequest
from kbroker.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest

from .txn_support import wait_until
from .wire import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic


def create_topic(broker: Broker, name: str) -> None:
    state = broker.state
    assert state is not None and broker._loop is not None

    async def run() -> None:
        state.create_topic(name, 2)
    asyncio.run_coroutine_threadsafe(run(), broker._loop).result(30)


def init(c: WireClient, txn_id: str, version: int = 4, **kw: Any) -> Any:
    assert c.call(FindCoordinatorRequest(key=txn_id, key_type=1), 3).error_code == 0
    return c.call(InitProducerIdRequest(transactional_id=txn_id, transaction_timeout_ms=60000, **kw), version)


def add(c: WireClient, txn_id: str, pid: int, epoch: int, topics: dict[str, list[int]], version: int = 3) -> dict:
    r = c.call(AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[Topic(name=t, partitions=ps) for t, ps in topics.items()]), version)
    return {(t.name, p.partition_index): p.partition_error_code
            for t in r.results_by_topic_v3_and_below for p in t.results_by_partition}


def end(c: WireClient, txn_id: str, pid: int, epoch: int, commit: bool, version: int = 3) -> int:
    return int(c.call(EndTxnRequest(transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                                    committed=commit), version).error_code)


def test_coordinator_answers(kbroker_broker: Broker) -> None:
    create_topic(kbroker_broker, "w")
    with WireClient(kbroker_broker.bootstrap_servers) as c:
        assert init(c, "").error_code == E.INVALID_REQUEST
        too_long = c.call(InitProducerIdRequest(transactional_id="w1", transaction_timeout_ms=10**9), 4)
        assert too_long.error_code == E.INVALID_TRANSACTION_TIMEOUT
        assert init(c, "w1", producer_id=5, producer_epoch=-1).error_code == E.INVALID_REQUEST
        first = init(c, "w1")
        assert (first.error_code, first.producer_epoch) == (0, 0)
        pid = first.producer_id
        assert init(c, "w1").producer_epoch == 1  # a new producer: the epoch moves on
        assert end(c, "w1", pid, 1, True) == E.INVALID_TXN_STATE  # nothing to commit
        assert add(c, "w1", pid, 0, {"w": [0]}) == {("w", 0): E.PRODUCER_FENCED}
        assert add(c, "w1", pid, 0, {"w": [0]}, version=1) == {("w", 0): E.INVALID_PRODUCER_EPOCH}
        assert add(c, "w1", pid + 1, 1, {"w": [0]}) == {("w", 0): E.INVALID_PRODUCER_ID_MAPPING}
        assert add(c, "w1", pid, 1, {"w": [0], "nope": [0]}) == {
            ("w", 0): E.OPERATION_NOT_ATTEMPTED, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
        assert add(c, "w1", pid, 1, {"w": [0, 1]}) == {("w", 0): 0, ("w", 1): 0}
        verify = c.call(AddPartitionsToTxnRequest(transactions=[
            AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
                transactional_id="w1", producer_id=pid, producer_epoch=1, verify_only=True,
                topics=[Topic(name="w", partitions=[0]), Topic(name="other", partitions=[3])])]), 4)
        codes = {(t.name, p.partition_index): p.partition_error_code
                 for r in verify.results_by_transaction for t in r.topic_results for p in t.results_by_partition}
        assert codes == {("w", 0): 0, ("other", 3): E.INVALID_TXN_STATE}  # TRANSACTION_ABORTABLE before v5
        described = c.call(DescribeTransactionsRequest(transactional_ids=["w1", "unknown"]), 0)
        states = {s.transactional_id: s for s in described.transaction_states}
        assert states["w1"].transaction_state == "Ongoing"
        assert sorted((t.topic, sorted(t.partitions)) for t in states["w1"].topics) == [("w", [0, 1])]
        assert states["unknown"].error_code == E.TRANSACTIONAL_ID_NOT_FOUND
        assert end(c, "w1", pid, 1, False) == 0
        assert end(c, "w1", pid, 1, False) == 0  # a retry of a completed abort
        assert end(c, "w1", pid, 1, True) == E.INVALID_TXN_STATE
        listed = c.call(ListTransactionsRequest(state_filters=["CompleteAbort", "Bogus"]), 1)
        assert [t.transactional_id for t in listed.transaction_states] == ["w1"]
        assert listed.unknown_state_filters == ["Bogus"]
        # KIP-360: the producer recovers with its id and epoch; an older epoch is fenced
        bumped = init(c, "w1", producer_id=pid, producer_epoch=1)
        assert (bumped.producer_id, bumped.producer_epoch) == (pid, 2)
        assert init(c, "w1", producer_id=pid, producer_epoch=0).error_code == E.PRODUCER_FENCED
        assert init(c, "w1", version=3, producer_id=pid, producer_epoch=0).error_code == E.INVALID_PRODUCER_EPOCH


def test_transactional_offsets_wait_for_the_commit(kbroker_broker: Broker) -> None:
    create_topic(kbroker_broker, "src")
    with WireClient(kbroker_broker.bootstrap_servers) as c:
        r = init(c, "offsets")
        pid, epoch = r.producer_id, r.producer_epoch
        assert c.call(FindCoordinatorRequest(key="g", key_type=0), 3).error_code == 0
        assert c.call(AddOffsetsToTxnRequest(transactional_id="offsets", producer_id=pid, producer_epoch=epoch,
                                             group_id="g"), 3).error_code == 0

        def commit(generation: int = -1, member: str = "") -> int:
            req = TxnOffsetCommitRequest(
                transactional_id="offsets", group_id="g", producer_id=pid, producer_epoch=epoch,
                generation_id_or_member_epoch=generation, member_id=member, topics=[
                    TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name="src", partitions=[
                        TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                            partition_index=0, committed_offset=42, committed_metadata="m")])])
            return int(c.call(req, 3).topics[0].partitions[0].error_code)

        assert commit(generation=3, member="ghost") == E.UNKNOWN_MEMBER_ID  # KIP-447 checks
        assert commit() == 0

        def fetch(stable: bool) -> tuple[int, int]:
            r = c.call(OffsetFetchRequest(group_id="g", require_stable=stable, topics=[
                OffsetFetchRequest.OffsetFetchRequestTopic(name="src", partition_indexes=[0])]), 7)
            p = r.topics[0].partitions[0]
            return int(p.committed_offset), int(p.error_code)

        assert fetch(stable=False) == (-1, 0)  # not visible before the commit
        assert fetch(stable=True) == (-1, E.UNSTABLE_OFFSET_COMMIT)
        assert end(c, "offsets", pid, epoch, True) == 0
        assert fetch(stable=True) == (42, 0)


def test_idle_transactional_ids_expire(tmp_path: Any) -> None:
    props = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "logs"),
             "transactional.id.expiration.ms": "500",
             "transaction.remove.expired.transaction.cleanup.interval.ms": "100"}
    with Broker(props) as broker, WireClient(broker.bootstrap_servers) as c:
        first = init(c, "short-lived")
        assert first.error_code == 0

        def gone() -> bool:
            r = c.call(DescribeTransactionsRequest(transactional_ids=["short-lived"]), 0)
            return bool(r.transaction_states[0].error_code == E.TRANSACTIONAL_ID_NOT_FOUND)

        wait_until(gone, "the idle transactional id to expire")
        again = init(c, "short-lived")  # a new producer id: the old one was forgotten
        assert again.error_code == 0 and again.producer_id != first.producer_id and again.producer_epoch == 0
