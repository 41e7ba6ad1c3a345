"""One client connection: framing, dispatch, and responses strictly in request order.

Wire framing (both directions):

    int32 size | size bytes: request header + body   (response header + body)

A size below 0 or above `socket.request.max.bytes` closes the connection as
soon as the prefix is read, before any of the frame is buffered.

Requests are decoded and dispatched as they arrive. Each gets a slot in an
ordered queue; a handler may complete later (a coroutine, run at once as far as it
goes without waiting and then as a task, kbroker.utils.eager; or a PendingResponse,
completed by the callback that wakes it: a parked Fetch, an acks=all Produce) and a
response leaves only when every earlier slot has left, so clients that pipeline (up to
5 in flight) see responses in request order. An acks=0 Produce occupies a slot
that produces no bytes. Reading stops (backpressure) while the broker's
RequestQueue is full (queued.max.requests / queued.max.request.bytes, Kafka's
keys, over all connections), while this connection has MAX_PENDING_RESPONSES
requests unanswered (Kafka reads one request per connection at a time; kbroker
lets a client pipeline this many) or MAX_QUEUED_OUTPUT response bytes unsent,
and resumes as they drain.

Protocol errors close the connection, as Kafka does: an undecodable header or
body, an unknown API key, an unsupported version of any API but ApiVersions
(which answers UNSUPPORTED_VERSION with a v0 body instead). A handler may
answer CLOSE_CONNECTION: earlier responses are sent, then the connection
closes (a failed acks=0 Produce, as Kafka does, so the producer notices). A handler that
raises is logged; the client gets UNKNOWN_SERVER_ERROR where the API has
per-item error codes, else the connection is closed. The server lives on.

Security (kbroker.security): on an SSL or SASL_SSL listener the bytes go through TLS
(kbroker.server.tls_transport: the handshake first, then plaintext frames as above;
responses are read from files and encrypted instead of sent with sendfile); on a SASL
listener frames pass through the SaslAuthenticator (kbroker.server.authenticator)
until the client is authenticated: before that only ApiVersions and SASL frames are
read, none larger than sasl.server.max.receive.size, and a connection not
authenticated within AUTHENTICATION_TIMEOUT_S is closed. Each request's context
carries the connection's principal (User:ANONYMOUS on PLAINTEXT).

While the request log or the protocol trace is on (kbroker.server.request_logger),
each request gets a LoggedRequest that follows it to the socket: the time its frame
was read whole, handed to its handler, answered, dequeued and written.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import struct
import time
from collections import deque
from collections.abc import Iterable
from functools import cached_property
from typing import TYPE_CHECKING, Any

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.api_key import ApiKey, request_header_version, response_header_version
from kbroker.protocol.codec import DecodeError, Reader, Writer
from kbroker.protocol.messages import REQUESTS
from kbroker.protocol.messages.request_header import RequestHeader
from kbroker.protocol.messages.response_header import ResponseHeader
from kbroker.security.principal import ANONYMOUS, KafkaPrincipal, rfc2253
from kbroker.security.quotas import FETCH as FETCH_QUOTA
from kbroker.security.quotas import PRODUCE as PRODUCE_QUOTA
from kbroker.security.quotas import REQUEST as REQUEST_QUOTA
from kbroker.server.api_table import ApiSpec
from kbroker.server.apis import api_versions
from kbroker.server.authenticator import SaslAuthenticator, SaslState
from kbroker.server.authorization import request_refusal
from kbroker.server.request_context import CLOSE_CONNECTION, PendingResponse, RequestContext
from kbroker.server.request_logger import LoggedRequest
from kbroker.server.response_writer import ResponseWriter
from kbroker.server.tls_transport import TlsChannel, TlsResponseWriter
from kbroker.utils.eager import start_eagerly

if TYPE_CHECKING:
    from kbroker.server.listener import SocketServer

log = logging.getLogger(__name__)

_PREFIX = struct.Struct(">i")
_HEAD = struct.Struct(">hhi")  # api_key, api_version, correlation_id
MAX_PENDING_RESPONSES = 64
MAX_QUEUED_OUTPUT = 8 * 1024 * 1024
RECV_CHUNK = 64 * 1024  # the server's shared receive buffer
_BIG_FRAME = 256 * 1024  # frames at least this large are received in place
_BIG_FRAME_START = 1024 * 1024  # ... into a buffer this large at first (or the frame's size)
AUTHENTICATION_TIMEOUT_S = 10.0  # TLS handshake and SASL exchange, from accept
_SASL_KEYS = (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)


class _Slot:
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


class Connection:
    """Used from the event loop thread only."""

    def __init__(self, server: SocketServer, sock: socket.socket, listener_name: str) -> None:
        self.server = server
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
        security = server.listener_security(listener_name)
        self.principal: KafkaPrincipal = ANONYMOUS
        self.sasl: SaslAuthenticator | None = None
        self.tls: TlsChannel | None = None
        if security.sasl:
            self.sasl = SaslAuthenticator(security, server.broker.scram_credentials.get,
                                          server.broker.time.monotonic_ms)
        if security.tls:
            self.tls = TlsChannel(server.ssl_context(listener_name))
        self.authenticated = self.sasl is None and self.tls is None
        self.max_request_bytes = (security.sasl_max_receive_size if self.sasl is not None
                                  else server.broker.config.socket_request_max_bytes)
        self._auth_timer: asyncio.TimerHandle | None = None
        self._muted = False  # a quota's throttle: not read until _unmute
        self._mute_timer: asyncio.TimerHandle | None = None
        if not self.authenticated:
            self._auth_timer = self.loop.call_later(AUTHENTICATION_TIMEOUT_S, self._auth_timeout)
        self.last_active_ms = server.broker.time.monotonic_ms()
        self._output_mark = 0  # writer.sent_bytes when the output was last seen to move
        self._output_moved_ms = self.last_active_ms
        self.closed = False
        # Bytes received and not yet framed; emptied (and given back) once framed. Reads
        # land in the server's one receive buffer (the loop reads one socket at a time),
        # so an idle connection holds no buffer of its own.
        self._inbuf = bytearray()
        # A large frame being received in place: its buffer grows (doubling) to the size
        # its prefix announced as its bytes arrive, so an announcement alone costs at
        # most _BIG_FRAME_START bytes (a 100 MB one cost 100 MB when the buffer was made
        # whole); frames up to that size (producers' usual requests) never grow.
        self._big_frame: bytearray | None = None
        self._big_filled = 0
        self._big_size = 0
        self._pending: deque[_Slot] = deque()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._deferred: set[PendingResponse] = set()  # answers completed by callbacks
        self._reading = False
        self._draining = False  # shutting down: no new requests
        self._close_after_drain = False
        self._received_ns = 0  # the last read's end while the request log is on, else 0
        self._unsent: deque[LoggedRequest] | None = None  # logged responses being written
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
        if self._auth_timer is not None:
            self._auth_timer.cancel()
            self._auth_timer = None
        if self._mute_timer is not None:
            self._mute_timer.cancel()
            self._mute_timer = None
        self.writer.close()
        for task in list(self._tasks):
            task.cancel()
        for pending in self._deferred:
            pending.cancel()
        self._deferred.clear()
        self._release(self._pending)
        self._pending.clear()
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

    def _release(self, slots: Iterable[_Slot]) -> None:
        queue = self.server.request_queue
        for slot in slots:
            queue.remove(slot.size)

    # -- input

    def _receive(self, target: memoryview) -> int:
        """recv_into `target`: the bytes received (and the connection marked active), or 0
        when none are ready yet or the peer closed or failed (then the connection is closed)."""
        try:
            n = self.sock.recv_into(target)
        except (BlockingIOError, InterruptedError):
            return 0
        except OSError as e:
            log.debug("connection %s: recv failed: %s", self.peer, e)
            self.close()
            return 0
        if not n:
            self.close()
            return 0
        self.last_active_ms = self.server.broker.time.monotonic_ms()
        self._received_ns = time.monotonic_ns() if self.request_log.active() else 0
        return n

    def _on_readable(self) -> None:
        big = self._big_frame
        target = self.server.recv_view if big is None else self._big_room()
        try:
            n = self._receive(target)
        finally:
            if big is not None:
                target.release()
        if not n:
            return
        if big is None:
            self._inbuf += target[:n]
        else:
            self._big_filled += n
            if self._big_filled < self._big_size:
                return
            self._handle_big_frame(self._big_done())
        self._guarded_process_input()

    def _big_room(self) -> memoryview:
        """Where the large frame's next bytes go; its buffer doubled (up to the frame's
        size, one copy of what arrived) when full."""
        big = self._big_frame
        assert big is not None
        if self._big_filled == len(big):
            grown = bytearray(min(self._big_size, 2 * len(big)))
            grown[: self._big_filled] = big
            self._big_frame = big = grown
        return memoryview(big)[self._big_filled :]

    def _big_done(self) -> bytearray:
        big = self._big_frame
        assert big is not None and len(big) == self._big_filled == self._big_size
        self._big_frame = None
        return big

    def _on_readable_tls(self) -> None:
        """TLS: ciphertext into the channel, the handshake advanced, plaintext into _inbuf
        (or the large frame being received)."""
        tls, view = self.tls, self.server.tls_recv_view
        assert tls is not None
        n = self._receive(view)
        if not n:
            return
        tls.incoming.write(view[:n])
        try:
            if not tls.handshaken:
                done = tls.handshake()
                assert isinstance(self.writer, TlsResponseWriter)
                self.writer.push()
                if not done:
                    return
                self._tls_established()
                if self.closed:
                    return
            got = self._decrypt()
        except ssl.SSLError as e:
            log.info("connection %s: closing, TLS failed: %s", self.peer, e.reason or e)
            assert isinstance(self.writer, TlsResponseWriter)
            self.writer.flush_now()  # the alert, if any
            self.close()
            return
        if tls.outgoing.pending:
            assert isinstance(self.writer, TlsResponseWriter)
            self.writer.push()
        if not self.closed:
            self._guarded_process_input()  # with what came before a close_notify (as Kafka)
        if got < 0 and not self.closed:  # the peer's close_notify: ours, then the close
            tls.close_notify()
            assert isinstance(self.writer, TlsResponseWriter)
            self.writer.flush_now()
            self.close()

    def _decrypt(self) -> int:
        """All the plaintext the channel holds: straight into the large frame being received
        when there is one (as _on_readable receives it in place: no copies through _inbuf),
        else into _inbuf. The last read's result: 0, or -1 at the peer's close_notify."""
        tls, view = self.tls, self.server.recv_view
        assert tls is not None
        while not self.closed:
            big = self._big_frame
            if big is None:
                got = tls.read_into(view)
                if got <= 0:
                    return got
                self._inbuf += view[:got]
                continue
            target = self._big_room()
            try:
                got = tls.read_into(target)
            finally:
                target.release()
            if got <= 0:
                return got
            self._big_filled += got
            if self._big_filled == self._big_size:
                self._handle_big_frame(self._big_done())
        return 0

    def _tls_established(self) -> None:
        """The TLS handshake completed: on SSL listeners the client is authenticated as its
        certificate's mapped name (or ANONYMOUS without one)."""
        assert self.tls is not None
        if self.sasl is not None:
            return
        security = self.server.listener_security(self.listener_name)
        cert = self.tls.peer_certificate()
        principal = ANONYMOUS
        if cert is not None and security.ssl is not None:
            dn = rfc2253(cert.get("subject", ()))
            name = security.ssl.principal_rules.map(dn)
            if name is None:
                log.info("connection %s: closing, no ssl.principal.mapping.rules rule maps %r",
                         self.peer, dn)
                self.close()
                return
            principal = KafkaPrincipal("User", name)
        self._authenticated(principal)

    def _authenticated(self, principal: KafkaPrincipal) -> None:
        self.principal = principal
        if not self.authenticated:
            self.authenticated = True
            self.max_request_bytes = self.server.broker.config.socket_request_max_bytes
            if self._auth_timer is not None:
                self._auth_timer.cancel()
                self._auth_timer = None

    def _auth_timeout(self) -> None:
        self._auth_timer = None
        if not self.authenticated and not self.closed:
            log.info("connection %s: closing, not authenticated within %.0f s", self.peer,
                     AUTHENTICATION_TIMEOUT_S)
            self.close()

    def _handle_big_frame(self, frame: bytearray) -> None:
        try:
            self._handle_frame(frame)
        except Exception:
            log.exception("connection %s: closing after an internal error", self.peer)
            self.close()

    def _guarded_process_input(self) -> None:
        # Every frame of this read is handled before the parked Fetches they wake read
        # again: a follower's Fetch carries all of a producer's pipelined Produces at once.
        with self.server.broker.replica_manager.delayed_fetch_purgatory.held():
            try:
                self._process_input()
            except Exception:  # a bug here must cost one connection, not the server
                log.exception("connection %s: closing after an internal error", self.peer)
                self.close()

    def _process_input(self) -> None:
        buf = self._inbuf
        pos = 0
        while not self.closed and not self._draining:
            if self._muted:  # throttled by a quota: the rest waits until unmuted
                break
            if self._overloaded():
                self._pause_reading()
                break
            avail = len(buf) - pos
            if avail < 4:
                break
            try:
                size = frame_size(buf, pos, self.max_request_bytes)
            except FrameError as e:
                log.info("connection %s: closing, %s", self.peer, e)
                self.close()
                return
            if avail - 4 < size:
                if size >= _BIG_FRAME:
                    # Receive (or decrypt) the rest straight into the frame: no copies
                    # through _inbuf.
                    self._big_frame = bytearray(min(size, max(_BIG_FRAME_START, 2 * (avail - 4))))
                    self._big_frame[: avail - 4] = buf[pos + 4 :]
                    self._big_filled = avail - 4
                    self._big_size = size
                    pos = len(buf)
                break
            frame = buf[pos + 4 : pos + 4 + size]  # a bytearray copy: records are patched in place
            pos += 4 + size
            self._handle_frame(frame)
        if pos and not self.closed:
            if pos == len(buf):
                self._inbuf = bytearray()  # a new empty one: the old one's capacity goes back
            else:
                del buf[:pos]

    def _handle_frame(self, frame: bytearray) -> None:
        if self.sasl is not None and self._sasl_frame(frame):
            return
        try:
            parsed = parse_frame(frame, self.server.api_table)
        except FrameError as e:
            log.info("connection %s: closing, %s", self.peer, e)
            self.close()
            return
        api_key, version, correlation_id, spec = parsed.api_key, parsed.version, \
            parsed.correlation_id, parsed.spec
        if parsed.request is None:  # KIP-511: ApiVersions too new, answered in v0's format
            slot = self._new_slot(api_key, 0, correlation_id, len(frame))
            self._complete(slot, api_versions.unsupported_version_response(spec))
            return
        header, request = parsed.header, parsed.request
        assert header is not None
        if parsed.client_software is not None:
            self.client_software = parsed.client_software
        ctx = RequestContext(
            services=self.server.services,
            api_key=api_key,
            api_version=version,
            correlation_id=correlation_id,
            client_id=header.client_id,
            listener_name=self.listener_name,
            peer=self.peer,
            principal=self.principal,
        )
        slot = self._new_slot(api_key, version, correlation_id, len(frame), header, request)
        slot.client_id = header.client_id or ""
        if self.server.broker.authorizer is not None:
            refused = request_refusal(ctx, request)
            if refused is not None:
                self._refuse(slot, spec, request, refused)
                return
        self._dispatch(slot, spec, ctx, request)

    def _decode(self, frame: bytearray, api_key: int, version: int) -> tuple[RequestHeader, Any] | None:
        """The header and request of a frame; None (the connection closed) when undecodable."""
        try:
            return decode_request(frame, api_key, version)
        except (DecodeError, UnicodeDecodeError) as e:
            log.info("connection %s: closing, cannot decode %s v%d: %s",
                     self.peer, _name(api_key), version, e)
            self.close()
            return None

    def _sasl_frame(self, frame: bytearray) -> bool:
        """SASL's part of a frame's handling on a SASL listener: True when it was handled
        here (a SASL request or raw token, or a request refused before authentication)."""
        sasl = self.sasl
        assert sasl is not None
        if sasl.state is SaslState.RAW:
            self._raw_token(frame)
            return True
        if len(frame) < _HEAD.size:
            return False
        api_key, version, correlation_id = _HEAD.unpack_from(frame, 0)
        if api_key in _SASL_KEYS:
            self._sasl_request(frame, api_key, version, correlation_id)
            return True
        if not sasl.authenticated:
            if api_key == ApiKey.API_VERSIONS and sasl.state is SaslState.HANDSHAKE:
                return False
            log.info("connection %s: closing, unexpected %s request during SASL authentication",
                     self.peer, _name(api_key))
            self.close()
            return True
        if sasl.expired() and not sasl.reauthenticating:
            log.info("connection %s: closing, its SASL session expired "
                     "(connections.max.reauth.ms)", self.peer)
            self.close()
            return True
        return False

    def _sasl_request(self, frame: bytearray, api_key: int, version: int,
                      correlation_id: int) -> None:
        sasl = self.sasl
        assert sasl is not None
        spec = self.server.api_table.get(api_key)
        if spec is None or not spec.min_version <= version <= spec.max_version:
            log.info("connection %s: closing, unsupported %s version %d", self.peer,
                     _name(api_key), version)
            self.close()
            return
        decoded = self._decode(frame, api_key, version)
        if decoded is None:
            return
        header, request = decoded
        slot = self._new_slot(api_key, version, correlation_id, len(frame), header, request)
        response: Any
        if api_key == ApiKey.SASL_HANDSHAKE:
            response, close = sasl.handshake(request.mechanism, version)
        else:
            response, close = sasl.authenticate(request.auth_bytes, version)
        if sasl.principal is not None and not close:
            self._authenticated(sasl.principal)
        self._complete(slot, response, close_after=close)

    def _raw_token(self, frame: bytearray) -> None:
        """A bare SASL token after SaslHandshake v0: answered with a bare token."""
        sasl = self.sasl
        assert sasl is not None
        response, close = sasl.authenticate(bytes(frame), None)
        if close:
            self.close()  # Kafka closes without an answer to a failed v0 exchange
            return
        slot = _Slot(-1, 0, 0, len(frame))
        self._pending.append(slot)
        self.server.request_queue.add(len(frame))
        slot.parts = [_PREFIX.pack(len(response.auth_bytes)) + response.auth_bytes]
        slot.done = True
        if sasl.principal is not None:
            self._authenticated(sasl.principal)
        self._send_ready()

    def _new_slot(self, api_key: int, version: int, correlation_id: int, size: int,
                  header: RequestHeader | None = None, request: Any = None) -> _Slot:
        slot = _Slot(api_key, version, correlation_id, size)
        self._pending.append(slot)
        self.server.request_queue.add(size)
        if self._received_ns:  # the log or trace was on at the read that brought the frame
            slot.logged = self.request_log.received(self, header, request, api_key, version,
                                                    correlation_id, size, self._received_ns)
        return slot

    # -- dispatch

    def _dispatch(self, slot: _Slot, spec: ApiSpec, ctx: RequestContext, request: Any) -> None:
        quotas = self.server.broker.client_quotas
        started = time.perf_counter_ns() if quotas.active else 0
        awaited = False
        try:
            result = spec.handler(ctx, request)
            if type(result) is not PendingResponse and hasattr(type(result), "__await__"):
                # A coroutine (inspect.isawaitable costs more): it runs now as far as it
                # goes without waiting, and answers now if it never waits (kbroker.utils.eager).
                awaited = True
                _, task = start_eagerly(self.loop, self._await(slot, spec, request, result))
                if task is not None:
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
        except Exception:
            log.exception("%s v%d from %s failed", _name(ctx.api_key), ctx.api_version, self.peer)
            self._fail(slot, spec, request)
            return
        finally:
            if slot.logged is not None:
                slot.logged.handler_returned()
            if started:
                slot.throttle_ms = quotas.record(
                    self.principal.name, slot.client_id, REQUEST_QUOTA,
                    (time.perf_counter_ns() - started) / 1e6, self.server.broker.time.milliseconds())
        if awaited:
            return  # answered by _await, now or in its task
        if type(result) is PendingResponse:
            self._deferred.add(result)
            result.attach(lambda response, error: self._deferred_done(slot, spec, request, result,
                                                                      response, error))
        else:
            self._complete(slot, result)

    async def _await(self, slot: _Slot, spec: ApiSpec, request: Any, result: Any) -> None:
        try:
            response = await result
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s v%d from %s failed", _name(slot.api_key), slot.version, self.peer)
            self._fail(slot, spec, request)
            return
        self._complete(slot, response)

    def _deferred_done(self, slot: _Slot, spec: ApiSpec, request: Any, pending: PendingResponse,
                       response: Any, error: BaseException | None) -> None:
        """A PendingResponse was completed (inside the callback that completed it)."""
        self._deferred.discard(pending)
        if error is not None:
            log.error("%s v%d from %s failed", _name(slot.api_key), slot.version, self.peer,
                      exc_info=error)
            self._fail(slot, spec, request)
            return
        self._complete(slot, response)

    def _refuse(self, slot: _Slot, spec: ApiSpec, request: Any, code: int) -> None:
        """Not authorized as a whole: the API's error answer with `code`."""
        log.info("%s v%d from %s (%s) refused: %s", _name(slot.api_key), slot.version,
                 self.peer, self.principal, ErrorCode(code).name)
        if spec.error_response is None:
            self.close()
            return
        self._complete(slot, spec.error_response(request, slot.version, code))

    def _fail(self, slot: _Slot, spec: ApiSpec, request: Any) -> None:
        if spec.error_response is None:
            self.close()
            return
        try:
            response = spec.error_response(request, slot.version, ErrorCode.UNKNOWN_SERVER_ERROR)
        except Exception:
            log.exception("building the error response failed")
            self.close()
            return
        self._complete(slot, response)

    def _complete(self, slot: _Slot, response: Any, close_after: bool = False) -> None:
        if self.closed:
            return
        slot.close_after = close_after
        if slot.logged is not None:
            slot.logged.response_ready(response)
        quotas = self.server.broker.client_quotas
        throttle = slot.throttle_ms
        if quotas.active and slot.api_key == ApiKey.PRODUCE:
            throttle = max(throttle, quotas.record(self.principal.name, slot.client_id,
                                                   PRODUCE_QUOTA, slot.size,
                                                   self.server.broker.time.milliseconds()))
        if response is CLOSE_CONNECTION:
            slot.close_after = True
        elif response is not None:
            try:
                if throttle and hasattr(response, "throttle_time_ms"):
                    response.throttle_time_ms = throttle
                slot.parts = self._encode(slot, response)
                if quotas.active and slot.api_key == ApiKey.FETCH:
                    fetched = quotas.record(self.principal.name, slot.client_id, FETCH_QUOTA,
                                            sum(len(p) for p in slot.parts),
                                            self.server.broker.time.milliseconds())
                    if fetched > throttle:  # the answer says how long, so encode it again
                        throttle = response.throttle_time_ms = fetched
                        slot.parts = self._encode(slot, response)
            except Exception:
                log.exception("encoding %s v%d failed", _name(slot.api_key), slot.version)
                self.close()
                return
        if throttle:
            self._mute(throttle)
        slot.done = True
        self._send_ready()

    def _mute(self, throttle_ms: int) -> None:
        """A quota was exceeded: read nothing more from this client for throttle_ms (Kafka's
        channel muting); responses already queued still go out."""
        if self._mute_timer is not None:
            self._mute_timer.cancel()
        self._muted = True
        self._pause_reading()
        self._mute_timer = self.loop.call_later(throttle_ms / 1000, self._unmute)

    def _unmute(self) -> None:
        self._mute_timer = None
        self._muted = False
        if not self.closed and not self._overloaded():
            self._resume_reading()
            if self._inbuf and self._reading:
                self._guarded_process_input()

    def _encode(self, slot: _Slot, response: Any) -> list[Any]:
        return encode_response(response, slot.api_key, slot.version, slot.correlation_id)

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
        unsent, sent, now = self._unsent, self.writer.sent_bytes, time.monotonic_ns()
        while unsent and unsent[0].send_mark <= sent:
            self.request_log.completed(unsent.popleft(), now)

    def _close_when_sent(self) -> None:
        """Send what earlier requests produced, then close; later requests are dropped."""
        self.stop_reading()
        self._release(self._pending)
        self._pending.clear()
        self._close_after_drain = True
        if self.writer.idle:
            self.close()

    # -- output callbacks

    def _on_write_error(self, exc: BaseException) -> None:
        if isinstance(exc, OSError):
            log.debug("connection %s: send failed: %s", self.peer, exc)
        else:
            log.error("connection %s: send failed", self.peer, exc_info=exc)
        self.close()

    def _on_drained(self) -> None:
        self.last_active_ms = self.server.broker.time.monotonic_ms()
        if self._unsent:
            self._log_written()
        if self._close_after_drain:
            self.close()
            return
        if not self._reading and not self._overloaded() and not self.closed:
            self._resume_reading()
            if self._inbuf and self._reading:
                self.loop.call_soon(self._guarded_process_input)


