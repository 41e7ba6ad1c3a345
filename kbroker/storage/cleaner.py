"""Cleaner: one cleaning of one compacted log, on a cleaner thread (Kafka's Cleaner).

A CleanJob is taken on the event loop (log_cleaner.py): the inactive segments from the
log start up to the first uncleanable offset, each with its .log held open (a
SegmentFile), the first dirty offset (the cleaner-offset-checkpoint), the aborted
transactions of that range and the active producers' last data offsets. Nothing else of
the Log is touched here: the thread reads the held files and writes new ones.

    1. the offset map: the keys of the dirty section [first dirty, first uncleanable),
       latest offset per key (compaction.map_keys, in the core without the GIL); a full
       map (log.cleaner.dedupe.buffer.size) ends the cleaning early, at the map's latest
       offset, the rest is left for the next one;
    2. the segments from the log start to the map's end, in groups whose sizes add up to
       at most segment.bytes (and whose offsets fit an index's int32), are each rewritten
       into one new segment named after the group's first base offset with the .cleaned
       suffix: <base>.log.cleaned, .index.cleaned, .timeindex.cleaned, .txnindex.cleaned.
       A segment is read a chunk at a time (preadv into one buffer); batches whose
       records all survive are written from that buffer as they are, others are rebuilt
       by the core (compaction.RecordFilter), compressed ones re-compressed with their
       own codec; one pwritev per chunk. The new files are fsynced.
    3. the loop swaps each group in (Log.begin_replace, retire_segments and
       finish_replace: .cleaned -> .swap, the old segments renamed .deleted, .swap -> no
       suffix); LogLoader finishes or undoes an interrupted swap at the next start.

Offsets never change (a cleaned segment has gaps); the active segment is never cleaned;
a producer's last batch stays (at least its header) so idempotence survives.

Lock: none; one job per log at a time (LogCleanerManager's in-progress set), on one
cleaner thread.
"""

from __future__ import annotations

import os
import threading
import time as _time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from kbroker._core import compaction
from kbroker._core.offset_map import SLOT_SIZE, OffsetMap
from kbroker._core.records import RecordValidationError
from kbroker.common.error_code import ErrorCode
from kbroker.common.topic_partition import TopicPartition
from kbroker.records import compression
from kbroker.records.batch_header import (
    CODEC_MASK,
    CONTROL_BIT,
    HEADER_SIZE,
    LENGTH_POS,
    LOG_OVERHEAD,
    TRANSACTIONAL_BIT,
)
from kbroker.records.builder import frame_records
from kbroker.records.file_slice import SegmentFile
from kbroker.storage.cleaned_transactions import CleanedTransactionMetadata
from kbroker.storage.log_segment import CLEANED_SUFFIX, LogSegment
from kbroker.storage.transaction_index import AbortedTxn

# batch_plan's (position, size, base_offset, last_offset, attributes, producer_id,
# producer_epoch, record_count, control_type)
SpecialBatch = tuple[int, int, int, int, int, int, int, int, int]

INT32_MAX = 0x7FFFFFFF
CHUNK_BYTES = 256 * 1024  # how much of a segment the core walks in one call (default)

# Called at each step of a cleaning and its swap with the step's name ("map", "clean",
# "cleaned", then in the Log's swap steps "swap-log", "swap", "deleted", "renamed-log"); tests raise a BaseException there to leave the files as
# a crash at that point would.
CrashHook = Callable[[str], None]


class CleanerAborted(Exception):
    """The cleaning stopped (shutdown, the log went away)."""


@dataclass
class SegmentToClean:
    segment: LogSegment
    file: SegmentFile  # held open for the cleaning, whatever the Log does meanwhile
    size: int
    next_offset: int  # the next segment's base offset
    mtime: float


@dataclass
class CleanJob:
    topic_partition: TopicPartition
    directory: str
    segments: list[SegmentToClean]
    first_dirty_offset: int
    first_uncleanable_offset: int
    aborted_txns: list[AbortedTxn]
    active_producers: dict[int, int]  # producer id -> offset of its last data batch's end
    now_ms: int
    delete_retention_ms: int
    segment_bytes: int
    index_interval_bytes: int
    segment_index_bytes: int
    max_uncompressed: int
    truncations: int  # the Log's truncation count when the job was taken


@dataclass
class CleanedGroup:
    new: LogSegment  # .cleaned files, written and fsynced
    old: list[LogSegment]


