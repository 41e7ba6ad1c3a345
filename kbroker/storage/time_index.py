"""TimeIndex: the sparse .timeindex file mapping timestamps to offsets.

Entry (12 bytes, big-endian): timestamp int64 | relativeOffset int32. The timestamp
is the largest seen in the segment up to that entry; the offset is where it was
seen. Entries strictly increase in timestamp, so every record at an offset <= O of
an entry (T, O) has timestamp <= T. Lookup(t) = the largest entry with timestamp <= t.

Lock: owned by its LogSegment (event-loop thread). Invariant: timestamps strictly
increase, relative offsets never decrease.
"""

from __future__ import annotations

import struct

from kbroker._core import index as _index
from kbroker.storage.errors import CorruptIndexError
from kbroker.storage.index_file import IndexFile

_ENTRY = struct.Struct(">qi")


class TimeIndex(IndexFile):
    ENTRY_SIZE = 12

    def entry(self, slot: int) -> tuple[int, int]:
        ts, rel = _ENTRY.unpack_from(self.buffer, slot * 12)
        return ts, self.base_offset + rel

    @property
    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry; (-1, base_offset) when empty."""
        if self.entries == 0:
            return -1, self.base_offset
        return self.entry(self.entries - 1)

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the largest entry with timestamp <= target; (-1, base) if none."""
        slot = _index.time_index_lookup(self.buffer, self.entries, target_timestamp)
        if slot < 0:
            return -1, self.base_offset
        return self.entry(slot)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append when timestamp exceeds the last entry's (Kafka's maybeAppend)."""
        if timestamp <= self.last_entry[0]:
            return
        if self.is_full and not skip_full_check:
            raise CorruptIndexError(f"time index {self.path} is full")
        self._ensure_capacity(self.entries + 1)
        _ENTRY.pack_into(self.buffer, self.entries * 12, timestamp, offset - self.base_offset)
        self.entries += 1

    def truncate_to(self, offset: int) -> None:
        """Drop every entry whose offset >= offset."""
        n = self.entries
        while n > 0 and self.entry(n - 1)[1] >= offset:
            n -= 1
        self.entries = n

    def sanity_check(self, max_relative_offset: int) -> None:
        if self.misaligned:
            raise CorruptIndexError(f"{self.path}: length not a multiple of 12")
        if not _index.check_time_index(self.buffer, self.entries, max_relative_offset):
            raise CorruptIndexError(f"{self.path}: entries out of order")
