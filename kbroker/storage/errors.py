"""Storage exceptions, each carrying the Kafka ErrorCode a request handler answers with."""

from __future__ import annotations

from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError


class StorageError(KafkaError):
    """Base of storage errors; `error_code` is the Kafka error for the client."""

    error_code: int = ErrorCode.KAFKA_STORAGE_ERROR


class InvalidRecordsError(StorageError):
    """A Produce payload failed validation (CORRUPT_MESSAGE, INVALID_RECORD, ...);
    `record_errors` [(record index in its batch, message)] for Produce's RecordErrors."""

    error_code = ErrorCode.CORRUPT_MESSAGE

    def __init__(self, message: str = "", error_code: int | None = None, *,
                 record_errors: list[tuple[int, str]] | None = None) -> None:
        super().__init__(message, error_code)
        self.record_errors = record_errors or []


class RecordListTooLargeError(StorageError):
    error_code = ErrorCode.RECORD_LIST_TOO_LARGE


class OffsetOutOfRangeError(StorageError):
    error_code = ErrorCode.OFFSET_OUT_OF_RANGE


class KafkaStorageError(StorageError):
    """Disk I/O failed; the log is unusable until restart."""

    error_code = ErrorCode.KAFKA_STORAGE_ERROR


class CorruptIndexError(StorageError):
    """An index file failed its sanity check (recovery rebuilds it)."""

    error_code = ErrorCode.KAFKA_STORAGE_ERROR
