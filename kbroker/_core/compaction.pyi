"""Typed face of kbroker/_core/compaction.pyx (the log cleaner's per-record work)."""

from kbroker._core.offset_map import OffsetMap

DELETE: int
DELETE_EMPTY: int
RETAIN_EMPTY: int
COPY: int
OUT: int
COMPRESS: int

# (position, size, base_offset, last_offset, attributes, producer_id, producer_epoch,
#  record_count, control_type)
SpecialBatch = tuple[int, int, int, int, int, int, int, int, int]

def batch_plan(buf: object, start: int, end: int) -> tuple[int, list[SpecialBatch]]: ...
def map_keys(offset_map: OffsetMap, buf: object, start: int, end: int, start_offset: int,
             end_offset: int, max_size: int, skipped: list[int],
             sections: list[tuple[int, bytes]]) -> tuple[int, bool, int]: ...

class FilterResult:
    pieces: list[tuple[int, int, int]]
    out: bytes
    messages_read: int
    messages_retained: int
    invalid_messages: int
    bytes_read: int

class RecordFilter:
    def __init__(self, offset_map: OffsetMap, now_ms: int, delete_retention_ms: int,
                 active_producers: dict[int, int]) -> None: ...
    def filter(self, buf: object, start: int, end: int,
               decisions: list[tuple[int, int, bool, bool]],
               sections: list[tuple[int, bytes]]) -> FilterResult: ...
