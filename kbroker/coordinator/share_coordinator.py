"""ShareCoordinator: where share-partition state is kept, the internal compacted topic
`__share_group_state`, as Kafka's share coordinator (KIP-932; read, not copied).

A share partition (group id, topic id, partition) lives in partition
`abs(java_hash("<group>:<topic id>:<partition>")) % share.coordinator.state.topic.num.partitions`
(Kafka's SharePartitionKey.asCoordinatorKey, the topic id as Uuid.toString: base64).
kbroker hashed the topic id in dashed hex before; a state found where that form placed
it (`legacy`) is moved to its own partition by a single broker at startup, and in a
cluster answered by the old partition's leader while the key's own coordinator has none
(server/share_state_persister.py asks there) until deleted. Each write is one ShareSnapshot record
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

InitializeShareGroupState (`initialize_state`: a new state at a state epoch not below
the current one's), DeleteShareGroupState (`delete_state`) and ReadShareGroupStateSummary
(`read_state`) serve the group coordinator's share-group admin APIs; a write of a lower
state epoch than the key's state answers FENCED_STATE_EPOCH.

Lock: the broker's event-loop thread only.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable

from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.common.kafka_uuid import uuid_to_base64
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
    """Kafka's SharePartitionKey.asCoordinatorKey: "<group>:<topic id>:<partition>", the
    topic id as Uuid.toString writes it (URL-safe base64)."""
    group_id, topic_id, partition = key
    return f"{group_id}:{uuid_to_base64(topic_id)}:{partition}"


def legacy_coordinator_key(key: SharePartitionKey) -> str:
    """The form kbroker hashed before, the topic id in dashed hex: states written then sit
    in the partition it hashes to (`ShareCoordinator` reads them from there)."""
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
        # states written before the key form changed, in the partition the old form hashes
        # to (of partitions led here), not yet in their own partition
        self.legacy: dict[SharePartitionKey, PersistedState] = {}
        # cluster mode: the partitions led here (None on a single broker: all of them)
        self.owned_partitions: set[int] | None = set() if topic.broker.clustered else None

    def load(self) -> None:
        """A single broker: every partition's states, at startup; states still where the
        old key form placed them are moved to their own partition (`migrate_legacy`)."""
        if not self.topic.exists:
            return
        for partition in range(self.topic.num_partitions):
            self._load_partition(partition)
        self.migrate_legacy()
        log.info("share coordinator: %d share partitions loaded from %s", len(self.states), self.topic.name)

    def _load_partition(self, partition: int) -> int:
        """The states of a partition, its own keys' in `states`, those the old key form put
        here in `legacy` (later records winning in each)."""
        loaded = 0
        for rec in self.topic.read_partition(partition):
            if rec.key is None or rec.control_type != CONTROL_NONE:
                continue
            try:
                kind, key = decode_key(bytes(rec.key))
                if kind != SHARE_SNAPSHOT:
                    continue
                held = (self.states if self.partition_of(key) == partition else
                        self.legacy if self.legacy_partition_of(key) == partition else None)
                if held is None:
                    continue
                if rec.value is None:
                    held.pop(key, None)
                else:
                    held[key] = decode_value(bytes(rec.value))
                    loaded += 1
            except DecodeError as e:
                log.warning("%s-%d offset %d: unreadable share state record (%s)",
                            self.topic.name, partition, rec.offset, e)
        return loaded

    def migrate_legacy(self) -> None:
        """A single broker: each state written under the old key form is written to its
        own partition (unless that has a state of the key) and tombstoned where it was."""
        for key, state in list(self.legacy.items()):
            if key not in self.states:
                self._append(key, state)
            self.delete_legacy(key)

    def read_with_legacy(self, key: SharePartitionKey) -> tuple[int, PersistedState | None]:
        """ReadShareGroupState's answer here: the key's state (NOT_COORDINATOR when this
        broker does not coordinate it), else its state under the old key form if that
        partition is led here."""
        code = self.check_coordinator(key)
        state = self.read_state(key) if code == E.NONE else None
        legacy = self.read_legacy(key) if state is None else None
        return (E.NONE, legacy) if legacy is not None else (code, state)

    def read_legacy(self, key: SharePartitionKey) -> PersistedState | None:
        """Cluster mode: the key's state where the old key form placed it, if that
        partition is led here (read once its own share coordinator has none)."""
        owned = self.owned_partitions
        return self.legacy.get(key) if owned is None or self.legacy_partition_of(key) in owned else None

    def delete_legacy(self, key: SharePartitionKey) -> int:
        """A tombstone for the key where the old key form placed it."""
        if self.legacy.pop(key, None) is None:
            return E.NONE
        try:
            self.topic.append_records(self.legacy_partition_of(key), [(encode_key(key), None)])
        except KafkaError as e:
            log.warning("share state of %s: old placement not deleted: %s", coordinator_key(key), e)
            return e.error_code
        return E.NONE

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
        for key in [k for k in self.legacy if self.legacy_partition_of(k) == partition]:
            self.legacy.pop(key, None)

    def partition_of(self, key: SharePartitionKey) -> int:
        return self.topic.partition_for(coordinator_key(key))

    def legacy_partition_of(self, key: SharePartitionKey) -> int:
        return self.topic.partition_for(legacy_coordinator_key(key))

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
        """DeleteShareGroupState: a tombstone for the key (nothing to do when it has no
        state), and one where the old key form placed it, if that partition is led here."""
        legacy = self.delete_legacy(key) if self.read_legacy(key) is not None else None
        code = self.check_coordinator(key)
        if code != E.NONE:
            return code if legacy is None else legacy
        return self._append(key, None) if key in self.states else E.NONE

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
