"""LogSegment: one .log file of whole record batches plus its .index, .timeindex and
.txnindex.

Files are named by the segment's base offset in 20 digits, as Kafka names them:
00000000000000000000.log / .index / .timeindex / .txnindex. The .log holds batches back to
back exactly as the broker received them (offsets and leader epoch patched). Every
index.interval.bytes of appended data an offset index entry (largest offset of the
append, its start position) and a time index entry (largest timestamp so far, its
offset) are added. Indexes are opened lazily (a clean start touches only the last
segment's) and are never trusted over the log: recover() rebuilds them (the
transaction index, which needs the producer state before the segment, is rebuilt by
LogLoader). The .txnindex lists the transactions aborted by a marker in this segment
(transaction_index.py); it exists only once it has an entry.

Rolling: by segment.bytes, by an index filling up, by relative offsets outgrowing
int32, and by segment.ms counted from when the segment was created or opened in this
process (Kafka counts from the first batch's timestamp; a client clock cannot force
rolls here).

Lock: the broker's event-loop thread calls every method; LogManager's background
thread only closes and unlinks files of segments already removed from their Log.
Invariants: size == bytes of whole batches in the file (after recover); the batches'
offsets increase and lie in [base_offset, next_offset).
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable
from typing import NamedTuple

from kbroker._core import segment_scan, segment_seek
from kbroker.records import compression
from kbroker.records.batch_header import HEADER_SIZE, MAGIC_POS, BatchHeader
from kbroker.records.file_slice import FileSlice, SegmentFile
from kbroker.storage.errors import CorruptIndexError, KafkaStorageError
from kbroker.storage.offset_index import OffsetIndex
from kbroker.storage.segment_file_cache import SegmentFileCache
from kbroker.storage.time_index import TimeIndex
from kbroker.storage.transaction_index import TXN_INDEX_SUFFIX, TransactionIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"  # the log cleaner's new segment, being written
SWAP_SUFFIX = ".swap"  # the log cleaner's new segment, written, replacing the old ones
INT32_MAX = 0x7FFFFFFF


def file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


class SegmentRecovery(NamedTuple):
    """What recover() found: bytes cut from a torn or corrupt tail, the leader epoch
    starts [(epoch, start offset)], and how many batches carry a producer id."""

    truncated_bytes: int
    epoch_starts: list[tuple[int, int]]
    producer_batches: int


class BatchLocation:
    """Where a batch lies in a segment file (from a header walk)."""

    __slots__ = ("position", "base_offset", "last_offset", "size")

    def __init__(self, position: int, base_offset: int, last_offset: int, size: int) -> None:
        self.position = position
        self.base_offset = base_offset
        self.last_offset = last_offset
        self.size = size


class LogSegment:
    def __init__(
        self,
        directory: str,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_size: int,
        created_ms: int,
        suffix: str = "",
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.max_index_size = max_index_size
        self.created_ms = created_ms
        self.log_path = os.path.join(directory, file_name(base_offset, LOG_SUFFIX + suffix))
        # The .log is opened when first used and may be given back (release_files) when
        # the SegmentFileCache evicts the segment; the descriptor is shared with the
        # FileSlices handed out by read(), so a slice in flight keeps its file.
        self.file_cache: SegmentFileCache | None = None
        self._closed = False
        self._file: SegmentFile | None = None
        try:
            self.size = os.stat(self.log_path).st_size
        except FileNotFoundError:
            self.size = 0  # a new segment: its .log is created on first use (open_file)
        self.bytes_since_last_index_entry = 0
        self.roll_jitter_ms = -1  # segment.jitter.ms drawn for this segment (-1: not yet)
        self._offset_index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None
        self._index_suffix = suffix
        self.txn_index = TransactionIndex(os.path.join(directory, file_name(base_offset, TXN_INDEX_SUFFIX + suffix)))
        self._check_indexes_on_open = False
        # Filled by load_tail()/recover()/append(): the next offset after the last batch
        # and the largest timestamp (with its offset). -1: unknown / none.
        self.next_offset = base_offset
        self.max_timestamp_so_far = -1
        self.offset_of_max_timestamp_so_far = -1

    @property
    def fd(self) -> int:
        """The .log's descriptor, opened if need be (use it within one expression: the
        segment may give it back when another segment is opened)."""
        return self.open_file().fd

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size}, next_offset={self.next_offset})"

    # -- indexes (lazy) ---------------------------------------------------------------
    @property
    def offset_index(self) -> OffsetIndex:
        if self.file_cache is not None:
            self.file_cache.touch(self)
        if self._offset_index is None:
            path = os.path.join(self.directory, file_name(self.base_offset, INDEX_SUFFIX + self._index_suffix))
            self._offset_index = OffsetIndex(path, self.base_offset, self.max_index_size)
            self._check_lazily_opened()
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        if self.file_cache is not None:
            self.file_cache.touch(self)
        if self._time_index is None:
            path = os.path.join(self.directory, file_name(self.base_offset, TIME_INDEX_SUFFIX + self._index_suffix))
            self._time_index = TimeIndex(path, self.base_offset, self.max_index_size)
            self._check_lazily_opened()
        return self._time_index

    def _check_lazily_opened(self) -> None:
        if self._check_indexes_on_open:
            self._check_indexes_on_open = False
            self._checked()

    def sanity_check_indexes(self) -> None:
        """Raise CorruptIndexError unless both indexes look consistent with the log."""
        self.offset_index.sanity_check(max(self.size, 1))
        self.time_index.sanity_check(max(self.next_offset - 1 - self.base_offset, 0))
        if self.offset_index.entries and self.offset_index.last_entry[0] >= self.next_offset:
            raise CorruptIndexError(f"{self.offset_index.path}: last entry beyond the log")
        if self.time_index.entries and self.time_index.last_entry[1] >= self.next_offset:
            raise CorruptIndexError(f"{self.time_index.path}: last entry beyond the log")
        index = self.offset_index
        for slot in {0, index.entries - 1} if index.entries else ():
            offset, position = index.entry(slot)
            header = os.pread(self.fd, HEADER_SIZE, position)
            if len(header) < HEADER_SIZE or header[MAGIC_POS] != 2 or BatchHeader.parse(header).base_offset > offset:
                raise CorruptIndexError(f"{index.path}: entry {slot} does not point at a batch")

    def _checked(self) -> None:
        """Make sure lazily opened indexes are sane; rebuild them from the log if not."""
        try:
            self.sanity_check_indexes()
            ok = not self._index_lost()
        except CorruptIndexError:
            ok = False
        if not ok:
            self.rebuild_indexes()

    def _index_lost(self) -> bool:
        """An index file was missing when loaded while the log has outgrown one index
        interval: rebuild it, as Kafka does (a smaller segment never needed an entry)."""
        return self.size > self.index_interval_bytes and (self.offset_index.created
                                                         or self.time_index.created)

    # -- loading ----------------------------------------------------------------------
    def load_tail(self) -> None:
        """After a clean shutdown: next offset and max timestamp from the indexes and a
        short header walk after the last offset index entry (the last segment only)."""
        index_ok = not self._index_lost()
        try:
            self.offset_index.sanity_check(max(self.size, 1))
            self.time_index.sanity_check(INT32_MAX)
        except CorruptIndexError:
            index_ok = False
        start = self.offset_index.last_entry[1] if index_ok else 0
        count, next_off, ts, off_ts, end = segment_seek.scan_headers(self.fd, start, self.size)
        if end != self.size or (not index_ok):
            self.recover()
            return
        if count:
            self.next_offset = next_off
        elif start == 0:
            self.next_offset = self.base_offset
        t_ts, t_off = self.time_index.last_entry
        self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far = (t_ts, t_off)
        if ts > self.max_timestamp_so_far:
            self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far = ts, off_ts
        try:
            self.sanity_check_indexes()
        except CorruptIndexError:
            self.rebuild_indexes()

    def load_closed(self, next_offset: int) -> None:
        """A non-last segment after a clean shutdown: its next offset is the next
        segment's base offset; the max timestamp is read lazily from the time index."""
        self.next_offset = next_offset
        self.max_timestamp_so_far = -2  # unknown until largest_timestamp asks
        self._check_indexes_on_open = True

    @property
    def largest_timestamp(self) -> int:
        """The segment's largest record timestamp (retention, ListOffsets)."""
        if self.max_timestamp_so_far == -2:
            self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far = self.time_index.last_entry
        return self.max_timestamp_so_far

    def recover(self, start_position: int = 0, expected_next_offset: int = -1,
                truncate: bool = True) -> SegmentRecovery:
        """Scan the log, validating each batch (CRC etc. in C), rebuild the offset and time
        indexes, truncate a torn or corrupt tail. Returns what it found."""
        scan = self._scan(expected_next_offset)
        self.offset_index.load_entries(scan.offset_index_entries)
        self.time_index.load_entries(scan.time_index_entries)
        self.bytes_since_last_index_entry = scan.bytes_since_last_index_entry
        self.next_offset = scan.next_offset if scan.batch_count else self.base_offset
        self.max_timestamp_so_far = scan.max_timestamp
        self.offset_of_max_timestamp_so_far = scan.offset_of_max_timestamp
        truncated = self.size - scan.valid_bytes
        if truncated and truncate:
            os.ftruncate(self.fd, scan.valid_bytes)
            self.size = scan.valid_bytes
        return SegmentRecovery(truncated, list(scan.epoch_starts), scan.producer_batches)

    def rebuild_indexes(self) -> None:
        """Rebuild indexes from the log without truncating it (a flushed segment)."""
        self.recover(truncate=False)

    def _scan(self, expected_next_offset: int) -> segment_scan.SegmentScan:
        if self.size == 0:
            return segment_scan.scan_segment(b"", self.base_offset, 0, expected_next_offset,
                                         self.index_interval_bytes)
        # MAP_POPULATE: the kernel maps (and reads ahead) the whole file up front, ~40%
        # faster than faulting 4 KiB pages in during the scan (bench_storage.py)
        flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
        with mmap.mmap(self.fd, self.size, flags=flags, prot=mmap.PROT_READ) as mm:
            return segment_scan.scan_segment(mm, self.base_offset, 0, expected_next_offset,
                                         self.index_interval_bytes)

    # -- append -----------------------------------------------------------------------
    def should_roll(self, payload_size: int, max_offset: int, now_ms: int, segment_bytes: int,
                    segment_ms: int) -> bool:
        if self.size == 0:
            return max_offset - self.base_offset > INT32_MAX
        return (
            self.size > segment_bytes - payload_size
            or now_ms - self.created_ms > segment_ms
            or self.offset_index.is_full
            or self.time_index.is_full
            or max_offset - self.base_offset > INT32_MAX
        )

    def append(self, largest_offset: int, max_timestamp: int, offset_of_max_timestamp: int,
               records: bytes | bytearray | memoryview | list[bytes | memoryview]) -> None:
        """Append whole, offset-assigned batches (one buffer, or pieces for pwritev)."""
        position = self.size
        try:
            if isinstance(records, list):
                length = sum(len(p) for p in records)
                written = os.pwritev(self.fd, records, position)
                if written < length:  # short write: finish from a joined copy
                    rest = memoryview(b"".join(records))[written:]
                    self._pwrite_all(rest, position + written)
            else:
                length = len(records)
                self._pwrite_all(memoryview(records), position)
        except OSError as e:
            raise KafkaStorageError(f"append to {self.log_path} failed: {e}") from e
        if max_timestamp > self.largest_timestamp:
            self.max_timestamp_so_far = max_timestamp
            self.offset_of_max_timestamp_so_far = offset_of_max_timestamp
        if self.bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append(largest_offset, position)
            self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += length
        self.size += length
        self.next_offset = largest_offset + 1

    def _pwrite_all(self, view: memoryview, position: int) -> None:
        written = 0
        while written < len(view):
            written += os.pwrite(self.fd, view[written:], position + written)

    # -- lookups ----------------------------------------------------------------------
    def translate_offset(self, offset: int, starting_position: int = 0) -> BatchLocation | None:
        """The batch holding the first offset >= `offset`, from the index then a header walk."""
        _, position = self.offset_index.lookup(offset)
        found = segment_seek.find_batch(self.fd, max(position, starting_position), self.size, offset)
        if found is None:
            return None
        return BatchLocation(*found)

    def read(self, start_offset: int, max_size: int, max_position: int | None = None,
             min_one_message: bool = True, max_records: int = 0) -> tuple[int, FileSlice] | None:
        """(batch position, slice) from the batch holding start_offset, at most max_size
        bytes (at least that whole batch with min_one_message), not beyond max_position.
        `max_records` > 0: also not beyond the batch that the offset index places at or
        before start_offset + max_records, when that offset is in this segment (the slice
        then ends at a batch boundary: about max_records records, to the index's
        granularity, or the first batch alone when it holds more)."""
        if max_position is None:
            max_position = self.size
        loc = self.translate_offset(start_offset)
        if loc is None:
            return None
        if max_records > 0 and start_offset + max_records < self.next_offset:
            _, cap = self.offset_index.lookup(start_offset + max_records)
            # No indexed batch between: the first batch alone (it always comes whole).
            max_position = min(max_position, cap if cap > loc.position else loc.position + loc.size)
        if loc.position >= max_position:
            return loc.position, FileSlice(self.open_file(), loc.position, 0)
        limit = max(max_size, loc.size) if min_one_message else max_size
        size = min(max_position - loc.position, limit)
        return loc.position, FileSlice(self.open_file(), loc.position, max(size, 0))

    def fetch_upper_bound_offset(self, start_position: int, fetch_size: int) -> int | None:
        """An offset above every offset of the `fetch_size` bytes read from start_position,
        from the offset index (None: the index cannot tell)."""
        return self.offset_index.fetch_upper_bound_offset(start_position + fetch_size)

    def open_file(self) -> SegmentFile:
        """The segment's file, held by whoever sends or fsyncs it after the segment closes."""
        file = self._file
        if file is None:
            if self._closed:
                raise KafkaStorageError(f"segment {self.log_path} is closed")
            file = self._file = SegmentFile(os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644))
        if self.file_cache is not None:
            self.file_cache.touch(self)
        return file

    def release_files(self) -> None:
        """Give back the .log descriptor and the index mappings (reopened when next used)."""
        self._file = None
        for idx in (self._offset_index, self._time_index):
            if idx is not None:
                idx.unmap()

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after starting_offset whose
        timestamp >= target, or None."""
        _, entry_offset = self.time_index.lookup(timestamp - 1)
        loc = self.translate_offset(max(entry_offset, starting_offset))
        position = loc.position if loc is not None else self.size
        while position < self.size:
            found = segment_seek.find_batch_by_timestamp(self.fd, position, self.size, timestamp)
            if found is None:
                return None
            pos, base, last, size, _max_ts = found
            if last >= starting_offset:
                hit = self._first_record_at_or_after(pos, size, timestamp, starting_offset)
                if hit is not None:
                    return hit
            position = pos + size
        return None

    def _first_record_at_or_after(self, position: int, size: int, timestamp: int,
                                  starting_offset: int) -> tuple[int, int] | None:
        data = os.pread(self.fd, size, position)
        header = BatchHeader.parse(data)
        if header.is_log_append_time:
            off = max(header.base_offset, starting_offset)
            return (off, header.max_timestamp) if header.max_timestamp >= timestamp else None
        section = compression.decompress(header.codec, memoryview(data)[HEADER_SIZE:])
        for delta, ts in segment_seek.record_timestamps(section, header.record_count, header.base_timestamp):
            offset = header.base_offset + delta
            if ts >= timestamp and offset >= starting_offset:
                return offset, ts
        return None

    def offset_of_max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record carrying the segment's max timestamp."""
        ts = self.largest_timestamp
        if ts < 0:
            return None
        return self.find_offset_by_timestamp(ts, self.base_offset)

    # -- truncation -------------------------------------------------------------------
    def truncate_to(self, offset: int) -> int:
        """Remove the batch holding `offset` and everything after; return bytes removed."""
        loc = self.translate_offset(offset)
        if loc is None:
            return 0
        cut = loc.base_offset
        self.offset_index.truncate_to(cut)
        self.time_index.truncate_to(cut)
        self.txn_index.truncate_to(cut)
        removed = self.size - loc.position
        os.ftruncate(self.fd, loc.position)
        self.size = loc.position
        self.bytes_since_last_index_entry = 0
        start = self.offset_index.last_entry[1]
        count, next_off, ts, off_ts, _ = segment_seek.scan_headers(self.fd, start, self.size)
        self.next_offset = next_off if count else self.base_offset
        t_ts, t_off = self.time_index.last_entry
        self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far = t_ts, t_off
        if ts > t_ts:
            self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far = ts, off_ts
        return removed

    # -- life cycle -------------------------------------------------------------------
    def on_become_inactive(self) -> None:
        """The segment was rolled: a final time index entry, indexes trimmed."""
        if self.largest_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp_so_far,
                                         self.offset_of_max_timestamp_so_far, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()

    def resize_indexes(self, size: int) -> None:
        self.max_index_size = size
        self.offset_index.max_index_size = size // 8 * 8
        self.time_index.max_index_size = size // 12 * 12

    def flush(self) -> None:
        os.fsync(self.fd)
        self.flush_indexes()

    def flush_indexes(self) -> None:
        """msync the mapped indexes and fsync the transaction index (also from the flush
        thread: an index closed or remapped meanwhile is skipped; indexes are rebuilt on
        recovery anyway)."""
        for idx in (self._offset_index, self._time_index, self.txn_index):
            if idx is not None:
                try:
                    idx.flush()
                except (ValueError, OSError):
                    pass

    def close(self) -> None:
        if self.max_timestamp_so_far >= 0:
            self.time_index.maybe_append(self.max_timestamp_so_far,
                                         self.offset_of_max_timestamp_so_far, skip_full_check=True)
        for idx in (self._offset_index, self._time_index):
            if idx is not None:
                idx.close()
        self._closed_now()

    def close_handlers(self) -> None:
        """Close file descriptors only (after deletion, or a simulated crash)."""
        for idx in (self._offset_index, self._time_index):
            if idx is not None:
                idx.abandon()
        self._closed_now()

    def _closed_now(self) -> None:
        self._closed = True
        self._file = None  # closes the descriptor unless a FileSlice still holds it
        if self.file_cache is not None:
            self.file_cache.forget(self)

    def paths(self) -> list[str]:
        return [
            self.log_path,
            os.path.join(self.directory, file_name(self.base_offset, INDEX_SUFFIX + self._index_suffix)),
            os.path.join(self.directory, file_name(self.base_offset, TIME_INDEX_SUFFIX + self._index_suffix)),
            self.txn_index.path,
        ]

    def rename_for_deletion(self) -> list[str]:
        """Rename the files to *.deleted (fds stay open for in-flight sends); return new paths."""
        for idx in (self._offset_index, self._time_index):
            if idx is not None:
                idx.trim_to_valid_size()
        return self.change_suffix(self._index_suffix, self._index_suffix + DELETED_SUFFIX)

    def change_suffix(self, old: str, new: str,
                      after_log: Callable[[], None] | None = None) -> list[str]:
        """Rename every file of the segment from name+old to name+new (Kafka's
        changeFileSuffixes: the .log first, then the indexes; after_log is called in
        between, for tests of a crash there); the paths that now exist. Open descriptors
        and mappings stay valid."""
        new_paths = []
        for i, path in enumerate(self.paths()):
            if i == 1 and after_log is not None:
                after_log()
            assert path.endswith(old), (path, old)
            target = path[: len(path) - len(old)] + new
            try:
                os.rename(path, target)
                new_paths.append(target)
            except FileNotFoundError:
                pass
        self.log_path = self.log_path[: len(self.log_path) - len(old)] + new
        self._index_suffix = self._index_suffix[: len(self._index_suffix) - len(old)] + new
        self.txn_index.path = self.txn_index.path[: len(self.txn_index.path) - len(old)] + new
        for idx in (self._offset_index, self._time_index):
            if idx is not None:
                idx.path = idx.path[: len(idx.path) - len(old)] + new
        return new_paths
