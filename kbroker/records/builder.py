"""Record batches the broker writes itself (group metadata, recompression, the log
cleaner's rebuilt compressed batches) and tests build.

The bytes come from the core's one batch encoder (kbroker/_core/batch_encode.pyx):
encode_records writes the records section, frame_batch the header and CRC-32C around
it. This module adds the codec, which the core does not import (see
kbroker/_core/records.pyx for the layout).
"""

from __future__ import annotations

from collections.abc import Sequence

from kbroker._core.batch_encode import encode_records, frame_batch
from kbroker.records import compression
from kbroker.records.batch_header import BatchHeader

# (key, value, timestamp_delta, headers): one record as encode_records takes it.
RecordValues = tuple[bytes | None, bytes | None, int, Sequence[tuple[str | bytes, bytes | None]]]


def build_batch(records: Sequence[RecordValues], base_timestamp: int, *, codec: int = 0,
                level: int | None = None, max_timestamp: int | None = None,
                base_offset: int = 0, partition_leader_epoch: int = -1, attributes: int = 0,
                producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1) -> bytes:
    """One batch of `records`, its records section compressed with `codec`. maxTimestamp
    defaults to the largest record timestamp, as a producer writes it."""
    if not records:
        raise ValueError("a record batch holds at least one record")
    section = encode_records(records)
    if codec:
        section = compression.compress(codec, section, level)
    if max_timestamp is None:
        max_timestamp = base_timestamp + max(r[2] for r in records)
    return frame_batch(section, len(records), base_timestamp, max_timestamp,
                       base_offset=base_offset, partition_leader_epoch=partition_leader_epoch,
                       attributes=attributes | codec, producer_id=producer_id,
                       producer_epoch=producer_epoch, base_sequence=base_sequence)


def frame_records(template: bytes | bytearray | memoryview, section: bytes | bytearray | memoryview,
                  level: int | None = None) -> bytes:
    """A batch from a header `template` (61 bytes: every field but batchLength and crc) and
    its records section uncompressed, compressed with the codec its attributes name (the
    log cleaner's rebuilt compressed batches)."""
    h = BatchHeader.parse(template)
    records = compression.compress(h.codec, memoryview(section), level) if h.codec else bytes(section)
    return frame_batch(records, h.record_count, h.base_timestamp, h.max_timestamp,
                       base_offset=h.base_offset, partition_leader_epoch=h.partition_leader_epoch,
                       attributes=h.attributes, last_offset_delta=h.last_offset_delta,
                       producer_id=h.producer_id, producer_epoch=h.producer_epoch,
                       base_sequence=h.base_sequence)
