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

Lock: one event loop; a reader task owns the receive side.
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


class AsyncBrokerConnection:
    """See the module docstring. Open with `await AsyncBrokerConnection.open(...)`."""

    def __init__(self, host: str, port: int, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter, client_id: str) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self._reader = reader
        self._writer = writer
        self._next_correlation_id = 0
        # correlation id -> (api key, version, future), in the order sent
        self._pending: dict[int, tuple[int, int, asyncio.Future[Any]]] = {}
        self._closed: KafkaClientError | None = None
        self._reader_task = asyncio.ensure_future(self._read_responses())

    @classmethod
    async def open(cls, host: str, port: int, client_id: str, timeout_s: float = 30.0,
                   local_addr: tuple[str, int] | None = None) -> AsyncBrokerConnection:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, limit=1 << 20, local_addr=local_addr), timeout_s)
        except (TimeoutError, OSError) as e:
            raise KafkaClientError(f"cannot connect to {host}:{port}: {e or 'timed out'}",
                                   ErrorCode.NETWORK_EXCEPTION) from e
        sock = writer.get_extra_info("socket")
        if sock is not None:
            import socket

            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, _SOCKET_BUFFER)
        return cls(host, port, reader, writer, client_id)

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
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = (api_key, version, fut)
        try:
            self._writer.write(frame)
            await self._writer.drain()
        except (OSError, RuntimeError) as e:
            self._fail(KafkaClientError(f"send to {self.host}:{self.port} failed: {e}",
                                        ErrorCode.NETWORK_EXCEPTION))
        try:
            return await asyncio.wait_for(asyncio.shield(fut), timeout_s)
        except TimeoutError:
            self._fail(KafkaClientError(
                f"{self.host}:{self.port} did not answer within {timeout_s} s",
                ErrorCode.REQUEST_TIMED_OUT))
            raise self._closed from None  # type: ignore[misc]

    async def _read_responses(self) -> None:
        try:
            while True:
                head = await self._reader.readexactly(4)
                (size,) = _SIZE.unpack(head)
                if not 0 < size <= MAX_FRAME_BYTES:
                    raise KafkaClientError(f"bad response size {size}", ErrorCode.CORRUPT_MESSAGE)
                body = bytearray(await self._reader.readexactly(size))
                self._dispatch(body)
        except asyncio.CancelledError:
            self._fail(KafkaClientError("connection closed", ErrorCode.NETWORK_EXCEPTION))
            raise
        except KafkaClientError as e:
            self._fail(e)
        except (OSError, asyncio.IncompleteReadError) as e:
            self._fail(KafkaClientError(f"{self.host}:{self.port} closed the connection ({e!r})",
                                        ErrorCode.NETWORK_EXCEPTION))
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
        self._writer.close()
        if not self._reader_task.done() and asyncio.current_task() is not self._reader_task:
            self._reader_task.cancel()

    def close(self) -> None:
        self._fail(KafkaClientError("connection closed", ErrorCode.NETWORK_EXCEPTION))
