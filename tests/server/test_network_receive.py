"""NetworkReceive: size-prefixed frames cut from what arrives, in any pieces, with the
connection's other parts stood in for."""

from __future__ import annotations

import struct

import pytest

from kbroker.server.network_receive import BIG_FRAME, FrameError, NetworkReceive, frame_size


class Frames(NetworkReceive):
    """A NetworkReceive whose frames are collected, never overloaded or muted."""

    def __init__(self, limit: int = 1 << 20) -> None:
        self._init_receive()
        self.peer = "test"
        self.closed = False
        self._draining = False
        self._muted = False
        self.max_request_bytes = limit
        self.frames: list[bytes] = []

    def close(self) -> None:  # type: ignore[override]
        self.closed = True

    def _overloaded(self) -> bool:  # type: ignore[override]
        return False

    def _pause_reading(self) -> None:  # type: ignore[override]
        pass

    def _handle_frame(self, frame: bytearray) -> None:  # type: ignore[override]
        self.frames.append(bytes(frame))

    def arrive(self, data: bytes) -> None:
        self._inbuf += data
        self._process_input()


def framed(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def test_frame_size_refuses_sizes_outside_zero_to_the_limit() -> None:
    assert frame_size(struct.pack(">i", 100), 0, 100) == 100
    for size in (-1, 101):
        with pytest.raises(FrameError, match="socket.request.max.bytes=100"):
            frame_size(struct.pack(">i", size), 0, 100)


def test_frames_arriving_in_pieces_are_handled_whole_and_in_order() -> None:
    stream = framed(b"one") + framed(b"two") + framed(b"three")
    receive = Frames()
    for i in range(0, len(stream), 5):
        receive.arrive(stream[i : i + 5])
    assert receive.frames == [b"one", b"two", b"three"]
    assert receive._inbuf == bytearray()


def test_an_oversized_prefix_closes_before_its_frame_arrives() -> None:
    receive = Frames(limit=10)
    receive.arrive(framed(b"ok") + struct.pack(">i", 11))
    assert receive.frames == [b"ok"] and receive.closed


def test_a_large_frame_is_received_in_place_from_a_source() -> None:
    body = bytes(range(256)) * (BIG_FRAME // 256 + 1)
    stream = framed(body)
    receive = Frames(limit=len(body))
    receive.arrive(stream[:1000])
    assert receive.frames == [] and receive._big_frame is not None
    assert receive._inbuf == bytearray()  # what came is in the frame's own buffer
    rest = memoryview(stream)[1000:]
    offset = 0

    def read_into(target: memoryview) -> int:
        nonlocal offset
        n = min(len(target), len(rest) - offset, 65536)
        target[:n] = rest[offset : offset + n]
        offset += n
        return n

    view = memoryview(bytearray(65536))
    assert receive._take_from(read_into, view) == 0
    assert receive.frames == [body] and receive._big_frame is None
