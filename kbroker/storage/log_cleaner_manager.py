"""LogCleanerManager: which compacted log to clean next, and how far each was cleaned
(Kafka's LogCleanerManager).

On disk, per log dir, `cleaner-offset-checkpoint` (Kafka's checkpoint format): for each
compacted log, the first offset the cleaner has not yet seen (its first dirty offset).
Everything below it was cleaned against a map that held its keys' latest offsets.

A log's range (Kafka's cleanableOffsets): the first dirty offset is its checkpoint (the
log start offset if missing, below the log start or beyond the log end); the first
uncleanable offset is the lowest of the last stable offset (no open transaction is
cleaned), the active segment's base offset (the active segment is never cleaned) and,
with min.compaction.lag.ms, the base offset of the first inactive segment holding a
record younger than that. The dirty ratio is the bytes of [first dirty, first uncleanable)
over the bytes of [log start, first uncleanable). The filthiest log whose ratio exceeds
min.cleanable.dirty.ratio is cleaned next, or any with dirty bytes whose first dirty
record is older than max.compaction.lag.ms.

Lock: the broker's event-loop thread selects and marks logs; the checkpoint files are
written on a cleaner thread, under `_lock`, each with the whole dict of its dir, in order.
Invariant: a log is in `in_progress` while a cleaning of it runs; it is cleaned by at
most one thread.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass

from kbroker.common.topic_partition import TopicPartition
from kbroker.records.batch_header import HEADER_SIZE, BatchHeader
from kbroker.storage.checkpoints import OffsetCheckpointFile
from kbroker.storage.log import Log

log = logging.getLogger(__name__)

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"


@dataclass
class LogToClean:
    """A compacted log's cleanable range and its dirty ratio (Kafka's LogToClean)."""

    topic_partition: TopicPartition
    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    needs_compaction_now: bool

    @property
    def cleanable_ratio(self) -> float:
        total = self.clean_bytes + self.cleanable_bytes
        return self.cleanable_bytes / total if total else 0.0


class LogCleanerManager:
    def __init__(self, log_dirs: list[str]) -> None:
        self.log_dirs = list(log_dirs)
        self.in_progress: set[TopicPartition] = set()
        self.uncleanable: set[TopicPartition] = set()  # a cleaning failed: left alone
        self._lock = threading.Lock()
        self._checkpoints: dict[str, dict[TopicPartition, int]] = {}
        for d in self.log_dirs:
            try:
                self._checkpoints[d] = OffsetCheckpointFile(os.path.join(d, CLEANER_OFFSET_CHECKPOINT)).read()
            except (ValueError, OSError):
                log.warning("ignoring a malformed %s in %s", CLEANER_OFFSET_CHECKPOINT, d)
                self._checkpoints[d] = {}
        # the dirty ratio of each compacted log at the last selection (observability)
        self.last_ratios: dict[TopicPartition, float] = {}

    # -- checkpoints ------------------------------------------------------------------
    def checkpoint_of(self, log_dir: str, tp: TopicPartition) -> int | None:
        with self._lock:
            return self._checkpoints.get(log_dir, {}).get(tp)

    def update_checkpoint(self, log_dir: str, tp: TopicPartition, offset: int | None) -> None:
        """Set (None: forget) a log's first dirty offset and write its dir's checkpoint."""
        self.update_checkpoints(log_dir, {tp: offset})

    def update_checkpoints(self, log_dir: str, changes: dict[TopicPartition, int | None]) -> None:
        """Several logs' first dirty offsets (None: forget the log), one write of the file."""
        with self._lock:
            offsets = self._checkpoints.setdefault(log_dir, {})
            before = dict(offsets)
            for tp, offset in changes.items():
                if offset is None:
                    offsets.pop(tp, None)
                else:
                    offsets[tp] = offset
            if offsets != before:
                OffsetCheckpointFile(os.path.join(log_dir, CLEANER_OFFSET_CHECKPOINT)).write(dict(offsets))

    # -- selection (event loop) --------------------------------------------------------
    def cleanable(self, tp: TopicPartition, lg: Log, log_dir: str, now_ms: int) -> LogToClean:
        """The log's range and ratio now (see the module docstring)."""
        checkpoint = self.checkpoint_of(log_dir, tp)
        start = lg.log_start_offset
        first_dirty = start if checkpoint is None or checkpoint < start or checkpoint > lg.log_end_offset \
            else checkpoint
        cfg = lg.config
        active = lg.segments.active
        first_uncleanable = min(lg.last_stable_offset, active.base_offset)
        inactive = [s for s in lg.segments if s is not active]
        if cfg.min_compaction_lag_ms > 0:
            for seg in inactive:
                if seg.next_offset <= first_dirty:
                    continue
                if seg.largest_timestamp > now_ms - cfg.min_compaction_lag_ms:
                    first_uncleanable = min(first_uncleanable, seg.base_offset)
                    break
        first_dirty = min(first_dirty, first_uncleanable)
        clean_bytes = cleanable_bytes = 0
        first_dirty_segment = None
        for seg in inactive:
            if seg.base_offset >= first_uncleanable:
                break
            if seg.next_offset <= first_dirty:
                clean_bytes += seg.size
            else:
                cleanable_bytes += seg.size
                if first_dirty_segment is None:
                    first_dirty_segment = seg
        needs_now = False
        if cfg.max_compaction_lag_ms < 2**63 - 1 and first_dirty_segment is not None \
                and cleanable_bytes > 0:
            first_ts = _first_batch_timestamp(first_dirty_segment)
            needs_now = first_ts > 0 and now_ms - first_ts > cfg.max_compaction_lag_ms
        return LogToClean(tp, lg, first_dirty, first_uncleanable, clean_bytes, cleanable_bytes,
                          needs_now)

    def grab_filthiest_log(self, logs: dict[TopicPartition, tuple[Log, str]],
                           now_ms: int) -> tuple[LogToClean, str] | None:
        """The compacted log to clean next, marked in progress (with its log dir); None when
        none needs it."""
        best: tuple[LogToClean, str] | None = None
        ratios = {}
        for tp, (lg, log_dir) in logs.items():
            if not lg.config.compact or lg.closed or tp in self.in_progress or tp in self.uncleanable:
                continue
            ltc = self.cleanable(tp, lg, log_dir, now_ms)
            ratios[tp] = ltc.cleanable_ratio
            if not ((ltc.needs_compaction_now and ltc.cleanable_bytes > 0)
                    or ltc.cleanable_ratio > lg.config.min_cleanable_dirty_ratio):
                continue
            if best is None or ltc.cleanable_ratio > best[0].cleanable_ratio:
                best = (ltc, log_dir)
        self.last_ratios = ratios
        if best is not None:
            self.in_progress.add(best[0].topic_partition)
        return best

    def done_cleaning(self, tp: TopicPartition) -> None:
        self.in_progress.discard(tp)


def _first_batch_timestamp(seg: object) -> int:
    """The max timestamp of a segment's first batch (Kafka's getFirstBatchTimestamp)."""
    try:
        data = os.pread(seg.fd, HEADER_SIZE, 0)  # type: ignore[attr-defined]
    except OSError:
        return -1
    if len(data) < HEADER_SIZE:
        return -1
    return BatchHeader.parse(data).max_timestamp