@dataclass
class CleanerStats:
    """Kafka's CleanerStats: what one cleaning read, wrote and removed."""

    map_bytes_read: int = 0
    map_messages_read: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    messages_read: int = 0
    messages_written: int = 0
    invalid_messages: int = 0
    runs_copied: int = 0  # runs of batches written as they were read
    runs_rebuilt: int = 0  # runs of rebuilt batches
    map_utilization: float = 0.0
    start: float = field(default_factory=_time.monotonic)
    map_done: float = 0.0
    end: float = 0.0

    @property
    def elapsed(self) -> float:
        return max((self.end or _time.monotonic()) - self.start, 1e-9)

    def summary(self, tp: TopicPartition, start_offset: int, end_offset: int) -> str:
        map_s = max(self.map_done - self.start, 0.0)
        clean_s = max(self.elapsed - map_s, 1e-9)
        mb = 1024 * 1024
        return (
            f"cleaned {tp} offsets [{start_offset}, {end_offset}) in {self.elapsed:.3f} s: "
            f"offset map {self.map_bytes_read / mb:.1f} MB, {self.map_messages_read} records in "
            f"{map_s:.3f} s ({self.map_bytes_read / mb / max(map_s, 1e-9):.1f} MB/s), "
            f"{self.map_utilization:.1%} of the map used; cleaned {self.bytes_read / mb:.1f} MB "
            f"in {clean_s:.3f} s ({self.bytes_read / mb / clean_s:.1f} MB/s), wrote "
            f"{self.bytes_written / mb:.1f} MB ({1 - self.bytes_written / max(self.bytes_read, 1):.1%} "
            f"smaller), {self.messages_read} records read, {self.messages_written} kept, "
            f"{self.messages_read - self.messages_written} removed")


@dataclass
class CleanResult:
    job: CleanJob
    groups: list[CleanedGroup]
    end_offset: int  # the next cleaning's first dirty offset
    stats: CleanerStats


class Throttler:
    """log.cleaner.io.max.bytes.per.second, shared by the cleaner threads: sleeps while
    the bytes read and written run ahead of the rate."""

    def __init__(self, bytes_per_second: float) -> None:
        self.rate = bytes_per_second
        self._lock = threading.Lock()
        self._start = _time.monotonic()
        self._bytes = 0.0

    def maybe_throttle(self, nbytes: int, stop: threading.Event | None = None) -> None:
        if self.rate == float("inf") or self.rate <= 0:
            return
        with self._lock:
            self._bytes += nbytes
            now = _time.monotonic()
            elapsed = now - self._start
            if elapsed > 1.0:  # a new window
                self._start, self._bytes = now, float(nbytes)
                elapsed = 0.0
            ahead = self._bytes / self.rate - elapsed
        if ahead > 0:
            if stop is not None:
                stop.wait(ahead)
            else:
                _time.sleep(ahead)


