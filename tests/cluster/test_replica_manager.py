"""ReplicaManager.append_records and its produce purgatory, and fetch_messages and its fetch
purgatory, in process, on a fake clock (as Kafka's ReplicaManagerTest / PartitionTest):
acks 1 and all, min.insync.replicas before and after the append, timeouts, a follower's
fetch completing acks=all inside itself, leadership moving and fencing, the coordinators'
wait_for_replication; a consumer's read up to the high watermark (read_committed: the
last stable offset, with the aborted transactions), a follower's up to the log end
moving the high watermark and the ISR, min_bytes parking until an append or the
deadline, leader epochs fenced."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest

from kbroker.cluster.delayed_produce import PartitionAppendResult
from kbroker.cluster.fetch_params import (
    FetchInfo,
    FetchParams,
    FetchResult,
    PartitionData,
    PartitionFetchInfo,
)
from kbroker.cluster.fetch_session import CachedPartition
from kbroker.cluster.partition import Partition, PartitionState
from kbroker.cluster.replica_manager import LeaderAndIsrPartition, ReplicaManager
from kbroker.common.error_code import ErrorCode
from kbroker.common.topic_partition import TopicPartition
from kbroker.metadata.topic_registry import TopicInfo
from kbroker.protocol.messages.fetch import FetchRequest
from kbroker.records.batch_header import TRANSACTIONAL_BIT
from kbroker.records.control_record import end_txn_marker
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_manager import LogManager
from kbroker.storage.producer_state import AppendOrigin
from kbroker.utils.time import MockTime
from kbroker.utils.timer import MockTimer
from tests.batches import decode_batches, make_batch, values_batch

LOCAL, FOLLOWER = 1, 2
TOPIC = "t"
TP0, TP1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)
TIMEOUT_MS = 30_000
LAG_MS = 10_000


class Topics:
    """The topic catalog the ReplicaManager asks: one topic of two partitions."""

    def __init__(self) -> None:
        self.info = TopicInfo(TOPIC, uuid.uuid4(), 2)

    def get(self, name: str) -> TopicInfo | None:
        return self.info if name == TOPIC else None


class Env:
    def __init__(self, path: str, min_isr: int) -> None:
        self.time = MockTime()
        self.timer = MockTimer()
        self.log_manager = LogManager([path], LogConfig(min_insync_replicas=min_isr), self.time,
                                      replicated=True)
        self.log_manager.startup()
        self.topics = Topics()
        self.replica_manager = ReplicaManager(
            LOCAL, self.log_manager, self.topics, self.time.milliseconds,  # type: ignore[arg-type]
            clustered=True, replica_lag_time_max_ms=LAG_MS, timer=self.timer)
        self.answers: list[list[PartitionAppendResult]] = []
        self.controller_epoch = 1

    async def lead(self, isr: tuple[int, ...] = (LOCAL, FOLLOWER), epoch: int = 1, leader: int = LOCAL,
                   partition_epoch: int = 0, tps: tuple[TopicPartition, ...] = (TP0, TP1)) -> None:
        result = await self.replica_manager.become_leader_or_follower(0, self.controller_epoch, [
            LeaderAndIsrPartition(tp, self.topics.info.topic_id,
                                  PartitionState(leader, epoch, isr, (LOCAL, FOLLOWER), partition_epoch))
            for tp in tps])
        assert set(result.errors.values()) == {ErrorCode.NONE}

    def partition(self, tp: TopicPartition = TP0) -> Partition:
        partition = self.replica_manager.get_partition(tp)
        assert partition is not None
        return partition

    def produce(self, acks: int, *tps: TopicPartition, records: int = 3) -> None:
        self.replica_manager.append_records(
            TIMEOUT_MS, acks, AppendOrigin.CLIENT, [(tp, values_batch(records)) for tp in tps or (TP0,)],
            self.answers.append)

    def follower_fetches(self, tp: TopicPartition = TP0) -> None:
        """The follower fetches from the leader's log end: it holds everything."""
        leo = self.partition(tp).local_log().log_end_offset
        self.partition(tp).update_follower_fetch_state(FOLLOWER, leo, leo)

    def codes(self) -> list[list[int]]:
        return [[r.error_code for r in results] for results in self.answers]

    def fetch(self, replica_id: int = -1, offset: int = 0, *, tp: TopicPartition = TP0,
              min_bytes: int = 0, max_wait_ms: int = 500, isolation_level: int = 0,
              leader_epoch: int = -1, infos: list[FetchInfo] | None = None) -> Fetched:
        fetched = Fetched()
        self.replica_manager.fetch_messages(
            FetchParams(replica_id, max_wait_ms, min_bytes, 1 << 20, isolation_level),
            infos if infos is not None else [PartitionFetchInfo(tp, fetch_partition(tp, offset, leader_epoch))],
            fetched)
        return fetched


