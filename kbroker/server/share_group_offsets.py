"""ShareGroupOffsets: what the share-group admin APIs read and change, as Kafka's
GroupCoordinatorService / GroupMetadataManager do for DescribeShareGroupOffsets,
AlterShareGroupOffsets, DeleteShareGroupOffsets and DeleteGroups of a share group (read,
not copied).

A share group's "offsets" are its share partitions' states: each one's start offset
(SPSO) and the records in flight above it, kept by the share coordinator in
`__share_group_state` (coordinator/share_coordinator.py) and, once a member fetched the
partition since the broker started, by its SharePartition in memory
(server/share_partition_manager.py), which writes every change it answers through the
share coordinator. So:

- describe reads the SharePartition when there is one, else the persisted state; a
  partition the group never initialized answers start offset -1 (Kafka's
  UNINITIALIZED_START_OFFSET) without error, as a topic that does not exist does. Lag
  (v1, KIP-1226) is Kafka's `high watermark - start offset - delivery complete count`
  (the records above the SPSO already acknowledged or archived); -1 where the start
  offset is -1;
- alter and delete need the group to exist (GROUP_ID_NOT_FOUND) and to have no members
  (NON_EMPTY_GROUP); alter writes a new state (start offset as asked, nothing in flight,
  the state epoch bumped), delete writes tombstones; either drops the SharePartition in
  memory, so the next fetch rebuilds it from the new state (after a delete: from the
  group's `share.auto.offset.reset`);
- deleting the group deletes every share partition state of it, then the group.

A share group exists while the coordinator knows it: it has had a member since the
broker started, or it has a share partition state (ShareGroups loads those groups, empty,
at startup, as Kafka's coordinator replays its records).

Lock: the broker's event-loop thread only.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kbroker.common.error_code import ErrorCode
from kbroker.coordinator.share_coordinator import (
    PersistedState,
    ShareCoordinator,
    SharePartitionKey,
)
from kbroker.coordinator.share_group import ShareGroupCoordinator
from kbroker.coordinator.share_partition import RecordState, StateBatch
from kbroker.server.share_partition_manager import SharePartitionManager

if TYPE_CHECKING:
    from kbroker.cluster.metadata_cache import TopicCatalog
    from kbroker.cluster.replica_manager import ReplicaManager

E = ErrorCode
UNINITIALIZED_START_OFFSET = -1
UNINITIALIZED_LAG = -1
DEFAULT_LEADER_EPOCH = 0
ZERO_UUID = uuid.UUID(int=0)
_COMPLETE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


class GroupError(Exception):
    """A whole request's (or group's) error: its code and message."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class PartitionOffset:
    """One partition of a DescribeShareGroupOffsets answer."""

    partition: int
    start_offset: int = UNINITIALIZED_START_OFFSET
    leader_epoch: int = DEFAULT_LEADER_EPOCH
    lag: int = UNINITIALIZED_LAG
    error_code: int = E.NONE


@dataclass(frozen=True)
class TopicOffsets:
    name: str
    topic_id: uuid.UUID
    partitions: list[PartitionOffset]


def delivery_complete_count(batches: Iterable[StateBatch], start_offset: int) -> int:
    """The offsets at or above the start offset already acknowledged or archived."""
    return sum(b.last_offset - max(b.first_offset, start_offset) + 1 for b in batches
               if b.delivery_state in _COMPLETE and b.last_offset >= start_offset)


