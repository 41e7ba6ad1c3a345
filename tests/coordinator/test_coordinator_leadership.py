"""CoordinatorLeadership: the group and transaction coordinators follow the leaderships
of __consumer_offsets and __transaction_state partitions (Kafka's onLeadershipChange),
against fake coordinators and partitions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kbroker.common.topic_partition import TopicPartition
from kbroker.coordinator.coordinator_leadership import CoordinatorLeadership

OFFSETS, TXN = "__consumer_offsets", "__transaction_state"


@dataclass
class FakePartition:
    topic_partition: TopicPartition
    is_leader: bool
    leader_epoch: int = 0


@dataclass
class FakeGroupCoordinator:
    owned_partitions: set[int] = field(default_factory=set)
    calls: list[tuple[str, int]] = field(default_factory=list)

    def on_elected(self, partition: int) -> None:
        self.calls.append(("elected", partition))
        self.owned_partitions.add(partition)

    def on_resigned(self, partition: int) -> None:
        self.calls.append(("resigned", partition))
        self.owned_partitions.discard(partition)


@dataclass
class CacheEntry:
    coordinator_epoch: int


@dataclass
class FakeTxnState:
    caches: dict[int, CacheEntry] = field(default_factory=dict)


@dataclass
class FakeTxnCoordinator:
    state: FakeTxnState = field(default_factory=FakeTxnState)
    calls: list[tuple[Any, ...]] = field(default_factory=list)

    def on_elected(self, partition: int, coordinator_epoch: int) -> None:
        self.calls.append(("elected", partition, coordinator_epoch))
        self.state.caches[partition] = CacheEntry(coordinator_epoch)

    def on_resigned(self, partition: int) -> None:
        self.calls.append(("resigned", partition))
        self.state.caches.pop(partition, None)


def leadership(partitions: dict[TopicPartition, FakePartition]) -> tuple[
        CoordinatorLeadership, FakeGroupCoordinator, FakeTxnCoordinator]:
    groups, txns = FakeGroupCoordinator(), FakeTxnCoordinator()
    return CoordinatorLeadership(groups, txns, partitions.get), groups, txns  # type: ignore[arg-type]


def test_a_leader_of_an_offsets_partition_coordinates_its_groups_until_it_follows() -> None:
    tp = TopicPartition(OFFSETS, 3)
    partitions = {tp: FakePartition(tp, True)}
    changes, groups, _txns = leadership(partitions)
    changes.leadership_changed([partitions[tp]], [])  # type: ignore[list-item]
    partitions[tp].is_leader = False
    changes.leadership_changed([], [partitions[tp]])  # type: ignore[list-item]
    assert groups.calls == [("elected", 3), ("resigned", 3)]


def test_a_partition_no_longer_led_here_resigns_its_coordinators() -> None:
    offsets, txn = TopicPartition(OFFSETS, 0), TopicPartition(TXN, 1)
    partitions = {offsets: FakePartition(offsets, True), txn: FakePartition(txn, True, 4)}
    changes, groups, txns = leadership(partitions)
    changes.leadership_changed(list(partitions.values()), [])  # type: ignore[arg-type]
    partitions.clear()  # StopReplica: the replicas are gone
    changes.leadership_changed([], [])
    assert groups.calls == [("elected", 0), ("resigned", 0)]
    assert txns.calls == [("elected", 1, 4), ("resigned", 1)]


def test_a_new_leader_epoch_is_a_new_transaction_coordinator_epoch() -> None:
    txn = TopicPartition(TXN, 2)
    partitions = {txn: FakePartition(txn, True, 5)}
    changes, _groups, txns = leadership(partitions)
    changes.leadership_changed([partitions[txn]], [])  # type: ignore[list-item]
    changes.leadership_changed([partitions[txn]], [])  # type: ignore[list-item]  the same epoch
    partitions[txn].leader_epoch = 6
    changes.leadership_changed([partitions[txn]], [])  # type: ignore[list-item]
    assert txns.calls == [("elected", 2, 5), ("elected", 2, 6)]


def test_other_topics_leave_the_coordinators_be() -> None:
    tp = TopicPartition("orders", 0)
    partitions = {tp: FakePartition(tp, True)}
    changes, groups, txns = leadership(partitions)
    changes.leadership_changed([partitions[tp]], [])  # type: ignore[list-item]
    assert groups.calls == [] and txns.calls == []