def fetch_partition(tp: TopicPartition, offset: int, leader_epoch: int = -1) -> FetchRequest.FetchPartition:
    return FetchRequest.FetchPartition(partition=tp.partition, fetch_offset=offset,
                                       current_leader_epoch=leader_epoch, partition_max_bytes=1 << 20)


class Fetched:
    """A FetchResponder that keeps the results it is answered."""

    def __init__(self) -> None:
        self.results: list[FetchResult] = []
        self.done = False

    def shutting_down(self) -> bool:
        return False

    def respond(self, result: FetchResult) -> None:
        self.results.append(result)

    def fail(self, error: BaseException) -> None:
        raise AssertionError(error)

    @property
    def data(self) -> PartitionData:
        """The one answer's one partition."""
        assert len(self.results) == 1 and len(self.results[0].partitions) == 1
        return self.results[0].partitions[0][1]

    def offsets(self) -> list[int]:
        records = self.data.records
        data = records if isinstance(records, bytes) else records.read_bytes()
        return [r[0] for _b, _e, recs in decode_batches(data) for r in recs]


@pytest.fixture
def env(tmp_path: Any) -> Iterator[Env]:
    e = Env(str(tmp_path), min_isr=2)
    yield e
    e.log_manager.shutdown()


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_acks_1_is_answered_inside_the_append_and_counted(env: Env) -> None:
    async def scenario() -> None:
        await env.lead()
        env.produce(1)
        env.produce(1)
        assert [[r.base_offset for r in results] for results in env.answers] == [[0], [3]]
        assert env.partition().local_log().high_watermark == 0  # the follower has not fetched
        stats = env.replica_manager.topic_stats.topic(TOPIC)
        assert (stats.total_produce_requests, stats.messages_in) == (2, 6)
    run(scenario())


def test_acks_all_is_answered_inside_the_follower_fetch_that_moves_the_high_watermark(env: Env) -> None:
    async def scenario() -> None:
        await env.lead()
        env.produce(-1)
        assert env.answers == [] and env.replica_manager.delayed_produce_purgatory.watched == 1
        env.follower_fetches()
        assert env.codes() == [[ErrorCode.NONE]] and env.answers[0][0].base_offset == 0
        assert env.replica_manager.delayed_produce_purgatory.watched == 0
    run(scenario())


def test_acks_all_of_several_partitions_is_answered_once_all_are_replicated(env: Env) -> None:
    async def scenario() -> None:
        await env.lead()
        env.produce(-1, TP0, TP1, TopicPartition("unknown", 0))
        env.follower_fetches(TP0)
        assert env.answers == []
        env.follower_fetches(TP1)
        assert env.codes() == [[ErrorCode.NONE, ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]]
    run(scenario())


def test_acks_all_times_out_with_request_timed_out(env: Env) -> None:
    async def scenario() -> None:
        await env.lead()
        env.produce(-1)
        env.timer.advance(TIMEOUT_MS / 1000 - 0.001)
        assert env.answers == []
        env.timer.advance(0.001)
        assert env.codes() == [[ErrorCode.REQUEST_TIMED_OUT]] and env.answers[0][0].base_offset == -1
        env.follower_fetches()  # too late: nothing more is answered
        assert len(env.answers) == 1
        assert env.timer.pending == 0
    run(scenario())


def test_an_isr_below_min_insync_replicas_refuses_acks_all_and_stores_nothing(env: Env) -> None:
    async def scenario() -> None:
        await env.lead(isr=(LOCAL,))
        env.produce(-1)
        env.produce(1)  # acks=1 does not ask for replicas
        assert env.codes() == [[ErrorCode.NOT_ENOUGH_REPLICAS], [ErrorCode.NONE]]
        assert env.answers[1][0].base_offset == 0
    run(scenario())


def test_an_isr_that_shrank_below_min_insync_replicas_answers_after_the_append(env: Env) -> None:
    async def scenario() -> None:
        await env.lead()
        env.produce(-1)
        env.time.sleep(LAG_MS + 1)  # the follower is no longer caught up: not waited for
        await env.lead(isr=(LOCAL,), epoch=1, partition_epoch=1)  # the ISR shrank (AlterPartition)
        assert env.codes() == [[ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND]]
    run(scenario())


def test_a_leadership_that_moves_answers_not_leader(env: Env) -> None:
    async def scenario() -> None:
        await env.lead()
        env.produce(-1)
        await env.lead(epoch=2, leader=FOLLOWER)
        assert env.codes() == [[ErrorCode.NOT_LEADER_OR_FOLLOWER]]
    run(scenario())


