"""Build uncompressed record batch v2 bytes for the coordinator's own writes.

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 (2) |
    crc uint32 (CRC-32C of attributes..end) | attributes int16 | lastOffsetDelta int32 |
    baseTimestamp int64 | maxTimestamp int64 | producerId int64 | producerEpoch int16 |
    baseSequence int32 | recordCount int32 | records
    record: length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
            key varbytes | value varbytes (null: length -1) | headerCount varint (0)

Varints are zigzag. Log.append_as_leader assigns the base offset and epoch in place.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from kbroker._core.crc32c import crc32c

_AFTER_CRC = struct.Struct(">hiqqqhii")
_PREFIX = struct.Struct(">qiib")


def _varint(value: int) -> bytes:
    v = (value << 1) ^ (value >> 63)
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _varbytes(data: bytes | None) -> bytes:
    return _varint(-1) if data is None else _varint(len(data)) + data


def build_batch(records: Sequence[tuple[bytes | None, bytes | None]], timestamp_ms: int) -> bytes:
    """One batch holding (key, value) records, all stamped `timestamp_ms`."""
    body = bytearray()
    for i, (key, value) in enumerate(records):
        rec = b"\x00" + _varint(0) + _varint(i) + _varbytes(key) + _varbytes(value) + _varint(0)
        body += _varint(len(rec)) + rec
    after_crc = _AFTER_CRC.pack(0, len(records) - 1, timestamp_ms, timestamp_ms, -1, -1, -1,
                                len(records)) + bytes(body)
    crc = crc32c(after_crc)
    batch_length = 4 + 1 + 4 + len(after_crc)
    return _PREFIX.pack(0, batch_length, 0, 2) + struct.pack(">I", crc) + after_crc