class FrameError(Exception):
    """A frame the connection closes on (its message says why, for the log): a size
    outside [0, limit], a frame too short for a header, an API key or version the broker
    does not serve, a header or body that does not decode."""


def frame_size(buf: bytes | bytearray | memoryview, pos: int, limit: int) -> int:
    """The size of the frame whose int32 prefix is at buf[pos:pos + 4] (the caller has
    those 4 bytes). FrameError when outside [0, limit]."""
    (size,) = _PREFIX.unpack_from(buf, pos)
    if size < 0 or size > limit:
        raise FrameError(f"frame size {size} outside [0, socket.request.max.bytes={limit}]")
    return int(size)


class ParsedFrame:
    """A request frame read as the connection reads it (parse_frame)."""

    __slots__ = ("api_key", "version", "correlation_id", "spec", "header", "request",
                 "client_software")

    def __init__(self, api_key: int, version: int, correlation_id: int, spec: ApiSpec,
                 header: RequestHeader | None = None, request: Any = None,
                 client_software: str | None = None) -> None:
        self.api_key = api_key
        self.version = version
        self.correlation_id = correlation_id
        self.spec = spec
        self.header = header
        self.request = request  # None: an ApiVersions of a version too new (KIP-511)
        self.client_software = client_software  # NAME/VERSION from a valid ApiVersions v3+


