"""Typed face of kbroker/_core/records.pyx (record batch v2 validation and scanning)."""

from kbroker.common.error_code import ErrorCode

BATCH_LAYOUT: dict[str, int]

class RecordValidationError(Exception):
    error_code: ErrorCode
    position: int
    def __init__(self, error_code: int, message: str, position: int = 0) -> None: ...

class BatchesInfo:
    batch_count: int
    record_count: int
    offset_count: int
    max_timestamp: int
    offset_of_max_timestamp: int
    codecs: int
    attributes_or: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    producer_batches: int
    valid_bytes: int
    @property
    def compressed(self) -> bool: ...
    @property
    def has_transactional(self) -> bool: ...
    @property
    def has_control(self) -> bool: ...

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

_Buffer = bytes | bytearray | memoryview

def validate_batches(
    buf: object,
    max_message_bytes: int = ...,
    *,
    now_ms: int = ...,
    timestamp_before_max_ms: int = ...,
    timestamp_after_max_ms: int = ...,
    check_timestamps: bool = ...,
    from_client: bool = ...,
    require_keys: bool = ...,
) -> BatchesInfo: ...
def assign_offsets(
    buf: object, base_offset: int, partition_leader_epoch: int, log_append_time: int = ...
) -> int: ...
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
) -> SegmentScan: ...
def find_batch(
    fd: int, start_position: int, end_position: int, target_offset: int
) -> tuple[int, int, int, int] | None: ...
def find_batch_by_timestamp(
    fd: int, start_position: int, end_position: int, target_timestamp: int
) -> tuple[int, int, int, int, int] | None: ...
def record_timestamps(records: object, count: int, base_timestamp: int) -> list[tuple[int, int]]: ...
def scan_headers(fd: int, start_position: int, end_position: int) -> tuple[int, int, int, int, int]: ...
def assign_offsets_pieces(
    buf: object, base_offset: int, partition_leader_epoch: int
) -> tuple[list[bytes | memoryview], int]: ...
def read_batch_header(
    buf: object, position: int = ...
) -> tuple[int, int, int, int, int, int, int, int, int, int, int, int, int]: ...
def keyless_records(section: object, count: int) -> list[int]: ...
def decode_records(
    section: object, count: int
) -> list[tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]: ...

# (base_offset, last_offset_delta, producer_id, producer_epoch, base_sequence, max_timestamp,
#  attributes, control_type, coordinator_epoch)
ProducerBatchTuple = tuple[int, int, int, int, int, int, int, int, int]

def producer_batches(buf: object) -> list[ProducerBatchTuple]: ...
def read_producer_batches(
    fd: int, start_position: int, end_position: int, start_offset: int, end_offset: int
) -> list[ProducerBatchTuple]: ...
