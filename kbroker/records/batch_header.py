"""The 61-byte record batch v2 header as a small Python object (per-batch uses only).

Layout (big-endian), as documented in kbroker/_core/records.pyx:

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 |
    crc uint32 | attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 |
    maxTimestamp int64 | producerId int64 | producerEpoch int16 | baseSequence int32 |
    recordCount int32

For producer state and tests; the append and fetch paths never build one per batch.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength

CODEC_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @classmethod
    def parse(cls, buf: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
        return cls._make(HEADER.unpack_from(buf, position))

    @property
    def size_in_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def codec(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_BIT)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF
