"""CoordinatorLeadership: the coordinators move with the leaderships of their topics'
partitions (Kafka's KafkaApis.onLeadershipChange), in cluster mode.

A LeaderAndIsr that makes this broker the leader of a __consumer_offsets partition makes
it that partition's groups' coordinator (the group coordinator loads them); one of
__transaction_state its transactional ids' (a new leader epoch is a new coordinator
epoch: the partition reloads); one of __share_group_state the share coordinator of its
share partitions' state (loaded then). The share groups (membership) follow their group
ids' __consumer_offsets partitions, as the groups do. A follower, or a partition no longer led here at all (a
StopReplica, a leadership lost meanwhile), resigns.

Owns: nothing (the coordinators own what they coordinate; the ReplicaManager its
partitions). Registered with the ReplicaManager (`add_leadership_listener`) by the wiring.

Lock: the broker's event-loop thread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from kbroker.cluster.partition import Partition
from kbroker.common.topic_partition import TopicPartition
from kbroker.coordinator.group_coordinator import GroupCoordinator
from kbroker.coordinator.offsets_topic import GROUP_METADATA_TOPIC_NAME
from kbroker.coordinator.share_coordinator import SHARE_GROUP_STATE_TOPIC_NAME, ShareCoordinator
from kbroker.coordinator.share_group import ShareGroupCoordinator
from kbroker.coordinator.transaction_coordinator import TransactionCoordinator
from kbroker.coordinator.transaction_topic import TRANSACTION_STATE_TOPIC_NAME


class PartitionCoordinator(Protocol):
    """The group coordinator's and the share coordinator's part in this (Kafka's
    onElection / onResignation)."""

    owned_partitions: set[int] | None

    def on_elected(self, partition: int) -> None: ...

    def on_resigned(self, partition: int) -> None: ...


class CoordinatorLeadership:
    """See the module docstring. `partition_of` is the ReplicaManager's partition lookup."""

    def __init__(self, group_coordinator: GroupCoordinator, txn_coordinator: TransactionCoordinator,
                 share_groups: ShareGroupCoordinator, share_coordinator: ShareCoordinator,
                 partition_of: Callable[[TopicPartition], Partition | None]) -> None:
        self.group_coordinator = group_coordinator
        self.txn_coordinator = txn_coordinator
        self.share_groups = share_groups
        self.share_coordinator = share_coordinator
        self._partition_of = partition_of

    def leadership_changed(self, leaders: list[Partition], followers: list[Partition]) -> None:
        self._offsets_leadership(leaders, followers)
        self._transaction_leadership(leaders, followers)
        self._share_state_leadership(leaders, followers)

    def _led_here(self, tp: TopicPartition) -> bool:
        partition = self._partition_of(tp)
        return partition is not None and partition.is_leader

    def _offsets_leadership(self, leaders: list[Partition], followers: list[Partition]) -> None:
        coordinator = self.group_coordinator
        self._follow(GROUP_METADATA_TOPIC_NAME, coordinator, leaders, followers)
        self.share_groups.on_resigned(lambda group_id: not coordinator.is_coordinator_for(group_id))

    def _share_state_leadership(self, leaders: list[Partition], followers: list[Partition]) -> None:
        self._follow(SHARE_GROUP_STATE_TOPIC_NAME, self.share_coordinator, leaders, followers)

    def _follow(self, topic: str, coordinator: PartitionCoordinator, leaders: list[Partition],
                followers: list[Partition]) -> None:
        """A coordinator of a topic's partitions: elected where it leads, resigned where it
        follows or no longer leads."""
        for p in leaders:
            if p.topic_partition.topic == topic:
                coordinator.on_elected(p.topic_partition.partition)
        for p in followers:
            if p.topic_partition.topic == topic:
                coordinator.on_resigned(p.topic_partition.partition)
        for index in list(coordinator.owned_partitions or set()):
            if not self._led_here(TopicPartition(topic, index)):
                coordinator.on_resigned(index)

    def _transaction_leadership(self, leaders: list[Partition], followers: list[Partition]) -> None:
        coordinator = self.txn_coordinator
        for p in leaders:
            if p.topic_partition.topic == TRANSACTION_STATE_TOPIC_NAME:
                index = p.topic_partition.partition
                entry = coordinator.state.caches.get(index)
                if entry is None or entry.coordinator_epoch != p.leader_epoch:
                    coordinator.on_elected(index, p.leader_epoch)
        for p in followers:
            if p.topic_partition.topic == TRANSACTION_STATE_TOPIC_NAME:
                coordinator.on_resigned(p.topic_partition.partition)
        for index in list(coordinator.state.caches):
            if not self._led_here(TopicPartition(TRANSACTION_STATE_TOPIC_NAME, index)):
                coordinator.on_resigned(index)
