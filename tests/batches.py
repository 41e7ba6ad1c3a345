"""Record batch v2 bytes for tests (uncompressed and compressed), from kbroker's encoder.

Batches are built by the broker's one encoder (kbroker.records.builder over
kbroker/_core/batch_encode.pyx). It is checked against code it does not share in
tests/core/test_batch_encode.py: byte for byte against kafka-python's
DefaultRecordBatchBuilder, and read back by kafka-python's DefaultRecordBatch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from kbroker.records.builder import build_batch


@dataclass
class Rec:
    value: bytes | None
    key: bytes | None = None
    timestamp_delta: int = 0
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


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
    return build_batch([(r.key, r.value, r.timestamp_delta, r.headers) for r in recs], base_timestamp,
                       codec=codec, max_timestamp=max_timestamp, base_offset=base_offset,
                       partition_leader_epoch=partition_leader_epoch, attributes=attributes,
                       producer_id=producer_id, producer_epoch=producer_epoch,
                       base_sequence=base_sequence)


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
