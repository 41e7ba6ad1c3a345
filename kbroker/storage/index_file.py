"""IndexFile: the mmap'd, preallocated file under OffsetIndex and TimeIndex (Kafka's AbstractIndex).

A writable index is preallocated to max_index_size (rounded down to whole entries)
so appends are stores into the mapping; close() and trim_to_valid_size() cut the
file back to the entries written, as Kafka does when a segment becomes inactive.
An existing file's length gives its entry count, so a crash leaves a preallocated
file whose tail is zeros: recovery rebuilds such indexes (sanity_check catches them).

Lock: the broker's event-loop thread owns an index (through its LogSegment); no
other thread touches it. Invariant: 0 <= entries <= max_entries.
"""

from __future__ import annotations

import os

from kbroker._core.index import MappedFile


class IndexFile:
    ENTRY_SIZE = 8

    def __init__(self, path: str, base_offset: int, max_index_size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_index_size = max(max_index_size // self.ENTRY_SIZE, 1) * self.ENTRY_SIZE
        # created: the file did not exist and was made empty here (a new segment's index,
        # or one lost from disk: LogSegment rebuilds the latter when it loads)
        self.created = False
        try:
            self._length = os.stat(path).st_size
        except FileNotFoundError:
            self._length = 0
            self.created = True
            os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o644))
        # Mapped without a descriptor (Kafka closes an index's file once mapped), and only
        # while the index is in use: LogSegment unmaps the indexes of segments it evicts.
        self._mm: MappedFile | None = None
        self.entries = self._length // self.ENTRY_SIZE
        self.misaligned = self._length % self.ENTRY_SIZE != 0
        self._closed = False

    # -- mapping ------------------------------------------------------------------
    def _mapping(self) -> MappedFile | None:
        if self._mm is None and self._length > 0:
            if self._closed:
                raise ValueError(f"index {self.path} is closed")
            self._mm = MappedFile(self.path, self._length)
        return self._mm

    def unmap(self) -> None:
        """Give the mapping back (the entries stay on disk; the next use maps them again)."""
        if self._mm is not None:
            self._mm.close()
            self._mm = None

    def resize(self, new_size: int) -> None:
        new_size = (new_size // self.ENTRY_SIZE) * self.ENTRY_SIZE
        if new_size == self._length:
            return
        mapped = self._mm is not None
        self.unmap()
        if mapped and new_size > 0:
            self._mm = MappedFile(self.path, new_size)  # sets the file's length
        else:  # not in use: only the length changes; the next use maps it
            os.truncate(self.path, new_size)
        self._length = new_size
        self.entries = min(self.entries, new_size // self.ENTRY_SIZE)

    def trim_to_valid_size(self) -> None:
        self.resize(self.entries * self.ENTRY_SIZE)

    def _ensure_capacity(self, entries: int) -> None:
        need = entries * self.ENTRY_SIZE
        if need > self._length:
            self.resize(max(self.max_index_size, need))

    @property
    def max_entries(self) -> int:
        return self.max_index_size // self.ENTRY_SIZE

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    @property
    def buffer(self) -> MappedFile | bytes:
        mm = self._mapping()
        return mm if mm is not None else b""

    @property
    def size_in_bytes(self) -> int:
        return self.entries * self.ENTRY_SIZE

    # -- bulk ---------------------------------------------------------------------
    def reset(self) -> None:
        self.entries = 0
        self.misaligned = False

    def load_entries(self, raw: bytes) -> None:
        """Replace the contents with already-encoded entries (index rebuilding)."""
        n = len(raw) // self.ENTRY_SIZE
        self.entries = 0
        self.misaligned = False
        self._ensure_capacity(n)
        mm = self._mapping()
        if n and mm is not None:
            memoryview(mm)[: len(raw)] = raw
        self.entries = n

    def flush(self) -> None:
        mm = self._mm  # once: the loop thread may unmap it meanwhile (then this is a no-op)
        if mm is not None:
            mm.flush()

    def close(self) -> None:
        if self._closed:
            return
        self.trim_to_valid_size()
        self.unmap()
        self._closed = True

    def abandon(self) -> None:
        """Close without trimming (a crash, in tests)."""
        self.unmap()
        self._closed = True

    def rename(self, new_path: str) -> None:
        os.rename(self.path, new_path)
        self.path = new_path
