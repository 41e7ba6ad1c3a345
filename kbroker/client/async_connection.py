"""One asyncio connection to one Kafka broker: what brokers use to talk to each other
(the controller's LeaderAndIsr/UpdateMetadata/StopReplica, a follower's Fetch and
OffsetForLeaderEpoch, a leader's AlterPartition, ControlledShutdown).

Frames, both directions, as in kbroker.client.connection:

    size int32 (bytes that follow) | header | body

Requests are pipelined: `request()` may be called by several tasks at once; each gets
its own response, matched by correlation id (a broker answers in order). The versions
are the caller's choice: brokers of one kbroker cluster speak the same versions, so no
ApiVersions round trip is made. A failure of the socket fails every pending request
with KafkaClientError(NETWORK_EXCEPTION) and closes the connection; the owner opens a
new one.

Responses are framed in the protocol's buffer_updated and resolve their requests' futures
right there, so a waiter resumes in the next loop turn. (With a stream reader task, a
shield and wait_for in between it took four turns: on a busy broker each turn is every
other connection's work, and a follower paid them for each fetch on the acks=all path.)

Lock: one event loop.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from kbroker.client.connection import MAX_FRAME_BYTES, KafkaClientError, encode_request
from kbroker.common.error_code import ErrorCode
from kbroker.protocol.api_key import response_header_version
from kbroker.protocol.codec import Reader
from kbroker.protocol.messages import RESPONSES
from kbroker.protocol.messages.response_header import ResponseHeader

__all__ = ["AsyncBrokerConnection"]

_SIZE = struct.Struct(">i")
_SOCKET_BUFFER = 4 << 20
_HEAD_BYTES = 256 << 10  # what one read takes when no large frame is being read
# A large frame's first buffer: its announced size up to this, grown (doubling) beyond it
# as its bytes arrive, so that an announcement alone costs no more
_FRAME_START_BYTES = 16 << 20


class AsyncBrokerConnection:
    """See the module docstring. Open with `await AsyncBrokerConnection.open(...)`."""

    def __init__(self, host: str, port: int, transport: asyncio.Transport,
                 protocol: _ResponseProtocol, client_id: str) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self._transport = transport
        self._protocol = protocol
        protocol.connection = self
        self._next_correlation_id = 0
        # correlation id -> (api key, version, future), in the order sent
        self._pending: dict[int, tuple[int, int, asyncio.Future[Any]]] = {}
        self._closed: KafkaClientError | None = protocol.lost

    @classmethod
    async def open(cls, host: str, port: int, client_id: str, timeout_s: float = 30.0,
                   local_addr: tuple[str, int] | None = None) -> AsyncBrokerConnection:
        loop = asyncio.get_running_loop()
        try:
            transport, protocol = await asyncio.wait_for(
                loop.create_connection(_ResponseProtocol, host, port, local_addr=local_addr),
                timeout_s)
        except (TimeoutError, OSError) as e:
            raise KafkaClientError(f"cannot connect to {host}:{port}: {e or 'timed out'}",
                                   ErrorCode.NETWORK_EXCEPTION) from e
        sock = transport.get_extra_info("socket")
        if sock is not None:
            import socket

            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _SOCKET_BUFFER)
            except OSError as e:
                # The peer reset the connection as it was made (a broker stopping): the
                # transport has closed the socket already (EBADF). A failed connect.
                transport.close()
                raise KafkaClientError(f"cannot connect to {host}:{port}: {e}",
                                       ErrorCode.NETWORK_EXCEPTION) from e
        return cls(host, port, transport, protocol, client_id)

    @property
    def closed(self) -> bool:
        return self._closed is not None

    async def request(self, request: Any, version: int, timeout_s: float | None = None) -> Any:
        """Send `request` at `version`; its decoded response. KafkaClientError when the
        connection fails or the answer does not come within `timeout_s` (the connection
        is closed then: a late answer would be matched to nothing)."""
        if self._closed is not None:
            raise self._closed
        api_key = request.API_KEY
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
        frame = encode_request(request, version, correlation_id, self.client_id)
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        self._pending[correlation_id] = (api_key, version, fut)
        timer = None
        if timeout_s is not None:
            timer = loop.call_later(timeout_s, self._timed_out, fut, timeout_s)
        try:
            self._transport.write(frame)
            await self._protocol.drained()
            # The answer resolves `fut` straight from buffer_updated: its waiter runs in the
            # next loop turn (a stream reader task, shield and wait_for took four).
            return await fut
        finally:
            if timer is not None:
                timer.cancel()

    def _timed_out(self, fut: asyncio.Future[Any], timeout_s: float) -> None:
        if not fut.done():
            self._fail(KafkaClientError(f"{self.host}:{self.port} did not answer within {timeout_s} s",
                                        ErrorCode.REQUEST_TIMED_OUT))

    def _frame(self, body: bytearray) -> None:
        """One response frame (without its size prefix), from the protocol."""
        try:
            self._dispatch(body)
        except KafkaClientError as e:
            self._fail(e)
        except Exception as e:  # a response that does not decode
            self._fail(KafkaClientError(f"bad response from {self.host}:{self.port}: {e!r}",
                                        ErrorCode.CORRUPT_MESSAGE))

    def _dispatch(self, body: bytearray) -> None:
        r = Reader(body)
        # The correlation id is the first field of every response header version.
        correlation_id = _SIZE.unpack_from(body, 0)[0]
        entry = self._pending.pop(correlation_id, None)
        if entry is None:
            raise KafkaClientError(f"unexpected correlation id {correlation_id}",
                                   ErrorCode.CORRUPT_MESSAGE)
        api_key, version, fut = entry
        ResponseHeader.decode(r, response_header_version(api_key, version))
        response = RESPONSES[api_key].decode(r, version)
        if not fut.done():
            fut.set_result(response)

    def _fail(self, error: KafkaClientError) -> None:
        if self._closed is None:
            self._closed = error
        pending, self._pending = self._pending, {}
        for _key, _version, fut in pending.values():
            if not fut.done():
                fut.set_exception(error)
                fut.exception()  # retrieved: a request abandoned by its waiter logs nothing
        self._protocol.connection = None
        self._transport.close()

    def close(self) -> None:
        self._fail(KafkaClientError("connection closed", ErrorCode.NETWORK_EXCEPTION))


class _ResponseProtocol(asyncio.BufferedProtocol):
    """Frames the bytes of one connection into responses, handed to the connection as
    they complete (in buffer_updated, no task in between); write flow control for drain.

    The socket is read straight into the buffers (asyncio's get_buffer / buffer_updated):
    small frames come in `_head` (one read may hold several; each is copied out), and a
    frame larger than what `_head` holds gets a buffer of its own of the frame's size (up
    to _FRAME_START_BYTES, then doubling as its bytes arrive), read into until it is whole
    and handed over as it is: a follower's Fetch answer of up to
    replica.fetch.response.max.bytes is read once, not read into bytes, appended to a
    buffer and cut out of it again (three copies of every replicated byte)."""

    def __init__(self) -> None:
        self.connection: AsyncBrokerConnection | None = None
        self.lost: KafkaClientError | None = None
        self._head = bytearray(_HEAD_BYTES)
        self._head_len = 0
        self._frame: bytearray | None = None  # a large frame being read, how much of it
        self._frame_len = 0                   # is in, and its announced size
        self._frame_size = 0
        self._paused: asyncio.Future[None] | None = None

    def get_buffer(self, sizehint: int) -> memoryview:
        frame = self._frame
        if frame is not None:
            if self._frame_len == len(frame):  # full, the frame not whole: grow it
                grown = bytearray(min(2 * len(frame), self._frame_size))
                grown[:self._frame_len] = frame
                self._frame = frame = grown
            return memoryview(frame)[self._frame_len:]
        return memoryview(self._head)[self._head_len:]

    def buffer_updated(self, nbytes: int) -> None:
        if self.connection is None:  # failed: what still comes is dropped
            self._head_len, self._frame, self._frame_len = 0, None, 0
            return
        frame = self._frame
        if frame is not None:
            self._frame_len += nbytes
            if self._frame_len == self._frame_size:
                self._frame, self._frame_len = None, 0
                self.connection._frame(frame)
            return
        self._head_len += nbytes
        head, end, pos = self._head, self._head_len, 0
        while self.connection is not None and end - pos >= 4:
            (size,) = _SIZE.unpack_from(head, pos)
            if not 0 < size <= MAX_FRAME_BYTES:
                self.connection._fail(KafkaClientError(f"bad response size {size}",
                                                       ErrorCode.CORRUPT_MESSAGE))
                return
            if end - pos - 4 < size:
                if 4 + size > len(head):  # larger than _head: read into a buffer of its own
                    frame = bytearray(min(size, _FRAME_START_BYTES))
                    have = end - pos - 4
                    frame[:have] = head[pos + 4 : end]
                    self._frame, self._frame_len, self._frame_size, pos = frame, have, size, end
                break
            body = head[pos + 4 : pos + 4 + size]
            pos += 4 + size
            self.connection._frame(body)
        if pos:
            # the rest (a frame's beginning) to the front; `head` keeps its size (asyncio
            # may still hold the view get_buffer gave it)
            rest = end - pos
            head[:rest] = head[pos:end]
            self._head_len = rest

    def connection_lost(self, exc: Exception | None) -> None:
        error = KafkaClientError(
            "connection closed" if exc is None else f"connection lost ({exc!r})",
            ErrorCode.NETWORK_EXCEPTION)
        if self.connection is not None:
            peer = f"{self.connection.host}:{self.connection.port}"
            self.connection._fail(KafkaClientError(
                f"{peer} closed the connection ({exc!r})", ErrorCode.NETWORK_EXCEPTION))
        self.lost = error
        self._wake(error)

    def pause_writing(self) -> None:
        if self._paused is None:
            self._paused = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        self._wake(None)

    def _wake(self, error: KafkaClientError | None) -> None:
        paused, self._paused = self._paused, None
        if paused is not None and not paused.done():
            if error is None:
                paused.set_result(None)
            else:
                paused.set_exception(error)
                paused.exception()

    async def drained(self) -> None:
        """Returns at once unless the transport's write buffer is over its high mark."""
        if self._paused is not None:
            await asyncio.shield(self._paused)
