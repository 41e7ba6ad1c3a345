"""LogManager: loading many logs, create/delete, retention, flush.ms, checkpoints."""

from __future__ import annotations

import os
import uuid

import pytest
from batches import values_batch

from kbroker.common.topic_partition import TopicPartition
from kbroker.storage.checkpoints import OffsetCheckpointFile
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_manager import LogManager
from kbroker.storage.partition_metadata import read_partition_metadata
from kbroker.utils.time import MockTime

from .conftest import TOPIC_ID, TP, Env

TS = 1_700_000_000_000


def test_many_logs_over_two_dirs(tmp_path: object, time: MockTime) -> None:
    dirs = [os.path.join(str(tmp_path), "a"), os.path.join(str(tmp_path), "b")]
    cfg = LogConfig(segment_bytes=2048)
    m = LogManager(dirs, cfg, time, recovery_threads=3)
    m.startup()
    tps = [TopicPartition(f"t{i % 3}", i) for i in range(12)]
    for tp in tps:
        lg = m.get_or_create_log(tp, uuid.uuid4())
        for _ in range(tp.partition + 1):
            lg.append_as_leader(values_batch(2))
    assert {len(os.listdir(d)) for d in dirs} == {6}
    m.shutdown()
    m = LogManager(dirs, cfg, time)
    m.startup()
    assert set(m.all_logs()) == set(tps)
    for tp in tps:
        assert m.get_log(tp).log_end_offset == 2 * (tp.partition + 1)  # type: ignore[union-attr]
    assert read_partition_metadata(m.get_log(tps[0]).dir) is not None  # type: ignore[union-attr]
    m.shutdown()


def test_get_or_create_is_idempotent_and_keeps_topic_id(env: Env) -> None:
    log = env.manager.get_or_create_log(TP, TOPIC_ID)
    assert env.manager.get_or_create_log(TP, uuid.uuid4()) is log
    assert log.topic_id == TOPIC_ID
    log = env.restart()
    assert log.topic_id == TOPIC_ID


def test_delete_log(env: Env) -> None:
    env.log.append_as_leader(values_batch(3))
    env.log.update_config(env.config.with_overrides(file_delete_delay_ms=60_000))
    old = env.log
    fd = old.active_segment.fd
    env.manager.delete_log(TP)
    assert env.manager.get_log(TP) is None
    os.fstat(fd)  # still open for in-flight sends until file.delete.delay.ms
    names = os.listdir(env.path)
    assert any(n.startswith("topic-0.") and n.endswith("-delete") for n in names)
    env.time.sleep(60_000)
    env.manager.deleter.run_due()
    assert not any(n.endswith("-delete") for n in os.listdir(env.path))
    with pytest.raises(OSError):
        os.fstat(fd)
    assert env.log.log_end_offset == 0  # recreated empty


def test_retention_ms_by_largest_timestamp(env: Env) -> None:
    log = env.log
    now = env.time.milliseconds()
    for i in range(30):
        log.append_as_leader(values_batch(4, size=60, base_timestamp=now - 100_000 + i * 1000))
    segs = len(log.segments)
    log.update_config(log.config.with_overrides(retention_ms=50_000))
    deleted = env.manager.cleanup_logs()
    assert 0 < deleted < segs
    first = log.segments.first
    assert first is not None and log.log_start_offset == first.base_offset > 0
    assert all(now - s.largest_timestamp <= 50_000 for s in list(log.segments)[:-1])
    # retention never removes the active segment
    env.time.sleep(10_000_000)
    env.manager.cleanup_logs()
    assert len(log.segments) == 1 and log.log_end_offset == 120
    assert log.read(log.log_start_offset, 100) is not None


def test_retention_bytes(env: Env) -> None:
    log = env.log
    for _ in range(40):
        log.append_as_leader(values_batch(4, size=60))
    log.update_config(log.config.with_overrides(retention_bytes=5000))
    env.manager.cleanup_logs()
    assert log.size_in_bytes <= 5000 + env.config.segment_bytes
    assert sum(s.size for s in list(log.segments)[1:]) <= 5000


def test_deleted_segment_files_wait_for_the_delay(env: Env) -> None:
    log = env.log
    log.update_config(log.config.with_overrides(file_delete_delay_ms=60_000))
    for _ in range(40):
        log.append_as_leader(values_batch(4, size=60))
    first = log.segments.first
    assert first is not None
    fd, path = first.fd, first.log_path
    log.delete_records(log.segments.higher(first.base_offset).base_offset)  # type: ignore[union-attr]
    assert os.path.exists(path + ".deleted") and not os.path.exists(path)
    os.fstat(fd)  # still open for in-flight sends
    env.manager.deleter.run_due()
    assert os.path.exists(path + ".deleted")
    env.time.sleep(60_001)
    env.manager.deleter.run_due()
    assert not os.path.exists(path + ".deleted")


