"""ReplicaMove and LogManager's moves: a replica copied into another log dir with its offsets,
epochs and log start offset, swapped in; and a crash at each step recovers to one copy."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from kbroker.common.topic_partition import TopicPartition
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_manager import LogManager
from kbroker.storage.replica_move import future_dir_name, partition_of_future_dir
from kbroker.utils.time import MockTime
from tests.batches import values_batch
from tests.log_bytes import read_all_bytes

TP = TopicPartition("moving", 0)
TOPIC_ID = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")


def _manager(dirs: list[Path], config: LogConfig, time: MockTime) -> LogManager:
    m = LogManager([str(d) for d in dirs], config, time)
    m.startup()
    return m


def _fill(manager: LogManager, batches: int) -> None:
    lg = manager.get_or_create_log(TP, TOPIC_ID)
    for i in range(batches):
        lg.append_as_leader(values_batch(3, size=80), leader_epoch=i // 20)


def test_future_dir_names() -> None:
    name = future_dir_name(TP)
    assert partition_of_future_dir(name) == TP
    assert partition_of_future_dir("moving-0") is None
    assert partition_of_future_dir("moving-0.abc-delete") is None


def test_a_move_copies_offsets_epochs_and_the_log_start(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=4096, file_delete_delay_ms=0)
    time = MockTime()
    a, b = tmp_path / "a", tmp_path / "b"
    m = _manager([a, b], config, time)
    _fill(m, 60)
    old = m.get_log(TP)
    assert old is not None
    source_dir = m.dir_of(TP)
    target = str(b) if source_dir == str(a) else str(a)
    old.delete_records(30)
    move = m.start_move(TP, target)
    steps = 0
    while not move.copy(max_bytes=2048):
        steps += 1
        if steps == 2:  # the current log keeps taking appends during the copy
            old.append_as_leader(values_batch(1), leader_epoch=5)
    old.append_as_leader(values_batch(2), leader_epoch=5)  # after the last step: complete copies it
    expected = read_all_bytes(old)
    new = m.complete_move(TP)
    assert m.dir_of(TP) == target and new.dir == os.path.join(target, TP.dir_name)
    assert new.log_start_offset == 30 and new.log_end_offset == old.log_end_offset
    assert read_all_bytes(new) == expected
    assert new.leader_epoch_cache.entries[-1][0] == 5
    assert not (Path(source_dir) / TP.dir_name).exists()
    m.shutdown()
    again = _manager([a, b], config, time)
    assert again.dir_of(TP) == target and again.get_log(TP).log_start_offset == 30  # type: ignore[union-attr]
    again.shutdown()


def test_a_crash_before_the_swap_forgets_the_move(tmp_path: Path) -> None:
    config = LogConfig(file_delete_delay_ms=0)
    time = MockTime()
    a, b = tmp_path / "a", tmp_path / "b"
    m = _manager([a, b], config, time)
    _fill(m, 10)
    end = m.get_log(TP).log_end_offset  # type: ignore[union-attr]
    source_dir = m.dir_of(TP)
    target = str(b) if source_dir == str(a) else str(a)
    move = m.start_move(TP, target)
    move.copy(max_bytes=100)
    m.abandon()  # crash: the current dir and a future dir both exist
    again = _manager([a, b], config, time)
    assert again.dir_of(TP) == source_dir and again.get_log(TP).log_end_offset == end  # type: ignore[union-attr]
    again.deleter.shutdown()
    assert not [n for n in os.listdir(target) if n.endswith("-future")]
    again.shutdown()


def test_a_crash_between_the_renames_promotes_the_future_copy(tmp_path: Path) -> None:
    config = LogConfig(file_delete_delay_ms=0)
    time = MockTime()
    a, b = tmp_path / "a", tmp_path / "b"
    m = _manager([a, b], config, time)
    _fill(m, 10)
    end = m.get_log(TP).log_end_offset  # type: ignore[union-attr]
    source_dir = m.dir_of(TP)
    target = str(b) if source_dir == str(a) else str(a)
    move = m.start_move(TP, target)
    move.finish_copy()
    move.future.close()
    m.abandon()
    os.rename(os.path.join(source_dir, TP.dir_name),
              os.path.join(source_dir, f"{TP.dir_name}.{uuid.uuid4().hex}-delete"))
    again = _manager([a, b], config, time)  # only the future copy is left: it becomes the log
    assert again.dir_of(TP) == target and again.get_log(TP).log_end_offset == end  # type: ignore[union-attr]
    again.shutdown()
