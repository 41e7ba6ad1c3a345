"""Build real record batch v2 bytes for tests (uncompressed and compressed).

An independent writer: varints and the header are encoded here with struct, the
CRC-32C comes from the `crc32c` PyPI package, so the core is checked against code
it does not share. See kbroker/_core/records.pyx for the layout.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

import crc32c

from kbroker.records import compression

HEADER = struct.Struct(">qiibIhiqqqhii")


def varint(value: int) -> bytes:
    v = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def varbytes(data: bytes | None) -> bytes:
    if data is None:
        return varint(-1)
    return varint(len(data)) + data


@dataclass
class Rec:
    value: bytes | None
    key: bytes | None = None
    timestamp_delta: int = 0
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


def encode_record(rec: Rec, offset_delta: int) -> bytes:
    body = bytearray(b"\x00")
    body += varint(rec.timestamp_delta) + varint(offset_delta)
    body += varbytes(rec.key) + varbytes(rec.value)
    body += varint(len(rec.headers))
    for hk, hv in rec.headers:
        body += varbytes(hk.encode()) + varbytes(hv)
    return varint(len(body)) + bytes(body)


def make_batch(
    records: Sequence[Rec | bytes],
    *,
    base_offset: int = 0,
    base_timestamp: int = 1_700_000_000_000,
    codec: int = 0,
    partition_leader_epoch: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    attributes: int = 0,
    max_timestamp: int | None = None,
) -> bytes:
    recs = [r if isinstance(r, Rec) else Rec(r) for r in records]
    body = b"".join(encode_record(r, i) for i, r in enumerate(recs))
    if codec:
        body = compression.compress(codec, body)
    if max_timestamp is None:
        max_timestamp = base_timestamp + max((r.timestamp_delta for r in recs), default=0)
    attrs = attributes | codec
    after_crc = struct.pack(
        ">hiqqqhii", attrs, len(recs) - 1, base_timestamp, max_timestamp,
        producer_id, producer_epoch, base_sequence, len(recs),
    ) + body
    crc = crc32c.crc32c(after_crc)
    length = 4 + 1 + 4 + len(after_crc)
    return struct.pack(">qiibI", base_offset, length, partition_leader_epoch, 2, crc) + after_crc


def values_batch(n: int, size: int = 10, prefix: bytes = b"v", **kw: object) -> bytes:
    recs = [Rec((prefix + str(i).encode()).ljust(size, b".")) for i in range(n)]
    return make_batch(recs, **kw)  # type: ignore[arg-type]


def decode_batches(data: bytes) -> list[tuple[int, int, list[tuple[int, int, bytes | None, bytes | None]]]]:
    """[(base_offset, partition_leader_epoch, [(offset, timestamp, key, value)])] — for checks."""
    from kbroker.records.record_iter import iter_batches

    out = []
    for batch in iter_batches(data):
        recs = [(r.offset, r.timestamp, r.key, r.value) for r in batch.records()]
        out.append((batch.header.base_offset, batch.header.partition_leader_epoch, recs))
    return out
