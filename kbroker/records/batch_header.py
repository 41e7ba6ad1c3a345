"""The 61-byte record batch v2 header as a small Python object (per-batch uses only).

The layout has one definition, kbroker/_core/records.pxd (its table is at the top of
records.pyx): the positions and attribute bits below are read from the core, and
BatchHeader.parse is the core's header reader. BatchHeader names its fields in
layout order:

    baseOffset | batchLength | partitionLeaderEpoch | magic | crc | attributes |
    lastOffsetDelta | baseTimestamp | maxTimestamp | producerId | producerEpoch |
    baseSequence | recordCount

For producer state and tests; the append and fetch paths never build one per batch.
ProducerBatch is what producer state reads of a batch that carries a producer id (the
core's producer_batches / read_producer_batches), with the control record's type and
coordinator epoch for a transaction marker.
"""

from __future__ import annotations

from typing import NamedTuple

from kbroker._core.record_decode import producer_batches, read_producer_batches
from kbroker._core.records import BATCH_LAYOUT, read_batch_header

BASE_OFFSET_POS = BATCH_LAYOUT["BASE_OFFSET_POS"]
LENGTH_POS = BATCH_LAYOUT["LENGTH_POS"]
MAGIC_POS = BATCH_LAYOUT["MAGIC_POS"]
CRC_POS = BATCH_LAYOUT["CRC_POS"]
ATTRIBUTES_POS = BATCH_LAYOUT["ATTRIBUTES_POS"]
HEADER_SIZE = BATCH_LAYOUT["HEADER_SIZE"]  # 61
LOG_OVERHEAD = BATCH_LAYOUT["LOG_OVERHEAD"]  # baseOffset + batchLength

CODEC_MASK = BATCH_LAYOUT["CODEC_MASK"]
TIMESTAMP_TYPE_BIT = BATCH_LAYOUT["TIMESTAMP_TYPE_BIT"]
TRANSACTIONAL_BIT = BATCH_LAYOUT["TRANSACTIONAL_BIT"]
CONTROL_BIT = BATCH_LAYOUT["CONTROL_BIT"]
DELETE_HORIZON_BIT = BATCH_LAYOUT["DELETE_HORIZON_BIT"]


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
        return cls._make(read_batch_header(buf, position))

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


CONTROL_NONE = -1  # ProducerBatch.control_type of a data batch


class ProducerBatch(NamedTuple):
    base_offset: int
    last_offset_delta: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    max_timestamp: int
    attributes: int
    control_type: int  # -1: a data batch; else the control record's type (-2: unreadable)
    coordinator_epoch: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return self.control_type != CONTROL_NONE

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def producer_batches_of(buf: bytes | bytearray | memoryview) -> list[ProducerBatch]:
    """The batches of `buf` (whole, validated batches) that carry a producer id."""
    return [ProducerBatch._make(t) for t in producer_batches(buf)]


def read_producer_batches_of(fd: int, start_position: int, end_position: int, start_offset: int,
                             end_offset: int) -> list[ProducerBatch]:
    """The batches of a segment file between the positions that carry a producer id and
    hold offsets in [start_offset, end_offset)."""
    return [ProducerBatch._make(t) for t in
            read_producer_batches(fd, start_position, end_position, start_offset, end_offset)]


def complete_batches_size(buf: bytes | bytearray | memoryview) -> int:
    """The length of the whole batches at the start of `buf`: a fetch response may end
    with the beginning of a batch that did not fit (a consumer skips it; a follower
    appends only what precedes it, as Kafka's MemoryRecords.batches() stops there)."""
    view = memoryview(buf)
    pos, end = 0, len(view)
    while pos + LOG_OVERHEAD <= end:
        size = LOG_OVERHEAD + int.from_bytes(view[pos + LENGTH_POS:pos + LENGTH_POS + 4], "big", signed=True)
        if size < HEADER_SIZE or pos + size > end:
            break
        pos += size
    return pos
