"""Typed face of kbroker/_core/batch_encode.pyx (the record batch encoder)."""

from collections.abc import Iterable
from typing import Any

def encode_records(
    records: Iterable[tuple[bytes | None, bytes | None, int, Iterable[tuple[str | bytes, bytes | None]]]],
) -> bytes: ...
def frame_batch(
    section: bytes | bytearray | memoryview,
    record_count: int,
    base_timestamp: int,
    max_timestamp: int,
    *,
    base_offset: int = ...,
    partition_leader_epoch: int = ...,
    attributes: int = ...,
    last_offset_delta: int | None = ...,
    producer_id: int = ...,
    producer_epoch: int = ...,
    base_sequence: int = ...,
) -> bytes: ...
def murmur2(data: bytes | bytearray | memoryview) -> int: ...
def partition_for_key(key: bytes | bytearray | memoryview, num_partitions: int) -> int: ...

class BinaryColumn:
    def __init__(self, valid: Any, offsets: Any, data: Any, start: int) -> None: ...

class Int32Column:
    def __init__(self, valid: Any, values: Any, start: int) -> None: ...

class Int64Column:
    def __init__(self, valid: Any, values: Any, start: int) -> None: ...

PARTITION_BY_KEY: int
PARTITION_STICKY: int
PARTITION_ROUND_ROBIN: int

class HeadersColumn:
    def __init__(self, lists: Int32Column, keys: BinaryColumn, values: BinaryColumn) -> None: ...

def encode_batches(num_rows: int, keys: BinaryColumn | None, values: BinaryColumn,
                   partitions: Int32Column | None, headers: HeadersColumn | None,
                   num_partitions: int, null_key_partition: int, timestamp: int,
                   max_batch_bytes: int, timestamps: Int64Column | None = ...,
                   partitioner: int = ...) -> list[tuple[int, bytes]]: ...