def parse_frame(frame: bytes | bytearray | memoryview, api_table: dict[int, ApiSpec]) -> ParsedFrame:
    """A request frame (without its size prefix) decoded as the connection does before it
    dispatches it: FrameError for everything the connection closes on. An ApiVersions of
    a version above the broker's is not decoded (request None): the connection answers it
    in the v0 format (KIP-511)."""
    if len(frame) < _HEAD.size:
        raise FrameError(f"frame of {len(frame)} bytes is too short")
    api_key, version, correlation_id = _HEAD.unpack_from(frame, 0)
    spec = api_table.get(api_key)
    if api_key == ApiKey.API_VERSIONS and spec is not None and version > spec.max_version:
        return ParsedFrame(api_key, version, correlation_id, spec)
    if spec is None or not spec.min_version <= version <= spec.max_version:
        raise FrameError(f"unsupported API key {api_key} version {version}")
    try:
        header, request = decode_request(frame, api_key, version)
    except (DecodeError, UnicodeDecodeError) as e:
        raise FrameError(f"cannot decode {_name(api_key)} v{version}: {e}") from None
    software = None
    if api_key == ApiKey.API_VERSIONS:
        software = api_versions.client_software(request, version)
    return ParsedFrame(api_key, version, correlation_id, spec, header, request, software)


def decode_request(frame: bytes | bytearray | memoryview, api_key: int,
                   version: int) -> tuple[RequestHeader, Any]:
    """The header and body of a request frame (without its size prefix) of a supported
    API key and version. DecodeError (or UnicodeDecodeError) when it does not decode."""
    reader = Reader(frame)
    header = RequestHeader.decode(reader, request_header_version(api_key, version))
    return header, REQUESTS[api_key].decode(reader, version)


def encode_response(response: Any, api_key: int, version: int, correlation_id: int) -> list[Any]:
    """A response as the parts to send: size prefix, header and body bytes, with the
    body's file slices (records) as parts of their own."""
    w = Writer()
    ResponseHeader(correlation_id=correlation_id).encode(w, response_header_version(api_key, version))
    response.encode(w, version)
    parts = w.parts()
    prefix = _PREFIX.pack(len(w))
    if parts and isinstance(parts[0], bytes):
        parts[0] = prefix + parts[0]
    else:
        parts.insert(0, prefix)
    return parts


def _name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return str(api_key)
