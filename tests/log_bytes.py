"""A log's bytes for tests: every batch from the log start to the log end, read through
the Log's own read path (Log.read and its file slices)."""

from __future__ import annotations

from kbroker._core.segment_scan import scan_segment
from kbroker.records.file_slice import FileSlice
from kbroker.storage.log import Log


def read_all_bytes(log: Log) -> bytes:
    """Every byte from the log start to the log end, as the log's reads return them."""
    out = bytearray()
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        info = log.read(offset, 1 << 30, max_offset=log.log_end_offset)
        if info.records is None:
            break
        data = FileSlice(*info.records).read_bytes()
        out += data
        scan = scan_segment(data, 0)
        if scan.next_offset <= offset:
            break
        offset = scan.next_offset
    return bytes(out)
