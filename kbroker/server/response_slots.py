"""A connection's responses, strictly in request order (Kafka's in-flight sends of one
channel, which Kafka keeps at one request; kbroker lets a client pipeline).

InOrderResponses (a base of kbroker.server.connection.Connection) owns the ordered queue
of ResponseSlots (`_pending`), one per request read, in the order read. A request's slot
is counted in the broker's RequestQueue (queued.max.requests / queued.max.request.bytes)
from its read until its response leaves the queue. A handler may answer later (a
coroutine's task, a PendingResponse's callback): its slot is marked done then, and a
response is handed to the writer only when every earlier slot has left, so clients that
pipeline see responses in request order. An acks=0 Produce occupies a slot that produces
no bytes. A slot that says close_after sends, then closes: later requests are dropped.

While the request log or the protocol trace is on (kbroker.server.request_logger), a
slot carries the request's LoggedRequest; it is dequeued with its slot and completed once
the writer has sent every byte up to its last (`_unsent`, in send order).

Used from the event loop thread only.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from kbroker.protocol.messages.request_header import RequestHeader
from kbroker.server.request_logger import LoggedRequest

if TYPE_CHECKING:
    from kbroker.server.listener import SocketServer
    from kbroker.server.request_logger import RequestLog
    from kbroker.server.response_writer import ResponseWriter
    from kbroker.server.tls_transport import TlsResponseWriter


class ResponseSlot:
    """One request's place in its connection's response order."""

    __slots__ = ("api_key", "version", "correlation_id", "size", "done", "parts", "close_after",
                 "logged", "client_id", "throttle_ms")

    def __init__(self, api_key: int, version: int, correlation_id: int, size: int) -> None:
        self.api_key = api_key
        self.version = version
        self.correlation_id = correlation_id
        self.size = size  # of the request frame: counted in the broker's RequestQueue
        self.done = False
        self.parts: list[Any] | None = None
        self.close_after = False
        self.logged: LoggedRequest | None = None  # while the request log or trace is on
        self.client_id = ""  # for client quotas
        self.throttle_ms = 0  # request_percentage's throttle, found when the handler ran


class InOrderResponses:
    """The response-order half of a Connection. The connection provides the rest (its
    writer, reading state and close), declared here for the type checker."""

    server: SocketServer
    loop: asyncio.AbstractEventLoop
    request_log: RequestLog
    closed: bool
    writer: ResponseWriter | TlsResponseWriter
    _reading: bool
    _draining: bool
    _inbuf: bytearray
    _received_ns: int
    close: Callable[[], None]
    stop_reading: Callable[[], None]
    _overloaded: Callable[[], bool]
    _resume_reading: Callable[[], None]
    _guarded_process_input: Callable[[], None]

    def _init_slots(self) -> None:
        self._pending: deque[ResponseSlot] = deque()
        self._close_after_drain = False
        self._unsent: deque[LoggedRequest] | None = None  # logged responses being written

    def new_slot(self, api_key: int, version: int, correlation_id: int, size: int,
                 header: RequestHeader | None = None, request: Any = None) -> ResponseSlot:
        """The next slot, for a request of `size` bytes just read."""
        slot = ResponseSlot(api_key, version, correlation_id, size)
        self._pending.append(slot)
        self.server.request_queue.add(size)
        if self._received_ns:  # the log or trace was on at the read that brought the frame
            slot.logged = self.request_log.received(self, header, request, api_key, version,  # type: ignore[arg-type]
                                                    correlation_id, size, self._received_ns)
        return slot

    def _answered_slot(self, size: int, parts: list[Any]) -> None:
        """The next slot, already answered with `parts` (a bare SASL token's answer)."""
        slot = ResponseSlot(-1, 0, 0, size)
        self._pending.append(slot)
        self.server.request_queue.add(size)
        slot.parts = parts
        slot.done = True

    def _release(self, slots: Iterable[ResponseSlot]) -> None:
        queue = self.server.request_queue
        for slot in slots:
            queue.remove(slot.size)

    def _drop_slots(self) -> None:
        self._release(self._pending)
        self._pending.clear()

    def _send_ready(self) -> None:
        pending = self._pending
        while pending and pending[0].done and not self.closed:
            slot = pending.popleft()
            self._release((slot,))
            if slot.parts is not None:
                self.writer.send(slot.parts)
            if slot.logged is not None:
                self._follow(slot.logged, slot.parts)
            if slot.close_after:
                self._close_when_sent()
                return
        if self._reading is False and not self._overloaded() and not self._draining:
            self._resume_reading()
            if self._inbuf and self._reading:
                self.loop.call_soon(self._guarded_process_input)

    def _follow(self, logged: LoggedRequest, parts: list[Any] | None) -> None:
        """A logged response left the queue: completed now if it has no bytes, else once
        the writer has sent every byte up to its last."""
        logged.dequeued(parts)
        if parts is None:
            self.request_log.completed(logged)
            return
        logged.send_mark = self.writer.sent_bytes + self.writer.queued_bytes
        if self._unsent is None:
            self._unsent = deque()
        self._unsent.append(logged)

    def _log_written(self) -> None:
        unsent, sent = self._unsent, self.writer.sent_bytes
        assert unsent is not None
        now = time.monotonic_ns()
        while unsent and unsent[0].send_mark <= sent:
            self.request_log.completed(unsent.popleft(), now)

    def _close_when_sent(self) -> None:
        """Send what earlier requests produced, then close; later requests are dropped."""
        self.stop_reading()
        self._drop_slots()
        self._close_after_drain = True
        if self.writer.idle:
            self.close()
