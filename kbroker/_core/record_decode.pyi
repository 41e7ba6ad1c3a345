"""Typed face of kbroker/_core/record_decode.pyx (records and control records as values)."""

# (base_offset, last_offset_delta, producer_id, producer_epoch, base_sequence, max_timestamp,
#  attributes, control_type, coordinator_epoch)
ProducerBatchTuple = tuple[int, int, int, int, int, int, int, int, int]

def producer_batches(buf: object) -> list[ProducerBatchTuple]: ...
def read_producer_batches(
    fd: int, start_position: int, end_position: int, start_offset: int, end_offset: int
) -> list[ProducerBatchTuple]: ...
def keyless_records(section: object, count: int) -> list[int]: ...
def decode_records(
    section: object, count: int
) -> list[tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]: ...
