"""KafkaError: the one base of errors that a request answers with a Kafka error code.

Storage, record validation, idempotent-producer checks and admin checks raise
subclasses; request handlers catch KafkaError and answer `error_code` (with the
message where the API has a message field). Anything else that escapes a handler
is a bug: logged, and answered UNKNOWN_SERVER_ERROR or by closing the connection.
"""

from __future__ import annotations

from kbroker.common.error_code import ErrorCode


class KafkaError(Exception):
    error_code: int = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str = "", error_code: int | None = None) -> None:
        super().__init__(message)
        if error_code is not None:
            self.error_code = error_code
