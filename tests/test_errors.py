"""One base for errors that answer with a Kafka error code: handlers catch KafkaError."""

from __future__ import annotations

import pathlib
import re

import pytest

from kbroker._core.records import RecordValidationError
from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.server.topic_admin import AdminError
from kbroker.storage.errors import InvalidRecordsError, KafkaStorageError, StorageError
from kbroker.storage.producer_state import ProducerStateError


@pytest.mark.parametrize("error,code", [
    (KafkaStorageError("disk"), ErrorCode.KAFKA_STORAGE_ERROR),
    (InvalidRecordsError("bad", ErrorCode.INVALID_RECORD), ErrorCode.INVALID_RECORD),
    (RecordValidationError(ErrorCode.CORRUPT_MESSAGE, "crc"), ErrorCode.CORRUPT_MESSAGE),
    (ProducerStateError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, "seq"), ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
    (AdminError(ErrorCode.POLICY_VIOLATION, "too many"), ErrorCode.POLICY_VIOLATION),
])
def test_every_coded_error_is_a_kafka_error(error: Exception, code: int) -> None:
    assert isinstance(error, KafkaError) and error.error_code == code
    assert issubclass(StorageError, KafkaError)


def test_handlers_do_not_find_error_codes_by_duck_typing() -> None:
    root = pathlib.Path(__file__).resolve().parents[1] / "kbroker"
    found = [str(p.relative_to(root)) for p in root.rglob("*.py")
             if re.search(r'getattr\(\w+, "error_code"', p.read_text())]
    assert found == []
