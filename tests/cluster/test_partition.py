"""Partition on its own, on a fake clock, as Kafka's PartitionTest: the high watermark from
the followers' fetches (the lowest log end offset of the maximal ISR, never back), ISR
expansion and shrink proposed to the controller (one at a time, applied once it answers),
min.insync.replicas before the append and after it (check_enough_replicas_reach_offset),
leader epochs fenced, and what the Partition tells its ReplicaManager's purgatories."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest

from kbroker.cluster.partition import NotLeaderError, Partition, PartitionState
from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.common.topic_partition import TopicPartition
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_manager import LogManager
from kbroker.utils.time import MockTime
from tests.batches import values_batch

LEADER, F1, F2 = 1, 2, 3
TP = TopicPartition("t", 0)
LAG_MS = 10_000


class Purgatories:
    """The DelayedOperations a Partition tells: which checks it asked for."""

    def __init__(self) -> None:
        self.checks: list[str] = []

    def check_and_complete_fetch(self, tp: TopicPartition) -> None:
        self.checks.append("fetch")

    def check_and_complete_produce(self, tp: TopicPartition) -> None:
        self.checks.append("produce")


class Controller:
    """AlterPartition as the leader sees it: each proposal is a future the test answers."""

    def __init__(self) -> None:
        self.proposals: list[tuple[tuple[int, ...], Future[PartitionState]]] = []

    def alter_isr(self, partition: Partition, isr: tuple[int, ...]) -> Future[PartitionState]:
        fut: Future[PartitionState] = Future()
        self.proposals.append((isr, fut))
        return fut

    def accept(self, partition: Partition) -> None:
        """The last proposal written, with the next partition epoch."""
        isr, fut = self.proposals[-1]
        s = partition.state
        fut.set_result(PartitionState(s.leader, s.leader_epoch, isr, s.replicas, s.partition_epoch + 1))


class Env:
    def __init__(self, path: str) -> None:
        self.time = MockTime()
        self.log_manager = LogManager([path], LogConfig(min_insync_replicas=2), self.time,
                                      replicated=True)
        self.log_manager.startup()
        self.log = self.log_manager.get_or_create_log(TP, uuid.uuid4())
        self.purgatories = Purgatories()
        self.controller = Controller()
        self.partition = Partition(TP, LEADER, self.log, self.time.milliseconds,
                                   replica_lag_time_max_ms=LAG_MS,
                                   alter_isr=self.controller.alter_isr,  # type: ignore[arg-type]
                                   delayed_operations=self.purgatories)

    def lead(self, isr: tuple[int, ...] = (LEADER, F1, F2), epoch: int = 1) -> None:
        self.partition.make_leader(PartitionState(LEADER, epoch, isr, (LEADER, F1, F2)))

    def append(self, records: int = 3, acks: int = -1) -> int:
        """Append as leader; returns the offset after the batch."""
        return self.partition.append_records_to_leader(values_batch(records), acks).last_offset + 1

    def fetch(self, follower: int, offset: int) -> None:
        self.partition.update_follower_fetch_state(follower, offset, self.log.log_end_offset)


@pytest.fixture
def env(tmp_path: Any) -> Iterator[Env]:
    e = Env(str(tmp_path))
    yield e
    e.log_manager.shutdown()


def test_the_high_watermark_is_the_lowest_log_end_of_the_isr_and_never_goes_back(env: Env) -> None:
    env.lead()
    end = env.append(5)
    assert env.log.high_watermark == 0  # no follower holds anything yet
    env.fetch(F1, end)
    assert env.log.high_watermark == 0  # F2 holds nothing
    env.fetch(F2, 3)
    assert env.log.high_watermark == 3
    env.fetch(F2, end)
    assert env.log.high_watermark == end
    env.fetch(F2, 2)  # a follower that truncated: the high watermark stays
    assert env.log.high_watermark == end


def test_a_moved_high_watermark_tells_both_purgatories_and_an_append_tells_the_fetches(env: Env) -> None:
    env.lead(isr=(LEADER, F1))
    env.purgatories.checks.clear()
    end = env.append(2)
    assert env.purgatories.checks == ["fetch"]  # new data; the high watermark has not moved
    env.purgatories.checks.clear()
    env.fetch(F1, end)
    assert env.purgatories.checks == ["produce", "fetch"]
    env.purgatories.checks.clear()
    env.fetch(F1, end)  # the same offset again: nothing moved, nothing to tell
    assert env.purgatories.checks == []


def test_acks_all_below_min_insync_replicas_stores_nothing(env: Env) -> None:
    env.lead(isr=(LEADER,))
    with pytest.raises(KafkaError) as refused:
        env.append(acks=-1)
    assert refused.value.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert env.log.log_end_offset == 0
    assert env.append(acks=1) == 3  # acks=1 does not ask for the ISR
    assert env.partition.min_insync_replicas == 2  # the topic's, from its log


def test_enough_replicas_reach_the_offset_once_the_high_watermark_passes_it(env: Env) -> None:
    env.lead(isr=(LEADER, F1))
    end = env.append(3)
    p = env.partition
    assert p.check_enough_replicas_reach_offset(end, 2) is None  # still waiting
    env.fetch(F1, end)
    assert p.check_enough_replicas_reach_offset(end, 2) == ErrorCode.NONE
    p.make_leader(PartitionState(LEADER, 1, (LEADER,), (LEADER, F1, F2), 1))  # the ISR shrank
    assert p.check_enough_replicas_reach_offset(end, 2) == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    p.make_follower(PartitionState(F1, 2, (F1,), (LEADER, F1, F2), 2))
    assert p.check_enough_replicas_reach_offset(end, 2) == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_a_follower_that_caught_up_is_proposed_for_the_isr_once_and_joins_when_accepted(env: Env) -> None:
    env.lead(isr=(LEADER, F1))
    end = env.append(3)
    env.fetch(F1, end)
    assert env.log.high_watermark == end
    env.fetch(F2, 1)  # below the high watermark: not yet
    assert env.controller.proposals == []
    env.fetch(F2, end)
    assert [isr for isr, _ in env.controller.proposals] == [(LEADER, F1, F2)]
    assert env.partition.maximal_isr == (LEADER, F1, F2)  # counted for the high watermark already
    env.append(1)
    env.fetch(F2, end + 1)  # while one change is pending no other is proposed
    assert len(env.controller.proposals) == 1
    env.controller.accept(env.partition)
    assert env.partition.isr == (LEADER, F1, F2) and env.partition.pending_isr is None
    assert env.partition.state.partition_epoch == 1


def test_a_follower_not_caught_up_for_the_lag_time_is_shrunk_out_of_the_isr(env: Env) -> None:
    env.lead()
    end = env.append(3)
    env.fetch(F1, end)
    env.fetch(F2, end)
    env.append(3)  # F2 stops fetching here; F1 keeps up
    env.time.sleep(LAG_MS)
    env.fetch(F1, env.log.log_end_offset)
    env.partition.maybe_shrink_isr()
    assert env.controller.proposals == []  # exactly the lag time: still in sync
    env.time.sleep(1)
    env.partition.maybe_shrink_isr()
    assert [isr for isr, _ in env.controller.proposals] == [(LEADER, F1)]
    env.controller.accept(env.partition)
    assert env.partition.isr == (LEADER, F1)
    assert env.log.high_watermark == env.log.log_end_offset  # F2 is no longer waited for


def test_an_answer_to_an_older_leadership_is_ignored(env: Env) -> None:
    env.lead(isr=(LEADER, F1))
    env.fetch(F2, 0)  # holds all there is (nothing): proposed for the ISR
    assert len(env.controller.proposals) == 1
    env.lead(isr=(LEADER, F1), epoch=2)  # a LeaderAndIsr from the controller first
    env.controller.accept(env.partition)
    assert env.partition.isr == (LEADER, F1) and env.partition.leader_epoch == 2


def test_leader_epochs_are_fenced_with_kafkas_codes(env: Env) -> None:
    env.lead(epoch=5)
    env.partition.check_leader(5)
    env.partition.check_leader(-1)
    for epoch, code in ((4, ErrorCode.FENCED_LEADER_EPOCH), (6, ErrorCode.UNKNOWN_LEADER_EPOCH)):
        with pytest.raises(NotLeaderError) as fenced:
            env.partition.check_leader(epoch)
        assert fenced.value.error_code == code
    env.partition.fenced = True  # the broker lost ZooKeeper: no writes as leader
    with pytest.raises(NotLeaderError):
        env.append(acks=1)
