"""ShareGroupOffsets: what the share-group admin APIs read and change, as Kafka's
GroupCoordinatorService / GroupMetadataManager do for DescribeShareGroupOffsets,
AlterShareGroupOffsets, DeleteShareGroupOffsets and DeleteGroups of a share group (read,
not copied).

A share group's "offsets" are its share partitions' states: each one's start offset
(SPSO) and the records in flight above it, kept by the share coordinator in
`__share_group_state` (coordinator/share_coordinator.py) and, once a member fetched the
partition since the broker started, by its SharePartition in memory on the partition's
leader (server/share_partition_manager.py), which writes every change it answers through
the share coordinator. The group coordinator reaches each key's share coordinator
through the persister (server/share_state_persister.py, Kafka's DefaultStatePersister):
on a single broker directly, in a cluster with ReadShareGroupStateSummary,
InitializeShareGroupState and DeleteShareGroupState to the broker leading the key's
`__share_group_state` partition. Which share partitions of a group may hold state is
what the group coordinator assigned or altered (ShareGroup.initialized, Kafka's
ShareGroupStatePartitionMetadata), with the states and share partitions of this broker.
So:

- describe reads the SharePartition when there is one here, else the persisted state; a
  partition the group never initialized answers start offset -1 (Kafka's
  UNINITIALIZED_START_OFFSET) without error, as a topic that does not exist does. Lag
  (v1, KIP-1226) is Kafka's `high watermark - start offset - delivery complete count`
  (the records above the SPSO already acknowledged or archived; in a cluster the high
  watermark is the partition leader's ListOffsets answer); -1 where the start offset is
  -1;
- alter and delete need the group to exist (GROUP_ID_NOT_FOUND) and to have no members
  (NON_EMPTY_GROUP); alter initializes a new state (start offset as asked, nothing in
  flight, the state epoch bumped), delete removes the states; either drops the
  SharePartition in memory here, so the next fetch rebuilds it from the new state (after a
  delete: from the group's `share.auto.offset.reset`). In a cluster the share-partition
  leader is another broker: it drops a group's idle share partitions when the group's
  last share session there closes (an empty group has none), and one whose write is
  answered FENCED_STATE_EPOCH (its state was initialized anew);
- deleting the group deletes every share partition state of it, then the group; a state
  not deleted keeps the group and answers its error (Kafka's deleteShareGroups).

A share group exists while the coordinator knows it: it has had a member since the
broker started, or it has a share partition state (ShareGroups loads those groups, empty,
at startup, as Kafka's coordinator replays its records).

Lock: the broker's event-loop thread only.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kbroker.common.error_code import ErrorCode
from kbroker.common.topic_partition import TopicPartition
from kbroker.coordinator.share_coordinator import ShareCoordinator, SharePartitionKey
from kbroker.coordinator.share_group import ShareGroupCoordinator
from kbroker.coordinator.share_partition import RecordState, StateBatch
from kbroker.server.share_partition_manager import SharePartitionManager
from kbroker.server.share_state_persister import ShareStatePersister, SummaryState

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
                 replica_manager: ReplicaManager, persister: ShareStatePersister) -> None:
        self.coordinator = coordinator
        self.state = state
        self.partitions = partitions
        self.topics = topics
        self.replica_manager = replica_manager
        self.persister = persister

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
        """The group's share partitions (of one topic) that may hold state: persisted or in
        memory here, and (a cluster, where their states are at other brokers' share
        coordinators) those the group coordinator initialized (assigned or altered)."""
        keys = {k for k in self.state.states if k[0] == group_id}
        keys.update(k for k in self.partitions.partitions if k[0] == group_id)
        if self.persister.clustered:
            keys.update((group_id, t, p) for t, ps in self.coordinator.initialized_partitions(group_id).items()
                        for p in ps)
        return sorted((k for k in keys if topic_id is None or k[1] == topic_id), key=lambda k: (str(k[1]), k[2]))

    # -- DescribeShareGroupOffsets
    async def describe(self, group_id: str, topics: list[tuple[str, list[int]]] | None) -> list[TopicOffsets]:
        """Each named topic's partitions; `topics` None: every share partition of the
        group (GROUP_ID_NOT_FOUND if there is no such share group)."""
        if not group_id:
            raise GroupError(E.INVALID_GROUP_ID, "The group id must not be empty.")
        if topics is None:
            self.check_group(group_id, alterable=False)
            by_topic: dict[uuid.UUID, list[int]] = {}
            for _g, topic_id, partition in self.keys_of(group_id):
                by_topic.setdefault(topic_id, []).append(partition)
            topics = [(info.name, ps) for t, ps in by_topic.items() if (info := self.topics.get_by_id(t)) is not None]
        return [await self._describe_topic(group_id, name, ps) for name, ps in topics]

    async def _describe_topic(self, group_id: str, name: str, partitions: list[int]) -> TopicOffsets:
        info = self.topics.get(name)
        if info is None:  # absence of data, not an error (Kafka's answer)
            return TopicOffsets(name, ZERO_UUID, [PartitionOffset(p) for p in partitions])
        described = await asyncio.gather(*(self._describe_partition((group_id, info.topic_id, p), name)
                                            for p in partitions))
        return TopicOffsets(name, info.topic_id, list(described))

    async def _describe_partition(self, key: SharePartitionKey, name: str) -> PartitionOffset:
        sp = self.partitions.partitions.get(key)
        read = self.persister.read_summary(key)
        code, persisted = read if isinstance(read, tuple) else await read
        if code != E.NONE:
            return PartitionOffset(key[2], error_code=code)
        if sp is not None:
            start, complete = sp.start_offset, delivery_complete_count(sp.snapshot(), sp.start_offset)
        elif persisted is not None and persisted.start_offset >= 0:
            start = persisted.start_offset
            complete = (persisted.delivery_complete_count if isinstance(persisted, SummaryState)
                        else delivery_complete_count(persisted.batches, start))
        else:
            return PartitionOffset(key[2])
        epoch = persisted.leader_epoch if persisted is not None else DEFAULT_LEADER_EPOCH
        hwm = self.partitions.high_watermark(name, key[2])
        if self.persister.clustered and not self.partitions.leads(name, key[2]):
            hwm = await self.persister.latest_offset(TopicPartition(name, key[2]))
        lag = UNINITIALIZED_LAG if hwm is None or complete < 0 else hwm - start - complete
        return PartitionOffset(key[2], start, epoch, lag)

    # -- AlterShareGroupOffsets
    async def alter(self, group_id: str, topic_id: uuid.UUID, partition: int, start_offset: int) -> int:
        """A new state for one share partition (the group checked by the caller), as
        Kafka's alterShareGroupOffsets initializes it: the start offset as asked, nothing
        in flight, the state epoch bumped (InitializeShareGroupState)."""
        if start_offset < 0:
            return E.INVALID_REQUEST
        key = (group_id, topic_id, partition)
        sp = self.partitions.partitions.get(key)
        read = self.persister.read_summary(key)
        code, old = read if isinstance(read, tuple) else await read
        if code != E.NONE:
            return code
        epoch = max(sp.state_epoch if sp is not None else 0, old.state_epoch if old is not None else 0) + 1
        done = self.persister.initialize_state(key, epoch, start_offset)
        code = done if isinstance(done, int) else await done
        if code == E.NONE:
            self.partitions.forget(key)
            info = self.topics.get_by_id(topic_id)
            self.coordinator.mark_initialized(group_id, topic_id, info.name if info is not None else "", partition)
        return code

    # -- DeleteShareGroupOffsets and DeleteGroups
    async def delete(self, group_id: str, topic_id: uuid.UUID | None = None) -> int:
        """The group's share partition states (of one topic) deleted
        (DeleteShareGroupState); the first error."""
        keys = self.keys_of(group_id, topic_id)
        answers = [self.persister.delete_state(key) for key in keys]
        first: int = E.NONE
        for key, answer in zip(keys, answers, strict=True):
            code = answer if isinstance(answer, int) else await answer
            if code == E.NONE:
                self.partitions.forget(key)
                self.coordinator.mark_deleted(*key)
            elif first == E.NONE:
                first = code
        return first

    async def delete_group(self, group_id: str) -> int:
        """DeleteGroups of a share group: GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, the error
        of a state not deleted (the group kept, as Kafka's deleteShareGroups), or NONE."""
        try:
            self.check_group(group_id, alterable=True)
        except GroupError as e:
            return e.code
        code = await self.delete(group_id)
        if code != E.NONE:
            return code
        return self.coordinator.delete(group_id)
