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

import mmap
import os


class IndexFile:
    ENTRY_SIZE = 8

    def __init__(self, path: str, base_offset: int, max_index_size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_index_size = max(max_index_size // self.ENTRY_SIZE, 1) * self.ENTRY_SIZE
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self._length = os.fstat(self._fd).st_size
        self._mm: mmap.mmap | None = None
        self._map()
        self.entries = self._length // self.ENTRY_SIZE
        self.misaligned = self._length % self.ENTRY_SIZE != 0

    # -- mapping ------------------------------------------------------------------
    def _map(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        if self._length > 0:
            self._mm = mmap.mmap(self._fd, self._length)
            # No readahead on faults: the preallocated tail is a hole, and readahead would
            # allocate and zero up to megabytes of it per fault where an append needs one page.
            self._mm.madvise(mmap.MADV_RANDOM)

    def resize(self, new_size: int) -> None:
        new_size = (new_size // self.ENTRY_SIZE) * self.ENTRY_SIZE
        if new_size == self._length:
            return
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        os.ftruncate(self._fd, new_size)
        self._length = new_size
        self._map()
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
    def buffer(self) -> mmap.mmap | bytes:
        return self._mm if self._mm is not None else b""

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
        if n and self._mm is not None:
            self._mm[: len(raw)] = raw
        self.entries = n

    def flush(self) -> None:
        if self._mm is not None:
            self._mm.flush()

    def close(self) -> None:
        if self._fd < 0:
            return
        self.trim_to_valid_size()
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        os.close(self._fd)
        self._fd = -1

    def abandon(self) -> None:
        """Close without trimming (a crash, in tests)."""
        if self._fd < 0:
            return
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        os.close(self._fd)
        self._fd = -1

    def rename(self, new_path: str) -> None:
        os.rename(self.path, new_path)
        self.path = new_path
