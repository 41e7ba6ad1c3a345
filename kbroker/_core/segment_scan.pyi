"""Typed face of kbroker/_core/segment_scan.pyx (one CRC-checking pass over a segment)."""

class SegmentScan:
    valid_bytes: int
    batch_count: int
    next_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    bytes_since_last_index_entry: int
    offset_index_entries: bytes
    time_index_entries: bytes
    epoch_starts: list[tuple[int, int]]
    producer_batches: int
    error: str | None

def scan_segment(
    buf: object,
    base_offset: int,
    start_position: int = ...,
    expected_next_offset: int = ...,
    index_interval_bytes: int = ...,
    last_time_index_timestamp: int = ...,
    max_timestamp: int = ...,
    offset_of_max_timestamp: int = ...,
    last_epoch: int = ...,
    require_contiguous: bool = ...,
    max_relative_offset: int = ...,
) -> SegmentScan: ...
