"""Decode records of v2 batches in Python: for tests, compaction and rare lookups.

One record (inside the possibly compressed records section of a batch):

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint | key | valueLength varint | value |
    headerCount varint | (headerKeyLength varint | headerKey | headerValueLength varint |
    headerValue) * headerCount

Varints are zigzag-encoded. Slow by design: the broker's hot paths never decode records.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from kbroker.records import compression
from kbroker.records.batch_header import HEADER_SIZE, BatchHeader


class Record(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = 0
    v = 0
    while True:
        b = buf[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            return (v >> 1) ^ -(v & 1), pos
        shift += 7


def _varbytes(buf: bytes, pos: int) -> tuple[bytes | None, int]:
    n, pos = _varint(buf, pos)
    if n < 0:
        return None, pos
    return buf[pos : pos + n], pos + n


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
        buf = self.records_section()
        pos = 0
        for _ in range(h.record_count):
            length, pos = _varint(buf, pos)
            end = pos + length
            p = pos + 1
            ts_delta, p = _varint(buf, p)
            offset_delta, p = _varint(buf, p)
            key, p = _varbytes(buf, p)
            value, p = _varbytes(buf, p)
            n_headers, p = _varint(buf, p)
            headers = []
            for _ in range(n_headers):
                hk, p = _varbytes(buf, p)
                hv, p = _varbytes(buf, p)
                headers.append(((hk or b"").decode(), hv))
            ts = h.max_timestamp if h.is_log_append_time else h.base_timestamp + ts_delta
            yield Record(h.base_offset + offset_delta, ts, key, value, headers)
            pos = end


def iter_batches(data: bytes | bytearray | memoryview) -> Iterator[Batch]:
    """Batches of a buffer of whole batches (a trailing partial batch is skipped)."""
    buf = bytes(data)
    pos = 0
    while pos + HEADER_SIZE <= len(buf):
        header = BatchHeader.parse(buf, pos)
        if header.batch_length < HEADER_SIZE - 12 or pos + header.size_in_bytes > len(buf):
            return
        yield Batch(buf, pos)
        pos += header.size_in_bytes


def iter_records(data: bytes | bytearray | memoryview) -> Iterator[Record]:
    for batch in iter_batches(data):
        yield from batch.records()