def test_a_fenced_broker_answers_not_leader_and_takes_no_writes(env: Env) -> None:
    async def scenario() -> None:
        await env.lead()
        env.produce(-1)
        env.replica_manager.set_zk_fenced(True)
        env.produce(1)
        assert env.codes() == [[ErrorCode.NOT_LEADER_OR_FOLLOWER], [ErrorCode.NOT_LEADER_OR_FOLLOWER]]
    run(scenario())


def test_wait_for_replication_resolves_when_the_follower_holds_the_offset(env: Env) -> None:
    async def scenario() -> None:
        await env.lead()
        info = env.replica_manager.append_to_leader(TP0, values_batch(2), -1, AppendOrigin.CLIENT)
        waited = env.replica_manager.wait_for_replication(TP0, info.last_offset + 1, 1, TIMEOUT_MS)
        assert isinstance(waited, asyncio.Future) and not waited.done()
        env.follower_fetches()
        assert waited.done() and waited.result() == ErrorCode.NONE
        assert env.replica_manager.wait_for_replication(TP0, info.last_offset + 1, 1, TIMEOUT_MS) == ErrorCode.NONE
    run(scenario())


def test_a_cancelled_wait_for_replication_is_forgotten(env: Env) -> None:
    async def scenario() -> None:
        await env.lead()
        env.replica_manager.append_to_leader(TP0, values_batch(2), 1, AppendOrigin.CLIENT)
        waited = env.replica_manager.wait_for_replication(TP0, 2, 1, TIMEOUT_MS)
        assert isinstance(waited, asyncio.Future)
        waited.cancel()
        await asyncio.sleep(0)  # the future's done callbacks run on the loop
        assert env.replica_manager.delayed_produce_purgatory.watched == 0
    run(scenario())


# -- fetch_messages ------------------------------------------------------------------------------
def test_a_consumer_reads_up_to_the_high_watermark_and_counts_its_fetches(env: Env) -> None:
    async def scenario() -> None:
        await env.lead()
        env.produce(1)
        early = env.fetch()
        assert early.offsets() == [] and early.data.high_watermark == 0
        env.follower_fetches()
        assert env.fetch().offsets() == [0, 1, 2]
        assert env.fetch(offset=3).offsets() == []
        assert env.fetch(offset=4).data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        stats = env.replica_manager.topic_stats.topic(TOPIC)
        assert (stats.total_fetch_requests, stats.failed_fetch_requests) == (4, 0)
    run(scenario())


def test_a_follower_reads_up_to_the_log_end_and_its_fetch_moves_the_high_watermark(env: Env) -> None:
    async def scenario() -> None:
        await env.lead()
        env.produce(-1)
        first = env.fetch(FOLLOWER)
        assert first.offsets() == [0, 1, 2] and first.data.high_watermark == 0
        assert env.answers == []  # acks=all waits for the follower's next fetch
        caught_up = env.fetch(FOLLOWER, offset=3)
        assert caught_up.offsets() == [] and caught_up.data.high_watermark == 3
        assert env.codes() == [[ErrorCode.NONE]]
        out_of_range = env.fetch(FOLLOWER, offset=7).data
        assert (out_of_range.error_code, out_of_range.log_start_offset, out_of_range.high_watermark) == (
            ErrorCode.OFFSET_OUT_OF_RANGE, 0, 3)
    run(scenario())


def test_a_follower_that_caught_up_is_proposed_for_the_isr(env: Env) -> None:
    proposed: list[tuple[int, ...]] = []

    def alter_isr(partition: Partition, isr: tuple[int, ...]) -> Future[PartitionState]:
        proposed.append(isr)
        return Future()

    async def scenario() -> None:
        env.replica_manager.alter_isr = alter_isr  # type: ignore[assignment]
        await env.lead(isr=(LOCAL,))
        env.produce(1)
        assert env.fetch(FOLLOWER).offsets() == [0, 1, 2] and proposed == []
        env.fetch(FOLLOWER, offset=3)
        assert proposed == [(LOCAL, FOLLOWER)]
    run(scenario())


def txn_batch(pid: int, n: int = 2) -> bytes:
    return make_batch([f"{pid}-{i}".encode() for i in range(n)], producer_id=pid, producer_epoch=0,
                      base_sequence=0, attributes=TRANSACTIONAL_BIT)


