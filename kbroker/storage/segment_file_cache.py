"""SegmentFileCache: a bounded set of segments holding open files, least recently used out.

A segment holds a descriptor for its .log and mappings for its indexes only while in
use: opened on first read or append, given back when the cache evicts it, so the
number of partitions is bounded by disk and memory, not by RLIMIT_NOFILE (nor by
vm.max_map_count: each open segment maps at most its two indexes). A FileSlice or a
flush job holds its own reference to the file it uses, so eviction never changes
bytes in flight.

`max_open` comes from log.open.segment.files.max, or (-1) half of the process's
open-file limit, leaving the rest to connections.

Lock: the event-loop thread touches and evicts; the FileDeleter thread may forget a
deleted segment; `_lock` guards the order. Recovery threads do not use the cache:
LogLoader gives back each partition's files when it has loaded it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Protocol


class CachedSegment(Protocol):
    def release_files(self) -> None: ...


class SegmentFileCache:
    def __init__(self, max_open: int) -> None:
        self.max_open = max(max_open, 1)
        self._open: OrderedDict[CachedSegment, None] = OrderedDict()
        self._lock = threading.Lock()
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._open)

    def touch(self, segment: CachedSegment) -> None:
        """`segment` is in use (it may just have opened a file): evict the least recently
        used others while over the bound."""
        evicted = []
        with self._lock:
            open_ = self._open
            if segment in open_:
                open_.move_to_end(segment)
                return
            open_[segment] = None
            while len(open_) > self.max_open:
                oldest, _ = open_.popitem(last=False)
                evicted.append(oldest)
            self.evictions += len(evicted)
        for seg in evicted:
            seg.release_files()

    def forget(self, segment: CachedSegment) -> None:
        with self._lock:
            self._open.pop(segment, None)
