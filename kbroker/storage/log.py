"""Log: one partition's log, the narrow interface the broker uses.

append (validate in C through log_validator.py, assign offsets in place, write;
a follower's batches validated in one walk that yields their offsets), read (a FileSlice for
sendfile), offsets (log start, log end, high watermark, last stable), lookup by
timestamp, truncate_to, delete_records, roll, flush, close.

Transactions: appends go through the producer state (producer_state.py), which tracks
the transactions in progress; a marker that aborts one adds it to the transaction
index of the segment it lands in. The last stable offset (LSO) is the first offset of
the oldest transaction not yet decided and replicated, bounded by the high watermark;
read_committed Fetch reads up to it and asks `collect_aborted_transactions` which
aborted transactions overlap what it read.

Lock: the broker's event-loop thread calls every method; there is no lock on the
data path. Two other threads touch a Log: LogManager's FileDeleter thread closes and
unlinks files of segments this Log has already removed, and the optional flush
executor fsyncs segments (after a roll, a flush.messages or a flush.ms flush) and
then raises the recovery point. The recovery point, the truncation count and the
queued fsync, the only state shared across threads, belong to the Log's LogFlusher
(log_flusher.py), under its lock.

Invariants: log_start_offset <= high_watermark <= log_end_offset;
recovery_point <= log_end_offset; the segments' base offsets increase, the last
one is the active segment and log_end_offset is its next offset. Offsets are 64-bit, a
segment's index entries int32: it holds none more than INT32_MAX above its base (an
append that would rolls at its own first offset, which a follower's may be past a gap).

On a single broker the high watermark follows the log end offset after every
append (`auto_high_watermark`); replication will turn that off and drive
update_high_watermark() from follower fetches.
"""

from __future__ import annotations

import errno
import logging
import os
import random
import uuid
from collections.abc import Callable
from concurrent.futures import Executor, Future

from kbroker._core.batch_validation import (
    FollowerBatchesInfo,
    assign_offsets,
    assign_offsets_pieces,
)
from kbroker.common.topic_partition import TopicPartition
from kbroker.records.batch_header import producer_batches_of
from kbroker.storage.errors import (
    InvalidRecordsError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
)
from kbroker.storage.file_deleter import FileDeleter
from kbroker.storage.leader_epoch_cache import LeaderEpochFileCache
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_flusher import LogFlusher
from kbroker.storage.log_segment import CLEANED_SUFFIX, SWAP_SUFFIX, LogSegment
from kbroker.storage.log_segments import LogSegments
from kbroker.storage.log_validator import max_uncompressed, validate_as_follower, validate_as_leader
from kbroker.storage.producer_state import (
    AppendOrigin,
    CompletedTxn,
    Duplicate,
    ProducerStateManager,
)
from kbroker.storage.transaction_index import AbortedTxn
from kbroker.storage.values import FetchDataInfo, LogAppendInfo, LogOffsetMetadata
from kbroker.utils.histogram import Histogram
from kbroker.utils.time import Time

log = logging.getLogger(__name__)

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5


