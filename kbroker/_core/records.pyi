"""Typed face of kbroker/_core/records.pyx (the record batch v2 layout, its errors)."""

from kbroker.common.error_code import ErrorCode

BATCH_LAYOUT: dict[str, int]

class RecordValidationError(Exception):
    error_code: ErrorCode
    position: int
    def __init__(self, error_code: int, message: str, position: int = 0) -> None: ...

def read_batch_header(
    buf: object, position: int = ...
) -> tuple[int, int, int, int, int, int, int, int, int, int, int, int, int]: ...
