"""The rule a compacted topic adds to a producer's batches (Kafka's LogValidator.validateKey):
every record has a key, since compaction keeps the latest record per key. A record
without one is refused: the Produce answer is INVALID_RECORD with a record error per
keyless record of the first batch holding one (its index in the batch and Kafka's
message), and nothing of the request is appended.

The core checks uncompressed batches while it validates them (validate_batches with
require_keys); a compressed batch is inflated here, within the decompression bound, and
its records' keys read by the core (keyless_records).

Lock: none; called by the Log on the event-loop thread before anything is written.
"""

from __future__ import annotations

from kbroker._core.record_decode import keyless_records
from kbroker._core.records import RecordValidationError
from kbroker.common.error_code import ErrorCode
from kbroker.common.topic_partition import TopicPartition
from kbroker.records import compression
from kbroker.records.batch_header import CONTROL_BIT
from kbroker.records.record_iter import iter_batches
from kbroker.storage.errors import InvalidRecordsError


def keyless_error(tp: TopicPartition, record_indexes: list[int]) -> InvalidRecordsError:
    """Kafka's answer to keyless records of one batch of a compacted topic."""
    message = f"Compacted topic cannot accept message without key in topic partition {tp}."
    errors = [(i, message) for i in record_indexes]
    return InvalidRecordsError(
        f"One or more records have been rejected due to {len(errors)} record errors in total, "
        f"and only showing the first three errors at most: {errors[:3]}", ErrorCode.INVALID_RECORD,
        record_errors=errors)


def check_keys(tp: TopicPartition, payload: memoryview, *, compressed_only: bool,
               max_uncompressed: int) -> None:
    """InvalidRecordsError (INVALID_RECORD, with record errors) at the first data batch of
    `payload` holding a record without a key; compressed_only: the core already checked
    the uncompressed batches."""
    for batch in iter_batches(payload):
        h = batch.header
        if h.attributes & CONTROL_BIT or (compressed_only and h.codec == 0):
            continue
        try:
            section = batch.records_section(max_uncompressed)
            keyless = keyless_records(section, h.record_count)
        except compression.DecompressionLimitError as e:
            raise InvalidRecordsError(str(e), ErrorCode.CORRUPT_MESSAGE) from e
        except RecordValidationError as e:
            raise InvalidRecordsError(str(e), e.error_code) from e
        except Exception as e:  # any codec's error (zlib.error, ZstdError, ...)
            raise InvalidRecordsError(f"cannot decompress batch: {e}") from e
        if keyless:
            raise keyless_error(tp, keyless)

