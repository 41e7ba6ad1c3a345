"""LogSegments: a partition's segments sorted by base offset.

Lock: owned by its Log (event-loop thread). Invariant: base offsets are unique and
sorted; the last segment is the active one.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator

from kbroker.storage.log_segment import LogSegment
from kbroker.storage.segment_file_cache import SegmentFileCache


class LogSegments:
    def __init__(self) -> None:
        self._bases: list[int] = []
        self._segments: list[LogSegment] = []
        self._file_cache: SegmentFileCache | None = None

    def use_file_cache(self, cache: SegmentFileCache) -> None:
        """From now on the segments open files through `cache` (bounded, LRU); the files
        opened so far (by loading) are given back until next used."""
        self._file_cache = cache
        for seg in self._segments:
            seg.release_files()
            seg.file_cache = cache

    def __len__(self) -> int:
        return len(self._segments)

    def __iter__(self) -> Iterator[LogSegment]:
        return iter(list(self._segments))

    def add(self, segment: LogSegment) -> None:
        if self._file_cache is not None:
            segment.file_cache = self._file_cache
        i = bisect.bisect_left(self._bases, segment.base_offset)
        if i < len(self._bases) and self._bases[i] == segment.base_offset:
            self._segments[i] = segment
        else:
            self._bases.insert(i, segment.base_offset)
            self._segments.insert(i, segment)

    def remove(self, base_offset: int) -> None:
        i = bisect.bisect_left(self._bases, base_offset)
        if i < len(self._bases) and self._bases[i] == base_offset:
            del self._bases[i]
            del self._segments[i]

    def get(self, base_offset: int) -> LogSegment | None:
        i = bisect.bisect_left(self._bases, base_offset)
        if i < len(self._bases) and self._bases[i] == base_offset:
            return self._segments[i]
        return None

    def floor(self, offset: int) -> LogSegment | None:
        """The segment with the largest base offset <= offset."""
        i = bisect.bisect_right(self._bases, offset)
        return self._segments[i - 1] if i else None

    def higher(self, base_offset: int) -> LogSegment | None:
        """The segment after the one with this base offset."""
        i = bisect.bisect_right(self._bases, base_offset)
        return self._segments[i] if i < len(self._segments) else None

    def from_offset(self, offset: int) -> list[LogSegment]:
        """Segments that may hold offsets >= offset (from its floor segment on)."""
        i = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        return self._segments[i:]

    @property
    def first(self) -> LogSegment | None:
        return self._segments[0] if self._segments else None

    @property
    def active(self) -> LogSegment:
        return self._segments[-1]

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)
