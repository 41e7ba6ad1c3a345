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

Lock: runs on a LogManager recovery thread before the Log is published; it touches
only its own directory.
"""

from __future__ import annotations

import logging
import os
import uuid
from concurrent.futures import Executor

from kbroker.common.topic_partition import TopicPartition
from kbroker.storage.file_deleter import FileDeleter
from kbroker.storage.leader_epoch_cache import LeaderEpochFileCache
from kbroker.storage.log import Log
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_segment import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
)
from kbroker.storage.log_segments import LogSegments
from kbroker.utils.time import Time

log = logging.getLogger(__name__)


class LoadResult:
    """What loading found: for logging and tests."""

    def __init__(self) -> None:
        self.recovered_segments = 0
        self.scanned_bytes = 0
        self.truncated_bytes = 0
        self.deleted_segments = 0
        self.rebuilt_indexes = 0


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
                   flush_executor=self.flush_executor)

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
        if self.clean:
            self._load_clean(segments)
        else:
            self._recover(segments, epoch_cache)
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
        result = Log(self.dir, self.tp, self.topic_id, self.config, self.time, segments,
                     log_start_offset=log_start, recovery_point=recovery_point,
                     leader_epoch_cache=epoch_cache, deleter=self.deleter,
                     flush_executor=self.flush_executor)
        for seg in segments:  # nothing stays open: the broker's SegmentFileCache reopens on use
            seg.release_files()
        return result

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

    def _clean_directory(self) -> list[int]:
        """Remove leftovers; return the base offsets of the .log files."""
        bases = []
        names = os.listdir(self.dir)
        logs = {n[: -len(LOG_SUFFIX)] for n in names if n.endswith(LOG_SUFFIX)}
        for name in names:
            path = os.path.join(self.dir, name)
            if name.endswith((DELETED_SUFFIX, ".tmp")):
                os.unlink(path)
            elif name.endswith(LOG_SUFFIX) and name[: -len(LOG_SUFFIX)].isdigit():
                bases.append(int(name[: -len(LOG_SUFFIX)]))
            elif name.endswith((INDEX_SUFFIX, TIME_INDEX_SUFFIX)):
                stem = name.rsplit(".", 1)[0]
                if stem not in logs:
                    os.unlink(path)
        return sorted(bases)

    def _load_clean(self, segments: LogSegments) -> None:
        all_segments = list(segments)
        for seg, nxt in zip(all_segments, all_segments[1:], strict=False):
            seg.load_closed(nxt.base_offset)
        active = segments.active
        active.load_tail()
        active.resize_indexes(self.config.segment_index_bytes)
        self._recovered_to = active.next_offset

    def _recover(self, segments: LogSegments, epoch_cache: LeaderEpochFileCache) -> None:
        all_segments = list(segments)
        start = segments.floor(self.recovery_point) or all_segments[0]
        expected = -1
        for i, seg in enumerate(all_segments):
            if seg.base_offset < start.base_offset:
                seg.load_closed(all_segments[i + 1].base_offset)
                continue
            self.result.scanned_bytes += seg.size
            truncated, epochs = seg.recover(expected_next_offset=expected)
            self.result.recovered_segments += 1
            for epoch, offset in epochs:
                epoch_cache.assign(epoch, offset)
            expected = seg.next_offset if seg.size else expected
            if truncated:
                self.result.truncated_bytes += truncated
                log.warning("%s: truncated %d corrupt bytes from %s", self.tp, truncated, seg.log_path)
                for later in all_segments[i + 1:]:
                    segments.remove(later.base_offset)
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
                active.close_handlers()
                for path in active.paths():
                    os.unlink(path) if os.path.exists(path) else None
        segments.active.resize_indexes(self.config.segment_index_bytes)
        self._recovered_to = segments.active.next_offset
