"""LogLoader: open a partition directory into a Log, recovering it when needed.

After a clean shutdown (the log dir's .kafka_cleanshutdown marker was present) the
checkpoints are trusted: every segment's .log is opened, but only the last
segment's indexes are read (sanity-checked, then a short header walk past the last
offset index entry finds the log end). Other segments' indexes open lazily and are
sanity-checked then; a bad one is rebuilt from its .log.

After a crash, every segment from the one holding the recovery point on is scanned
batch by batch in C (CRC-32C, lengths, offsets), its indexes rebuilt; the first
torn or corrupt batch truncates its segment there and every later segment is
deleted. Leftovers of interrupted deletions (*.deleted) and index files without a
.log are removed.

Transaction indexes: every segment recovery scanned gets its .txnindex rebuilt from
the log (as does any segment whose .txnindex is not whole entries, and every segment
after it). A segment holding no batch with a producer id holds no marker, so its index
is empty; otherwise the producer state before the segment (the newest snapshot, then
the producer batches of the log up to the segment) tells where each transaction its
markers abort started. The producer state so rebuilt up to the log end is handed to
the Log; otherwise the Log loads it lazily, trusting the newest snapshot after a clean
shutdown when it sits at the log end (producer_state.py).

Lock: runs on a LogManager recovery thread before the Log is published; it touches
only its own directory.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Callable
from concurrent.futures import Executor

from kbroker._core import segment_seek
from kbroker.common.topic_partition import TopicPartition
from kbroker.storage.file_deleter import FileDeleter
from kbroker.storage.leader_epoch_cache import LeaderEpochFileCache
from kbroker.storage.log import Log
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    file_name,
)
from kbroker.storage.log_segments import LogSegments
from kbroker.storage.producer_snapshot import SNAPSHOT_SUFFIX, snapshot_offsets
from kbroker.storage.producer_state import CompletedTxn, ProducerStateManager, log_producer_batches
from kbroker.storage.transaction_index import ENTRY_SIZE, TXN_INDEX_SUFFIX, AbortedTxn
from kbroker.utils.histogram import Histogram
from kbroker.utils.time import Time

log = logging.getLogger(__name__)


def _base_of(name: str) -> int | None:
    stem = name.split(".", 1)[0]
    return int(stem) if stem.isdigit() else None


class LoadResult:
    """What loading found: for logging and tests."""

    def __init__(self) -> None:
        self.recovered_segments = 0
        self.scanned_bytes = 0
        self.truncated_bytes = 0
        self.deleted_segments = 0
        self.rebuilt_indexes = 0
        self.rebuilt_txn_indexes = 0


class LogLoader:
    def __init__(
        self,
        directory: str,
        topic_partition: TopicPartition,
        topic_id: uuid.UUID | None,
        config: LogConfig,
        time: Time,
        deleter: FileDeleter,
        *,
        had_clean_shutdown: bool,
        recovery_point: int,
        log_start_offset: int,
        flush_executor: Executor | None = None,
        flush_times_ms: Histogram | None = None,
        on_checkpoint_needed: Callable[[Log], None] | None = None,
        on_io_error: Callable[[str, BaseException], None] | None = None,
    ) -> None:
        self.dir = directory
        self.tp = topic_partition
        self.topic_id = topic_id
        self.config = config
        self.time = time
        self.deleter = deleter
        self.clean = had_clean_shutdown
        self.recovery_point = recovery_point
        self.log_start_offset = log_start_offset
        self.flush_executor = flush_executor
        self.flush_times_ms = flush_times_ms  # each fsync's time (LogManager's histogram)
        self.on_checkpoint_needed = on_checkpoint_needed  # the Log's, from LogManager
        self.on_io_error = on_io_error
        self.result = LoadResult()

    def new_log(self) -> Log:
        """A new, empty partition: nothing to read, one segment whose files appear on first use."""
        segments = LogSegments()
        start = max(self.log_start_offset, 0)
        segments.add(LogSegment(self.dir, start, index_interval_bytes=self.config.index_interval_bytes,
                                max_index_size=self.config.segment_index_bytes,
                                created_ms=self.time.milliseconds()))
        return Log(self.dir, self.tp, self.topic_id, self.config, self.time, segments,
                   log_start_offset=start, recovery_point=start,
                   leader_epoch_cache=LeaderEpochFileCache(self.dir), deleter=self.deleter,
                   flush_executor=self.flush_executor, flush_times_ms=self.flush_times_ms,
                   on_checkpoint_needed=self.on_checkpoint_needed, on_io_error=self.on_io_error,
                   producer_state=ProducerStateManager(self.dir, [], trusted=True))

    def load(self) -> Log:
        os.makedirs(self.dir, exist_ok=True)
        bases = self._clean_directory()
        if not bases:  # created but never written (its .log appears on first use)
            return self.new_log()
        segments = LogSegments()
        now = self.time.milliseconds()
        for base in bases:
            segments.add(LogSegment(self.dir, base, index_interval_bytes=self.config.index_interval_bytes,
                                    max_index_size=self.config.segment_index_bytes, created_ms=now))
        if not len(segments):
            seg = LogSegment(self.dir, max(self.log_start_offset, 0),
                             index_interval_bytes=self.config.index_interval_bytes,
                             max_index_size=self.config.segment_index_bytes, created_ms=now)
            segments.add(seg)
        epoch_cache = LeaderEpochFileCache(self.dir)
        recovered: dict[int, int] = {}  # base offset -> producer batches, of the segments scanned
        if self.clean:
            self._load_clean(segments)
        else:
            recovered = self._recover(segments, epoch_cache)
        leo = segments.active.next_offset
        if leo < self.log_start_offset:
            # recovery cut below the checkpointed log start: start empty there, as Kafka does
            self._start_empty_at(segments, self.log_start_offset)
            epoch_cache.clear()
            leo = self.log_start_offset
        first = segments.first
        assert first is not None
        log_start = min(max(self.log_start_offset, first.base_offset), leo)
        epoch_cache.truncate_from_end(leo)
        epoch_cache.truncate_from_start(log_start)
        recovery_point = min(self.recovery_point, leo) if self.clean else self._recovered_to
        state = self._producer_state(segments, recovered, log_start, leo)
        result = Log(self.dir, self.tp, self.topic_id, self.config, self.time, segments,
                     log_start_offset=log_start, recovery_point=recovery_point,
                     leader_epoch_cache=epoch_cache, deleter=self.deleter,
                     flush_executor=self.flush_executor, flush_times_ms=self.flush_times_ms,
                   on_checkpoint_needed=self.on_checkpoint_needed, on_io_error=self.on_io_error,
                     producer_state=state,
                     aborted_txns=any(os.path.exists(seg.txn_index.path) for seg in segments
                                      if seg.base_offset in self._txn_indexes))
        for seg in segments:  # nothing stays open: the broker's SegmentFileCache reopens on use
            seg.release_files()
        return result

    def _producer_state(self, segments: LogSegments, recovered: dict[int, int], log_start: int,
                        leo: int) -> ProducerStateManager:
        """The Log's producer state: rebuilt to the log end when transaction indexes had to be
        rebuilt from the log, else to be loaded lazily (trusted after a clean shutdown when
        the newest snapshot is at the log end)."""
        snapshots = self._snapshots
        state = ProducerStateManager(self.dir, snapshots, trusted=self.clean and (
            (bool(snapshots) and snapshots[-1] == leo) or (not snapshots and leo == log_start)))
        rebuild_from = min([*recovered, *self._corrupt_txn_indexes(segments)], default=None)
        if rebuild_from is None:
            return state
        loaded = False
        for seg in segments.from_offset(rebuild_from):
            count = recovered.get(seg.base_offset, -1)  # -1: not scanned, walk it
            if count == 0 and not loaded:
                seg.txn_index.reset([])
                continue
            if not loaded:
                state.load(segments, log_start, seg.base_offset)
                loaded = True
            aborted: list[AbortedTxn] = []

            def index(txn: CompletedTxn, lso: int, out: list[AbortedTxn] = aborted) -> None:
                if txn.is_aborted:
                    out.append(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso))

            state.replay(log_producer_batches(segments, seg.base_offset, seg.next_offset), index)
            seg.txn_index.reset(aborted)
            if aborted:
                self._txn_indexes.add(seg.base_offset)
            self.result.rebuilt_txn_indexes += 1
        if loaded:
            state.map_end_offset = leo
        return state

    def _corrupt_txn_indexes(self, segments: LogSegments) -> list[int]:
        """Base offsets of segments whose .txnindex is not a whole number of entries."""
        out = []
        for base in self._txn_indexes:
            seg = segments.get(base)
            if seg is None:
                continue
            try:
                size = os.stat(seg.txn_index.path).st_size
            except FileNotFoundError:
                continue
            if size % ENTRY_SIZE:
                log.warning("%s: rebuilding %s (%d bytes is not whole entries)", self.tp,
                            seg.txn_index.path, size)
                out.append(base)
        return out

    def _start_empty_at(self, segments: LogSegments, offset: int) -> None:
        for seg in list(segments):
            segments.remove(seg.base_offset)
            seg.close_handlers()
            for path in seg.paths():
                if os.path.exists(path):
                    os.unlink(path)
        seg = LogSegment(self.dir, offset, index_interval_bytes=self.config.index_interval_bytes,
                         max_index_size=self.config.segment_index_bytes,
                         created_ms=self.time.milliseconds())
        seg.next_offset = offset
        segments.add(seg)
        self._recovered_to = offset

    def _finish_swaps(self) -> list[str]:
        """Finish or undo what the log cleaner left (Kafka's LogLoader): .cleaned files are
        an unfinished cleaning, removed, and so is any .swap file at or above the lowest
        .cleaned base offset (its group's renames may not be complete). A remaining
        <base>.log.swap is a whole cleaned segment: the segments whose base offsets lie
        within its offsets are the ones it replaces, removed, then its files lose the
        suffix. The directory's names after that."""
        names = os.listdir(self.dir)
        cleaned = [n for n in names if n.endswith(CLEANED_SUFFIX)]
        swaps = [n for n in names if n.endswith(SWAP_SUFFIX)]
        if not cleaned and not swaps:
            return names
        lowest_cleaned = min((b for n in cleaned if (b := _base_of(n)) is not None), default=None)
        for n in cleaned:
            os.unlink(os.path.join(self.dir, n))
        kept = []
        for n in swaps:
            base = _base_of(n)
            if base is None or (lowest_cleaned is not None and base >= lowest_cleaned):
                os.unlink(os.path.join(self.dir, n))
            else:
                kept.append(n)
        logs = sorted(b for n in kept if n.endswith(LOG_SUFFIX + SWAP_SUFFIX)
                      and (b := _base_of(n)) is not None)
        for base in logs:
            path = os.path.join(self.dir, file_name(base, LOG_SUFFIX + SWAP_SUFFIX))
            fd = os.open(path, os.O_RDONLY)
            try:
                count, next_offset, *_ = segment_seek.scan_headers(fd, 0, os.fstat(fd).st_size)
            finally:
                os.close(fd)
            end = next_offset if count else base + 1
            for n in os.listdir(self.dir):
                b = _base_of(n)
                if b is not None and base <= b < end and n.endswith(
                        (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)):
                    os.unlink(os.path.join(self.dir, n))
            log.info("%s: finishing the swap of the cleaned segment %s", self.tp, path)
        for n in kept:
            if _base_of(n) in logs:
                os.rename(os.path.join(self.dir, n), os.path.join(self.dir, n[: -len(SWAP_SUFFIX)]))
            else:  # an index whose .log was already renamed: indexes are rebuilt when needed
                os.unlink(os.path.join(self.dir, n))
        return os.listdir(self.dir)

    def _clean_directory(self) -> list[int]:
        """Remove leftovers; return the base offsets of the .log files."""
        bases = []
        names = self._finish_swaps()
        logs = {n[: -len(LOG_SUFFIX)] for n in names if n.endswith(LOG_SUFFIX)}
        self._txn_indexes: set[int] = set()
        for name in names:
            path = os.path.join(self.dir, name)
            if name.endswith((DELETED_SUFFIX, ".tmp")):
                os.unlink(path)
            elif name.endswith(LOG_SUFFIX) and name[: -len(LOG_SUFFIX)].isdigit():
                bases.append(int(name[: -len(LOG_SUFFIX)]))
            elif name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)):
                stem = name.rsplit(".", 1)[0]
                if stem not in logs:
                    os.unlink(path)
                elif name.endswith(TXN_INDEX_SUFFIX) and stem.isdigit():
                    self._txn_indexes.add(int(stem))
        self._snapshots = snapshot_offsets(n for n in names if n.endswith(SNAPSHOT_SUFFIX))
        return sorted(bases)

    def _load_clean(self, segments: LogSegments) -> None:
        all_segments = list(segments)
        for seg, nxt in zip(all_segments, all_segments[1:], strict=False):
            seg.load_closed(nxt.base_offset)
        active = segments.active
        active.load_tail()
        active.resize_indexes(self.config.segment_index_bytes)
        self._recovered_to = active.next_offset

    def _recover(self, segments: LogSegments, epoch_cache: LeaderEpochFileCache) -> dict[int, int]:
        """Scan the segments from the recovery point on; their base offsets -> how many
        batches with a producer id each holds."""
        all_segments = list(segments)
        start = segments.floor(self.recovery_point) or all_segments[0]
        expected = -1
        recovered: dict[int, int] = {}
        for i, seg in enumerate(all_segments):
            if seg.base_offset < start.base_offset:
                seg.load_closed(all_segments[i + 1].base_offset)
                continue
            self.result.scanned_bytes += seg.size
            truncated, epochs, producer_batches = seg.recover(expected_next_offset=expected)
            recovered[seg.base_offset] = producer_batches
            self.result.recovered_segments += 1
            for epoch, offset in epochs:
                epoch_cache.assign(epoch, offset)
            expected = seg.next_offset if seg.size else expected
            if truncated:
                self.result.truncated_bytes += truncated
                log.warning("%s: truncated %d corrupt bytes from %s", self.tp, truncated, seg.log_path)
                for later in all_segments[i + 1:]:
                    segments.remove(later.base_offset)
                    self._txn_indexes.discard(later.base_offset)
                    later.close_handlers()
                    for path in later.paths():
                        try:
                            os.unlink(path)
                        except FileNotFoundError:
                            pass
                    self.result.deleted_segments += 1
                break
        # an empty trailing segment whose base is below its predecessor's end is stale
        active = segments.active
        if active.size == 0 and len(segments) > 1:
            prev = list(segments)[-2]
            if prev.next_offset > active.base_offset:
                segments.remove(active.base_offset)
                recovered.pop(active.base_offset, None)
                active.close_handlers()
                for path in active.paths():
                    os.unlink(path) if os.path.exists(path) else None
        segments.active.resize_indexes(self.config.segment_index_bytes)
        self._recovered_to = segments.active.next_offset
        return recovered
