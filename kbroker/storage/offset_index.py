"""OffsetIndex: the sparse .index file mapping offsets to .log byte positions.

Entry (8 bytes, big-endian): relativeOffset int32 (offset - base offset) | position int32.
An entry (O, P) says: the batch at position P has offsets <= ... and every batch
before P ends below O, so the batch holding any offset >= O starts at or after P.
Lookup(target) = the largest entry with offset <= target (binary search in C).

Lock: owned by its LogSegment (event-loop thread). Invariant: offsets and positions
strictly increase; the last offset is below the segment's next offset.
"""

from __future__ import annotations

import bisect
import struct

from kbroker._core import index as _index
from kbroker.storage.errors import CorruptIndexError
from kbroker.storage.index_file import IndexFile

_ENTRY = struct.Struct(">ii")


class OffsetIndex(IndexFile):
    ENTRY_SIZE = 8

    def entry(self, slot: int) -> tuple[int, int]:
        rel, pos = _ENTRY.unpack_from(self.buffer, slot * 8)
        return self.base_offset + rel, pos

    @property
    def last_entry(self) -> tuple[int, int]:
        """(offset, position) of the last entry; (base_offset, 0) when empty."""
        if self.entries == 0:
            return self.base_offset, 0
        return self.entry(self.entries - 1)

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """(offset, position) of the largest entry <= target; (base_offset, 0) if none."""
        rel = target_offset - self.base_offset
        if rel < 0 or self.entries == 0:
            return self.base_offset, 0
        slot = _index.offset_index_lookup(self.buffer, self.entries, min(rel, 0x7FFFFFFF))
        if slot < 0:
            return self.base_offset, 0
        return self.entry(slot)

    def fetch_upper_bound_offset(self, position: int) -> int | None:
        """The offset of the first entry at or after `position` (Kafka's
        fetchUpperBoundOffset): no batch before that position holds an offset above it."""
        n = self.entries
        slot = bisect.bisect_left(range(n), position, key=lambda i: self.entry(i)[1])
        return self.entry(slot)[0] if slot < n else None

    def append(self, offset: int, position: int) -> None:
        if self.entries and offset <= self.last_entry[0]:
            raise CorruptIndexError(f"offset index append {offset} not above {self.last_entry[0]}")
        if self.is_full:
            raise CorruptIndexError(f"offset index {self.path} is full")
        self._ensure_capacity(self.entries + 1)
        _ENTRY.pack_into(self.buffer, self.entries * 8, offset - self.base_offset, position)
        self.entries += 1

    def truncate_to(self, offset: int) -> None:
        """Drop every entry whose offset >= offset."""
        slot = _index.offset_index_lookup(self.buffer, self.entries, offset - self.base_offset - 1) \
            if self.entries and offset > self.base_offset else -1
        self.entries = slot + 1

    def sanity_check(self, log_size: int) -> None:
        if self.misaligned:
            raise CorruptIndexError(f"{self.path}: length not a multiple of 8")
        if not _index.check_offset_index(self.buffer, self.entries, log_size):
            raise CorruptIndexError(f"{self.path}: entries out of order or beyond the log")