class Cleaner:
    def __init__(self, dedupe_buffer_size: int, load_factor: float = 0.9,
                 throttler: Throttler | None = None, crash: CrashHook | None = None,
                 stop: threading.Event | None = None) -> None:
        self.dedupe_buffer_size = dedupe_buffer_size
        self.load_factor = load_factor
        self.throttler = throttler or Throttler(float("inf"))
        self.crash = crash
        self.stop = stop or threading.Event()
        self.chunk_bytes = CHUNK_BYTES
        self._buffer = bytearray()

    def _step(self, name: str) -> None:
        if self.stop.is_set():
            raise CleanerAborted("the cleaner is stopping")
        if self.crash is not None:
            self.crash(name)

    # -- the whole cleaning ----------------------------------------------------------
    def clean(self, job: CleanJob) -> CleanResult:
        stats = CleanerStats()
        offset_map = OffsetMap(max(self.dedupe_buffer_size, SLOT_SIZE))
        try:
            end_offset = self._build_offset_map(job, offset_map, stats)
            stats.map_done = _time.monotonic()
            stats.map_utilization = offset_map.utilization
            groups = []
            if end_offset > job.first_dirty_offset:
                for group in group_segments_by_size(
                        [s for s in job.segments if s.segment.base_offset < end_offset],
                        job.segment_bytes, job.first_uncleanable_offset):
                    groups.append(self._clean_group(job, group, offset_map, stats))
            stats.end = _time.monotonic()
            return CleanResult(job, groups, end_offset, stats)
        finally:
            offset_map.release()

    def _chunks(self, s: SegmentToClean) -> Iterator[tuple[int, memoryview, list[SpecialBatch]]]:
        """The segment's whole batches, a chunk at a time, read into one reused buffer (a
        read releases the GIL; a mapping's page faults and unmapping would not): (its file
        position, the chunk, batch_plan's batches of it)."""
        position = 0
        while position < s.size:
            if self.stop.is_set():
                raise CleanerAborted("the cleaner is stopping")
            view = self._read(s.file.fd, position, min(self.chunk_bytes, s.size - position))
            reached, plan = compaction.batch_plan(view, 0, len(view))
            if reached == 0:  # a batch larger than a chunk
                length = int.from_bytes(view[LENGTH_POS:LENGTH_POS + 4], "big", signed=True)
                view = self._read(s.file.fd, position, min(LOG_OVERHEAD + max(length, 0), s.size - position))
                reached, plan = compaction.batch_plan(view, 0, len(view))
                if reached == 0:
                    raise RecordValidationError(ErrorCode.CORRUPT_MESSAGE,
                                                f"a batch cut short in {s.segment.log_path}", position)
            yield position, view[:reached], plan
            position += reached

    def _read(self, fd: int, position: int, size: int) -> memoryview:
        if len(self._buffer) < size:
            self._buffer = bytearray(size)  # the old one goes with its last view
        view = memoryview(self._buffer)[:size]
        done = 0
        while done < size:
            n = os.preadv(fd, [view[done:]], position + done)
            if n <= 0:
                raise OSError(f"short read at {position + done}")
            done += n
        return view

    # -- 1. the offset map -----------------------------------------------------------
    def _build_offset_map(self, job: CleanJob, offset_map: OffsetMap, stats: CleanerStats) -> int:
        """Kafka's buildOffsetMap: the keys of [first dirty, first uncleanable); returns the
        end offset of the cleaning (the map's latest offset + 1)."""
        max_size = int(offset_map.max_slots * self.load_factor)
        txns = CleanedTransactionMetadata(job.aborted_txns)
        start, end = job.first_dirty_offset, job.first_uncleanable_offset
        for s in job.segments:
            if s.next_offset <= start or s.segment.base_offset >= end:
                continue
            self._step("map")
            for _position, view, plan in self._chunks(s):
                skipped, sections = [], []
                for (pos, size, _base, last, attributes, pid, _epoch, count, control) in plan:
                    if attributes & CONTROL_BIT:
                        txns.on_control_batch_read(last, pid, _control_type(count, control))
                    elif txns.on_batch_read(last, pid, bool(attributes & TRANSACTIONAL_BIT)):
                        skipped.append(pos)
                        continue
                    if attributes & CODEC_MASK and not attributes & CONTROL_BIT:
                        sections.append((pos, _inflate(view, pos, size, attributes, job)))
                reached, stopped, records = compaction.map_keys(
                    offset_map, view, 0, len(view), start, end, max_size, skipped, sections)
                stats.map_messages_read += records
                stats.map_bytes_read += reached
                self.throttler.maybe_throttle(reached, self.stop)
                if stopped:
                    return offset_map.latest_offset + 1
        return offset_map.latest_offset + 1

    # -- 2. one group of segments into one cleaned segment ------------------------------
    def _clean_group(self, job: CleanJob, group: list[SegmentToClean], offset_map: OffsetMap,
                     stats: CleanerStats) -> CleanedGroup:
        base = group[0].segment.base_offset
        self._step("clean")
        new = LogSegment(job.directory, base, index_interval_bytes=job.index_interval_bytes,
                         max_index_size=job.segment_index_bytes, created_ms=job.now_ms,
                         suffix=CLEANED_SUFFIX)
        for path in new.paths():  # a leftover of an earlier attempt
            if os.path.exists(path):
                os.unlink(path)
        txns = CleanedTransactionMetadata()
        record_filter = compaction.RecordFilter(offset_map, job.now_ms, job.delete_retention_ms,
                                                job.active_producers)
        out_fd = os.open(new.log_path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        written = 0
        try:
            for s in group:
                txns.add_aborted([t for t in job.aborted_txns
                                  if t.last_offset >= s.segment.base_offset
                                  and t.first_offset < s.next_offset])
                written = self._clean_into(job, s, record_filter, txns, out_fd, written, stats)
            os.fsync(out_fd)
        finally:
            os.close(out_fd)
        os.utime(new.log_path, (group[-1].mtime, group[-1].mtime))
        new.size = written
        new.recover(truncate=False)  # the offset and time indexes, from the new .log
        new.on_become_inactive()
        new.txn_index.reset(_dedupe(txns.cleaned_index))
        new.flush_indexes()
        new.txn_index.flush()
        new.release_files()
        self._step("cleaned")
        return CleanedGroup(new, [s.segment for s in group])

    def _clean_into(self, job: CleanJob, s: SegmentToClean, record_filter: compaction.RecordFilter,
                    txns: CleanedTransactionMetadata, out_fd: int, written: int,
                    stats: CleanerStats) -> int:
        for _position, view, plan in self._chunks(s):
            decisions, sections = [], []
            for (pos, size, _base, last, attributes, pid, _epoch, count, control) in plan:
                retention = None
                if attributes & CONTROL_BIT:
                    can_discard = txns.on_control_batch_read(last, pid, _control_type(count, control))
                    horizon_passed = _horizon_passed(view, pos, attributes, job.now_ms)
                    discard_records = can_discard and horizon_passed
                    last_of_producer = job.active_producers.get(pid) == last
                    retention = (compaction.RETAIN_EMPTY if last_of_producer
                                 else compaction.DELETE if discard_records
                                 else compaction.DELETE_EMPTY)
                    decisions.append((pos, retention, discard_records, can_discard))
                elif attributes & TRANSACTIONAL_BIT:
                    aborted = txns.on_batch_read(last, pid, True)
                    last_of_producer = job.active_producers.get(pid) == last
                    retention = (compaction.RETAIN_EMPTY if last_of_producer
                                 else compaction.DELETE if aborted else compaction.DELETE_EMPTY)
                    decisions.append((pos, retention, aborted, False))
                if attributes & CODEC_MASK and retention != compaction.DELETE:
                    sections.append((pos, _inflate(view, pos, size, attributes, job)))
            result = record_filter.filter(view, 0, len(view), decisions, sections)
            stats.bytes_read += result.bytes_read
            stats.messages_read += result.messages_read
            stats.messages_written += result.messages_retained
            stats.invalid_messages += result.invalid_messages
            before = written
            written = self._write_pieces(view, result, out_fd, written, stats)
            stats.bytes_written += written - before
            self.throttler.maybe_throttle(result.bytes_read + written - before, self.stop)
        return written

    def _write_pieces(self, view: memoryview, result: compaction.FilterResult, out_fd: int,
                      written: int, stats: CleanerStats) -> int:
        """Write a chunk's pieces with one pwritev (the GIL released for all of it): runs of
        batches kept whole straight from the read buffer, rebuilt ones from the filter's
        output (compressed ones compressed here first)."""
        out = memoryview(result.out)
        buffers: list[memoryview] = []
        for kind, start, end in result.pieces:
            if kind == compaction.COPY:
                stats.runs_copied += 1
                buffers.append(view[start:end])
                continue
            stats.runs_rebuilt += 1
            if kind == compaction.COMPRESS:
                buffers.append(memoryview(frame_records(out[start:start + HEADER_SIZE],
                                                        out[start + HEADER_SIZE:end])))
            else:
                buffers.append(out[start:end])
        return written + _pwritev_all(out_fd, buffers, written)


def group_segments_by_size(segments: list[SegmentToClean], max_size: int,
                           first_uncleanable_offset: int) -> list[list[SegmentToClean]]:
    """Kafka's groupSegmentsBySize: consecutive segments whose sizes add up to at most
    segment.bytes and whose offsets stay within int32 of the group's base."""
    groups: list[list[SegmentToClean]] = []
    rest = list(segments)
    while rest:
        group = [rest.pop(0)]
        size = group[0].size
        while rest and size + rest[0].size <= max_size and (
                group[0].size == 0
                or min(rest[0].next_offset, first_uncleanable_offset) - 1 - group[0].segment.base_offset
                <= INT32_MAX):
            size += rest[0].size
            group.append(rest.pop(0))
        groups.append(group)
    return groups


def _control_type(record_count: int, control_type: int) -> int:
    """-1 for an empty (already cleaned) control batch; an unreadable one counts as an
    unknown type (kept)."""
    if record_count == 0:
        return -1
    return control_type if control_type >= 0 else 1 << 15


def _inflate(buf: memoryview, pos: int, size: int, attributes: int, job: CleanJob) -> bytes:
    return compression.decompress(attributes & CODEC_MASK, buf[pos + HEADER_SIZE:pos + size],
                                  job.max_uncompressed)


def _horizon_passed(buf: memoryview, pos: int, attributes: int, now_ms: int) -> bool:
    """A batch's delete horizon (KIP-534: baseTimestamp with attribute bit 6) is past."""
    if not attributes & 0x40:
        return False
    base_timestamp = int.from_bytes(bytes(buf[pos + 27:pos + 35]), "big", signed=True)
    return base_timestamp <= now_ms


def _dedupe(txns: list[AbortedTxn]) -> list[AbortedTxn]:
    out: list[AbortedTxn] = []
    for t in sorted(txns, key=lambda t: t.last_offset):
        if not out or t.last_offset > out[-1].last_offset:
            out.append(t)
    return out


def _pwritev_all(fd: int, buffers: list[memoryview], position: int) -> int:
    """Write the buffers back to back at position (IOV_MAX at a time, short writes
    resumed); the bytes written."""
    total = 0
    pending = [b for b in buffers if len(b)]
    while pending:
        batch = pending[:1024]
        n = os.pwritev(fd, batch, position + total)
        total += n
        while n and pending:  # drop what was written, cut into a partly written buffer
            if n >= len(pending[0]):
                n -= len(pending.pop(0))
            else:
                pending[0] = pending[0][n:]
                n = 0
    return total
