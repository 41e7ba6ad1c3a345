"""Kafka's __consumer_offsets record of a share group's share partitions that hold state,
ShareGroupStatePartitionMetadata (record type 15, KIP-932; group-coordinator's
ShareGroupStatePartitionMetadataKey/Value.json, written here by hand as
share_coordinator.py writes ShareSnapshot).

    key   = int16 record type (15) | string GroupId (int16 length)              (not flexible)
    value = int16 version (0)
            InitializingTopics: compact array of TopicPartitionsInfo
            InitializedTopics:  compact array of TopicPartitionsInfo
            DeletingTopics:     compact array of TopicInfo
            | tagged fields
    TopicPartitionsInfo = uuid TopicId | compact string TopicName
                          | compact array of int32 Partitions | int64 CreateTimestamp | tagged fields
    TopicInfo           = uuid TopicId | compact string TopicName | tagged fields

A null value (tombstone) ends the group's record (the group deleted). kbroker writes the
initialized topics only: a share partition is initialized when the group coordinator
assigns it (its share-partition leader writes its first state at its first fetch) or
alters its start offset; it has no initializing or deleting phase to remember, since
those calls are answered before the record changes. Both other lists are read, their
partitions counted as holding state.

Lock: none (pure codecs).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kbroker.protocol.codec import Reader, Writer

SHARE_GROUP_STATE_PARTITION_METADATA = 15


@dataclass
class StatePartitionMetadata:
    """A group's share partitions that hold state: topic id -> (topic name, partitions)."""

    initialized: dict[uuid.UUID, tuple[str, frozenset[int]]] = field(default_factory=dict)
    deleting: dict[uuid.UUID, str] = field(default_factory=dict)


def encode_key(group_id: str) -> bytes:
    w = Writer()
    w.int16(SHARE_GROUP_STATE_PARTITION_METADATA)
    w.string(group_id)
    return bytes(w.to_bytes())


def decode_key(data: bytes) -> str:
    """The group id of a record of type 15 (the caller checked the type)."""
    r = Reader(data)
    r.int16()
    return r.string()


def encode_value(metadata: StatePartitionMetadata, timestamp_ms: int) -> bytes:
    w = Writer()
    w.int16(0)
    w.compact_array_length(0)  # initializing
    w.compact_array_length(len(metadata.initialized))
    for topic_id, (name, partitions) in sorted(metadata.initialized.items(), key=lambda t: str(t[0])):
        w.uuid(topic_id)
        w.compact_string(name)
        w.compact_array_length(len(partitions))
        for p in sorted(partitions):
            w.int32(p)
        w.int64(timestamp_ms)
        w.uvarint(0)
    w.compact_array_length(len(metadata.deleting))
    for topic_id, name in metadata.deleting.items():
        w.uuid(topic_id)
        w.compact_string(name)
        w.uvarint(0)
    w.uvarint(0)
    return bytes(w.to_bytes())


def decode_value(data: bytes) -> StatePartitionMetadata:
    r = Reader(data)
    r.int16()  # version 0
    out = StatePartitionMetadata()
    for _list in range(2):  # initializing, initialized: both may hold state
        for _ in range(r.compact_array_count()):
            topic_id, name = r.uuid(), r.compact_string()
            partitions = frozenset(r.int32() for _ in range(r.compact_array_count()))
            r.int64()  # create timestamp
            r.skip_tagged_fields()
            known = out.initialized.get(topic_id, (name, frozenset()))[1]
            out.initialized[topic_id] = (name, known | partitions)
    for _ in range(r.compact_array_count()):
        topic_id, name = r.uuid(), r.compact_string()
        r.skip_tagged_fields()
        out.deleting[topic_id] = name
    r.skip_tagged_fields()
    return out
