"""ResponseWriter: bytes and file slices leave in order, through a socket that fills up."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

from kbroker.records.file_slice import FileSlice, SegmentFile
from kbroker.server.response_writer import INLINE_SLICE_BYTES, ResponseWriter


def slice_of(path: Path, data: bytes, position: int, size: int) -> FileSlice:
    path.write_bytes(data)
    return FileSlice(SegmentFile(os.open(path, os.O_RDONLY)), position, size)


async def _exchange(parts: list[object], expected: int, small_buffer: bool) -> tuple[bytes, ResponseWriter]:
    loop = asyncio.get_running_loop()
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    if small_buffer:
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    errors: list[BaseException] = []
    writer = ResponseWriter(loop, ours, errors.append, lambda: None)
    writer.send(parts)
    assert writer.queued_bytes == expected
    theirs.setblocking(False)
    got = bytearray()
    for _ in range(10_000):  # read slowly: the writer must wait for room and resume
        await asyncio.sleep(0)
        try:
            got += theirs.recv(8192)
        except BlockingIOError:
            await asyncio.sleep(0.001)
        if len(got) == expected:
            break
    ours.close()
    theirs.close()
    assert not errors
    return bytes(got), writer


def test_parts_leave_in_order_through_a_full_socket(tmp_path: Path) -> None:
    big = os.urandom(3 * INLINE_SLICE_BYTES + 123)  # sent with sendfile
    small = os.urandom(1000)  # read at queue time and sent with the bytes around it
    parts = [b"head", slice_of(tmp_path / "big", b"xx" + big, 2, len(big)), b"-mid-",
             slice_of(tmp_path / "small", small, 0, len(small)), memoryview(b"tail")]
    expected = b"head" + big + b"-mid-" + small + b"tail"
    got, writer = asyncio.run(_exchange(parts, len(expected), small_buffer=True))
    assert got == expected
    assert writer.idle and writer.queued_bytes == 0 and writer.sent_bytes == len(expected)


def test_a_queued_slice_outlives_its_segment_closing(tmp_path: Path) -> None:
    data = os.urandom(2 * INLINE_SLICE_BYTES)
    part = slice_of(tmp_path / "seg", data, 0, len(data))
    file = part.file
    (tmp_path / "seg").unlink()  # the segment is deleted; the slice still holds its file
    del file
    got, _ = asyncio.run(_exchange([part], len(data), small_buffer=True))
    assert got == data


def test_a_slice_whose_file_shrank_fails_the_connection_not_the_bytes(tmp_path: Path) -> None:
    async def run() -> list[BaseException]:
        loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair()
        ours.setblocking(False)
        errors: list[BaseException] = []
        writer = ResponseWriter(loop, ours, errors.append, lambda: None)
        data = os.urandom(2 * INLINE_SLICE_BYTES)
        part = slice_of(tmp_path / "shrunk", data, 0, len(data))
        os.truncate(tmp_path / "shrunk", 0)  # truncated under the queued slice
        writer.send([part])
        for _ in range(100):
            await asyncio.sleep(0.001)
            if errors:
                break
        ours.close()
        theirs.close()
        return errors

    errors = asyncio.run(run())
    assert errors and isinstance(errors[0], OSError)
