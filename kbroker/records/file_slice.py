"""A region of an open log segment file, sent to a socket with os.sendfile.

Log.read returns one of these instead of bytes (Kafka's FileRecords.slice): the
response writer interleaves header bytes with FileSlices and never copies the
records through Python.
"""

from __future__ import annotations

from typing import NamedTuple


class FileSlice(NamedTuple):
    fd: int
    position: int
    size: int

    def __len__(self) -> int:
        return self.size

    def read_bytes(self) -> bytes:
        """Copy the slice into memory (tests, and clients that need the bytes)."""
        import os

        return os.pread(self.fd, self.size, self.position)
