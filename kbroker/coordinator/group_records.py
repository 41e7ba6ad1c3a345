"""Kafka's own record formats for __consumer_offsets (GroupMetadataManager's schemas).

Every record has a key; the key's leading int16 version says what it is. A null
value is a tombstone (the offset or group was deleted). Strings are int16 length +
UTF-8 (nullable: length -1 is null); bytes are int32 length + data; arrays are an
int32 count. All integers are big-endian.

    OffsetCommitKey   (key version 0 or 1; we write 1)
        version int16 | group string | topic string | partition int32
    OffsetCommitValue (value version 0-3; we write 3, or 1 when an explicit expire
                       timestamp exists, as Kafka does)
        v0: version | offset int64 | metadata string | commit_timestamp int64
        v1: v0 + expire_timestamp int64
        v2: as v0
        v3: version | offset int64 | leader_epoch int32 | metadata string |
            commit_timestamp int64
    GroupMetadataKey  (key version 2)
        version int16 | group string
    GroupMetadataValue (value version 0-3; we write 3)
        version int16 | protocol_type string | generation int32 |
        protocol nullable string | leader nullable string |
        current_state_timestamp int64 (v2+) |
        members [int32 count] of:
            member_id string | group_instance_id nullable string (v3+) |
            client_id string | client_host string | rebalance_timeout int32 (v1+) |
            session_timeout int32 | subscription bytes | assignment bytes

Flexible (tagged-field) value versions of newer Kafka are not read: a value with
an unknown version raises ValueError and the loader skips the record.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: list[MemberValue] = field(default_factory=list)


class _Out:
    def __init__(self) -> None:
        self.buf = bytearray()

    def i16(self, v: int) -> _Out:
        self.buf += _I16.pack(v)
        return self

    def i32(self, v: int) -> _Out:
        self.buf += _I32.pack(v)
        return self

    def i64(self, v: int) -> _Out:
        self.buf += _I64.pack(v)
        return self

    def string(self, v: str | None) -> _Out:
        if v is None:
            return self.i16(-1)
        data = v.encode()
        self.i16(len(data))
        self.buf += data
        return self

    def bytes_(self, v: bytes | None) -> _Out:
        if v is None:
            return self.i32(-1)
        self.i32(len(v))
        self.buf += v
        return self


class _In:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, s: struct.Struct) -> int:
        (v,) = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return int(v)

    def i16(self) -> int:
        return self._take(_I16)

    def i32(self) -> int:
        return self._take(_I32)

    def i64(self) -> int:
        return self._take(_I64)

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        end = self.pos + n
        if end > len(self.data):
            raise ValueError("string runs past the end")
        v = self.data[self.pos : end].decode()
        self.pos = end
        return v

    def bytes_(self) -> bytes:
        n = self.i32()
        if n < 0:
            return b""
        end = self.pos + n
        if end > len(self.data):
            raise ValueError("bytes run past the end")
        v = self.data[self.pos : end]
        self.pos = end
        return bytes(v)


def encode_offset_key(key: OffsetCommitKey) -> bytes:
    return bytes(_Out().i16(OFFSET_COMMIT_KEY_VERSION).string(key.group).string(key.topic)
                 .i32(key.partition).buf)


def encode_group_key(key: GroupMetadataKey) -> bytes:
    return bytes(_Out().i16(GROUP_METADATA_KEY_VERSION).string(key.group).buf)


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey:
    r = _In(data)
    version = r.i16()
    if version in (0, 1):
        return OffsetCommitKey(r.string() or "", r.string() or "", r.i32())
    if version == 2:
        return GroupMetadataKey(r.string() or "")
    raise ValueError(f"unknown __consumer_offsets key version {version}")


def encode_offset_value(v: OffsetCommitValue) -> bytes:
    if v.expire_timestamp >= 0:
        out = _Out().i16(1).i64(v.offset).string(v.metadata).i64(v.commit_timestamp)
        return bytes(out.i64(v.expire_timestamp).buf)
    out = _Out().i16(OFFSET_COMMIT_VALUE_VERSION).i64(v.offset).i32(v.leader_epoch)
    return bytes(out.string(v.metadata).i64(v.commit_timestamp).buf)


def decode_offset_value(data: bytes) -> OffsetCommitValue:
    r = _In(data)
    version = r.i16()
    if version in (0, 1, 2):
        offset = r.i64()
        metadata = r.string() or ""
        commit_ts = r.i64()
        expire = r.i64() if version == 1 else -1
        return OffsetCommitValue(offset, -1, metadata, commit_ts, expire)
    if version == 3:
        offset = r.i64()
        epoch = r.i32()
        metadata = r.string() or ""
        return OffsetCommitValue(offset, epoch, metadata, r.i64())
    raise ValueError(f"unknown OffsetCommitValue version {version}")


def encode_group_value(v: GroupMetadataValue) -> bytes:
    out = _Out().i16(GROUP_METADATA_VALUE_VERSION).string(v.protocol_type).i32(v.generation)
    out.string(v.protocol).string(v.leader).i64(v.current_state_timestamp).i32(len(v.members))
    for m in v.members:
        out.string(m.member_id).string(m.group_instance_id).string(m.client_id).string(m.client_host)
        out.i32(m.rebalance_timeout).i32(m.session_timeout).bytes_(m.subscription).bytes_(m.assignment)
    return bytes(out.buf)


def decode_group_value(data: bytes) -> GroupMetadataValue:
    r = _In(data)
    version = r.i16()
    if not 0 <= version <= 3:
        raise ValueError(f"unknown GroupMetadataValue version {version}")
    protocol_type = r.string() or ""
    generation = r.i32()
    protocol = r.string()
    leader = r.string()
    state_ts = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.i32()):
        member_id = r.string() or ""
        instance_id = r.string() if version >= 3 else None
        client_id = r.string() or ""
        client_host = r.string() or ""
        rebalance_timeout = r.i32() if version >= 1 else -1
        session_timeout = r.i32()
        members.append(MemberValue(member_id, instance_id, client_id, client_host,
                                   rebalance_timeout, session_timeout, r.bytes_(), r.bytes_()))
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_ts, members)
