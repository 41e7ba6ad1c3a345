"""Value objects passed between Log and its callers (Kafka's LogAppendInfo & co.)."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass

from kbroker.records.file_slice import FileSlice


@dataclass(frozen=True, slots=True)
class LogOffsetMetadata:
    """An offset and where it lies: the segment's base offset and the batch position in it."""

    message_offset: int
    segment_base_offset: int = -1
    relative_position_in_segment: int = -1

    @property
    def on_segment(self) -> bool:
        return self.segment_base_offset >= 0


@dataclass(frozen=True, slots=True)
class LogAppendInfo:
    """What an append did. Offsets are -1 when nothing was appended (empty payload)."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int
    log_start_offset: int
    record_count: int
    valid_bytes: int
    batch_count: int = 0
    codecs: int = 0
    # flush.messages reached: the fsync running on the flush thread (the caller answers
    # the producer once it is done); None when no flush was due.
    flushed: Future[None] | None = None


@dataclass(frozen=True, slots=True)
class FetchDataInfo:
    """A read: where it starts and the file slice to send (None when there is nothing)."""

    fetch_offset_metadata: LogOffsetMetadata
    records: FileSlice | None
    first_entry_incomplete: bool = False

    @property
    def size(self) -> int:
        return 0 if self.records is None else self.records.size
