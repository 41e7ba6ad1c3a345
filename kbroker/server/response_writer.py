"""Sends response parts on a non-blocking socket: gathered bytes and zero-copy file slices.

A response is a list of parts in wire order: in-memory chunks (bytes) and file
slices (fd, position, size) of log segments. Consecutive byte chunks go out in
one `sendmsg` (writev); a file slice goes out with `os.sendfile` straight from
the page cache, looping on partial writes. When the socket is full the writer
registers `loop.add_writer` and resumes when it is writable again: no transport
buffers, no copies of record data, no drain around each sendfile (which is why
asyncio transports and `loop.sendfile` are not used here).

A slice of at most `INLINE_SLICE_BYTES` is read (pread) when queued and goes
out with the bytes around it: one sendmsg and one TCP segment for a small Fetch
response instead of sendmsg + sendfile + sendmsg, three segments and as many
wake-ups of the client. Copying 16 KiB costs less than the syscall and segment
it saves; larger slices keep the zero-copy path.

`queued_bytes` (bytes plus slice sizes not yet sent) lets the connection apply
backpressure: it stops reading requests while too much output is pending.

A queued slice holds a reference to its segment's file (`SegmentFile`), so the
descriptor stays open until the slice is sent or dropped, however long the send
stalls and whatever storage does meanwhile (retention, DeleteTopics, eviction).
If the file shrank under it (truncation) and sendfile sends nothing, the
connection is closed; it never sends another file's bytes.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from kbroker.records.file_slice import FileSlice

_BYTES_TYPES = (bytes, bytearray, memoryview)
_MAX_IOV = 512  # chunks per sendmsg call (IOV_MAX is 1024 on Linux)
_MAX_SENDFILE = 1 << 30
INLINE_SLICE_BYTES = 16 * 1024


class ResponseWriter:
    """Owned by one connection; used from the event loop thread only."""

    __slots__ = ("_loop", "_sock", "_fd", "_queue", "queued_bytes", "sent_bytes", "_waiting",
                 "_scheduled", "_on_error", "_on_drained", "closed")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        sock: socket.socket,
        on_error: Callable[[BaseException], None],
        on_drained: Callable[[], None],
    ) -> None:
        self._loop = loop
        self._sock = sock
        self._fd = sock.fileno()
        self._queue: deque[Any] = deque()
        self.queued_bytes = 0
        self.sent_bytes = 0  # ever sent: the idle sweep tells a stalled output by it
        self._waiting = False
        self._scheduled = False
        self._on_error = on_error
        self._on_drained = on_drained
        self.closed = False

    def send(self, parts: Iterable[Any]) -> None:
        for part in parts:
            if isinstance(part, _BYTES_TYPES):
                size = len(part)
            else:
                size = part.size
                if 0 < size <= INLINE_SLICE_BYTES:
                    part = _inline(part)
            if size:
                self._queue.append(part)
                self.queued_bytes += size
        if not self._waiting and not self._scheduled and self._queue:
            # Send at the end of this loop iteration: the responses of all requests
            # handled in it leave in one sendmsg instead of one syscall each.
            self._scheduled = True
            self._loop.call_soon(self._scheduled_flush)

    def _scheduled_flush(self) -> None:
        self._scheduled = False
        if not self._waiting and not self.closed:
            self._flush()

    @property
    def idle(self) -> bool:
        return not self._queue

    def close(self) -> None:
        if self._waiting:
            self._loop.remove_writer(self._fd)
            self._waiting = False
        self._queue.clear()
        self.queued_bytes = 0
        self.closed = True

    def _on_writable(self) -> None:
        self._flush()

    def _flush(self) -> None:
        queue = self._queue
        try:
            while queue and not self.closed:
                if isinstance(queue[0], _BYTES_TYPES):
                    self._send_chunks()
                else:
                    self._send_slice()
        except (BlockingIOError, InterruptedError):
            if not self._waiting:
                self._loop.add_writer(self._fd, self._on_writable)
                self._waiting = True
            return
        except Exception as e:  # OSError, or a bug: either way this connection is done
            self._on_error(e)
            return
        if self._waiting:
            self._loop.remove_writer(self._fd)
            self._waiting = False
        if not self.closed:
            self._on_drained()

    def _send_chunks(self) -> None:
        queue = self._queue
        chunks: list[Any] = []
        for part in queue:
            if not isinstance(part, _BYTES_TYPES) or len(chunks) == _MAX_IOV:
                break
            chunks.append(part)
        sent = self._sock.sendmsg(chunks)
        self.queued_bytes -= sent
        self.sent_bytes += sent
        while sent:
            head = queue[0]
            if sent >= len(head):
                sent -= len(head)
                queue.popleft()
            else:
                queue[0] = memoryview(head)[sent:]
                sent = 0
                raise BlockingIOError  # partial write: the socket buffer is full

    def _send_slice(self) -> None:
        part = self._queue[0]
        n = os.sendfile(self._fd, part.fd, part.position, min(part.size, _MAX_SENDFILE))
        if n == 0:
            raise OSError(f"sendfile sent nothing: segment fd {part.fd} shrank or closed")
        self.queued_bytes -= n
        self.sent_bytes += n
        if n < part.size:
            self._queue[0] = FileSlice(part.file, part.position + n, part.size - n)
        else:
            self._queue.popleft()


def _inline(part: FileSlice) -> bytes | FileSlice:
    """The slice's bytes; the slice itself when it cannot be read whole (sendfile then
    fails the connection, as for any slice that shrank or whose file closed)."""
    try:
        data = os.pread(part.fd, part.size, part.position)
    except OSError:
        return part
    return data if len(data) == part.size else part
