"""ShareCoordinator: where share-partition state is kept, the internal compacted topic
`__share_group_state`, as Kafka's share coordinator (KIP-932; read, not copied).

A share partition (group id, topic id, partition) lives in partition
`abs(java_hash("<group>:<topic id>:<partition>")) % share.coordinator.state.topic.num.partitions`
(Kafka's SharePartitionKey.asCoordinatorKey). Each write is one ShareSnapshot record
holding the whole state, so the last record of a key is its state and compaction keeps
only that; Kafka also writes ShareUpdate records (deltas) between snapshots, which this
coordinator never needs (a share partition's state is bounded by
`group.share.partition.max.record.locks` offsets, written as runs).

Record formats (Kafka's ShareSnapshotKey / ShareSnapshotValue, version 0):

    key   = int16 record type (0: ShareSnapshot, 1: ShareUpdate)
            string GroupId (int16 length) | uuid TopicId | int32 Partition
    value = int16 version (0)
            uint16 SnapshotEpoch | int32 StateEpoch | int32 LeaderEpoch | int64 StartOffset
            StateBatches: compact array of
                int64 FirstOffset | int64 LastOffset | int8 DeliveryState | int16 DeliveryCount
                | tagged fields
            | tagged fields

DeliveryState is Kafka's RecordState id (0 available, 2 acknowledged, 4 archived). A
null value (tombstone) removes the state (the group's offsets deleted).

The single broker reads every partition at startup (`load`) and keeps the last state of
each key in memory. In a cluster the share coordinator of a key is the leader of its
partition (Kafka's ShareCoordinatorService): it loads a partition's states when it
becomes its leader (`on_elected`) and drops them when it stops (`on_resigned`); a key of a
partition not led here answers NOT_COORDINATOR, and the share-partition leader asks
again where the metadata says (server/share_state_persister.py). A write appends through
the replica manager (acks=all, the topic's min.insync.replicas) and is answered once the
high watermark passed it (`wait_replicated`), so a state a share-partition leader was
told is written survives the coordinator's failover; memory changes once the append is
done. A write of a lower leader epoch than the state's (a share-partition leader that
lost its leadership, still writing) answers FENCED_LEADER_EPOCH, as Kafka's
ShareCoordinatorShard. Created on first need with `cleanup.policy=compact`,
`share.coordinator.state.topic.segment.bytes` and `.replication.factor`.

Lock: the broker's event-loop thread only.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable

from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.coordinator.internal_topic import InternalTopic
from kbroker.coordinator.share_partition import StateBatch
from kbroker.protocol.codec import DecodeError, Reader, Writer
from kbroker.records.batch_header import CONTROL_NONE

log = logging.getLogger(__name__)
E = ErrorCode

SHARE_GROUP_STATE_TOPIC_NAME = "__share_group_state"
SHARE_SNAPSHOT = 0
SHARE_UPDATE = 1

SharePartitionKey = tuple[str, uuid.UUID, int]


class PersistedState:
    __slots__ = ("state_epoch", "start_offset", "batches", "leader_epoch")

    def __init__(self, state_epoch: int, start_offset: int, batches: list[StateBatch] | None = None,
                 leader_epoch: int = 0) -> None:
        self.state_epoch = state_epoch
        self.start_offset = start_offset
        self.batches = batches or []
        self.leader_epoch = leader_epoch

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PersistedState) and (
            self.state_epoch, self.start_offset, self.batches) == (
            other.state_epoch, other.start_offset, other.batches)

    def __repr__(self) -> str:
        return f"PersistedState({self.state_epoch}, {self.start_offset}, {self.batches})"


def coordinator_key(key: SharePartitionKey) -> str:
    group_id, topic_id, partition = key
    return f"{group_id}:{topic_id}:{partition}"


def encode_key(key: SharePartitionKey) -> bytes:
    w = Writer()
    w.int16(SHARE_SNAPSHOT)
    w.string(key[0])
    w.uuid(key[1])
    w.int32(key[2])
    return bytes(w.to_bytes())


def decode_key(data: bytes) -> tuple[int, SharePartitionKey]:
    r = Reader(data)
    kind = r.int16()
    return kind, (r.string(), r.uuid(), r.int32())


def encode_value(state: PersistedState, snapshot_epoch: int = 0) -> bytes:
    w = Writer()
    w.int16(0)
    w.uint16(snapshot_epoch & 0xFFFF)
    w.int32(state.state_epoch)
    w.int32(state.leader_epoch)
    w.int64(state.start_offset)
    w.compact_array_length(len(state.batches))
    for b in state.batches:
        w.int64(b.first_offset)
        w.int64(b.last_offset)
        w.int8(b.delivery_state)
        w.int16(b.delivery_count)
        w.uvarint(0)  # no tagged fields
    w.uvarint(0)
    return bytes(w.to_bytes())


def decode_value(data: bytes) -> PersistedState:
    r = Reader(data)
    version = r.int16()
    if version != 0:
        raise DecodeError(f"unknown ShareSnapshotValue version {version}")
    r.uint16()  # snapshot epoch
    state_epoch, leader_epoch, start = r.int32(), r.int32(), r.int64()
    batches = []
    for _ in range(r.compact_array_count()):
        first, last, state, count = r.int64(), r.int64(), r.int8(), r.int16()
        r.skip_tagged_fields()
        batches.append(StateBatch(first, last, state, count))
    r.skip_tagged_fields()
    return PersistedState(state_epoch, start, batches, leader_epoch)


class ShareStateTopic(InternalTopic):
    name = SHARE_GROUP_STATE_TOPIC_NAME

    @property
    def configured_partitions(self) -> int:
        return self.broker.config.share_coordinator_state_topic_num_partitions

    @property
    def configured_replication_factor(self) -> int:
        return self.broker.config.share_coordinator_state_topic_replication_factor

    @property
    def min_insync_replicas(self) -> int:
        return self.broker.config.share_coordinator_state_topic_min_isr if self.broker.clustered else 1

    def topic_configs(self) -> dict[str, str]:
        return {
            "cleanup.policy": "compact",
            "compression.type": "producer",
            "min.insync.replicas": str(self.min_insync_replicas),
            "segment.bytes": str(self.broker.config.share_coordinator_state_topic_segment_bytes),
        }


class ShareCoordinator:
    """The share coordinator (see the module docstring): the states of the
    `__share_group_state` partitions it leads (all of them on a single broker)."""

    def __init__(self, topic: ShareStateTopic) -> None:
        self.topic = topic
        self.states: dict[SharePartitionKey, PersistedState] = {}
        self.snapshot_epochs: dict[SharePartitionKey, int] = {}
        # cluster mode: the partitions led here (None on a single broker: all of them)
        self.owned_partitions: set[int] | None = set() if topic.broker.clustered else None

    def load(self) -> None:
        """A single broker: every partition's states, at startup."""
        if not self.topic.exists:
            return
        for partition in range(self.topic.num_partitions):
            self._load_partition(partition)
        log.info("share coordinator: %d share partitions loaded from %s", len(self.states), self.topic.name)

    def _load_partition(self, partition: int) -> int:
        loaded = 0
        for rec in self.topic.read_partition(partition):
            if rec.key is None or rec.control_type != CONTROL_NONE:
                continue
            try:
                kind, key = decode_key(bytes(rec.key))
                if kind != SHARE_SNAPSHOT:
                    continue
                if rec.value is None:
                    self.states.pop(key, None)
                else:
                    self.states[key] = decode_value(bytes(rec.value))
                    loaded += 1
            except DecodeError as e:
                log.warning("%s-%d offset %d: unreadable share state record (%s)",
                            self.topic.name, partition, rec.offset, e)
        return loaded

    # -- cluster mode: leadership of __share_group_state partitions
    def on_elected(self, partition: int) -> None:
        """This broker now leads `__share_group_state`-`partition`: load its states."""
        owned = self.owned_partitions
        if owned is None or partition in owned:
            return
        self._drop_partition(partition)
        self._load_partition(partition)
        owned.add(partition)
        log.info("share coordinator of %s-%d", self.topic.name, partition)

    def on_resigned(self, partition: int) -> None:
        owned = self.owned_partitions
        if owned is None or partition not in owned:
            return
        owned.discard(partition)
        self._drop_partition(partition)
        log.info("no longer share coordinator of %s-%d", self.topic.name, partition)

    def _drop_partition(self, partition: int) -> None:
        for key in [k for k in self.states if self.partition_of(k) == partition]:
            self.states.pop(key, None)
            self.snapshot_epochs.pop(key, None)

    def partition_of(self, key: SharePartitionKey) -> int:
        return self.topic.partition_for(coordinator_key(key))

    def check_coordinator(self, key: SharePartitionKey) -> int:
        """NONE when this broker coordinates the key, else NOT_COORDINATOR."""
        owned = self.owned_partitions
        return E.NONE if owned is None or self.partition_of(key) in owned else E.NOT_COORDINATOR

    # -- reads and writes (ReadShareGroupState / WriteShareGroupState)
    def read_state(self, key: SharePartitionKey) -> PersistedState | None:
        return self.states.get(key)

    def write_state(self, key: SharePartitionKey, state: PersistedState) -> int | Awaitable[int]:
        """Append the key's new state; the error code, at once or once replicated.
        FENCED_LEADER_EPOCH / FENCED_STATE_EPOCH for an epoch below the state's."""
        code = self.check_coordinator(key)
        if code != E.NONE:
            return code
        current = self.states.get(key)
        if current is not None and state.leader_epoch < current.leader_epoch:
            return E.FENCED_LEADER_EPOCH
        if current is not None and state.state_epoch < current.state_epoch:
            return E.FENCED_STATE_EPOCH  # the state was initialized anew (AlterShareGroupOffsets)
        return self._append(key, state)

    def initialize_state(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> int | Awaitable[int]:
        """InitializeShareGroupState: a new state of the key (start offset, nothing in
        flight) at a state epoch not below the current one's (else FENCED_STATE_EPOCH), as
        Kafka's ShareCoordinatorShard.initializeState; the leader epoch is kept, so an old
        share-partition leader stays fenced."""
        code = self.check_coordinator(key)
        if code != E.NONE:
            return code
        current = self.states.get(key)
        if current is not None and state_epoch < current.state_epoch:
            return E.FENCED_STATE_EPOCH
        leader_epoch = current.leader_epoch if current is not None else -1
        return self._append(key, PersistedState(state_epoch, start_offset, leader_epoch=leader_epoch))

    def delete_state(self, key: SharePartitionKey) -> int | Awaitable[int]:
        """DeleteShareGroupState: a tombstone for the key (nothing to do when it has no state)."""
        code = self.check_coordinator(key)
        if code != E.NONE or key not in self.states:
            return code
        return self._append(key, None)

    def _append(self, key: SharePartitionKey, state: PersistedState | None) -> int | Awaitable[int]:
        """One ShareSnapshot record (None: a tombstone), memory changed once appended; the
        error code at once (a single broker) or once replicated."""
        epoch = self.snapshot_epochs.get(key, -1) + 1
        partition = self.partition_of(key)
        value = None if state is None else encode_value(state, epoch)
        try:
            info = self.topic.append_records(partition, [(encode_key(key), value)],
                                             acks=-1 if self.topic.broker.clustered else 1)
        except KafkaError as e:
            log.warning("share state of %s not written: %s", coordinator_key(key), e)
            return e.error_code
        if state is None:
            self.states.pop(key, None)
            self.snapshot_epochs.pop(key, None)
        else:
            self.snapshot_epochs[key] = epoch
            self.states[key] = state
        waited = self.topic.wait_replicated(partition, self.topic.broker.config.request_timeout_ms / 1000,
                                            info.last_offset + 1)
        return E.NONE if waited is None else waited
