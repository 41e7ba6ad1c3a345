"""The request log: Kafka's `kafka.request.logger`, one line per completed request.

At DEBUG, when a response's last byte has been handed to the kernel (an acks=0
Produce, or a request answered by closing the connection: when it leaves the
connection's queue), one line in the spirit of Kafka's "Completed request":

    Completed request: FindCoordinator v4 correlationId=3 clientId="rdkafka"
    clientSoftware=confluent-kafka-python/2.6.1-rdkafka-2.6.1
    connection=127.0.0.1:9092-127.0.0.1:50514-0 listener=PLAINTEXT
    securityProtocol=PLAINTEXT principal=User:ANONYMOUS
    errors=[1 x COORDINATOR_NOT_AVAILABLE] errorMessages=["The coordinator is not available."]
    requestBytes=43 responseBytes=92 totalTimeMs=0.512 requestQueueTimeMs=0.021
    localTimeMs=0.303 remoteTimeMs=0.000 throttleTimeMs=0 responseQueueTimeMs=0.018
    sendTimeMs=0.170

(one line; wrapped here). securityProtocol is the listener's (PLAINTEXT, SSL,
SASL_PLAINTEXT, SASL_SSL) and principal the connection's when the request was logged
(User:ANONYMOUS before a SASL handshake completes, then the authenticated user; on SSL the
certificate's mapped name), as Kafka's RequestChannel logs them. `errors` counts every error_code of the response, per
partition included ("3 x NONE, 1 x NOT_LEADER_OR_FOLLOWER"); `errorMessages` lists
each non-empty error_message. A request without a response shows `errors=[no
response]` (acks=0) or `errors=[no response, connection closed]`. clientSoftware is
what the connection's ApiVersions v3+ said ("unknown/unknown" before). The
connection id is Kafka's: local address-peer address-index. Sizes are header plus
body, without the 4-byte size prefix. Times in ms, split as Kafka's RequestChannel
splits them: requestQueue (read whole -> handed to its handler: decoding, and waiting
behind backpressure),
local (the handler's own run), remote (the handler waiting: long-poll Fetch, acks=all,
a group's rebalance, a ZooKeeper write), throttle (kbroker has no quotas: 0),
responseQueue (ready -> its turn, after every earlier response of the connection),
send (handed to the writer -> written), total (read whole -> written).

At TRACE, one more line after it, the bodies as kbroker.server.request_json renders
them with records as counts and sizes only (never record data), each cut at
MAX_BODY_CHARS:

    Request and response bodies: FindCoordinator v4 correlationId=3
    connection=127.0.0.1:9092-127.0.0.1:50514-0 request={"key_type":1,...} response={...}

The request metrics (kbroker.server.request_metrics, while /metrics is served) take
their times from the same LoggedRequest, at the same point: no second set of clocks.
A request followed for them alone skips what only the line and the trace use (the
wall clock, the response's size), so a line logged for it after the level changed
mid-flight says responseBytes=0.

Off costs nothing on the hot path: the connection asks `active()` (one cached
isEnabledFor) per read and builds no entry, string or timestamp unless it is on; a
request whose frame came with a read while it was on is followed. Levels change live (broker_loggers, IncrementalAlterConfigs
BROKER_LOGGER), and Python drops its isEnabledFor cache on every level change.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

from kbroker.server.broker_loggers import TRACE
from kbroker.server.request_context import CLOSE_CONNECTION
from kbroker.server.request_json import api_name, error_counts, errors, to_json

if TYPE_CHECKING:
    from kbroker.server.connection import Connection
    from kbroker.server.protocol_trace import ProtocolTrace
    from kbroker.server.request_metrics import RequestMetrics

LOGGER_NAME = "kafka.request.logger"
MAX_BODY_CHARS = 2000
UNKNOWN_SOFTWARE = "unknown/unknown"  # Kafka's ClientInformation.UNKNOWN_NAME_OR_VERSION

request_logger = logging.getLogger(LOGGER_NAME)
_DEBUG = logging.DEBUG
_now = time.monotonic_ns


class LoggedRequest:
    """One request being followed from the socket back to the socket (times in ns)."""

    __slots__ = ("connection", "api_key", "api_version", "correlation_id", "client_id",
                 "request_bytes", "request_text", "response", "response_bytes", "closed",
                 "received_ns", "received_wall", "started_ns", "returned_ns", "ready_ns",
                 "dequeued_ns", "send_mark", "detailed")

    def __init__(self, connection: Connection, api_key: int, api_version: int,
                 correlation_id: int, client_id: str | None, request_bytes: int,
                 received_ns: int, detailed: bool = True) -> None:
        self.connection = connection
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.request_bytes = request_bytes
        self.request_text: str | None = None
        self.response: Any = None
        self.response_bytes = 0
        self.closed = False
        now = _now()
        self.received_ns = received_ns
        # the wall clock and the response's size are for the log line and the trace; the
        # request metrics alone need neither (not detailed: 0)
        self.detailed = detailed
        self.received_wall = time.time() - (now - received_ns) / 1e9 if detailed else 0.0
        self.started_ns = self.returned_ns = self.ready_ns = self.dequeued_ns = now
        self.send_mark = 0  # the writer's sent_bytes once this response is all written

    def handler_returned(self) -> None:
        self.returned_ns = _now()

    def response_ready(self, response: Any) -> None:
        """The handler's answer: a response, None (acks=0) or CLOSE_CONNECTION."""
        self.ready_ns = _now()
        if response is CLOSE_CONNECTION:
            self.closed = True
        else:
            self.response = response

    def dequeued(self, parts: list[Any] | None) -> None:
        """Its turn came: `parts` (the encoded response, if any) go to the writer."""
        self.dequeued_ns = _now()
        if parts and self.detailed:
            self.response_bytes = sum(
                len(p) if isinstance(p, bytes | bytearray | memoryview) else p.size
                for p in parts) - 4


