"""LogCleaner: compacts the logs of cleanup.policy=compact topics (Kafka's LogCleaner).

log.cleaner.threads cleaner tasks run on the broker's event loop; each, in turn:

    1. on the loop: the filthiest log (LogCleanerManager) is marked in progress and its
       job taken: the segments to read (held open), the aborted transactions, the active
       producers (cleaner.py, CleanJob);
    2. on a cleaner thread (a ThreadPoolExecutor of log.cleaner.threads): the offset map
       and the cleaned segments written with the .cleaned suffix (cleaner.py); the core
       walks records without the GIL, so the loop keeps serving requests;
    3. on the loop: each group swapped in (Log.begin_replace, retire_segments and
       finish_replace: renames only), a few renames per turn of the loop, so requests
       are served in between;
    4. on the cleaner thread: the new first dirty offset written to the log dir's
       cleaner-offset-checkpoint.

A task that finds nothing to clean sleeps log.cleaner.backoff.ms. A cleaning that fails
(corrupt data, a full disk) marks its log uncleanable for this run, logs why and removes
its .cleaned files; an I/O error of a swap takes the dir offline as any other. Stopping
(shutdown) sets an event the cleaner threads check between chunks; what they leave
(.cleaned files) is removed when the log is next loaded.

clean_once() runs the same three steps on the calling thread (tests drive cleanings
one at a time with it).

Stats: each cleaning logs Kafka's cleaner summary line (bytes read and written, records
removed, MB/s, map use) at INFO; `stats` keeps the totals and the last cleaning of each
log.

Lock: the event-loop thread owns everything here except what a job carries to the
cleaner thread.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kbroker.common.topic_partition import TopicPartition
from kbroker.storage.cleaner import (
    Cleaner,
    CleanerAborted,
    CleanerStats,
    CleanJob,
    CleanResult,
    CrashHook,
    SegmentToClean,
    Throttler,
)
from kbroker.storage.log import Log
from kbroker.storage.log_cleaner_manager import LogCleanerManager, LogToClean
from kbroker.storage.transaction_index import AbortedTxn
from kbroker.utils.time import Time

if TYPE_CHECKING:
    from kbroker.storage.log_manager import LogManager

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CleanerConfig:
    """The log.cleaner.* broker keys."""

    enable: bool = True
    threads: int = 1
    dedupe_buffer_size: int = 128 * 1024 * 1024
    io_buffer_size: int = 512 * 1024
    io_buffer_load_factor: float = 0.9
    io_max_bytes_per_second: float = float("inf")
    backoff_ms: int = 15000

    @property
    def chunk_bytes(self) -> int:
        """What one thread filters at a time: half its share of log.cleaner.io.buffer.size."""
        return max(self.io_buffer_size // max(self.threads, 1) // 2, 64 * 1024)


@dataclass
class LogCleanerStats:
    """Totals since start, and the last cleaning of each log."""

    cleanings: int = 0
    failures: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    messages_read: int = 0
    messages_removed: int = 0
    seconds: float = 0.0
    last: dict[TopicPartition, CleanerStats] = field(default_factory=dict)
    latest: CleanerStats | None = None  # the last cleaning of any log

    def add(self, tp: TopicPartition, s: CleanerStats) -> None:
        self.latest = s
        self.cleanings += 1
        self.bytes_read += s.bytes_read
        self.bytes_written += s.bytes_written
        self.messages_read += s.messages_read
        self.messages_removed += s.messages_read - s.messages_written
        self.seconds += s.elapsed
        self.last[tp] = s


class LogCleaner:
    def __init__(self, log_manager: LogManager, config: CleanerConfig, time: Time,
                 crash: CrashHook | None = None) -> None:
        self.log_manager = log_manager
        self.config = config
        self.time = time
        self.manager = LogCleanerManager(log_manager.log_dirs)
        self.stats = LogCleanerStats()
        self._stop = threading.Event()
        self._throttler = Throttler(config.io_max_bytes_per_second)
        self.crash = crash
        self._pool: ThreadPoolExecutor | None = None
        self._tasks: list[asyncio.Task[None]] = []

    def _cleaner(self) -> Cleaner:
        threads = max(self.config.threads, 1)
        cleaner = Cleaner(self.config.dedupe_buffer_size // threads, self.config.io_buffer_load_factor,
                          self._throttler, self.crash, self._stop)
        cleaner.chunk_bytes = self.config.chunk_bytes
        return cleaner

    # -- the tasks ----------------------------------------------------------------------
    def start(self) -> None:
        """Start log.cleaner.threads tasks on the running loop."""
        if not self.config.enable or self.config.threads <= 0:
            return
        self._pool = ThreadPoolExecutor(self.config.threads, thread_name_prefix="kbroker-log-cleaner")
        self._tasks = [asyncio.ensure_future(self._run()) for _ in range(self.config.threads)]

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        cleaner = self._cleaner()
        while not self._stop.is_set():
            cleaned = False
            try:
                cleaned = await self._clean_one(loop, cleaner)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("the log cleaner failed")
            if not cleaned:
                await asyncio.sleep(self.config.backoff_ms / 1000)

    async def _clean_one(self, loop: asyncio.AbstractEventLoop, cleaner: Cleaner) -> bool:
        taken = self._take_job()
        if taken is None:
            return False
        job, log_dir, lg = taken
        offset = None
        try:
            result = await loop.run_in_executor(self._pool, self._clean_or_fail, cleaner, job, log_dir)
            if result is not None:
                swapped: list[bool] = []
                for i in range(len(result.groups)):
                    for _ in self._swap_steps(result, lg, i, swapped):
                        await asyncio.sleep(0)  # requests are served between the steps
                    if not swapped[-1]:
                        break
                else:
                    offset = self._swapped(result, lg)
        finally:
            self.manager.done_cleaning(job.topic_partition)
        if offset is not None:
            await loop.run_in_executor(self._pool, self.manager.update_checkpoint, log_dir,
                                       job.topic_partition, offset)
        return True

    def shutdown(self) -> None:
        """Stop the tasks; a cleaning under way stops at its next chunk (its .cleaned files
        are removed when the log is next loaded)."""
        self._stop.set()
        for task in self._tasks:
            task.cancel()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    # -- one cleaning on the calling thread (tests, tools) --------------------------------
    def clean_once(self) -> CleanResult | None:
        """Select, clean and swap one log here and now; None when no log needs cleaning."""
        taken = self._take_job()
        if taken is None:
            return None
        job, log_dir, lg = taken
        offset = None
        try:
            result = self._clean_or_fail(self._cleaner(), job, log_dir, reraise=True)
            if result is not None:
                swapped: list[bool] = []
                for i in range(len(result.groups)):
                    for _ in self._swap_steps(result, lg, i, swapped):
                        pass
                    if not swapped[-1]:
                        break
                else:
                    offset = self._swapped(result, lg)
        finally:
            self.manager.done_cleaning(job.topic_partition)
        if offset is not None:
            self.manager.update_checkpoint(log_dir, job.topic_partition, offset)
        return result

    # -- the steps ----------------------------------------------------------------------
    def _take_job(self) -> tuple[CleanJob, str, Log] | None:
        logs = {}
        for tp, lg in self.log_manager.all_logs().items():
            d = self.log_manager.dir_of(tp)
            if d is not None and not self.log_manager.is_offline(tp) \
                    and tp not in self.log_manager.moves:
                logs[tp] = (lg, d)
        now = self.time.milliseconds()
        found = self.manager.grab_filthiest_log(logs, now)
        if found is None:
            return None
        ltc, log_dir = found
        try:
            job = self._job(ltc, now)
        except BaseException:
            self.manager.done_cleaning(ltc.topic_partition)
            raise
        if not job.segments:
            self.manager.done_cleaning(ltc.topic_partition)
            return None
        return job, log_dir, ltc.log

    def _job(self, ltc: LogToClean, now: int) -> CleanJob:
        lg = ltc.log
        cfg = lg.config
        segments = []
        all_segments = list(lg.segments)
        for seg, nxt in zip(all_segments, all_segments[1:], strict=False):
            if seg.base_offset >= ltc.first_uncleanable_offset:
                break
            file = seg.open_file()
            segments.append(SegmentToClean(seg, file, seg.size, nxt.base_offset,
                                           os.fstat(file.fd).st_mtime))
        aborted: list[AbortedTxn] = []
        if lg.aborted_txns_possible:
            for seg in all_segments:
                aborted += [t for t in seg.txn_index.entries
                            if t.first_offset < ltc.first_uncleanable_offset]
        state = lg.producer_state
        state.ensure_loaded(lg)
        producers = {pid: entry.batches[-1].last_offset for pid, entry in state.producers.items()
                     if entry.batches}
        return CleanJob(
            ltc.topic_partition, lg.dir, segments, ltc.first_dirty_offset,
            ltc.first_uncleanable_offset, aborted, producers, now, cfg.delete_retention_ms,
            cfg.segment_bytes, cfg.index_interval_bytes, cfg.segment_index_bytes,
            lg._max_uncompressed, lg.truncations)

    def _clean_or_fail(self, cleaner: Cleaner, job: CleanJob, log_dir: str,
                       reraise: bool = False) -> CleanResult | None:
        """On a cleaner thread: the cleaning, or None after a failure (logged; the log is
        left alone from then on; its .cleaned files removed)."""
        try:
            return cleaner.clean(job)
        except CleanerAborted:
            _remove_cleaned(job)
            return None
        except Exception as e:
            _remove_cleaned(job)
            self.stats.failures += 1
            self.manager.uncleanable.add(job.topic_partition)
            log.error("cleaning %s failed; it will not be cleaned again until restart: %s",
                      job.topic_partition, e, exc_info=not isinstance(e, OSError))
            if isinstance(e, OSError):
                self.log_manager.failures.report(log_dir, f"cleaning {job.topic_partition}", e)
            if reraise:
                raise
            return None

    def _swap_steps(self, result: CleanResult, lg: Log, i: int, swapped: list[bool]) -> Iterator[None]:
        """On the loop: swap the i-th cleaned group in (Log.begin_replace, retire_segments
        and finish_replace; the old segments retired RETIRE_PER_STEP at a time), yielding between steps; appends to
        `swapped` whether it went in. When the log changed meanwhile the cleaning is
        dropped and its other groups' files removed."""
        job = result.job
        group = result.groups[i]
        if not lg.begin_replace(group.new, group.old, job.truncations, self.crash):
            for later in result.groups[i + 1:]:
                for path in later.new.paths():
                    if os.path.exists(path):
                        os.unlink(path)
            log.info("dropped the cleaning of %s: the log changed meanwhile", job.topic_partition)
            swapped.append(False)
            return
        for k in range(0, len(group.old), RETIRE_PER_STEP):
            yield
            lg.retire_segments(group.old[k:k + RETIRE_PER_STEP])
        if self.crash is not None:
            self.crash("deleted")
        yield
        lg.finish_replace(group.new, self.crash)
        swapped.append(True)

    def _swapped(self, result: CleanResult, lg: Log) -> int:
        """Every group is in: retention of a compact,delete log (its periodic pass skips a
        log while it is cleaned, so a log cleaned back to back gets it here, as Kafka's
        cleaner thread runs deleteOldSegments of such logs), the stats, and the next
        cleaning's first dirty offset."""
        job = result.job
        if lg.config.delete and not lg.closed:
            lg.delete_old_segments()
        self.stats.add(job.topic_partition, result.stats)
        log.info("%s", result.stats.summary(job.topic_partition, job.first_dirty_offset,
                                            result.end_offset))
        return result.end_offset

    def forget(self, logs: list[tuple[TopicPartition, str]]) -> None:
        """Logs deleted: their checkpoint entries go (one write per log dir)."""
        by_dir: dict[str, dict[TopicPartition, int | None]] = {}
        for tp, log_dir in logs:
            self.manager.uncleanable.discard(tp)
            by_dir.setdefault(log_dir, {})[tp] = None
        for log_dir, changes in by_dir.items():
            self.manager.update_checkpoints(log_dir, changes)

    def truncated(self, tp: TopicPartition, log_dir: str, lg: Log) -> None:
        """A log truncated (or its start moved): a first dirty offset beyond its end comes
        back to the end, so what is written there again is cleaned (Kafka's
        maybeTruncateCheckpoint)."""
        checkpoint = self.manager.checkpoint_of(log_dir, tp)
        if checkpoint is not None and checkpoint > lg.log_end_offset:
            self.manager.update_checkpoint(log_dir, tp, lg.log_end_offset)

    def moved(self, tp: TopicPartition, old_dir: str, new_dir: str) -> None:
        """A log moved to another log dir: its checkpoint entry moves with it."""
        checkpoint = self.manager.checkpoint_of(old_dir, tp)
        if checkpoint is not None:
            self.manager.update_checkpoint(new_dir, tp, checkpoint)
            self.manager.update_checkpoint(old_dir, tp, None)


RETIRE_PER_STEP = 4  # old segments renamed .deleted per turn of the loop (4 files each)


def _remove_cleaned(job: CleanJob) -> None:
    from kbroker.storage.log_segment import CLEANED_SUFFIX
    for name in os.listdir(job.directory) if os.path.isdir(job.directory) else ():
        if name.endswith(CLEANED_SUFFIX):
            try:
                os.unlink(os.path.join(job.directory, name))
            except FileNotFoundError:
                pass
