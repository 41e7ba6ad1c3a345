"""TransactionIndex: a segment's `.txnindex`, the transactions aborted by a marker in that
segment, in Kafka's format (TransactionIndex / AbortedTxn), read by read_committed
Fetch to tell consumers which records to drop.

Entry (34 bytes, big-endian), appended in marker order:

    version int16 (0) | producer_id int64 | first_offset int64 | last_offset int64 |
    last_stable_offset int64

first_offset is the transaction's first offset on this partition (possibly in an earlier
segment), last_offset its ABORT marker's, last_stable_offset the LSO right after the
marker. The file exists only once a segment has an entry (a missing file is an empty
index). Like the other indexes it is never trusted over the log: recovery rebuilds the
index of every segment it scans (LogLoader), and one whose length is not a whole number
of entries is rebuilt too.

Lock: the broker's event-loop thread; the flush thread only fsyncs the file (`flush`).
Invariant: last_offset increases from entry to entry.
"""

from __future__ import annotations

import bisect
import os
import struct
from typing import NamedTuple

from kbroker.storage.errors import CorruptIndexError

TXN_INDEX_SUFFIX = ".txnindex"
ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34
CURRENT_VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    def __init__(self, path: str) -> None:
        self.path = path
        self._entries: list[AbortedTxn] | None = None  # read on first use
        self._last_offsets: list[int] = []
        self._dirty = False

    def __repr__(self) -> str:
        return f"TransactionIndex({self.path}, entries={len(self.entries)})"

    @property
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            self._entries = self._read()
            self._last_offsets = [e.last_offset for e in self._entries]
        return self._entries

    def _read(self) -> list[AbortedTxn]:
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return []
        if len(data) % ENTRY_SIZE:
            raise CorruptIndexError(f"{self.path}: length {len(data)} is not a whole number of entries")
        out = []
        for pos in range(0, len(data), ENTRY_SIZE):
            version, *fields = ENTRY.unpack_from(data, pos)
            if version != CURRENT_VERSION:
                raise CorruptIndexError(f"{self.path}: entry version {version}")
            out.append(AbortedTxn(*fields))
        return out

    def sanity_check(self) -> None:
        """CorruptIndexError unless the file is whole entries of version 0 in marker order."""
        self._entries = None
        last = -1
        for e in self.entries:
            if e.last_offset <= last or e.first_offset > e.last_offset:
                raise CorruptIndexError(f"{self.path}: entries out of order at {e}")
            last = e.last_offset

    def append(self, txn: AbortedTxn) -> None:
        entries = self.entries
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise CorruptIndexError(f"{self.path}: aborted transaction at {txn.last_offset} is not "
                                    f"after {entries[-1].last_offset}")
        data = ENTRY.pack(CURRENT_VERSION, *txn)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        entries.append(txn)
        self._last_offsets.append(txn.last_offset)
        self._dirty = True

    def reset(self, entries: list[AbortedTxn]) -> None:
        """Replace the contents (recovery rebuilt them from the log)."""
        if entries:
            with open(self.path, "wb") as f:
                f.write(b"".join(ENTRY.pack(CURRENT_VERSION, *e) for e in entries))
        else:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
        self._entries = list(entries)
        self._last_offsets = [e.last_offset for e in entries]
        self._dirty = bool(entries)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or above `offset`."""
        entries = self.entries
        keep = bisect.bisect_left(self._last_offsets, offset)
        if keep < len(entries):
            os.truncate(self.path, keep * ENTRY_SIZE)
            del entries[keep:]
            del self._last_offsets[keep:]
            self._dirty = True

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int
                             ) -> tuple[list[AbortedTxn], bool]:
        """The aborted transactions overlapping [fetch_offset, upper_bound_offset), and whether
        the search is complete: no later segment can hold one (an entry's LSO reached the
        bound), as Kafka's collectAbortedTxns."""
        entries = self.entries
        start = bisect.bisect_left(self._last_offsets, fetch_offset)
        if start and entries[start - 1].last_stable_offset >= upper_bound_offset:
            return [], True
        out = []
        for txn in entries[start:]:
            if txn.first_offset < upper_bound_offset:
                out.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return out, True
        return out, False

    def flush(self) -> None:
        """fsync the file if entries were written since the last flush (any thread)."""
        if not self._dirty:
            return
        self._dirty = False
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:  # renamed for deletion meanwhile, or truncated to nothing
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def rename(self, new_path: str) -> None:
        try:
            os.rename(self.path, new_path)
        except FileNotFoundError:
            pass
        self.path = new_path
