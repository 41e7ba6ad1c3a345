"""LogFlusher: how far one partition's log is known to be on disk, and the fsyncs that
move it (Kafka keeps this in LocalLog: recoveryPoint, flush, markFlushed).

The recovery point is the offset below which every byte of the log has been fsynced:
recovery after a crash scans from it (LogLoader). It moves up after a flush (here on
the event loop, or on the flush executor's thread), and down with a truncation, which
also counts itself (`truncations`) so that a fsync filled before a truncation does not
raise the recovery point past data that is gone, and so that a cleaning begun before
one is dropped (log_cleaner.py).

Lock: `_lock` guards `_recovery_point`, `_truncations` and the queued flush job, the
only state shared across threads (the event loop's and the flush executor's). The
rest (`unflushed_messages`, `last_flush_ms`) is the event loop's alone. A flush job
holds references to the segment files it fsyncs, so a segment deleted meanwhile keeps
its descriptor until then.

Invariant: recovery_point <= the log end offset (the active segment's next offset).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from time import monotonic_ns as _monotonic_ns

from kbroker.records.file_slice import SegmentFile
from kbroker.storage.errors import KafkaStorageError
from kbroker.storage.leader_epoch_cache import LeaderEpochFileCache
from kbroker.storage.log_segment import LogSegment
from kbroker.storage.log_segments import LogSegments
from kbroker.utils.histogram import Histogram
from kbroker.utils.time import Time


class LogFlusher:
    """The durability of one Log: its recovery point and its fsyncs. The Log owns it and
    calls it after checking it is open; `io_failed` is the Log's I/O error handler (the
    log dir goes offline) and returns the error to raise."""

    def __init__(
        self,
        name: str,
        directory: str,
        segments: LogSegments,
        leader_epoch_cache: LeaderEpochFileCache,
        time: Time,
        recovery_point: int,
        *,
        executor: Executor | None,
        io_failed: Callable[[str, BaseException], KafkaStorageError],
        is_closed: Callable[[], bool],
        flush_times_ms: Histogram | None = None,
    ) -> None:
        self._name = name  # the partition, for messages
        self._dir = directory
        self._segments = segments
        self._epochs = leader_epoch_cache
        self._time = time
        self._executor = executor
        self._io_failed = io_failed
        self._is_closed = is_closed
        self._lock = threading.Lock()
        self._recovery_point = min(recovery_point, self._log_end_offset)
        self._truncations = 0
        self._queued: _FlushJob | None = None  # under _lock
        self.unflushed_messages = 0
        self.last_flush_ms = time.milliseconds()
        self.flush_times_ms = flush_times_ms  # LogManager's: each fsync's time

    @property
    def _log_end_offset(self) -> int:
        return self._segments.active.next_offset

    @property
    def recovery_point(self) -> int:
        with self._lock:
            return self._recovery_point

    @property
    def truncations(self) -> int:
        """How many times the log was truncated (a cleaning begun before one is dropped)."""
        with self._lock:
            return self._truncations

    @property
    def background(self) -> bool:
        """Whether fsyncs run on a flush thread (else on the caller's)."""
        return self._executor is not None

    def appended(self, record_count: int, flush_messages: int) -> Future[None] | None:
        """Count an append's records; at flush.messages unflushed, flush (flush_async)."""
        self.unflushed_messages += record_count
        return self.flush_async() if self.unflushed_messages >= flush_messages else None

    def truncated(self) -> None:
        """The log was truncated: the recovery point comes down to the new log end."""
        leo = self._log_end_offset
        with self._lock:
            self._truncations += 1
            self._recovery_point = min(self._recovery_point, leo)

    def flush(self, up_to: int | None = None) -> None:
        """fsync the segments holding offsets from the recovery point to `up_to` (default:
        the log end), here, and move the recovery point there."""
        leo = self._log_end_offset
        target = leo if up_to is None else min(up_to, leo)
        start = self.recovery_point
        if target <= start and self.unflushed_messages == 0:
            return
        began = _monotonic_ns()
        try:
            for seg in self._segments.from_offset(start):
                if seg.base_offset >= target and seg is not self._segments.active:
                    break
                seg.flush()
        except OSError as e:
            raise self._io_failed(f"flushing {self._name}", e) from e
        self._flushed(began)
        self._epochs.flush()
        with self._lock:
            self._recovery_point = max(self._recovery_point, target)
        self.unflushed_messages = 0
        self.last_flush_ms = self._time.milliseconds()

    def mark_flushed(self, offset: int) -> None:
        """Everything below `offset` is on disk (the caller synced the filesystem)."""
        with self._lock:
            self._recovery_point = max(self._recovery_point, min(offset, self._log_end_offset))

    def flush_async(self) -> Future[None] | None:
        """fsync everything up to the current log end on the flush thread; the recovery
        point moves there once the fsync is done. Returns the flush's future (None when
        there was nothing to flush, or there is no flush thread and it flushed here).

        The fsync never runs on the event loop, so it stalls no other connection; a
        Produce that must wait for it (flush.messages) awaits the future. A flush queued
        but not yet started takes in later appends instead of queueing another fsync."""
        if self._executor is None:
            self.flush()
            return None
        target = self._log_end_offset
        if target <= self.recovery_point and self.unflushed_messages == 0:
            return None
        epochs = self._epochs.take_checkpoint()  # only when epochs changed
        if epochs is not None:
            self._executor.submit(self._logged, epochs, "leader-epoch-checkpoint")  # in order
        files = [(seg.open_file(), seg) for seg in self._segments.from_offset(self.recovery_point)]
        self.unflushed_messages = 0
        self.last_flush_ms = self._time.milliseconds()
        with self._lock:
            job = self._queued
            if job is not None:
                job.target, job.files, job.truncations = target, files, self._truncations
                return job.future
            job = self._queued = _FlushJob(target, files, self._truncations)
        self._executor.submit(self._run_flush, job)
        return job.future

    def write_in_background(self, write: Callable[[], None], what: str) -> None:
        """A small file's write (a producer snapshot) on the flush thread, in order with
        the fsyncs; here when there is none."""
        if self._executor is None:
            write()
        else:
            self._executor.submit(self._logged, write, what)

    def _logged(self, write: Callable[[], None], what: str) -> None:
        """Run a background write on the flush thread; a failure is logged, never dropped.
        A write queued before the log was deleted or moved to another dir is dropped: its
        directory is gone (and must not come back)."""
        if self._is_closed():
            return
        try:
            write()
        except FileNotFoundError:
            if not self._is_closed():
                self._io_failed(f"writing the {what} of {self._name}", FileNotFoundError(
                    f"{self._dir} disappeared"))
        except OSError as e:
            self._io_failed(f"writing the {what} of {self._name}", e)

    def _run_flush(self, job: _FlushJob) -> None:
        """On the flush thread: fsync the job's files, then raise the recovery point unless
        the log was truncated since the job was (last) filled."""
        with self._lock:
            if self._queued is job:
                self._queued = None
        began = _monotonic_ns()
        try:
            for file, seg in job.files:
                os.fsync(file.fd)
                seg.flush_indexes()
        except OSError as e:
            job.future.set_exception(self._io_failed(f"flushing {self._name}", e))
            return
        self._flushed(began)
        with self._lock:
            if job.truncations == self._truncations and job.target > self._recovery_point:
                self._recovery_point = job.target
        job.future.set_result(None)

    def _flushed(self, began_ns: int) -> None:
        if self.flush_times_ms is not None:
            self.flush_times_ms.observe((_monotonic_ns() - began_ns) / 1e6)


class _FlushJob:
    """One queued fsync of a Log: the files up to `target`, and who waits for it."""

    __slots__ = ("target", "files", "truncations", "future")

    def __init__(self, target: int, files: list[tuple[SegmentFile, LogSegment]], truncations: int) -> None:
        self.target = target
        self.files = files
        self.truncations = truncations
        self.future: Future[None] = Future()