class RequestLog:
    """One per SocketServer: the request logger, with `--trace` the protocol trace, and
    while the operations listener serves /metrics the request metrics (RequestMetrics,
    fed from the same times). Used from the event loop thread only."""

    def __init__(self, trace: ProtocolTrace | None = None,
                 metrics: RequestMetrics | None = None) -> None:
        self.trace = trace
        self.metrics = metrics

    def active(self) -> bool:
        return (self.metrics is not None or self.trace is not None
                or request_logger.isEnabledFor(_DEBUG))

    def received(self, connection: Connection, header: Any, request: Any, api_key: int,
                 api_version: int, correlation_id: int, size: int,
                 received_ns: int) -> LoggedRequest:
        client_id = header.client_id if header is not None else None
        entry = LoggedRequest(connection, api_key, api_version, correlation_id, client_id, size,
                              received_ns, self.trace is not None
                              or request_logger.isEnabledFor(_DEBUG))
        if request is not None and request_logger.isEnabledFor(TRACE):
            entry.request_text = _bounded(to_json(request, api_version))
        if self.trace is not None:
            self.trace.request(entry, header, request)
        return entry

    def completed(self, entry: LoggedRequest, sent_ns: int | None = None) -> None:
        """The response is written (or there is none): log it and trace it."""
        logging_on = request_logger.isEnabledFor(_DEBUG)
        if not logging_on and self.trace is None and self.metrics is None:
            return  # switched off while the request was in flight
        end = sent_ns or _now()
        response = entry.response
        if self.metrics is not None:
            self.metrics.completed(
                entry.api_key, entry.api_version,
                error_counts(response, entry.api_version) if response is not None else {},
                entry.received_ns, entry.started_ns, entry.returned_ns, entry.ready_ns,
                entry.dequeued_ns, end)
            if not logging_on and self.trace is None:
                return
        codes, messages = (errors(response, entry.api_version) if response is not None
                           else (Counter(), []))
        if logging_on:
            request_logger.debug("%s", _completed_line(entry, codes, messages, end))
            if request_logger.isEnabledFor(TRACE):
                request_logger.log(TRACE, "%s", _bodies_line(entry))
        if self.trace is not None:
            self.trace.response(entry, codes, messages, end)

    def close(self) -> None:
        if self.trace is not None:
            self.trace.close()


def _completed_line(entry: LoggedRequest, codes: Counter[str], messages: list[str],
                    end: int) -> str:
    conn = entry.connection
    if entry.response is not None:
        shown = ", ".join(f"{n} x {name}" for name, n in codes.items())
    else:
        shown = "no response, connection closed" if entry.closed else "no response"
    message_part = f" errorMessages={json.dumps(messages)}" if messages else ""
    return (
        f"Completed request: {api_name(entry.api_key)} v{entry.api_version} "
        f"correlationId={entry.correlation_id} clientId={json.dumps(entry.client_id)} "
        f"clientSoftware={conn.client_software or UNKNOWN_SOFTWARE} "
        f"connection={conn.connection_id} listener={conn.listener_name} "
        f"securityProtocol={conn.security_protocol} principal={conn.principal} "
        f"errors=[{shown}]{message_part} requestBytes={entry.request_bytes} "
        f"responseBytes={entry.response_bytes} totalTimeMs={_ms(end - entry.received_ns)} "
        f"requestQueueTimeMs={_ms(entry.started_ns - entry.received_ns)} "
        f"localTimeMs={_ms(entry.returned_ns - entry.started_ns)} "
        f"remoteTimeMs={_ms(entry.ready_ns - entry.returned_ns)} "
        f"throttleTimeMs={getattr(entry.response, 'throttle_time_ms', 0)} "
        f"responseQueueTimeMs={_ms(entry.dequeued_ns - entry.ready_ns)} "
        f"sendTimeMs={_ms(end - entry.dequeued_ns)}"
    )


def _bodies_line(entry: LoggedRequest) -> str:
    response = entry.response
    response_text = (_bounded(to_json(response, entry.api_version)) if response is not None
                     else "null")
    return (
        f"Request and response bodies: {api_name(entry.api_key)} v{entry.api_version} "
        f"correlationId={entry.correlation_id} connection={entry.connection.connection_id} "
        f"request={entry.request_text or 'null'} response={response_text}"
    )


def _bounded(body: dict[str, Any]) -> str:
    text = json.dumps(body, separators=(",", ":"), default=str)
    if len(text) <= MAX_BODY_CHARS:
        return text
    return f"{text[:MAX_BODY_CHARS]}...({len(text) - MAX_BODY_CHARS} more characters)"


def _ms(ns: int) -> str:
    return f"{max(ns, 0) / 1e6:.3f}"
