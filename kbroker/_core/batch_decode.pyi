"""Typed face of kbroker/_core/batch_decode.pyx (record batches to Arrow buffers)."""

from collections.abc import Callable
from typing import Any

class CorruptRecordError(ValueError): ...

class BufferPool:
    max_bytes: int
    held_bytes: int
    lent: int
    def __init__(self, max_bytes: int = ...) -> None: ...

class NativeBuffer:
    def __len__(self) -> int: ...
    def __buffer__(self, flags: int) -> memoryview: ...

class ColumnarRecords:
    num_rows: int
    key_nulls: int
    value_nulls: int
    header_nulls: int
    header_value_nulls: int
    num_headers: int
    include_headers: bool
    check_crcs: bool
    data_bytes: int
    pool: BufferPool
    def __init__(self, include_headers: bool = False, check_crcs: bool = True,
                 decompress: Callable[[int, memoryview], bytes] | None = None,
                 pool: BufferPool | None = None) -> None: ...
    def add_records(self, records: Any, start_offset: int, end_offset: int,
                    aborted: list[tuple[int, int]] | None = None) -> tuple[int, int]: ...
    def take(self) -> dict[str, Any]: ...

def scan_next_offset(records: Any, start_offset: int) -> int: ...
