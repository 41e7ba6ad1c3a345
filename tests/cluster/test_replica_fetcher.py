"""ReplicaFetcher against a scripted leader: an answer applies only to the fetch state it
was asked for. A LeaderAndIsr that arrives while a request is in flight replaces the
partition's state (a new leader epoch); the late answer, made for the old epoch, must
not act on the new state (a FENCED_LEADER_EPOCH for the old epoch would otherwise drop
the partition for good: the controller has already spoken)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kbroker.cluster import replica_fetcher
from kbroker.cluster.partition import Partition, PartitionState
from kbroker.cluster.replica_fetcher import FetcherConfig, ReplicaFetcherManager
from kbroker.common.error_code import ErrorCode
from kbroker.common.topic_partition import TopicPartition
from kbroker.protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)

TP = TopicPartition("t", 0)
OTHER = TopicPartition("t", 1)  # keeps the fetcher busy, so that it is not replaced
LEADER = 2


class StubLog:
    """What the fetcher reads of a follower's log before fetching."""

    latest_epoch = 0
    log_end_offset = 0
    log_start_offset = 0
    high_watermark = 0
    auto_high_watermark = False

    def end_offset_for_epoch(self, _epoch: int) -> tuple[int, int]:
        return -1, -1  # no epoch known: take the leader's end


def follower(tp: TopicPartition, epoch: int) -> Partition:
    partition = Partition(tp, 1, StubLog(), lambda: 0)  # type: ignore[arg-type]
    partition.make_follower(PartitionState(LEADER, epoch, (LEADER, 1), (LEADER, 1)))
    return partition


class ScriptedLeader:
    """Answers OffsetForLeaderEpoch: FENCED_LEADER_EPOCH below epoch 6; holds the first
    question about TP until `release` is set."""

    def __init__(self) -> None:
        self.asked: list[tuple[int, int]] = []  # (partition, current leader epoch)
        self.release = asyncio.Event()

    def channel(self, *_args: Any) -> ScriptedLeader:
        return self

    async def request(self, req: Any, _version: int, _timeout: float | None = None) -> Any:
        if not isinstance(req, OffsetForLeaderEpochRequest):
            await asyncio.Event().wait()  # fetches: no data, ever
        asks = [(p.partition, p.current_leader_epoch) for t in req.topics for p in t.partitions]
        self.asked += asks
        if (TP.partition, 5) in asks:
            await self.release.wait()
        return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=[
            OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult(topic=TP.topic, partitions=[
                OffsetForLeaderEpochResponse.EpochEndOffset(
                    error_code=ErrorCode.FENCED_LEADER_EPOCH if epoch < 6 else ErrorCode.NONE,
                    partition=p, leader_epoch=epoch, end_offset=0)
                for p, epoch in asks])])

    def reset(self) -> None:
        pass

    def close(self) -> None:
        pass


async def late_fenced_answer(leader: ScriptedLeader) -> bool:
    manager = ReplicaFetcherManager(1, FetcherConfig(), lambda _b: ("127.0.0.1", 1))
    manager.add_partitions([follower(TP, 5), follower(OTHER, 7)])
    for _ in range(100):
        if (TP.partition, 5) in leader.asked:
            break
        await asyncio.sleep(0.01)
    manager.add_partitions([follower(TP, 6)])  # LeaderAndIsr: epoch 6, the epoch-5 ask unanswered
    leader.release.set()
    for _ in range(100):
        if (TP.partition, 6) in leader.asked or not manager.fetching(TP):
            break
        await asyncio.sleep(0.01)
    fetching = manager.fetching(TP)
    manager.shutdown()
    return fetching


def test_a_late_answer_for_an_old_epoch_does_not_drop_the_new_state(
        monkeypatch: pytest.MonkeyPatch) -> None:
    leader = ScriptedLeader()
    monkeypatch.setattr(replica_fetcher, "BrokerChannel", leader.channel)
    fetching = asyncio.run(late_fenced_answer(leader))
    assert fetching, "the answer to epoch 5 dropped the partition the controller moved to epoch 6"
    assert (TP.partition, 6) in leader.asked


def test_no_fetcher_starts_after_shutdown() -> None:
    """A LeaderAndIsr handled while the broker stops (seen in `kbroker cluster up`'s stop:
    a follower's fetcher started after the fetchers were shut down kept retrying its
    leader every second and the process never exited)."""
    async def late_leader_and_isr() -> tuple[int, bool]:
        manager = ReplicaFetcherManager(1, FetcherConfig(), lambda _b: None)
        manager.add_partitions([follower(OTHER, 7)])
        running = len(manager.fetchers)
        manager.shutdown()
        manager.add_partitions([follower(TP, 8)])
        return running, bool(manager.fetchers) or manager.fetching(TP)

    running, after = asyncio.run(late_leader_and_isr())
    assert running == 1 and after is False


def test_reconfigure_respreads_the_partitions_over_the_new_fetcher_count() -> None:
    """Kafka's resizeThreadPool: a dynamic num.replica.fetchers moves every partition
    fetched to the fetcher its id now names; the same count leaves the fetchers be."""
    async def resize() -> tuple[bool, dict[tuple[int, int], set[int]], dict[tuple[int, int], set[int]]]:
        manager = ReplicaFetcherManager(1, FetcherConfig(num_replica_fetchers=1), lambda _b: None)
        partitions = [follower(TopicPartition("t", i), 7) for i in range(8)]
        manager.add_partitions(partitions)
        same = dict(manager.fetchers)
        manager.reconfigure(FetcherConfig(num_replica_fetchers=1))
        kept = same == manager.fetchers
        manager.reconfigure(FetcherConfig(num_replica_fetchers=4))
        expected: dict[tuple[int, int], set[int]] = {}
        for p in partitions:
            expected.setdefault((LEADER, manager.fetcher_id(p.topic_partition)), set()).add(
                p.topic_partition.partition)
        spread = {key: {tp.partition for tp in f.partitions} for key, f in manager.fetchers.items()}
        manager.shutdown()
        return kept, expected, spread

    kept, expected, spread = asyncio.run(resize())
    assert kept
    assert len(expected) > 1
    assert spread == expected
