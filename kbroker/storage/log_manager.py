"""LogManager: every partition log under one or more log.dirs.

On disk, per log dir:
    <dir>/<topic>-<partition>/...               one Log (see log_loader.py)
    <dir>/recovery-point-offset-checkpoint      Kafka's checkpoint format
    <dir>/log-start-offset-checkpoint
    <dir>/replication-offset-checkpoint         high watermarks (cluster mode only)
    <dir>/.kafka_cleanshutdown                  written last by shutdown(); removed
                                                once startup() has loaded the dir
    <dir>/<topic>-<partition>.<uuid hex>-delete  a deleted partition awaiting removal
    <dir>/<topic>-<partition>.<uuid hex>-future  a replica moving here (replica_move.py)

Lock: the broker's event-loop thread calls every public method after startup().
startup() loads partitions on `recovery_threads` worker threads (each touches only
its own directory) and publishes the logs when all are done. One background thread
(FileDeleter) only closes and unlinks files the logs have already let go of; one
flush thread fsyncs rolled segments and raises their Log's recovery point, and writes
the periodic checkpoints (their contents taken on the loop; `_checkpoint_lock` and a
version per dir keep an older content from landing after a newer one).
Invariant: one Log per TopicPartition, in exactly one log dir.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from kbroker.common.topic_partition import TopicPartition
from kbroker.storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
)
from kbroker.storage.errors import KafkaStorageError
from kbroker.storage.file_deleter import FileDeleter
from kbroker.storage.log import Log
from kbroker.storage.log_cleaner import CleanerConfig, LogCleaner
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_dir_failure import LogDirFailureChannel
from kbroker.storage.log_loader import LoadResult, LogLoader
from kbroker.storage.partition_metadata import read_partition_metadata, write_partition_metadata
from kbroker.storage.replica_move import ReplicaMove, future_dir_name, partition_of_future_dir
from kbroker.storage.segment_file_cache import SegmentFileCache
from kbroker.utils.atomic_file import fsync_dir, sync_filesystem
from kbroker.utils.histogram import Histogram
from kbroker.utils.rlimit import open_file_limit
from kbroker.utils.time import SYSTEM_TIME, Time

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
DELETE_DIR_SUFFIX = "-delete"


class LogManager:
    def __init__(
        self,
        log_dirs: list[str],
        default_config: LogConfig,
        time: Time = SYSTEM_TIME,
        *,
        retention_check_interval_ms: int = 300000,
        recovery_threads: int = 2,
        topic_configs: dict[str, LogConfig] | None = None,
        open_segment_files_max: int = -1,
        replicated: bool = False,
        cleaner_config: CleanerConfig | None = None,
    ) -> None:
        if not log_dirs:
            raise ValueError("log.dirs is empty")
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        self.default_config = default_config
        self.time = time
        self.retention_check_interval_ms = retention_check_interval_ms
        self.recovery_threads = max(recovery_threads, 1)
        self.topic_configs = dict(topic_configs or {})
        # Cluster mode: high watermarks follow the followers (Partition drives them) and
        # are checkpointed in replication-offset-checkpoint; a single broker's high
        # watermark is its log end offset.
        self.replicated = replicated
        self._high_watermarks: dict[TopicPartition, int] = {}
        self._logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, str] = {}
        self.deleter = FileDeleter(time)
        if open_segment_files_max < 0:  # half the open-file limit; the rest for connections
            open_segment_files_max = max(open_file_limit() // 2, 64)
        self.file_cache = SegmentFileCache(open_segment_files_max)
        self.failures = LogDirFailureChannel()
        self.failures.listeners.append(self._on_dir_offline)
        self._dir_offline_handlers: list[Callable[[str, bool], None]] = []
        self._flusher: ThreadPoolExecutor | None = None
        self.moves: dict[TopicPartition, ReplicaMove] = {}  # AlterReplicaLogDirs in progress
        # Checkpoint writes, from the loop or the flush thread, in version order per dir.
        self._checkpoint_lock = threading.Lock()
        self._checkpoint_version = 0
        self._written_versions: dict[str, int] = {}
        self._checkpointing: Future[None] | None = None
        self.last_load_recovered: list[TopicPartition] = []
        self.load_ms = 0  # how long startup() took to load (and recover) every log
        self.flush_times_ms = Histogram()  # each fsync of a log (LogFlushRateAndTimeMs)
        self._started = False
        # the log cleaner (log_cleaner.py): made at startup, its tasks started by the broker
        self.cleaner_config = cleaner_config or CleanerConfig()
        self.cleaner: LogCleaner | None = None

    # -- life cycle -------------------------------------------------------------------
    def startup(self) -> None:
        """Load every partition directory under log.dirs (concurrently), recovering those
        of a dir without the clean-shutdown marker; then remove the markers."""
        for d in self.log_dirs:
            os.makedirs(d, exist_ok=True)
        self._flusher = ThreadPoolExecutor(1, thread_name_prefix="kbroker-log-flush")
        jobs = []
        futures: dict[TopicPartition, str] = {}
        for d in self.log_dirs:
            clean = os.path.exists(os.path.join(d, CLEAN_SHUTDOWN_FILE))
            recovery = self._read_checkpoint(d, RECOVERY_POINT_CHECKPOINT)
            starts = self._read_checkpoint(d, LOG_START_OFFSET_CHECKPOINT)
            if self.replicated:
                self._high_watermarks.update(self._read_checkpoint(d, REPLICATION_OFFSET_CHECKPOINT))
            for name in sorted(os.listdir(d)):
                path = os.path.join(d, name)
                if not os.path.isdir(path):
                    continue
                if name.endswith(DELETE_DIR_SUFFIX):
                    self.deleter.schedule_dir(0, path)
                    continue
                moving = partition_of_future_dir(name)
                if moving is not None:
                    futures[moving] = path
                    continue
                try:
                    tp = TopicPartition.from_dir_name(name)
                except ValueError:
                    continue
                jobs.append((d, path, tp, clean, recovery.get(tp, 0), starts.get(tp, 0)))
        started_ms = self.time.monotonic_ms()
        with ThreadPoolExecutor(self.recovery_threads, thread_name_prefix="kbroker-log-recovery") as pool:
            loaded = list(pool.map(lambda job: self._load(*job), jobs))
        self.last_load_recovered = []
        recovered: list[LoadResult] = []
        for (d, _path, tp, clean, _rp, _ls), (lg, result) in zip(jobs, loaded, strict=True):
            if tp in self._logs:
                lg.close()
                raise KafkaStorageError(f"duplicate log directories for {tp}")
            self._publish(tp, lg, d)
            if not clean:
                self.last_load_recovered.append(tp)
                recovered.append(result)
        for tp, path in futures.items():
            self._adopt_future(tp, path)
        if recovered:
            _log_recovery(recovered, [d for d in self.log_dirs if not os.path.exists(
                os.path.join(d, CLEAN_SHUTDOWN_FILE))], self.time.monotonic_ms() - started_ms)
        self.load_ms = self.time.monotonic_ms() - started_ms
        for d in self.log_dirs:
            marker = os.path.join(d, CLEAN_SHUTDOWN_FILE)
            if os.path.exists(marker):
                os.unlink(marker)
        self.deleter.start()
        self.cleaner = LogCleaner(self, self.cleaner_config, self.time)
        self._started = True

    def _read_checkpoint(self, directory: str, name: str) -> dict[TopicPartition, int]:
        try:
            return OffsetCheckpointFile(os.path.join(directory, name)).read()
        except ValueError:
            log.warning("ignoring malformed checkpoint %s in %s", name, directory)
            return {}

    def _load(self, log_dir: str, path: str, tp: TopicPartition, clean: bool,
              recovery_point: int, log_start_offset: int) -> tuple[Log, LoadResult]:
        try:
            topic_id = read_partition_metadata(path)
        except ValueError:
            topic_id = None
        loader = self._loader(path, tp, topic_id, self.config_for(tp.topic), log_dir,
                              had_clean_shutdown=clean, recovery_point=recovery_point,
                              log_start_offset=log_start_offset)
        lg = loader.load()
        if not clean:
            r = loader.result
            log.debug("recovered %s: scanned %d bytes in %d segments, truncated %d bytes, "
                      "deleted %d segments", tp, r.scanned_bytes, r.recovered_segments,
                      r.truncated_bytes, r.deleted_segments)
        return lg, loader.result

    def _adopt_future(self, tp: TopicPartition, path: str) -> None:
        """A future dir left by a move: promoted when the move crashed after the current
        dir went (it is the partition's only copy), else removed (the move is forgotten)."""
        if tp in self._logs:
            log.info("removing the unfinished move of %s: %s", tp, path)
            self.deleter.schedule_dir(0, path)
            return
        final = os.path.join(os.path.dirname(path), tp.dir_name)
        os.rename(path, final)
        fsync_dir(os.path.dirname(path))
        lg, _result = self._load(os.path.dirname(path), final, tp, False, 0, 0)
        self._publish(tp, lg, os.path.dirname(path))
        log.warning("finished the move of %s to %s (interrupted by a crash)", tp, final)

    # -- moving a replica between log dirs (AlterReplicaLogDirs) -------------------------
    def start_move(self, tp: TopicPartition, target_dir: str) -> ReplicaMove:
        source = self._logs[tp]
        path = os.path.join(target_dir, future_dir_name(tp))
        os.makedirs(path)
        future = LogLoader(path, tp, source.topic_id, source.config, self.time, self.deleter,
                           had_clean_shutdown=True, recovery_point=0, log_start_offset=0,
                           flush_executor=None).new_log()
        future.segments.use_file_cache(self.file_cache)
        move = self.moves[tp] = ReplicaMove(source, future, target_dir)
        return move

    def cancel_move(self, tp: TopicPartition) -> None:
        move = self.moves.pop(tp, None)
        if move is not None:
            move.future.abandon()
            self.deleter.schedule_dir(0, move.future.dir)

    def complete_move(self, tp: TopicPartition) -> Log:
        """Swap the caught-up future log in (see replica_move.py); the new Log."""
        move = self.moves.pop(tp)
        move.finish_copy()
        future_path = move.future.dir
        move.future.close()
        old = self._logs[tp]
        old_dir = self._dir_of[tp]
        doomed = os.path.join(old_dir, f"{tp.dir_name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        old.flush()
        old.closed = True
        os.rename(old.dir, doomed)
        fsync_dir(old_dir)
        final = os.path.join(move.target_dir, tp.dir_name)
        os.rename(future_path, final)
        fsync_dir(move.target_dir)
        self.deleter.schedule(old.config.file_delete_delay_ms, old.abandon)
        self.deleter.schedule_dir(old.config.file_delete_delay_ms, doomed)
        lg = self._loader(final, tp, old.topic_id, old.config, move.target_dir,
                          had_clean_shutdown=True, recovery_point=move.future.log_end_offset,
                          log_start_offset=old.log_start_offset).load()
        lg.auto_high_watermark = old.auto_high_watermark
        high_watermark = old.high_watermark
        self._publish(tp, lg, move.target_dir)
        lg.update_high_watermark(high_watermark)
        if self.cleaner is not None:
            self.cleaner.moved(tp, old_dir, move.target_dir)
        self.checkpoint()
        return lg

    def shutdown(self) -> None:
        """Flush every log, write the checkpoints, close, then write the clean markers.

        After a startup that did not finish, only close what is open: a clean marker
        then would skip the recovery that the next start still owes the dirs."""
        if not self._started:
            self.abandon()
            return
        if self.cleaner is not None:  # a cleaning under way stops at its next chunk
            self.cleaner.shutdown()
        if self._flusher is not None:  # let queued flushes finish first
            self._flusher.shutdown(wait=True)
            self._flusher = None
        # Close every log without its own fsyncs, then make each dir durable with one
        # syncfs: all its logs are then flushed to their ends (one call instead of an
        # fsync per segment, snapshot and checkpoint: 10,000 partitions stop in a blink).
        log_ends = {}
        for tp, lg in self._logs.items():
            if not lg.closed:
                log_ends[tp] = lg.log_end_offset
                try:
                    lg.close(sync=False)
                except OSError as e:
                    self.failures.report(self._dir_of[tp], f"closing {tp}", e)
        for d in self.online_dirs:
            try:
                sync_filesystem(d)
            except OSError as e:
                self.failures.report(d, "syncing at shutdown", e)
        for tp, leo in log_ends.items():
            self._logs[tp].mark_flushed(leo)
        self.checkpoint()
        self.deleter.shutdown()
        for d in self.online_dirs:
            try:
                with open(os.path.join(d, CLEAN_SHUTDOWN_FILE), "w"):
                    pass
                fsync_dir(d)
            except OSError as e:
                self.failures.report(d, "writing the clean-shutdown marker", e)
        self._logs.clear()
        self._dir_of.clear()
        self._started = False

    def abandon(self) -> None:
        """Drop everything without flush, checkpoint or marker: a simulated crash (tests)."""
        if self.cleaner is not None:
            self.cleaner.shutdown()
        if self._flusher is not None:
            self._flusher.shutdown(wait=True)
            self._flusher = None
        self.deleter.shutdown()
        for lg in self._logs.values():
            lg.abandon()
        self._logs.clear()
        self._dir_of.clear()
        self._started = False

    # -- logs -------------------------------------------------------------------------
    def config_for(self, topic: str) -> LogConfig:
        return self.topic_configs.get(topic, self.default_config)

    def get_log(self, tp: TopicPartition) -> Log | None:
        return self._logs.get(tp)

    def all_logs(self) -> dict[TopicPartition, Log]:
        return dict(self._logs)

    def get_or_create_log(self, tp: TopicPartition, topic_id: uuid.UUID,
                          config: LogConfig | None = None, *, sync: bool = True) -> Log:
        """The partition's log, created empty if it has none. sync=False leaves the new
        directory and files to the caller's sync_dirs() (one syncfs per log dir for a
        whole CreateTopics instead of fsyncs per file)."""
        existing = self._logs.get(tp)
        if existing is not None:
            if config is not None and config != existing.config:
                existing.update_config(config)
            return existing
        if config is not None:
            self.topic_configs[tp.topic] = config
        log_dir = self._next_log_dir()
        path = os.path.join(log_dir, tp.dir_name)
        try:
            os.makedirs(path, exist_ok=True)
            write_partition_metadata(path, topic_id, sync=sync)
            lg = self._loader(path, tp, topic_id, self.config_for(tp.topic), log_dir,
                              had_clean_shutdown=True, recovery_point=0, log_start_offset=0).new_log()
            if sync:
                fsync_dir(log_dir)
        except OSError as e:
            shutil.rmtree(path, ignore_errors=True)  # nothing half made stays behind
            if e.errno not in (errno.EMFILE, errno.ENFILE, errno.ENOMEM):  # the process's limits
                self.failures.report(log_dir, f"creating the log of {tp}", e)
            raise KafkaStorageError(f"cannot create log for {tp} in {log_dir}: {e}") from e
        self._publish(tp, lg, log_dir)
        return lg

    def sync_dirs(self) -> None:
        """Make what was written to the online log dirs durable: one syncfs(2) each."""
        for d in self.online_dirs:
            try:
                sync_filesystem(d)
            except OSError as e:
                self.failures.report(d, "syncing new partitions", e)
                raise KafkaStorageError(f"cannot sync {d}: {e}") from e

    def discard_log(self, tp: TopicPartition) -> None:
        """Remove a log this broker has just created, at once (a creation that failed part-way:
        it holds no data and no client has seen it)."""
        lg = self._logs.pop(tp, None)
        self._dir_of.pop(tp, None)
        if lg is not None:
            lg.abandon()
            shutil.rmtree(lg.dir, ignore_errors=True)

    def _publish(self, tp: TopicPartition, lg: Log, log_dir: str) -> None:
        lg.segments.use_file_cache(self.file_cache)
        if self.replicated:
            lg.auto_high_watermark = False
            lg.update_high_watermark(self._high_watermarks.pop(tp, 0))
        self._logs[tp] = lg
        self._dir_of[tp] = log_dir

    def _loader(self, path: str, tp: TopicPartition, topic_id: uuid.UUID | None, config: LogConfig,
                log_dir: str, *, had_clean_shutdown: bool, recovery_point: int,
                log_start_offset: int) -> LogLoader:
        """The loader of a partition of `log_dir` that this manager serves: its Log fsyncs on
        the flush thread, reports I/O errors against the dir and asks for checkpoints."""
        return LogLoader(path, tp, topic_id, config, self.time, self.deleter,
                         had_clean_shutdown=had_clean_shutdown, recovery_point=recovery_point,
                         log_start_offset=log_start_offset, flush_executor=self._flusher,
                         flush_times_ms=self.flush_times_ms,
                         on_checkpoint_needed=lambda lg: self._log_truncated(tp, log_dir, lg),
                         on_io_error=lambda what, error: self.failures.report(log_dir, what, error))

    def _log_truncated(self, tp: TopicPartition, log_dir: str, lg: Log) -> None:
        """After a truncation or delete_records: the checkpoints, now."""
        self.checkpoint_dir(log_dir)
        if self.cleaner is not None:
            self.cleaner.truncated(tp, log_dir, lg)

    def _next_log_dir(self) -> str:
        """The online log dir holding the fewest partitions (Kafka's placement rule)."""
        online = self.online_dirs
        if not online:
            raise KafkaStorageError("every log dir is offline")
        if len(online) == 1:
            return online[0]
        counts = {d: 0 for d in online}
        for d in self._dir_of.values():
            if d in counts:
                counts[d] += 1
        return min(online, key=lambda d: counts[d])

    # -- log dir failures (LogDirFailureChannel) ----------------------------------------
    @property
    def online_dirs(self) -> list[str]:
        offline = self.failures.offline_dirs
        return [d for d in self.log_dirs if d not in offline]

    def dir_of(self, tp: TopicPartition) -> str | None:
        return self._dir_of.get(tp)

    def is_offline(self, tp: TopicPartition) -> bool:
        d = self._dir_of.get(tp)
        return d is not None and self.failures.is_offline(d)

    def reconfigure_default_config(self, config: LogConfig) -> None:
        """Kafka's reconfigureDefaultLogConfig (dynamic broker configs): the topic defaults
        of the logs created from now on; the caller updates the logs already open."""
        self.default_config = config

    def register_dir_offline_handler(self, handler: Callable[[str, bool], None]) -> None:
        """Called on the thread that found a failure with the dir and whether any dir is
        left online; the broker, once serving, hands it to its loop (offline partitions,
        or a shutdown), as Kafka's LogDirFailureHandler."""
        self._dir_offline_handlers.append(handler)

    def _on_dir_offline(self, log_dir: str) -> None:
        for handler in list(self._dir_offline_handlers):
            handler(log_dir, bool(self.online_dirs))

    def take_dir_offline(self, log_dir: str) -> None:
        """On the loop thread, after a failure: close the dir's logs without flushing (their
        partitions answer KAFKA_STORAGE_ERROR from now on: a closed Log raises it)."""
        for tp, d in self._dir_of.items():
            if d == log_dir:
                self._logs[tp].abandon()

    def update_topic_config(self, topic: str, config: LogConfig) -> None:
        self.topic_configs[topic] = config
        for tp, lg in self._logs.items():
            if tp.topic == topic:
                lg.update_config(config)

    def delete_log(self, tp: TopicPartition) -> None:
        self.delete_logs([tp])

    def delete_logs(self, tps: list[TopicPartition]) -> None:
        """Close the logs, rename each dir to <topic>-<partition>.<uuid>-delete and remove them
        in the background after file.delete.delay.ms; then checkpoint once (a topic's
        partitions go in one pass, not one checkpoint write per partition)."""
        forgotten: list[tuple[TopicPartition, str]] = []
        for tp in tps:
            lg = self._logs.pop(tp, None)
            log_dir = self._dir_of.pop(tp, None)
            if lg is None or log_dir is None:
                continue
            forgotten.append((tp, log_dir))
            delay = lg.config.file_delete_delay_ms
            target = os.path.join(log_dir, f"{tp.dir_name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
            # No new operations; the fds stay open until the delay ends (in-flight sendfile).
            lg.closed = True
            self.deleter.schedule(delay, lg.abandon)
            try:
                os.rename(lg.dir, target)
            except OSError as e:  # the dir goes offline; its data is left for a restart to see
                self.failures.report(log_dir, f"deleting {tp}", e)
                continue
            self.deleter.schedule_dir(delay, target)
        if self.cleaner is not None:
            self.cleaner.forget(forgotten)
        self.checkpoint()

    # -- background duties (called by the broker on its event loop) ----------------------
    def cleanup_logs(self) -> int:
        """One retention pass over every log; returns the number of segments deleted. A log
        the cleaner is cleaning waits for the next pass (Kafka's cleaner pauses retention of
        compact,delete logs while it cleans them)."""
        deleted = 0
        cleaning = self.cleaner.manager.in_progress if self.cleaner is not None else set()
        for tp, lg in list(self._logs.items()):
            if not lg.closed and tp not in cleaning:
                deleted += lg.delete_old_segments()
        return deleted

    def flush_dirty_logs(self) -> list[Future[None]]:
        """Flush the logs whose flush.ms has elapsed since their last flush, on the flush
        thread (a failure is logged there); return the flushes started."""
        now = self.time.milliseconds()
        started = []
        for lg in list(self._logs.values()):
            if not lg.closed and now - lg.last_flush_ms >= lg.config.flush_ms:
                flushed = lg.flush_async()
                if flushed is not None:
                    started.append(flushed)
        return started

    def checkpoint(self) -> None:
        """Write recovery points and log start offsets of every online log dir."""
        for d in self.online_dirs:
            try:
                self.checkpoint_dir(d)
            except KafkaStorageError:
                pass  # the dir went offline: reported and logged once

    def checkpoint_in_background(self) -> Future[None] | None:
        """The periodic checkpoint: the contents are taken now (on the loop), the files
        written and fsynced on the flush thread, so the loop never waits for a disk.
        Skipped while the previous one is still being written."""
        if self._flusher is None or (self._checkpointing is not None
                                     and not self._checkpointing.done()):
            return None
        writes = [(d, self._checkpoint_contents(d)) for d in self.online_dirs]
        self._checkpointing = self._flusher.submit(self._write_checkpoints, writes)
        return self._checkpointing

    def _write_checkpoints(self, writes: list[tuple[str, _CheckpointContents]]) -> None:
        for d, contents in writes:
            try:
                self._write_checkpoint(d, contents)
            except KafkaStorageError:
                pass  # reported: the loop takes the dir offline

    def checkpoint_dir(self, d: str) -> None:
        """Write one log dir's checkpoints now (also after a truncation or delete_records,
        which must be on disk before anyone reads the log again)."""
        if self.failures.is_offline(d):
            return
        self._write_checkpoint(d, self._checkpoint_contents(d))

    def _checkpoint_contents(self, d: str) -> _CheckpointContents:
        tps = [tp for tp, ld in self._dir_of.items() if ld == d]
        self._checkpoint_version += 1
        return _CheckpointContents(
            self._checkpoint_version,
            {tp: self._logs[tp].recovery_point for tp in tps},
            {tp: self._logs[tp].log_start_offset for tp in tps},
            {tp: self._logs[tp].high_watermark for tp in tps} if self.replicated else None)

    def _write_checkpoint(self, d: str, contents: _CheckpointContents) -> None:
        """On any thread. A content older than what the dir already has on disk is dropped:
        a background write taken before a truncation never lands after its checkpoint."""
        with self._checkpoint_lock:
            if contents.version <= self._written_versions.get(d, 0):
                return
            try:
                OffsetCheckpointFile(os.path.join(d, RECOVERY_POINT_CHECKPOINT)).write(contents.recovery)
                OffsetCheckpointFile(os.path.join(d, LOG_START_OFFSET_CHECKPOINT)).write(contents.starts)
                if contents.high_watermarks is not None:
                    OffsetCheckpointFile(os.path.join(d, REPLICATION_OFFSET_CHECKPOINT)).write(
                        contents.high_watermarks)
            except OSError as e:
                self.failures.report(d, "writing checkpoints", e)
                raise KafkaStorageError(f"cannot write checkpoints in {d}: {e}") from e
            self._written_versions[d] = contents.version


@dataclass(frozen=True)
class _CheckpointContents:
    """One log dir's checkpoints as of a moment; versions order them."""

    version: int
    recovery: dict[TopicPartition, int]
    starts: dict[TopicPartition, int]
    high_watermarks: dict[TopicPartition, int] | None


def _log_recovery(results: list[LoadResult], dirs: list[str], elapsed_ms: int) -> None:
    """One line after an unclean shutdown: what recovery scanned, cut and took."""
    log.warning(
        "recovered %d logs in %s after an unclean shutdown: scanned %d bytes in %d segments, "
        "truncated %d bytes, deleted %d segments, in %d ms", len(results), ",".join(dirs),
        sum(r.scanned_bytes for r in results), sum(r.recovered_segments for r in results),
        sum(r.truncated_bytes for r in results), sum(r.deleted_segments for r in results),
        elapsed_ms)