def test_flush_dirty_logs_and_checkpoints(env: Env) -> None:
    log = env.log
    log.update_config(log.config.with_overrides(flush_ms=1000))
    log.append_as_leader(values_batch(3))
    env.manager.flush_dirty_logs()
    assert log.recovery_point == 0
    env.time.sleep(1000)
    for flushed in env.manager.flush_dirty_logs():
        flushed.result(10)
    assert log.recovery_point == 3
    log.delete_records(2)
    env.manager.checkpoint()
    assert OffsetCheckpointFile(os.path.join(env.path, "recovery-point-offset-checkpoint")).read() == {TP: 3}
    assert OffsetCheckpointFile(os.path.join(env.path, "log-start-offset-checkpoint")).read() == {TP: 2}
    assert env.restart().log_start_offset == 2


def test_rolled_segments_are_flushed_in_background(env: Env) -> None:
    log = env.log
    for _ in range(40):
        log.append_as_leader(values_batch(4, size=60))
    env.manager._flusher.shutdown(wait=True)  # type: ignore[union-attr]
    assert log.recovery_point == log.active_segment.base_offset


def test_unclean_start_recovers_every_partition_concurrently(tmp_path: object, time: MockTime) -> None:
    cfg = LogConfig(segment_bytes=2048)
    m = LogManager([str(tmp_path)], cfg, time, recovery_threads=4)
    m.startup()
    tps = [TopicPartition("t", i) for i in range(8)]
    for tp in tps:
        lg = m.get_or_create_log(tp, uuid.uuid4())
        for _ in range(30):
            lg.append_as_leader(values_batch(3, size=40))
    m.abandon()
    tail = os.path.join(str(tmp_path), "t-5", "00000000000000000000.log")
    logs = sorted(f for f in os.listdir(os.path.dirname(tail)) if f.endswith(".log"))
    last = os.path.join(os.path.dirname(tail), logs[-1])
    os.truncate(last, os.path.getsize(last) - 1)
    m = LogManager([str(tmp_path)], cfg, time, recovery_threads=4)
    m.startup()
    assert sorted(m.last_load_recovered) == tps
    ends = {tp: m.get_log(tp).log_end_offset for tp in tps}  # type: ignore[union-attr]
    assert ends == {tp: (87 if tp.partition == 5 else 90) for tp in tps}
    m.shutdown()


def test_background_checkpoints_never_overwrite_a_newer_one(tmp_path: object) -> None:
    """A periodic checkpoint taken before delete_records but written after it must not bring
    the old log start offset back (a crash would then resurrect deleted records)."""
    import threading
    import uuid

    from kbroker.common.topic_partition import TopicPartition
    from kbroker.storage.checkpoints import LOG_START_OFFSET_CHECKPOINT, OffsetCheckpointFile
    from kbroker.storage.log_config import LogConfig
    from kbroker.storage.log_manager import LogManager
    from kbroker.utils.time import MockTime
    from tests.batches import values_batch

    d = str(tmp_path)
    m = LogManager([d], LogConfig(file_delete_delay_ms=0), MockTime())
    m.startup()
    tp = TopicPartition("t", 0)
    lg = m.get_or_create_log(tp, uuid.uuid4())
    for _ in range(10):
        lg.append_as_leader(values_batch(2))
    gate = threading.Event()
    assert m._flusher is not None
    m._flusher.submit(gate.wait, 30)  # the flush thread is busy: the next write waits
    background = m.checkpoint_in_background()  # contents: log start 0
    assert background is not None
    assert m.checkpoint_in_background() is None  # one at a time
    lg.delete_records(6)  # writes its own checkpoint at once: log start 6
    gate.set()
    background.result(timeout=30)
    starts = OffsetCheckpointFile(f"{d}/{LOG_START_OFFSET_CHECKPOINT}").read()
    assert starts[tp] == 6
    m.shutdown()


def test_a_failed_dir_reaches_every_registered_handler(tmp_path: object, time: MockTime) -> None:
    dirs = [os.path.join(str(tmp_path), d) for d in ("a", "b")]
    m = LogManager(dirs, LogConfig(), time)
    heard: list[tuple[str, str, bool]] = []
    m.register_dir_offline_handler(lambda d, left: heard.append(("first", d, left)))
    m.register_dir_offline_handler(lambda d, left: heard.append(("second", d, left)))
    m.failures.report(dirs[0], "writing", OSError("disk"))
    m.failures.report(dirs[1], "writing", OSError("disk"))
    assert heard == [("first", dirs[0], True), ("second", dirs[0], True),
                     ("first", dirs[1], False), ("second", dirs[1], False)]


def test_reconfigured_defaults_apply_to_topics_without_a_config(tmp_path: object, time: MockTime) -> None:
    m = LogManager([str(tmp_path)], LogConfig(), time)
    m.reconfigure_default_config(LogConfig(segment_bytes=4096))
    assert m.get_or_create_log(TP, TOPIC_ID).config.segment_bytes == 4096