def test_read_committed_stops_at_the_last_stable_offset_with_the_aborted_transactions(env: Env) -> None:
    async def scenario() -> None:
        await env.lead(isr=(LOCAL,))
        partition = env.partition()
        partition.append_records_to_leader(txn_batch(7), 1)  # 0-1, aborted at 2
        partition.append_records_to_leader(end_txn_marker(7, 0, False, 0, 1_700_000_000_000), 1,
                                           origin=AppendOrigin.COORDINATOR)
        partition.append_records_to_leader(txn_batch(8), 1)  # 3-4, still open
        committed = env.fetch(isolation_level=1).data
        assert (committed.high_watermark, committed.last_stable_offset) == (5, 3)
        assert [(t.producer_id, t.first_offset) for t in committed.aborted_transactions] == [(7, 0)]
        assert env.fetch(isolation_level=1).offsets() == [0, 1, 2]
        uncommitted = env.fetch()
        assert uncommitted.offsets() == [0, 1, 2, 3, 4] and uncommitted.data.aborted_transactions is None
    run(scenario())


def test_min_bytes_parks_the_fetch_until_an_append_wakes_it(env: Env) -> None:
    async def scenario() -> None:
        await env.lead(isr=(LOCAL,))
        parked = env.fetch(min_bytes=1)
        assert parked.results == [] and env.replica_manager.delayed_fetch_purgatory.watched == 1
        env.produce(1)
        assert parked.offsets() == [0, 1, 2]
        assert env.replica_manager.delayed_fetch_purgatory.watched == 0
    run(scenario())


def test_a_parked_fetch_answers_what_there_is_at_its_deadline(env: Env) -> None:
    async def scenario() -> None:
        await env.lead()  # the follower holds nothing: the high watermark stays at 0
        parked = env.fetch(min_bytes=1, max_wait_ms=500)
        env.produce(1)
        assert parked.results == []
        env.timer.advance(0.499)
        assert parked.results == []
        env.timer.advance(0.001)
        assert parked.offsets() == [] and parked.data.high_watermark == 0
        assert env.replica_manager.delayed_fetch_purgatory.watched == 0
        assert env.fetch(min_bytes=1, max_wait_ms=0).offsets() == []  # no wait: answered at once
    run(scenario())


def test_leader_epochs_are_fenced_and_only_the_leader_answers(env: Env) -> None:
    async def scenario() -> None:
        await env.lead(epoch=3)
        assert env.fetch(leader_epoch=2, min_bytes=1).data.error_code == ErrorCode.FENCED_LEADER_EPOCH
        assert env.fetch(leader_epoch=4, min_bytes=1).data.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
        assert env.fetch(leader_epoch=3).data.error_code == ErrorCode.NONE
        await env.lead(epoch=4, leader=FOLLOWER)
        assert env.fetch(FOLLOWER, min_bytes=1).data.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert env.replica_manager.delayed_fetch_purgatory.watched == 0
    run(scenario())


def test_a_session_partition_with_nothing_new_is_left_out_and_keeps_its_follower_caught_up(env: Env) -> None:
    async def scenario() -> None:
        await env.lead()
        env.produce(1)
        env.follower_fetches()
        cached = CachedPartition(TOPIC, env.topics.info.topic_id, fetch_partition(TP0, 3))
        first = env.fetch(FOLLOWER, infos=[cached])
        assert first.data.high_watermark == 3 and first.offsets() == []
        cached.answered(first.data)  # as the session's answer remembers it
        assert env.fetch(FOLLOWER, infos=[cached]).results[0].partitions == []  # nothing new: left out
        assert cached.quiet is not None
        follower = env.partition().followers[FOLLOWER]
        env.time.sleep(LAG_MS)
        assert env.fetch(FOLLOWER, infos=[cached]).results[0].partitions == []
        assert follower.last_caught_up_ms == env.time.milliseconds()
        env.produce(1)  # the log moved: read again, from where the session left it
        assert env.fetch(FOLLOWER, infos=[cached]).offsets() == [3, 4, 5] and cached.quiet is None
        stats = env.replica_manager.topic_stats.topic(TOPIC)
        assert stats.total_fetch_requests == 4
    run(scenario())


@pytest.mark.parametrize("replica_id", [-1, FOLLOWER], ids=["consumer", "follower"])
def test_a_parked_fetch_by_topic_id_answers_unknown_topic_id_once_the_topic_is_made_again(
        env: Env, replica_id: int) -> None:
    async def scenario() -> None:
        await env.lead()
        old_id = env.topics.info.topic_id
        info = PartitionFetchInfo(TP0, fetch_partition(TP0, 0), topic_id=old_id)
        parked = env.fetch(replica_id, min_bytes=1, infos=[info])
        assert parked.results == []
        env.topics.info = TopicInfo(TOPIC, uuid.uuid4(), 2)  # deleted, and made again by name
        env.produce(1)
        assert parked.data.error_code == ErrorCode.UNKNOWN_TOPIC_ID
    run(scenario())
