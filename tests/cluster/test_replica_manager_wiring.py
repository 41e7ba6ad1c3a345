"""What the wiring gives the ReplicaManager at construction reaches it (cluster mode):
the broker epoch supplier, the fetchers a follower is handed to, and the leadership
listeners told of each LeaderAndIsr (in process, no ZooKeeper)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from kbroker.cluster.partition import Partition, PartitionState
from kbroker.cluster.replica_manager import LeaderAndIsrPartition, ReplicaManager
from kbroker.common.error_code import ErrorCode
from kbroker.common.topic_partition import TopicPartition
from kbroker.metadata.topic_registry import TopicInfo
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_manager import LogManager
from kbroker.utils.time import MockTime
from kbroker.utils.timer import MockTimer

LOCAL, OTHER = 1, 2
INFO = TopicInfo("t", uuid.uuid4(), 2)
TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


class Topics:
    def get(self, name: str) -> TopicInfo | None:
        return INFO if name == INFO.name else None


class RecordingFetchers:
    """The ReplicaFetcherManager's face the ReplicaManager uses."""

    def __init__(self) -> None:
        self.fetched: list[TopicPartition] = []

    def add_partitions(self, partitions: list[Partition]) -> None:
        self.fetched += [p.topic_partition for p in partitions]

    def remove_partitions(self, tps: list[TopicPartition]) -> None:
        self.fetched = [tp for tp in self.fetched if tp not in tps]


def test_the_collaborators_given_at_construction_are_used(tmp_path: Path) -> None:
    time = MockTime()
    log_manager = LogManager([str(tmp_path)], LogConfig(), time, replicated=True)
    log_manager.startup()
    fetchers = RecordingFetchers()
    epoch = [-1]
    heard: list[tuple[list[TopicPartition], list[TopicPartition]]] = []
    rm = ReplicaManager(LOCAL, log_manager, Topics(), time.milliseconds,  # type: ignore[arg-type]
                        clustered=True, timer=MockTimer(), fetchers=fetchers,  # type: ignore[arg-type]
                        broker_epoch=lambda: epoch[0])
    rm.add_leadership_listener(lambda leaders, followers: heard.append(
        ([p.topic_partition for p in leaders], [p.topic_partition for p in followers])))
    assert rm.broker_epoch == -1
    epoch[0] = 42  # registered
    assert rm.broker_epoch == 42

    async def leader_and_isr() -> set[int]:
        result = await rm.become_leader_or_follower(0, 1, [
            LeaderAndIsrPartition(TP0, INFO.topic_id, PartitionState(LOCAL, 1, (LOCAL, OTHER), (LOCAL, OTHER))),
            LeaderAndIsrPartition(TP1, INFO.topic_id, PartitionState(OTHER, 1, (LOCAL, OTHER), (LOCAL, OTHER)))])
        return set(result.errors.values())

    try:
        assert asyncio.run(leader_and_isr()) == {ErrorCode.NONE}
    finally:
        log_manager.shutdown()
    assert fetchers.fetched == [TP1]
    assert heard == [([TP0], [TP1])]
