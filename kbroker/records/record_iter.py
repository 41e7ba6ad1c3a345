"""Decode records of v2 batches to Python values: for tests, compaction and rare lookups.

One record (inside the possibly compressed records section of a batch):

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint | key | valueLength varint | value |
    headerCount varint | (headerKeyLength varint | headerKey | headerValueLength varint |
    headerValue) * headerCount

Varints are zigzag-encoded; the core reads them (kbroker._core.record_decode.decode_records,
one call per batch). Slow by design: the broker's hot paths never decode records.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from kbroker._core.record_decode import decode_records
from kbroker.records import compression
from kbroker.records.batch_header import HEADER_SIZE, LOG_OVERHEAD, BatchHeader


class Record(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


class Batch:
    """One batch: its header and (on demand) its decoded records."""

    def __init__(self, data: bytes, position: int = 0) -> None:
        self.header = BatchHeader.parse(data, position)
        self.position = position
        self.data = data[position : position + self.header.size_in_bytes]

    def records_section(self, max_size: int = compression.DEFAULT_MAX_DECOMPRESSED_BYTES) -> bytes:
        return compression.decompress(self.header.codec, self.data[HEADER_SIZE:], max_size)

    def records(self) -> Iterator[Record]:
        h = self.header
        for offset_delta, ts_delta, key, value, headers in decode_records(self.records_section(),
                                                                          h.record_count):
            ts = h.max_timestamp if h.is_log_append_time else h.base_timestamp + ts_delta
            yield Record(h.base_offset + offset_delta, ts, key, value, headers)


def iter_batches(data: bytes | bytearray | memoryview) -> Iterator[Batch]:
    """Batches of a buffer of whole batches (a trailing partial batch is skipped)."""
    buf = bytes(data)
    pos = 0
    while pos + HEADER_SIZE <= len(buf):
        header = BatchHeader.parse(buf, pos)
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + header.size_in_bytes > len(buf):
            return
        yield Batch(buf, pos)
        pos += header.size_in_bytes


def iter_records(data: bytes | bytearray | memoryview) -> Iterator[Record]:
    for batch in iter_batches(data):
        yield from batch.records()