class Log:
    def __init__(
        self,
        directory: str,
        topic_partition: TopicPartition,
        topic_id: uuid.UUID | None,
        config: LogConfig,
        time: Time,
        segments: LogSegments,
        *,
        log_start_offset: int,
        recovery_point: int,
        leader_epoch_cache: LeaderEpochFileCache,
        deleter: FileDeleter,
        flush_executor: Executor | None = None,
        flush_times_ms: Histogram | None = None,
        producer_state: ProducerStateManager | None = None,
        aborted_txns: bool = False,
        on_checkpoint_needed: Callable[[Log], None] | None = None,
        on_io_error: Callable[[str, BaseException], None] | None = None,
    ) -> None:
        self.dir = directory
        self.topic_partition = topic_partition
        self.topic_id = topic_id
        self.config = config
        self.time = time
        self.segments = segments
        self.leader_epoch_cache = leader_epoch_cache
        self._deleter = deleter
        self.log_start_offset = log_start_offset
        self._high_watermark = self.log_end_offset
        self.auto_high_watermark = True
        self.closed = False
        # the recovery point and the fsyncs (the only state shared with another thread)
        self.flusher = LogFlusher(str(topic_partition), directory, segments, leader_epoch_cache, time,
                                  recovery_point, executor=flush_executor, io_failed=self._io_failed,
                                  is_closed=lambda: self.closed, flush_times_ms=flush_times_ms)
        # Called after delete_records moved the log start offset and after a truncation
        # lowered the recovery point: LogManager writes its checkpoints then (as Kafka
        # does), so a crash cannot resurrect deleted records or skip rescanning.
        self.on_checkpoint_needed = on_checkpoint_needed
        # Called (from any thread) with what failed and the OSError: LogManager takes the
        # log dir offline (LogDirFailureChannel).
        self.on_io_error = on_io_error
        # idempotent and transactional producers; loaded lazily (see producer_state.py)
        self.producer_state = producer_state or ProducerStateManager(directory)
        # whether any segment may have a transaction index entry (read_committed Fetch
        # looks for aborted transactions only then)
        self.aborted_txns_possible = aborted_txns
        self.producer_state.on_high_watermark_updated(self._high_watermark)

    def __repr__(self) -> str:
        return (f"Log({self.topic_partition}, log_start_offset={self.log_start_offset}, "
                f"log_end_offset={self.log_end_offset}, segments={len(self.segments)})")

    # -- offsets ----------------------------------------------------------------------
    @property
    def active_segment(self) -> LogSegment:
        return self.segments.active

    @property
    def log_end_offset(self) -> int:
        return self.segments.active.next_offset

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        seg = self.segments.active
        return LogOffsetMetadata(seg.next_offset, seg.base_offset, seg.size)

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        self.update_high_watermark(offset)

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark, clamped to [log_start_offset, log_end_offset]."""
        self._high_watermark = min(max(offset, self.log_start_offset), self.log_end_offset)
        self.producer_state.on_high_watermark_updated(self._high_watermark)
        return self._high_watermark

    def maybe_increment_high_watermark(self, offset: int) -> bool:
        if offset > self._high_watermark:
            self.update_high_watermark(offset)
            return True
        return False

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the oldest transaction not yet decided and replicated, or
        the high watermark when that is lower (or no transaction is open)."""
        state = self.producer_state
        state.ensure_loaded(self)
        first = state.first_unstable_offset
        return first if first is not None and first < self._high_watermark else self._high_watermark

    @property
    def size_in_bytes(self) -> int:
        return self.segments.size_in_bytes

    def update_config(self, config: LogConfig) -> None:
        """Live config change: applies to the next append, roll and retention pass."""
        self.config = config
        self.segments.active.resize_indexes(config.segment_index_bytes)
        for seg in self.segments:
            seg.index_interval_bytes = config.index_interval_bytes

    # -- append -----------------------------------------------------------------------
    def append_as_leader(self, records: bytes | bytearray | memoryview, leader_epoch: int = 0,
                         origin: AppendOrigin = AppendOrigin.CLIENT) -> LogAppendInfo:
        """Validate the payload (every batch, in C), assign offsets and leader epoch in
        place, append. Appends nothing and raises InvalidRecordsError (with the Kafka
        error code) when any batch is invalid, ProducerStateError when the producer
        state refuses a batch. Only a coordinator (origin COORDINATOR) writes control
        batches (transaction markers)."""
        return self._append(records, leader_epoch, assign=True, origin=origin)

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> LogAppendInfo:
        """Append batches whose offsets the leader assigned (CRC still checked)."""
        return self._append(records, -1, assign=False, origin=AppendOrigin.REPLICATION)

    def _append(self, records: bytes | bytearray | memoryview, leader_epoch: int, assign: bool,
                origin: AppendOrigin) -> LogAppendInfo:
        self._check_open()
        cfg = self.config
        view = memoryview(records).cast("B") if not isinstance(records, bytes) else memoryview(records)
        now = self.time.milliseconds()
        if assign:
            view, info = validate_as_leader(self.topic_partition, view, cfg, now,
                                            from_client=origin is AppendOrigin.CLIENT)
        else:
            info = validate_as_follower(view, cfg)
        if info.batch_count == 0:
            return LogAppendInfo(-1, -1, -1, -1, -1, self.log_start_offset, 0, 0)
        if info.valid_bytes > cfg.segment_bytes:
            raise RecordListTooLargeError(
                f"payload of {info.valid_bytes} bytes exceeds segment.bytes {cfg.segment_bytes}")
        log_append_time = now if (assign and cfg.log_append_time) else -1
        producer_append = None
        if info.producer_batches:  # idempotent or transactional: the producer state checks first
            prepared = self.producer_state.prepare(
                producer_batches_of(view), self.log_end_offset if assign else None, origin, self)
            if isinstance(prepared, Duplicate):
                return LogAppendInfo(prepared.first_offset, prepared.last_offset, -1, -1,
                                     -1, self.log_start_offset, 0, 0)
            producer_append = prepared
        buf: memoryview | bytearray | list[bytes | memoryview]
        if not assign:
            buf = view
            assert isinstance(info, FollowerBatchesInfo)
            first, last = self._follower_offsets(view, info)
        elif view.readonly and log_append_time < 0 and info.batch_count <= 256:
            # read-only payload: write patched 16-byte heads + the untouched rest (pwritev)
            first = self.log_end_offset
            buf, last = assign_offsets_pieces(view, first, leader_epoch)
        else:
            first = self.log_end_offset
            buf = view if not view.readonly else bytearray(view)
            last = assign_offsets(buf, first, leader_epoch, log_append_time)
        if log_append_time >= 0:
            max_ts, off_max = log_append_time, first
        else:
            max_ts, off_max = info.max_timestamp, first + info.offset_of_max_timestamp
        try:
            segment = self._maybe_roll(info.valid_bytes, first, last, now)
            segment.append(last, max_ts, off_max, buf)
        except (OSError, KafkaStorageError) as e:
            raise self._io_failed(f"appending to {self.topic_partition}", e) from e
        if assign:
            self.leader_epoch_cache.assign(leader_epoch, first)
        if producer_append is not None:
            self._complete_transactions(segment, self.producer_state.update(producer_append, last + 1))
        if self.auto_high_watermark:
            self.update_high_watermark(self.log_end_offset)
        flushed = self.flusher.appended(info.record_count, cfg.flush_messages)
        return LogAppendInfo(
            first_offset=first, last_offset=last, max_timestamp=max_ts,
            offset_of_max_timestamp=off_max, log_append_time=log_append_time,
            log_start_offset=self.log_start_offset, record_count=info.record_count,
            valid_bytes=info.valid_bytes, batch_count=info.batch_count, codecs=info.codecs,
            flushed=flushed,
        )

    def _complete_transactions(self, segment: LogSegment, completed: list[CompletedTxn]) -> None:
        """Markers ended these transactions: an aborted one goes to the transaction index of
        the segment holding its marker, with the LSO right after it (as Kafka)."""
        state = self.producer_state
        for txn in completed:
            if txn.is_aborted:
                lso = state.last_stable_offset_after(txn)
                segment.txn_index.append(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso))
                self.aborted_txns_possible = True
            state.complete_txn(txn)

    def read_upper_bound_offset(self, data: FetchDataInfo) -> int:
        """An offset above every offset a read's slice holds, from the offset index (the
        next segment's base or the log end when the index cannot tell)."""
        meta = data.fetch_offset_metadata
        segment = self.segments.get(meta.segment_base_offset) if meta.on_segment else None
        if segment is None or data.records is None:
            return self.log_end_offset
        upper = segment.fetch_upper_bound_offset(meta.relative_position_in_segment, data.size)
        if upper is None:
            nxt = self.segments.higher(segment.base_offset)
            upper = nxt.base_offset if nxt is not None else self.log_end_offset
        return upper

    def collect_aborted_transactions(self, fetch_offset: int, data: FetchDataInfo) -> list[AbortedTxn]:
        """The aborted transactions overlapping a read_committed read (Kafka's
        addAbortedTransactions): from the segment read on, until an entry's LSO shows that
        no later segment can hold one that started within the read."""
        meta = data.fetch_offset_metadata
        if not self.aborted_txns_possible or data.records is None or not meta.on_segment:
            return []
        segment = self.segments.get(meta.segment_base_offset)
        if segment is None:
            return []
        upper = self.read_upper_bound_offset(data)
        out: list[AbortedTxn] = []
        for seg in self.segments.from_offset(segment.base_offset):
            found, complete = seg.txn_index.collect_aborted_txns(fetch_offset, upper)
            out += found
            if complete:
                break
        return out

    @property
    def _max_uncompressed(self) -> int:
        """The most a batch of this log may expand to when the broker inflates it."""
        return max_uncompressed(self.config)

    def _follower_offsets(self, view: memoryview, info: FollowerBatchesInfo) -> tuple[int, int]:
        """First and last offset of a follower's payload (validated in one walk, with its
        offsets: validate_as_follower); refused below the log end or out of order."""
        first = int.from_bytes(view[0:8], "big", signed=True)
        last = info.next_offset - 1
        if first < self.log_end_offset or info.in_order_bytes != len(view):
            raise InvalidRecordsError(f"follower append at {first} below log end {self.log_end_offset}")
        for epoch, start in info.epoch_starts:
            self.leader_epoch_cache.assign(epoch, start)
        return first, last

    def _maybe_roll(self, size: int, first_offset: int, max_offset: int, now: int) -> LogSegment:
        seg = self.segments.active
        cfg = self.config
        # a compacted log rolls by max.compaction.lag.ms at the latest: the active segment
        # is never cleaned (Kafka's LogConfig.maxSegmentMs)
        segment_ms = min(cfg.segment_ms, cfg.max_compaction_lag_ms) if cfg.compact else cfg.segment_ms
        if seg.roll_jitter_ms < 0:  # drawn once per segment, as Kafka's randomSegmentJitter
            jitter = min(cfg.segment_jitter_ms, segment_ms)
            seg.roll_jitter_ms = random.randrange(jitter) if jitter > 0 else 0
        if seg.should_roll(size, max_offset, now, cfg.segment_bytes, segment_ms - seg.roll_jitter_ms):
            self.roll(first_offset)
        return self.segments.active

    def roll(self, expected_next_offset: int = 0) -> None:
        """A new active segment at the log end offset or expected_next_offset, the higher
        (Kafka's roll(expectedNextOffset)), if the active one has data; else it is replaced."""
        self._check_open()
        old = self.segments.active
        new_base = max(expected_next_offset, self.log_end_offset)
        if old.size == 0:
            if new_base > old.base_offset:
                self.segments.remove(old.base_offset)
                self._delete_segment_files([old])
                self._add_segment(new_base)
            return
        old.on_become_inactive()
        snapshot = self.producer_state.snapshot(new_base)
        self._add_segment(new_base)
        # with a flush thread, the rolled segment and the producer snapshot are fsynced off the loop
        self.flusher.write_in_background(snapshot.write, "producer snapshot")
        if self.flusher.background:
            self.flusher.flush_async()

    # -- read -------------------------------------------------------------------------
    def read(self, fetch_offset: int, max_bytes: int, max_offset: int | None = None,
             min_one_message: bool = True, max_records: int = 0) -> FetchDataInfo:
        """A FileSlice starting with the batch that holds fetch_offset, bounded by max_offset
        (default: the high watermark) and, with max_records > 0, ending at a batch boundary
        after about that many records (LogSegment.read). OffsetOutOfRangeError outside
        [log start, log end]."""
        self._check_open()
        leo = self.log_end_offset
        if fetch_offset < self.log_start_offset or fetch_offset > leo:
            raise OffsetOutOfRangeError(
                f"offset {fetch_offset} out of range [{self.log_start_offset}, {leo}] for {self.topic_partition}")
        bound = self._high_watermark if max_offset is None else min(max_offset, leo)
        empty = FetchDataInfo(LogOffsetMetadata(fetch_offset), None)
        if fetch_offset >= bound:
            return empty
        bound_meta = self.offset_metadata(bound)
        for seg in self.segments.from_offset(fetch_offset):
            if seg.base_offset > bound_meta.segment_base_offset >= 0:
                break
            max_position = (bound_meta.relative_position_in_segment
                            if seg.base_offset == bound_meta.segment_base_offset else seg.size)
            got = seg.read(fetch_offset, max_bytes, max_position, min_one_message, max_records)
            if got is None:
                continue
            position, slice_ = got
            return FetchDataInfo(LogOffsetMetadata(fetch_offset, seg.base_offset, position),
                                 slice_ if slice_.size else None)
        return empty

    def offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """Segment and position of the batch holding `offset` (the log end: after the last)."""
        if offset >= self.log_end_offset:
            return self.log_end_offset_metadata
        for seg in self.segments.from_offset(offset):
            loc = seg.translate_offset(offset)
            if loc is not None:
                return LogOffsetMetadata(offset, seg.base_offset, loc.position)
        return self.log_end_offset_metadata

    def fetch_offset_by_timestamp(self, timestamp: int) -> tuple[int, int, int] | None:
        """ListOffsets: (offset, timestamp, leader_epoch) or None. -1 latest, -2 earliest,
        -3 max timestamp (KIP-734), else the first offset with timestamp >= the target."""
        self._check_open()
        cache = self.leader_epoch_cache
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return self.log_start_offset, -1, cache.epoch_for_offset(self.log_start_offset)
        if timestamp in (LATEST_TIMESTAMP, LATEST_TIERED_TIMESTAMP):
            return self.log_end_offset, -1, cache.latest_epoch
        if timestamp == MAX_TIMESTAMP:
            return self._max_timestamp_offset()
        if timestamp < 0:
            return None
        for seg in self.segments:
            if seg.next_offset <= self.log_start_offset or seg.largest_timestamp < timestamp:
                continue
            hit = seg.find_offset_by_timestamp(timestamp, self.log_start_offset)
            if hit is not None:
                return hit[0], hit[1], cache.epoch_for_offset(hit[0])
        return None

    def _max_timestamp_offset(self) -> tuple[int, int, int] | None:
        best: LogSegment | None = None
        for seg in self.segments:
            if seg.next_offset <= self.log_start_offset or seg.size == 0:
                continue
            if best is None or seg.largest_timestamp > best.largest_timestamp:
                best = seg
        if best is None or best.largest_timestamp < 0:
            return None
        hit = best.find_offset_by_timestamp(best.largest_timestamp, self.log_start_offset)
        if hit is None:
            return None
        return hit[0], hit[1], self.leader_epoch_cache.epoch_for_offset(hit[0])

    @property
    def latest_epoch(self) -> int:
        return self.leader_epoch_cache.latest_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.leader_epoch_cache.end_offset_for(epoch, self.log_end_offset)

    # -- truncation and deletion -------------------------------------------------------
    def truncate_to(self, offset: int) -> None:
        """Remove everything from the batch holding `offset` on (the log end becomes that
        batch's base offset, or the log start offset if that is higher). Below the log
        start: truncate fully and start at offset."""
        self._check_open()
        if offset >= self.log_end_offset:
            return
        if offset < self.log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return
        doomed = [s for s in self.segments if s.base_offset > offset]
        if len(doomed) == len(self.segments):  # keep one: it is the active segment
            doomed = doomed[1:]
        for seg in doomed:
            self.segments.remove(seg.base_offset)
        self._delete_segment_files(doomed)
        self.segments.active.truncate_to(offset)
        if self.log_end_offset < self.log_start_offset:
            # the batch holding `offset` straddled the log start: never move it back
            self.truncate_fully_and_start_at(self.log_start_offset)
            return
        self._after_truncation()

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        self._check_open()
        doomed = list(self.segments)
        for seg in doomed:
            self.segments.remove(seg.base_offset)
        self._delete_segment_files(doomed)
        seg = self._add_segment(new_offset)
        if seg.size:
            os.ftruncate(seg.fd, 0)
            seg.size = 0
        self.leader_epoch_cache.clear()
        self.log_start_offset = new_offset
        self._after_truncation()

    def _add_segment(self, base_offset: int) -> LogSegment:
        """A new active segment at base_offset."""
        seg = LogSegment(self.dir, base_offset, index_interval_bytes=self.config.index_interval_bytes,
                         max_index_size=self.config.segment_index_bytes, created_ms=self.time.milliseconds())
        seg.next_offset = base_offset
        self.segments.add(seg)
        return seg

    def _after_truncation(self) -> None:
        leo = self.log_end_offset
        self.flusher.truncated()
        self._high_watermark = min(self._high_watermark, leo)
        if self.log_start_offset > leo:
            self.log_start_offset = leo
        self._high_watermark = max(self._high_watermark, self.log_start_offset)
        self.leader_epoch_cache.truncate_from_end(leo)
        self.leader_epoch_cache.flush()
        self.producer_state.invalidate(leo)
        self._checkpoint_needed()

    def delete_records(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to `offset` (<= high watermark; -1:
        the high watermark) and delete the segments wholly below it. Returns the new log
        start offset."""
        self._check_open()
        if offset == -1:
            offset = self._high_watermark
        if offset > self._high_watermark or offset < 0:
            raise OffsetOutOfRangeError(
                f"cannot delete records below {offset}: high watermark is {self._high_watermark}")
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self.leader_epoch_cache.truncate_from_start(offset)
            self.delete_segments(lambda seg, next_base: next_base <= self.log_start_offset)
            self._checkpoint_needed()
        return self.log_start_offset

    def delete_segments(self, predicate: Callable[[LogSegment, int], bool]) -> int:
        """Delete the oldest non-active segments while predicate(segment, next base offset)
        holds and they lie wholly below the high watermark. Returns how many."""
        doomed = []
        all_segments = list(self.segments)
        for seg, nxt in zip(all_segments, all_segments[1:], strict=False):
            if nxt.base_offset > self._high_watermark or not predicate(seg, nxt.base_offset):
                break
            doomed.append(seg)
        if not doomed:
            return 0
        for seg in doomed:
            self.segments.remove(seg.base_offset)
        first = self.segments.first
        assert first is not None
        if first.base_offset > self.log_start_offset:
            self.log_start_offset = first.base_offset
            self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        self._delete_segment_files(doomed)
        return len(doomed)

    # -- the log cleaner's swap (Kafka's replaceSegments), in three steps the cleaner spreads
    # over turns of the event loop, each leaving the log readable: begin_replace (.cleaned
    # -> .swap; the new segment in the log, the old ones out), retire_segments (the old
    # ones' files renamed .deleted, removed after file.delete.delay.ms; reads in flight
    # keep their descriptors), finish_replace (.swap -> no suffix). A crash anywhere leaves
    # what LogLoader finishes (a whole .swap: the old segments in its range go) or undoes
    # (.cleaned files).
    def begin_replace(self, new: LogSegment, old: list[LogSegment], truncations: int,
                      crash: Callable[[str], None] | None = None) -> bool:
        """The first step; False, and the new files removed, when the log changed meanwhile
        (closed, truncated, an old segment deleted; `truncations`: the count when the
        cleaning began)."""
        current = [self.segments.get(seg.base_offset) for seg in old]
        if self.closed or truncations != self.truncations or old[-1] is self.segments.active \
                or any(c is not o for c, o in zip(current, old, strict=True)):
            for path in new.paths():
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass
            return False
        step = crash or (lambda _name: None)
        try:
            new.change_suffix(CLEANED_SUFFIX, SWAP_SUFFIX, lambda: step("swap-log"))
        except OSError as e:
            raise self._io_failed(f"swapping cleaned segments of {self.topic_partition}", e) from e
        step("swap")
        for seg in old:
            self.segments.remove(seg.base_offset)
        self.segments.add(new)
        if new.txn_index.entries:
            self.aborted_txns_possible = True
        return True

    def retire_segments(self, old: list[LogSegment]) -> None:
        """Rename replaced segments' files for deletion (they are out of the log already)."""
        try:
            self._delete_segment_files(old)
        except KafkaStorageError as e:
            if not self.closed:  # a deleted log's dir went away with its files
                raise self._io_failed(f"retiring cleaned segments of {self.topic_partition}", e) from e

    def finish_replace(self, new: LogSegment, crash: Callable[[str], None] | None = None) -> None:
        """The new segment's files lose the .swap suffix (unless the segment left the log
        meanwhile: a truncation or deletion renamed them already)."""
        if self.closed or self.segments.get(new.base_offset) is not new:
            return
        step = crash or (lambda _name: None)
        try:
            new.change_suffix(SWAP_SUFFIX, "", lambda: step("renamed-log"))
        except OSError as e:
            raise self._io_failed(f"swapping cleaned segments of {self.topic_partition}", e) from e

    def _checkpoint_needed(self) -> None:
        if self.on_checkpoint_needed is not None:
            self.on_checkpoint_needed(self)

    def _delete_segment_files(self, doomed: list[LogSegment]) -> None:
        for seg in doomed:
            try:
                paths = seg.rename_for_deletion()
            except OSError as e:
                raise KafkaStorageError(f"cannot delete segment {seg}: {e}") from e
            self._deleter.schedule_segment(self.config.file_delete_delay_ms, seg.close_handlers, paths)

    # -- retention --------------------------------------------------------------------
    def delete_old_segments(self) -> int:
        """One retention pass (cleanup.policy=delete): retention.ms, then retention.bytes,
        then segments below the log start offset. Never the active segment."""
        if not self.config.delete:
            return self.delete_segments(lambda seg, nb: nb <= self.log_start_offset)
        return (self._delete_retention_ms() + self._delete_retention_bytes()
                + self.delete_segments(lambda seg, nb: nb <= self.log_start_offset))

    def _delete_retention_ms(self) -> int:
        retention = self.config.retention_ms
        if retention < 0:
            return 0
        now = self.time.milliseconds()
        return self.delete_segments(lambda seg, nb: now - self._segment_time(seg) > retention)

    def _segment_time(self, seg: LogSegment) -> int:
        ts = seg.largest_timestamp
        if ts >= 0:
            return ts
        try:
            return int(os.fstat(seg.fd).st_mtime * 1000)
        except OSError:
            return self.time.milliseconds()

    def _delete_retention_bytes(self) -> int:
        limit = self.config.retention_bytes
        if limit < 0:
            return 0
        excess = [self.size_in_bytes - limit]

        def over(seg: LogSegment, _next_base: int) -> bool:
            if excess[0] - seg.size >= 0:
                excess[0] -= seg.size
                return True
            return False

        return self.delete_segments(over)

    # -- durability (LogFlusher) ------------------------------------------------------
    @property
    def recovery_point(self) -> int:
        return self.flusher.recovery_point

    @property
    def truncations(self) -> int:
        """How many times the log was truncated (a cleaning begun before one is dropped)."""
        return self.flusher.truncations

    @property
    def last_flush_ms(self) -> int:
        return self.flusher.last_flush_ms

    def flush(self, up_to: int | None = None) -> None:
        """fsync the segments holding offsets from the recovery point to `up_to` (default:
        the log end) and move the recovery point there."""
        self._check_open()
        self.flusher.flush(up_to)

    def mark_flushed(self, offset: int) -> None:
        """Everything below `offset` is on disk (the caller synced the filesystem)."""
        self.flusher.mark_flushed(offset)

    def flush_async(self) -> Future[None] | None:
        """fsync up to the log end on the flush thread (LogFlusher.flush_async)."""
        self._check_open()
        return self.flusher.flush_async()

    def close(self, *, sync: bool = True) -> None:
        """Write the leader-epoch checkpoint and a producer snapshot, close the segments.
        sync=False leaves the fsyncs to the caller (LogManager.shutdown syncs each log dir's
        filesystem once for all its logs)."""
        if self.closed:
            return
        epochs = self.leader_epoch_cache.take_checkpoint()
        if epochs is not None:
            epochs(sync=sync)
        self.producer_state.close_snapshot(self.log_start_offset, self.log_end_offset).write(sync=sync)
        for seg in self.segments:
            seg.close()
        self.closed = True

    def abandon(self) -> None:
        """Close file descriptors only: no trimming, no checkpoint (a crash, in tests)."""
        for seg in self.segments:
            seg.close_handlers()
        self.closed = True

    def _io_failed(self, what: str, error: BaseException) -> KafkaStorageError:
        """An I/O error: report it (the dir goes offline) and return the error to raise.
        Running out of descriptors or memory is the process's trouble, not the disk's:
        the request fails, the dir stays online."""
        code = getattr(error, "errno", None) or getattr(error.__cause__, "errno", None)
        if self.on_io_error is not None and code not in _PROCESS_LIMITS:
            self.on_io_error(what, error)
        return KafkaStorageError(f"{what} failed: {error}")

    def _check_open(self) -> None:
        if self.closed:
            raise KafkaStorageError(f"log {self.topic_partition} is closed")


_PROCESS_LIMITS = (errno.EMFILE, errno.ENFILE, errno.ENOMEM)

