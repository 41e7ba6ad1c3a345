"""The protocol trace (`kbroker serve --trace FILE`): every request and response the
broker reads and writes, decoded with the generated codecs, as JSON lines. Never on
by default; `kbroker trace FILE` (kbroker.tools.trace) reads it.

One JSON object per line, in the order the broker saw them (a request when its frame
is read whole, its response when the last byte is written):

    {"t": 1718000000.123456, "connection": "127.0.0.1:9092-127.0.0.1:50514-0",
     "direction": "request", "api": "FindCoordinator", "api_key": 10, "api_version": 4,
     "correlation_id": 3, "client_id": "rdkafka", "size": 43,
     "header": {"request_api_key": 10, ...}, "body": {"key_type": 1, ...}}
    {"t": 1718000000.123968, "connection": "127.0.0.1:9092-127.0.0.1:50514-0",
     "direction": "response", "api": "FindCoordinator", "api_key": 10, "api_version": 4,
     "correlation_id": 3, "client_id": "rdkafka", "size": 92, "latency_ms": 0.512,
     "errors": {"COORDINATOR_NOT_AVAILABLE": 1},
     "error_messages": ["The coordinator is not available."],
     "header": {"correlation_id": 3}, "body": {"throttle_time_ms": 0, ...}}

"t" is the wall clock in seconds; "connection" Kafka's connection id (local
address-peer address-index); "size" header plus body, without the size prefix;
"latency_ms" from the request read whole to the response written; "errors" every
error_code of the response counted by name (per partition included). Headers and
bodies as kbroker.server.request_json renders them: record batches as their headers
with record counts and sizes, their records too with `--trace-records`. A request
answered with no response has "body": null and "no_response": "acks=0" or
"connection closed"; one whose connection closed before its response was written has
no response line.

Bounded: before a line would take the file past `max_bytes`, it is rotated as log4j's
RollingFileAppender does: FILE -> FILE.1 -> ... -> FILE.<backups>, the oldest dropped.
Written on the event loop thread; lines are buffered and flushed at the end of the
loop iteration that wrote them, and on close.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from kbroker.protocol.api_key import request_header_version
from kbroker.server.request_json import Records, api_name, to_json

if TYPE_CHECKING:
    from kbroker.server.request_logger import LoggedRequest

log = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 100 * 1024 * 1024
DEFAULT_BACKUPS = 5


@dataclass(frozen=True)
class TraceSettings:
    """`kbroker serve --trace FILE [--trace-records] [--trace-max-bytes N] [--trace-backups N]`."""

    path: str
    records: bool = False
    max_bytes: int = DEFAULT_MAX_BYTES
    backups: int = DEFAULT_BACKUPS


def rotated_paths(path: str, backups: int) -> list[str]:
    """The trace's files, oldest first: FILE.<backups> ... FILE.1, FILE."""
    return [f"{path}.{i}" for i in range(backups, 0, -1)] + [path]


class ProtocolTrace:
    """Writes the trace; used from the event loop thread only."""

    def __init__(self, settings: TraceSettings, loop: asyncio.AbstractEventLoop) -> None:
        self.settings = settings
        self._loop = loop
        self._records = Records.RECORDS if settings.records else Records.BATCHES
        self._file: TextIO | None = None
        self._size = 0
        self._flush_scheduled = False
        self._open()

    def _open(self) -> None:
        self._file = open(self.settings.path, "a", encoding="utf-8")  # noqa: SIM115
        self._size = self._file.tell()

    def request(self, entry: LoggedRequest, header: Any, request: Any) -> None:
        line = self._common(entry, "request", entry.received_wall, entry.request_bytes)
        if header is not None:
            line["header"] = to_json(header, request_header_version(entry.api_key,
                                                                    entry.api_version))
        line["body"] = (to_json(request, entry.api_version, self._records)
                        if request is not None else None)
        self._write(line)

    def response(self, entry: LoggedRequest, codes: Counter[str], messages: list[str],
                 end_ns: int) -> None:
        latency_s = (end_ns - entry.received_ns) / 1e9
        line = self._common(entry, "response", entry.received_wall + latency_s,
                            entry.response_bytes)
        line["latency_ms"] = round(latency_s * 1000, 3)
        line["errors"] = dict(codes)
        if messages:
            line["error_messages"] = messages
        if entry.response is None:
            line["no_response"] = "connection closed" if entry.closed else "acks=0"
            line["body"] = None
        else:
            line["header"] = {"correlation_id": entry.correlation_id}
            line["body"] = to_json(entry.response, entry.api_version, self._records)
        self._write(line)

    def _common(self, entry: LoggedRequest, direction: str, t: float, size: int) -> dict[str, Any]:
        return {
            "t": round(t, 6), "connection": entry.connection.connection_id,
            "direction": direction, "api": api_name(entry.api_key), "api_key": entry.api_key,
            "api_version": entry.api_version, "correlation_id": entry.correlation_id,
            "client_id": entry.client_id, "size": size,
        }

    def _write(self, line: dict[str, Any]) -> None:
        if self._file is None:
            return
        text = json.dumps(line, separators=(",", ":"), default=str) + "\n"
        size = len(text.encode())
        try:
            if self._size and self._size + size > self.settings.max_bytes:
                self._rotate()
            assert self._file is not None
            self._file.write(text)
        except OSError as e:  # a full disk ends the trace, not the broker
            log.error("protocol trace %s stopped: %s", self.settings.path, e)
            self.close()
            return
        self._size += size
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _rotate(self) -> None:
        assert self._file is not None
        self._file.close()
        paths = rotated_paths(self.settings.path, self.settings.backups)
        if self.settings.backups == 0:
            os.remove(self.settings.path)
        for older, newer in zip(paths, paths[1:], strict=False):
            if os.path.exists(newer):
                os.replace(newer, older)
        self._open()

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self._file is not None:
            try:
                self._file.flush()
            except OSError as e:
                log.error("protocol trace %s stopped: %s", self.settings.path, e)
                self.close()

    def close(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            try:
                file.close()
            except OSError:
                pass
