"""A region of an open log segment file, sent to a socket with os.sendfile.

Log.read returns one of these instead of bytes (Kafka's FileRecords.slice): the
response writer interleaves header bytes with FileSlices and never copies the
records through Python.

A slice owns a reference to the file it reads (`SegmentFile`), not a bare fd
number: a segment that is deleted, closed or evicted while a slice of it waits in
a connection's output queue keeps its descriptor open until the last slice on it
is sent or dropped, so the number can never be reused by another open file and
sendfile can never send another file's bytes.
"""

from __future__ import annotations

import os
from typing import NamedTuple


class SegmentFile:
    """An open segment file descriptor, closed when its last holder lets go.

    The segment holds one reference while it is open; each queued FileSlice holds
    another. CPython frees the object, and so closes the descriptor, as soon as the
    last reference goes: a segment's close() drops its own reference only.
    """

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __del__(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass

    def __repr__(self) -> str:
        return f"SegmentFile(fd={self.fd})"


class FileSlice(NamedTuple):
    file: SegmentFile
    position: int
    size: int

    @property
    def fd(self) -> int:
        return self.file.fd

    def __len__(self) -> int:
        return self.size

    def read_bytes(self) -> bytes:
        """Copy the slice into memory (tests, and clients that need the bytes)."""
        return os.pread(self.file.fd, self.size, self.position)
