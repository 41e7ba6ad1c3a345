"""A connection's input framing, as Kafka's NetworkReceive reads it.

Wire framing (both directions):

    int32 size | size bytes: request header + body   (response header + body)

A size below 0 or above the connection's limit (`socket.request.max.bytes`, or
`sasl.server.max.receive.size` before a SASL client is authenticated) closes the
connection as soon as the prefix is read, before any of the frame is buffered.

NetworkReceive (a base of kbroker.server.connection.Connection) owns the bytes received
and not yet framed (`_inbuf`, emptied and given back once framed) and the large frame
being received in place (`_big_frame`, `_big_filled`, `_big_size`). Reads land in the
server's one receive buffer (the loop reads one socket at a time), so an idle connection
holds no buffer of its own. A frame of at least BIG_FRAME bytes is received (or
decrypted) straight into a buffer of its own that grows (doubling) to the size its
prefix announced as its bytes arrive, so an announcement alone costs at most
BIG_FRAME_START bytes; frames up to that size (producers' usual requests) never grow.
Each whole frame goes to the connection's `_handle_frame`; framing stops while the
connection is muted, overloaded, draining or closed, and goes on where it stopped.

Used from the event loop thread only.
"""

from __future__ import annotations

import logging
import socket
import struct
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kbroker.server.listener import SocketServer
    from kbroker.server.request_logger import RequestLog

log = logging.getLogger("kbroker.server.connection")

PREFIX = struct.Struct(">i")
RECV_CHUNK = 64 * 1024  # the server's shared receive buffer
BIG_FRAME = 256 * 1024  # frames at least this large are received in place
BIG_FRAME_START = 1024 * 1024  # ... into a buffer this large at first (or the frame's size)


class FrameError(Exception):
    """A frame the connection closes on (its message says why, for the log): a size
    outside [0, limit], a frame too short for a header, an API key or version the broker
    does not serve, a header or body that does not decode."""


def frame_size(buf: bytes | bytearray | memoryview, pos: int, limit: int) -> int:
    """The size of the frame whose int32 prefix is at buf[pos:pos + 4] (the caller has
    those 4 bytes). FrameError when outside [0, limit]."""
    (size,) = PREFIX.unpack_from(buf, pos)
    if size < 0 or size > limit:
        raise FrameError(f"frame size {size} outside [0, socket.request.max.bytes={limit}]")
    return int(size)


class NetworkReceive:
    """The framing half of a Connection: what it reads from its socket, cut into frames.
    The connection provides the rest (close, _overloaded, _pause_reading, _handle_frame,
    its flags), declared here for the type checker."""

    server: SocketServer
    sock: socket.socket
    request_log: RequestLog
    peer: str
    closed: bool
    last_active_ms: int
    max_request_bytes: int
    _muted: bool
    _draining: bool
    close: Callable[[], None]
    _overloaded: Callable[[], bool]
    _pause_reading: Callable[[], None]
    _handle_frame: Callable[[bytearray], None]

    def _init_receive(self) -> None:
        self._inbuf = bytearray()
        self._big_frame: bytearray | None = None
        self._big_filled = 0
        self._big_size = 0
        self._received_ns = 0  # the last read's end while the request log is on, else 0

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
        self.last_active_ms = self.server.services.time.monotonic_ms()
        self._received_ns = time.monotonic_ns() if self.request_log.active() else 0
        return int(n)

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

    def _take_from(self, read_into: Callable[[memoryview], int], view: memoryview) -> int:
        """All the bytes `read_into` holds (TLS plaintext): straight into the large frame
        being received when there is one (as _on_readable receives it in place: no copies
        through _inbuf), else through `view` into _inbuf. The last read's result: 0, or
        below 0 when the source ended (the peer's close_notify)."""
        while not self.closed:
            big = self._big_frame
            if big is None:
                got = read_into(view)
                if got <= 0:
                    return got
                self._inbuf += view[:got]
                continue
            target = self._big_room()
            try:
                got = read_into(target)
            finally:
                target.release()
            if got <= 0:
                return got
            self._big_filled += got
            if self._big_filled == self._big_size:
                self._handle_big_frame(self._big_done())
        return 0

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

    def _handle_big_frame(self, frame: bytearray) -> None:
        try:
            self._handle_frame(frame)
        except Exception:
            log.exception("connection %s: closing after an internal error", self.peer)
            self.close()

    def _guarded_process_input(self) -> None:
        # Every frame of this read is handled before the parked Fetches they wake read
        # again: a follower's Fetch carries all of a producer's pipelined Produces at once.
        with self.server.services.replica_manager.delayed_fetch_purgatory.held():
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
                if size >= BIG_FRAME:
                    # Receive (or decrypt) the rest straight into the frame: no copies
                    # through _inbuf.
                    self._big_frame = bytearray(min(size, max(BIG_FRAME_START, 2 * (avail - 4))))
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
