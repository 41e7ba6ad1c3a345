"""Kafka's __consumer_offsets records of KIP-848 consumer groups, through the codecs
tools/codegen generates from group-coordinator's ConsumerGroup*.json
(kbroker/protocol/messages/internal_records/).

A key is int16 record type + the key (not flexible); a value is int16 version (0) + the
value (flexible). A null value is a tombstone. The record types:

    3 ConsumerGroupMetadata                 group -> group epoch, metadata hash (tag 0)
    5 ConsumerGroupMemberMetadata           group, member -> subscription, client, rebalance timeout,
                                            a classic member's session timeout and protocols
    6 ConsumerGroupTargetAssignmentMetadata group -> assignment epoch
    7 ConsumerGroupTargetAssignmentMember   group, member -> its target (topic id, partitions)
    8 ConsumerGroupCurrentMemberAssignment  group, member -> member epoch, previous epoch,
                                            state, assigned, pending revocation

Type 4 (ConsumerGroupPartitionMetadata) is not written: Kafka 4.1+ writes none either
(KIP-1101): the subscribed topics are compared with the broker's at each heartbeat,
and after a load through the metadata hash stored with the group epoch.
MemberState as Kafka numbers it: 0 UNREVOKED_PARTITIONS, 1 UNRELEASED_PARTITIONS,
2 STABLE, 127 UNKNOWN.

Lock: none (pure codecs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kbroker.coordinator.consumer_group_member import (
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroupMember,
    MemberState,
)
from kbroker.protocol.codec import Reader, Writer
from kbroker.protocol.messages.internal_records.consumer_group_current_member_assignment_key import (
    ConsumerGroupCurrentMemberAssignmentKey,
)
from kbroker.protocol.messages.internal_records.consumer_group_current_member_assignment_value import (
    ConsumerGroupCurrentMemberAssignmentValue as CurrentValue,
)
from kbroker.protocol.messages.internal_records.consumer_group_member_metadata_key import (
    ConsumerGroupMemberMetadataKey,
)
from kbroker.protocol.messages.internal_records.consumer_group_member_metadata_value import (
    ConsumerGroupMemberMetadataValue as MemberValue,
)
from kbroker.protocol.messages.internal_records.consumer_group_metadata_key import (
    ConsumerGroupMetadataKey,
)
from kbroker.protocol.messages.internal_records.consumer_group_metadata_value import (
    ConsumerGroupMetadataValue,
)
from kbroker.protocol.messages.internal_records.consumer_group_target_assignment_member_key import (
    ConsumerGroupTargetAssignmentMemberKey,
)
from kbroker.protocol.messages.internal_records.consumer_group_target_assignment_member_value import (
    ConsumerGroupTargetAssignmentMemberValue as TargetValue,
)
from kbroker.protocol.messages.internal_records.consumer_group_target_assignment_metadata_key import (
    ConsumerGroupTargetAssignmentMetadataKey,
)
from kbroker.protocol.messages.internal_records.consumer_group_target_assignment_metadata_value import (
    ConsumerGroupTargetAssignmentMetadataValue,
)

GROUP_METADATA, MEMBER_METADATA, TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT = 3, 5, 6, 7, 8
RECORD_TYPES = frozenset({3, 4, 5, 6, 7, 8})
_GROUP_KEYS: dict[int, Any] = {GROUP_METADATA: ConsumerGroupMetadataKey,
                               TARGET_METADATA: ConsumerGroupTargetAssignmentMetadataKey}
_MEMBER_KEYS: dict[int, Any] = {MEMBER_METADATA: ConsumerGroupMemberMetadataKey,
                                TARGET_MEMBER: ConsumerGroupTargetAssignmentMemberKey,
                                CURRENT_ASSIGNMENT: ConsumerGroupCurrentMemberAssignmentKey}
_STATE_IDS = {MemberState.UNREVOKED_PARTITIONS: 0, MemberState.UNRELEASED_PARTITIONS: 1,
              MemberState.STABLE: 2, MemberState.UNKNOWN: 127}
_STATES = {v: k for k, v in _STATE_IDS.items()}
VALUE_VERSION = 0
METADATA_HASH_TAG = 0  # ConsumerGroupMetadataValue's tagged MetadataHash (Kafka 4.1, KIP-1101)


@dataclass(frozen=True)
class RecordKey:
    record_type: int
    group_id: str
    member_id: str | None = None


def record_type(key: bytes) -> int:
    return int.from_bytes(key[:2], "big", signed=True) if len(key) >= 2 else -1


def encode_key(key: RecordKey) -> bytes:
    w = Writer()
    w.int16(key.record_type)
    if key.member_id is None:
        _GROUP_KEYS[key.record_type](group_id=key.group_id).encode(w, key.record_type)
    else:
        _MEMBER_KEYS[key.record_type](group_id=key.group_id, member_id=key.member_id).encode(w, key.record_type)
    return bytes(w.to_bytes())


def decode_key(data: bytes) -> RecordKey:
    r = Reader(data)
    kind = r.int16()
    if kind in _MEMBER_KEYS:
        k = _MEMBER_KEYS[kind].decode(r, kind)
        return RecordKey(kind, k.group_id, k.member_id)
    if kind in _GROUP_KEYS:
        return RecordKey(kind, _GROUP_KEYS[kind].decode(r, kind).group_id)
    return RecordKey(kind, r.string())  # type 4: read and ignored


def _encode(value: Any) -> bytes:
    w = Writer()
    w.int16(VALUE_VERSION)
    value.encode(w, VALUE_VERSION)
    return bytes(w.to_bytes())


def _decode(cls: Any, data: bytes) -> Any:
    r = Reader(data)
    return cls.decode(r, r.int16())


def encode_epoch(epoch: int, metadata_hash: int = 0) -> bytes:
    """ConsumerGroupMetadataValue v0: int32 epoch, then its tagged fields, where Kafka 4.1
    (KIP-1101) put tag 0, int64 MetadataHash (default 0, so not written when 0). The 3.9
    spec the codec is generated from has no tagged field, so the tag is written here."""
    if metadata_hash == 0:
        return _encode(ConsumerGroupMetadataValue(epoch=epoch))
    w = Writer()
    w.int16(VALUE_VERSION)
    w.int32(epoch)
    w.uvarint(1)  # one tagged field
    w.uvarint(METADATA_HASH_TAG)
    w.uvarint(8)
    w.int64(metadata_hash)
    return bytes(w.to_bytes())


def decode_epoch(data: bytes) -> tuple[int, int]:
    """(group epoch, metadata hash) of a ConsumerGroupMetadataValue; other tags are skipped."""
    r = Reader(data)
    version = r.int16()
    if version != VALUE_VERSION:
        raise ValueError(f"ConsumerGroupMetadataValue version {version} is not {VALUE_VERSION}")
    epoch, metadata_hash = r.int32(), 0
    for tag, size in r.tagged_fields():
        end = r.pos + size
        if tag == METADATA_HASH_TAG:
            metadata_hash = r.int64()
            r.end_tagged_field(end)
        else:
            r.skip(size)
    return epoch, metadata_hash


def encode_assignment_epoch(epoch: int) -> bytes:
    return _encode(ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=epoch))


def decode_assignment_epoch(data: bytes) -> int:
    return int(_decode(ConsumerGroupTargetAssignmentMetadataValue, data).assignment_epoch)


def encode_member(m: ConsumerGroupMember) -> bytes:
    classic: dict[str, Any] = {} if m.classic is None else {"classic_member_metadata": MemberValue.ClassicMemberMetadata(
        session_timeout_ms=m.classic.session_timeout_ms,
        supported_protocols=[MemberValue.ClassicProtocol(name=n, metadata=md) for n, md in m.classic.protocols])}
    return _encode(MemberValue(
        instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
        subscribed_topic_names=list(m.subscribed_topic_names), subscribed_topic_regex=m.subscribed_topic_regex,
        rebalance_timeout_ms=m.rebalance_timeout_ms, server_assignor=m.server_assignor, **classic))


def decode_member(member_id: str, data: bytes) -> ConsumerGroupMember:
    v = _decode(MemberValue, data)
    c = v.classic_member_metadata  # absent: the empty default (a classic member has protocols)
    classic = None if c is None or not c.supported_protocols else ClassicMemberMetadata(
        c.session_timeout_ms, tuple((p.name, bytes(p.metadata)) for p in c.supported_protocols))
    return ConsumerGroupMember(member_id, v.instance_id, v.rack_id, v.client_id, v.client_host,
                               v.rebalance_timeout_ms, tuple(v.subscribed_topic_names),
                               v.subscribed_topic_regex, v.server_assignor, classic=classic)


def _pairs(cls: Any, a: Assignment) -> list[Any]:
    return [cls(topic_id=t, partitions=sorted(ps)) for t, ps in sorted(a.items(), key=lambda x: str(x[0]))]


def _assignment(parts: list[Any]) -> Assignment:
    out: Assignment = {}
    for p in parts:
        out[p.topic_id] = out.get(p.topic_id, frozenset()) | frozenset(p.partitions)
    return {t: ps for t, ps in out.items() if ps}


def encode_target(a: Assignment) -> bytes:
    return _encode(TargetValue(topic_partitions=_pairs(TargetValue.TopicPartition, a)))


def decode_target(data: bytes) -> Assignment:
    return _assignment(_decode(TargetValue, data).topic_partitions)


def encode_current(m: ConsumerGroupMember) -> bytes:
    return _encode(CurrentValue(
        member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch, state=_STATE_IDS[m.state],
        assigned_partitions=_pairs(CurrentValue.TopicPartitions, m.assigned),
        partitions_pending_revocation=_pairs(CurrentValue.TopicPartitions, m.revoking)))


def decode_current(member: ConsumerGroupMember, data: bytes) -> ConsumerGroupMember:
    v = _decode(CurrentValue, data)
    return member.replace(member_epoch=v.member_epoch, previous_member_epoch=v.previous_member_epoch,
                          state=_STATES.get(v.state, MemberState.UNKNOWN),
                          assigned=_assignment(v.assigned_partitions),
                          revoking=_assignment(v.partitions_pending_revocation))
