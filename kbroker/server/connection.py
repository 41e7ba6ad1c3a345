"""One client connection, as Kafka's Processor serves a KafkaChannel: its socket, its
reading and backpressure, and the parts it is made of.

    kbroker.server.network_receive       framing: int32 size-prefixed frames, the size
                                         limit, partial and large reads (NetworkReceive)
    kbroker.server.authentication_gate   TLS and SASL before other requests, the
                                         principal (AuthenticationGate)
    kbroker.server.request_dispatcher    each frame's decode, authorization and handler:
                                         the callable the connection is given (`dispatch`)
    kbroker.server.connection_quotas     quota recording and channel muting
                                         (ConnectionThrottle)
    kbroker.server.response_slots        responses strictly in request order
                                         (InOrderResponses)

Connection owns the socket and its writer, whether it is read (`_reading`, `_draining`),
the handlers' tasks and PendingResponses (cancelled when it closes) and `complete`, where
a response becomes bytes: encoded (kbroker.server.request_frame.encode_response)
with the throttle its quotas bring. Requests are dispatched as they arrive, and clients
may pipeline. Reading stops (backpressure) while the broker's RequestQueue is full
(queued.max.requests / queued.max.request.bytes, Kafka's keys, over all connections),
while this connection has MAX_PENDING_RESPONSES requests unanswered (Kafka reads one
request per connection at a time; kbroker lets a client pipeline this many) or
MAX_QUEUED_OUTPUT response bytes unsent, and resumes as they drain.

Protocol errors close the connection, as Kafka does (the dispatcher says which). A
handler may answer CLOSE_CONNECTION: earlier responses are sent, then the connection
closes (a failed acks=0 Produce, as Kafka does, so the producer notices). A response
that fails to encode closes the connection. The server lives on.

While the request log or the protocol trace is on (kbroker.server.request_logger),
each request gets a LoggedRequest that follows it to the socket: the time its frame
was read whole, handed to its handler, answered, dequeued and written.

Used from the event loop thread only.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
from functools import cached_property
from typing import TYPE_CHECKING, Any

from kbroker.protocol.api_key import ApiKey
from kbroker.security.quotas import FETCH as FETCH_QUOTA
from kbroker.security.quotas import PRODUCE as PRODUCE_QUOTA
from kbroker.server.authentication_gate import AuthenticationGate
from kbroker.server.connection_quotas import ConnectionThrottle
from kbroker.server.network_receive import NetworkReceive
from kbroker.server.request_context import CLOSE_CONNECTION, PendingResponse
from kbroker.server.request_dispatcher import RequestDispatcher
from kbroker.server.request_frame import api_name, encode_response
from kbroker.server.response_slots import InOrderResponses, ResponseSlot
from kbroker.server.response_writer import ResponseWriter
from kbroker.server.tls_transport import TlsResponseWriter

if TYPE_CHECKING:
    from kbroker.server.listener import SocketServer

log = logging.getLogger(__name__)

MAX_PENDING_RESPONSES = 64
MAX_QUEUED_OUTPUT = 8 * 1024 * 1024


class Connection(NetworkReceive, AuthenticationGate, ConnectionThrottle, InOrderResponses):
    """Used from the event loop thread only."""

    def __init__(self, server: SocketServer, sock: socket.socket, listener_name: str,
                 dispatch: RequestDispatcher) -> None:
        self.server = server
        self.dispatch = dispatch
        self.loop = server.loop
        self.sock = sock
        self.fd = sock.fileno()
        self.listener_name = listener_name
        self.ip: str | None = None  # the peer's address, counted for max.connections.per.ip
        self.index = next(server.connection_index)
        self.client_software: str | None = None  # NAME/VERSION, from ApiVersions v3+
        self.request_log = server.request_log
        try:
            host, port = sock.getpeername()[:2]
            self.peer = f"{host}:{port}"
        except OSError:
            self.peer = "?"
        self.closed = False
        self._init_gate()
        self._init_throttle()
        self.last_active_ms = server.services.time.monotonic_ms()
        self._output_mark = 0  # writer.sent_bytes when the output was last seen to move
        self._output_moved_ms = self.last_active_ms
        self._init_receive()
        self._init_slots()
        self.tasks: set[asyncio.Task[Any]] = set()
        self.deferred: set[PendingResponse] = set()  # answers completed by callbacks
        self._reading = False
        self._draining = False  # shutting down: no new requests
        self.writer: ResponseWriter | TlsResponseWriter
        if self.tls is None:
            self.writer = ResponseWriter(self.loop, sock, self._on_write_error, self._on_drained)
            self._reader = self._on_readable
        else:
            self.writer = TlsResponseWriter(self.loop, sock, self.tls, self._on_write_error,
                                            self._on_drained)
            self._reader = self._on_readable_tls
        self._resume_reading()

    # -- state

    @cached_property
    def connection_id(self) -> str:
        """Kafka's connection id: local address-peer address-index."""
        try:
            host, port = self.sock.getsockname()[:2]
        except OSError:
            return f"?-{self.peer}-{self.index}"
        return f"{host}:{port}-{self.peer}-{self.index}"

    @property
    def idle(self) -> bool:
        return not self._pending and self.writer.idle

    def output_stalled(self, now_ms: int, limit_ms: int) -> bool:
        """True when queued output has not moved for more than limit_ms (a client that
        stopped reading). Called by the listener's periodic sweep, so the time is
        measured from the first sweep that saw the output stuck."""
        sent = self.writer.sent_bytes
        if self.writer.idle or sent != self._output_mark:
            self._output_mark = sent
            self._output_moved_ms = now_ms
            return False
        return now_ms - self._output_moved_ms > limit_ms

    def stop_reading(self) -> None:
        """Graceful shutdown: take no new requests, let pending ones finish."""
        self._draining = True
        self._pause_reading()

    def abort(self) -> None:
        """Close with a reset: drop what the kernel still holds for a client that stopped
        reading (a graceful close would keep trickling it into a closed window)."""
        if not self.closed:
            try:
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
        self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._pause_reading()
        self._close_gate()
        self._close_throttle()
        self.writer.close()
        for task in list(self.tasks):
            task.cancel()
        for pending in self.deferred:
            pending.cancel()
        self.deferred.clear()
        self._drop_slots()
        self.server.request_queue.forget(self)
        try:
            self.sock.close()
        except OSError:
            pass
        self.server.connection_closed(self)

    def _pause_reading(self) -> None:
        if self._reading:
            self.loop.remove_reader(self.fd)
            self._reading = False

    def _resume_reading(self) -> None:
        if not self._reading and not self.closed and not self._draining and not self._muted:
            self.loop.add_reader(self.fd, self._reader)
            self._reading = True

    def _overloaded(self) -> bool:
        if self.server.request_queue.full:
            self.server.request_queue.wait(self, self._on_queue_room)
            return True
        return (
            len(self._pending) >= MAX_PENDING_RESPONSES
            or self.writer.queued_bytes >= MAX_QUEUED_OUTPUT
        )

    def _on_queue_room(self) -> None:
        if not self._reading and not self.closed and not self._draining and not self._overloaded():
            self._resume_reading()
            if self._inbuf and self._reading:
                self._guarded_process_input()

    # -- requests

    def _handle_frame(self, frame: bytearray) -> None:
        """A whole frame (from NetworkReceive): through the gate, then to the dispatcher."""
        if self.sasl is not None and self._sasl_frame(frame):
            return
        self.dispatch(self, frame)

    def complete(self, slot: ResponseSlot, response: Any, close_after: bool = False) -> None:
        """`response` answers `slot`'s request: encoded with the throttle the quotas bring
        (channel muting for that long) and sent when every earlier response has been."""
        if self.closed:
            return
        slot.close_after = close_after
        if slot.logged is not None:
            slot.logged.response_ready(response)
        quotas = self.quotas
        throttle = slot.throttle_ms
        if quotas.active and slot.api_key == ApiKey.PRODUCE:
            throttle = max(throttle, self.recorded(PRODUCE_QUOTA, slot, slot.size))
        if response is CLOSE_CONNECTION:
            slot.close_after = True
        elif response is not None:
            try:
                if throttle and hasattr(response, "throttle_time_ms"):
                    response.throttle_time_ms = throttle
                slot.parts = encode_response(response, slot.api_key, slot.version,
                                             slot.correlation_id)
                if quotas.active and slot.api_key == ApiKey.FETCH:
                    fetched = self.recorded(FETCH_QUOTA, slot, sum(len(p) for p in slot.parts))
                    if fetched > throttle:  # the answer says how long, so encode it again
                        throttle = response.throttle_time_ms = fetched
                        slot.parts = encode_response(response, slot.api_key, slot.version,
                                                     slot.correlation_id)
            except Exception:
                log.exception("encoding %s v%d failed", api_name(slot.api_key), slot.version)
                self.close()
                return
        if throttle:
            self._mute(throttle)
        slot.done = True
        self._send_ready()

    # -- output callbacks

    def _on_write_error(self, exc: BaseException) -> None:
        if isinstance(exc, OSError):
            log.debug("connection %s: send failed: %s", self.peer, exc)
        else:
            log.error("connection %s: send failed", self.peer, exc_info=exc)
        self.close()

    def _on_drained(self) -> None:
        self.last_active_ms = self.server.services.time.monotonic_ms()
        if self._unsent:
            self._log_written()
        if self._close_after_drain:
            self.close()
            return
        if not self._reading and not self._overloaded() and not self.closed:
            self._resume_reading()
            if self._inbuf and self._reading:
                self.loop.call_soon(self._guarded_process_input)