class ShareGroupOffsets:
    def __init__(self, coordinator: ShareGroupCoordinator, state: ShareCoordinator,
                 partitions: SharePartitionManager, topics: TopicCatalog,
                 replica_manager: ReplicaManager) -> None:
        self.coordinator = coordinator
        self.state = state
        self.partitions = partitions
        self.topics = topics
        self.replica_manager = replica_manager

    # -- the group
    def check_group(self, group_id: str, alterable: bool) -> None:
        """INVALID_GROUP_ID, GROUP_ID_NOT_FOUND or (`alterable`) NON_EMPTY_GROUP."""
        if not group_id:
            raise GroupError(E.INVALID_GROUP_ID, "The group id must not be empty.")
        group = self.coordinator.describe(group_id)
        if group is None:
            raise GroupError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        if alterable and group.members:
            raise GroupError(E.NON_EMPTY_GROUP, f"Share group {group_id} has members; "
                             "its offsets can be changed only while it is empty.")

    def keys_of(self, group_id: str, topic_id: uuid.UUID | None = None) -> list[SharePartitionKey]:
        """The group's share partitions (of one topic), persisted or in memory."""
        keys = {k for k in self.state.states if k[0] == group_id}
        keys.update(k for k in self.partitions.partitions if k[0] == group_id)
        return sorted((k for k in keys if topic_id is None or k[1] == topic_id), key=lambda k: (str(k[1]), k[2]))

    # -- DescribeShareGroupOffsets
    def describe(self, group_id: str, topics: list[tuple[str, list[int]]] | None) -> list[TopicOffsets]:
        """Each named topic's partitions; `topics` None: every share partition of the
        group (GROUP_ID_NOT_FOUND if there is no such share group)."""
        if not group_id:
            raise GroupError(E.INVALID_GROUP_ID, "The group id must not be empty.")
        if topics is None:
            self.check_group(group_id, alterable=False)
            by_topic: dict[uuid.UUID, list[int]] = {}
            for _g, topic_id, partition in self.keys_of(group_id):
                by_topic.setdefault(topic_id, []).append(partition)
            named = [(info.name, ps) for t, ps in by_topic.items()
                     if (info := self.topics.get_by_id(t)) is not None]
            return [self._describe_topic(group_id, name, ps) for name, ps in named]
        return [self._describe_topic(group_id, name, ps) for name, ps in topics]

    def _describe_topic(self, group_id: str, name: str, partitions: list[int]) -> TopicOffsets:
        info = self.topics.get(name)
        if info is None:  # absence of data, not an error (Kafka's answer)
            return TopicOffsets(name, ZERO_UUID, [PartitionOffset(p) for p in partitions])
        return TopicOffsets(name, info.topic_id, [self._describe_partition((group_id, info.topic_id, p), name)
                                                  for p in partitions])

    def _describe_partition(self, key: SharePartitionKey, name: str) -> PartitionOffset:
        sp = self.partitions.partitions.get(key)
        persisted = self.state.read_state(key)
        if sp is not None:
            start, batches = sp.start_offset, sp.snapshot()
        elif persisted is not None:
            start, batches = persisted.start_offset, persisted.batches
        else:
            return PartitionOffset(key[2])
        epoch = persisted.leader_epoch if persisted is not None else DEFAULT_LEADER_EPOCH
        hwm = self.partitions.high_watermark(name, key[2])
        lag = UNINITIALIZED_LAG if hwm is None else hwm - start - delivery_complete_count(batches, start)
        return PartitionOffset(key[2], start, epoch, lag)

    # -- AlterShareGroupOffsets
    def alter(self, group_id: str, topic_id: uuid.UUID, partition: int, start_offset: int) -> int:
        """A new state for one share partition (the group checked by the caller): the
        start offset as asked, nothing in flight, the state epoch bumped."""
        if start_offset < 0:
            return E.INVALID_REQUEST
        key = (group_id, topic_id, partition)
        sp = self.partitions.partitions.get(key)
        old = self.state.read_state(key)
        epoch = max(sp.state_epoch if sp is not None else 0, old.state_epoch if old is not None else 0) + 1
        written = self.state.write_state(key, PersistedState(epoch, start_offset))
        # a single broker's API (api_table.SINGLE_BROKER_SHARE_APIS): answered at once
        code = written if isinstance(written, int) else E.UNKNOWN_SERVER_ERROR
        if code == E.NONE:
            self.partitions.forget(key)
        return code

    # -- DeleteShareGroupOffsets and DeleteGroups
    def delete(self, group_id: str, topic_id: uuid.UUID | None = None) -> int:
        """Tombstones for the group's share partitions (of one topic); the first error."""
        first: int = E.NONE
        for key in self.keys_of(group_id, topic_id):
            code = self.state.delete_state(key) if key in self.state.states else E.NONE
            if code == E.NONE:
                self.partitions.forget(key)
            elif first == E.NONE:
                first = code
        return first

    def delete_group(self, group_id: str) -> int:
        """DeleteGroups of a share group: GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP,
        GROUP_DELETION_FAILED (its state not deleted), or NONE."""
        try:
            self.check_group(group_id, alterable=True)
        except GroupError as e:
            return e.code
        if self.state.owned_partitions is not None:
            # a cluster: the group's states may be at other share coordinators, which no
            # request here deletes yet (Kafka's DeleteShareGroupState): refused, not half done
            return E.GROUP_DELETION_FAILED
        if self.delete(group_id) != E.NONE:
            return E.GROUP_DELETION_FAILED
        return self.coordinator.delete(group_id)
