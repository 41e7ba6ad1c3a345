"""CoordinatorLeadership: the group, transaction and share coordinators follow the
leaderships of __consumer_offsets, __transaction_state and __share_group_state partitions
(Kafka's onLeadershipChange), and the share groups their group ids' coordinators, against
fake coordinators and partitions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kbroker.common.topic_partition import TopicPartition
from kbroker.coordinator.coordinator_leadership import CoordinatorLeadership

OFFSETS, TXN, SHARE_STATE = "__consumer_offsets", "__transaction_state", "__share_group_state"


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

    def is_coordinator_for(self, group_id: str) -> bool:
        return int(group_id.split("-")[1]) in self.owned_partitions  # "g-<its offsets partition>"


@dataclass
class FakeShareGroups:
    groups: set[str] = field(default_factory=set)

    def on_resigned(self, coordinated_elsewhere: Any) -> None:
        self.groups = {g for g in self.groups if not coordinated_elsewhere(g)}


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


def leadership(partitions: dict[TopicPartition, FakePartition], share_groups: FakeShareGroups | None = None,
               share_state: FakeGroupCoordinator | None = None) -> tuple[
        CoordinatorLeadership, FakeGroupCoordinator, FakeTxnCoordinator]:
    groups, txns = FakeGroupCoordinator(), FakeTxnCoordinator()
    return CoordinatorLeadership(groups, txns, share_groups or FakeShareGroups(),  # type: ignore[arg-type]
                                 share_state or FakeGroupCoordinator(), partitions.get), groups, txns


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


def test_the_share_coordinator_follows_share_group_state_and_share_groups_their_group_ids() -> None:
    state, offsets = TopicPartition(SHARE_STATE, 1), TopicPartition(OFFSETS, 2)
    partitions = {state: FakePartition(state, True), offsets: FakePartition(offsets, True)}
    share_groups, share_state = FakeShareGroups(), FakeGroupCoordinator()
    changes, _groups, _txns = leadership(partitions, share_groups, share_state)
    changes.leadership_changed(list(partitions.values()), [])  # type: ignore[arg-type]
    share_groups.groups = {"g-2", "g-5"}  # a group of another partition is never here but says so
    partitions[offsets].is_leader = False
    partitions[state].is_leader = False
    changes.leadership_changed([], [partitions[offsets], partitions[state]])  # type: ignore[list-item]
    assert share_state.calls == [("elected", 1), ("resigned", 1)]
    assert share_groups.groups == set()
