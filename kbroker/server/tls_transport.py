"""TLS on a connection, on the broker's event loop: an SSLObject over two memory BIOs.

The connection reads ciphertext from the socket into `TlsChannel.incoming` and takes
plaintext out of the SSLObject; the handshake runs the same way (`handshake()` until
it completes), its records leaving through the writer. Nothing blocks and nothing runs
on another thread.

TlsResponseWriter has ResponseWriter's interface (send, idle, queued_bytes,
sent_bytes, close) for TLS connections. Zero-copy sendfile cannot go through a
user-space TLS layer (kernel TLS is not available here), so a file slice is read
(pread) in pieces of at most TLS_CHUNK bytes, encrypted and sent; only one piece's
ciphertext is held per connection at a time, so a client that stops reading holds
at most that much memory beyond its queued parts. `sent_bytes` counts plaintext
handed to TLS (at most one piece ahead of the socket), which the idle sweep and the
request log read. The plaintext path (ResponseWriter) is untouched by this module.
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from kbroker.records.file_slice import FileSlice

_BYTES_TYPES = (bytes, bytearray, memoryview)
TLS_CHUNK = 256 * 1024  # plaintext encrypted at a time
TLS_RECV_CHUNK = 256 * 1024  # ciphertext received at a time (the server's one TLS buffer)


class TlsChannel:
    """One connection's TLS state; loop thread only."""

    __slots__ = ("incoming", "outgoing", "obj", "handshaken")

    def __init__(self, context: ssl.SSLContext) -> None:
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        self.obj = context.wrap_bio(self.incoming, self.outgoing, server_side=True)
        self.handshaken = False

    def handshake(self) -> bool:
        """Advance the handshake with what arrived; True once complete. Raises
        ssl.SSLError when it fails (not TLS, untrusted certificate, ...)."""
        try:
            self.obj.do_handshake()
        except ssl.SSLWantReadError:
            return False
        self.handshaken = True
        return True

    def read_into(self, buf: memoryview) -> int:
        """Plaintext into buf (not empty): its size, 0 when none is ready, -1 at the peer's
        close_notify. SSLObject.read raises SSLWantReadError when no whole record is there
        and answers 0 once the close_notify was read (SSLZeroReturnError only in other
        cases), so 0 from it is the end."""
        try:
            got = int(self.obj.read(len(buf), buf))
        except ssl.SSLWantReadError:
            return 0
        except ssl.SSLZeroReturnError:
            return -1
        return got if got else -1

    def close_notify(self) -> None:
        """Our close_notify into `outgoing`, answering the peer's (Kafka's SslTransportLayer
        sends one when it closes): a client that waits for it, as asyncio's TLS transport
        does, then finishes its shutdown at once and cleanly."""
        try:
            self.obj.unwrap()
        except ssl.SSLError:
            pass

    def peer_certificate(self) -> dict[str, Any] | None:
        cert = self.obj.getpeercert()
        return cert or None


class TlsResponseWriter:
    """Owned by one TLS connection; used from the event loop thread only."""

    __slots__ = ("_loop", "_sock", "_fd", "_channel", "_queue", "_out", "queued_bytes",
                 "sent_bytes", "_waiting", "_scheduled", "_on_error", "_on_drained", "closed")

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, channel: TlsChannel,
                 on_error: Callable[[BaseException], None], on_drained: Callable[[], None]) -> None:
        self._loop = loop
        self._sock = sock
        self._fd = sock.fileno()
        self._channel = channel
        self._queue: deque[Any] = deque()
        self._out: memoryview | None = None  # ciphertext not yet accepted by the socket
        self.queued_bytes = 0
        self.sent_bytes = 0
        self._waiting = False
        self._scheduled = False
        self._on_error = on_error
        self._on_drained = on_drained
        self.closed = False

    @property
    def idle(self) -> bool:
        return not self._queue and self._out is None and not self._channel.outgoing.pending

    def send(self, parts: Iterable[Any]) -> None:
        for part in parts:
            size = len(part) if isinstance(part, _BYTES_TYPES) else part.size
            if size:
                self._queue.append(part)
                self.queued_bytes += size
        self.push()

    def push(self) -> None:
        """Send what TLS has to say (handshake records, tickets, queued parts) soon."""
        if not self._waiting and not self._scheduled and not self.closed:
            self._scheduled = True
            self._loop.call_soon(self._scheduled_flush)

    def flush_now(self) -> None:
        """Best effort, at once: an alert before the connection closes."""
        try:
            data = self._channel.outgoing.read()
            if data:
                self._sock.send(data)
        except OSError:
            pass

    def _scheduled_flush(self) -> None:
        self._scheduled = False
        if not self._waiting and not self.closed:
            self._flush()

    def close(self) -> None:
        if self._waiting:
            self._loop.remove_writer(self._fd)
            self._waiting = False
        self._queue.clear()
        self._out = None
        self.queued_bytes = 0
        self.closed = True

    def _flush(self) -> None:
        try:
            while not self.closed:
                if self._out is not None:
                    out = self._out
                    n = self._sock.send(out)
                    if n < len(out):
                        self._out = out[n:]
                        raise BlockingIOError
                    self._out = None
                    continue
                data = self._channel.outgoing.read()
                if data:
                    self._out = memoryview(data)
                    continue
                if not self._queue:
                    break
                plain = self._take(TLS_CHUNK)
                self._channel.obj.write(plain)
                self.queued_bytes -= len(plain)
                self.sent_bytes += len(plain)
        except (BlockingIOError, InterruptedError):
            if not self._waiting:
                self._loop.add_writer(self._fd, self._flush)
                self._waiting = True
            return
        except Exception as e:  # OSError, ssl.SSLError, or a bug: this connection is done
            self._on_error(e)
            return
        if self._waiting:
            self._loop.remove_writer(self._fd)
            self._waiting = False
        if not self.closed:
            self._on_drained()

    def _take(self, limit: int) -> bytes:
        """Up to `limit` plaintext bytes from the head of the queue (slices read with pread)."""
        queue, pieces, size = self._queue, [], 0
        while queue and size < limit:
            part = queue[0]
            room = limit - size
            if isinstance(part, _BYTES_TYPES):
                if len(part) <= room:
                    pieces.append(part)
                    size += len(part)
                    queue.popleft()
                else:
                    view = memoryview(part)
                    pieces.append(view[:room])
                    queue[0] = view[room:]
                    size += room
            else:
                n = min(room, part.size)
                data = os.pread(part.fd, n, part.position)
                if len(data) != n:
                    raise OSError(f"segment fd {part.fd} shrank under a queued slice")
                pieces.append(data)
                size += n
                if n < part.size:
                    queue[0] = FileSlice(part.file, part.position + n, part.size - n)
                else:
                    queue.popleft()
        return b"".join(pieces)
