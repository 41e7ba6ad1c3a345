"""Typed face of kbroker/_core/batch_validation.pyx (validation, offset assignment)."""

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

class FollowerBatchesInfo(BatchesInfo):
    in_order_bytes: int
    next_offset: int
    epoch_starts: list[tuple[int, int]]

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
def validate_follower_batches(buf: object, max_message_bytes: int = ...) -> FollowerBatchesInfo: ...
def assign_offsets(
    buf: object, base_offset: int, partition_leader_epoch: int, log_append_time: int = ...
) -> int: ...
def assign_offsets_pieces(
    buf: object, base_offset: int, partition_leader_epoch: int
) -> tuple[list[bytes | memoryview], int]: ...
