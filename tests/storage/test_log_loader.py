"""LogLoader, driven directly: a partition directory on disk in, a Log and a LoadResult out.

Each test writes a real partition directory through a Log (small segments: the
storage conftest's config), closes it cleanly or drops it as a crash would, damages
files where the test says so, and loads the directory again with a new LogLoader.
(tests/storage/test_recovery.py covers the same through LogManager's startup.)
"""

from __future__ import annotations

import os
from pathlib import Path

from batches import decode_batches, values_batch
from log_bytes import read_all_bytes

from kbroker.storage.file_deleter import FileDeleter
from kbroker.storage.leader_epoch_cache import LEADER_EPOCH_CHECKPOINT
from kbroker.storage.log import Log
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_loader import LogLoader
from kbroker.storage.log_segment import file_name
from kbroker.utils.time import MockTime

from .conftest import TOPIC_ID, TP

BATCHES, PER_BATCH = 60, 3  # 180 offsets; leader epoch i // 20 for batch i


def loader(path: Path, config: LogConfig, *, clean: bool, recovery_point: int = 0,
           log_start_offset: int = 0) -> LogLoader:
    time = MockTime()
    return LogLoader(str(path), TP, TOPIC_ID, config, time, FileDeleter(time),
                     had_clean_shutdown=clean, recovery_point=recovery_point,
                     log_start_offset=log_start_offset)


def write(path: Path, config: LogConfig, *, crash: bool = False) -> list[tuple[int, int]]:
    """60 batches of 3 records in a fresh partition dir; (base offset, size) per segment."""
    log = loader(path, config, clean=True).new_log()
    for i in range(BATCHES):
        log.append_as_leader(values_batch(PER_BATCH, size=50, prefix=b"%d-" % i), leader_epoch=i // 20)
    segments = [(s.base_offset, s.size) for s in log.segments]
    if crash:
        log.abandon()  # no flush, no trimmed indexes, no checkpoint
    else:
        log.close()
    return segments


def batch_size() -> int:
    return len(values_batch(PER_BATCH, size=50, prefix=b"0-"))


def log_files(path: Path) -> list[str]:
    return sorted(n for n in os.listdir(path) if n.endswith(".log"))


def offsets(log: Log) -> list[int]:
    return [r[0] for b in decode_batches(read_all_bytes(log)) for r in b[2]]


def test_a_new_log_has_no_files_until_the_first_append(tmp_path: Path, config: LogConfig) -> None:
    log = loader(tmp_path, config, clean=True, log_start_offset=40).new_log()
    assert os.listdir(tmp_path) == []
    assert (log.log_start_offset, log.log_end_offset, log.recovery_point) == (40, 40, 40)
    assert log.append_as_leader(values_batch(2)).first_offset == 40
    assert log_files(tmp_path) == [file_name(40, ".log")]
    log.close()


def test_an_unwritten_partition_loads_as_new_at_its_log_start(tmp_path: Path, config: LogConfig) -> None:
    log = loader(tmp_path / "t-0", config, clean=False, log_start_offset=7).load()
    assert os.listdir(tmp_path / "t-0") == []
    assert (log.log_start_offset, log.log_end_offset) == (7, 7)
    log.close()


def test_a_clean_load_trusts_the_checkpoints_and_scans_nothing(tmp_path: Path, config: LogConfig) -> None:
    segments = write(tmp_path, config)
    assert len(segments) >= 3
    ld = loader(tmp_path, config, clean=True, recovery_point=90)
    log = ld.load()
    r = ld.result
    assert (r.recovered_segments, r.scanned_bytes, r.truncated_bytes, r.deleted_segments) == (0, 0, 0, 0)
    assert (log.log_end_offset, log.recovery_point) == (180, 90)
    assert [s.base_offset for s in log.segments] == [b for b, _ in segments]
    assert sum(s._offset_index is not None for s in log.segments) == 1  # the last one only
    assert log.leader_epoch_cache.entries == [(0, 0), (1, 60), (2, 120)]
    assert offsets(log) == list(range(180))
    log.close()
    # a recovery point past the log's end is cut to it
    log = loader(tmp_path, config, clean=True, recovery_point=10_000).load()
    assert log.recovery_point == 180
    log.close()


def test_a_crash_scans_from_the_segment_holding_the_recovery_point(tmp_path: Path,
                                                                     config: LogConfig) -> None:
    segments = write(tmp_path, config, crash=True)
    third = segments[2][0]
    ld = loader(tmp_path, config, clean=False, recovery_point=third + 1)
    log = ld.load()
    r = ld.result
    assert r.recovered_segments == len(segments) - 2
    assert r.scanned_bytes == sum(size for _, size in segments[2:])
    assert (r.truncated_bytes, r.deleted_segments) == (0, 0)
    assert (log.log_end_offset, log.recovery_point) == (180, 180)
    assert offsets(log) == list(range(180))
    log.close()


def test_leader_epochs_are_rebuilt_from_the_batches_scanned(tmp_path: Path, config: LogConfig) -> None:
    write(tmp_path, config, crash=True)
    assert not os.path.exists(tmp_path / LEADER_EPOCH_CHECKPOINT)  # a crash wrote none
    log = loader(tmp_path, config, clean=False).load()
    assert log.leader_epoch_cache.entries == [(0, 0), (1, 60), (2, 120)]
    log.close()


def test_epochs_are_cut_to_the_log_end_and_its_start(tmp_path: Path, config: LogConfig) -> None:
    write(tmp_path, config)
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_text("0\n4\n0 0\n1 60\n2 120\n9 500\n")
    first_base = int(log_files(tmp_path)[1].split(".")[0])  # the second segment's base
    log = loader(tmp_path, config, clean=True, log_start_offset=first_base + 1).load()
    assert log.log_start_offset == first_base + 1
    covering = 0 if first_base + 1 < 60 else 1
    assert log.leader_epoch_cache.entries[0] == (covering, first_base + 1)
    assert log.leader_epoch_cache.entries[-1] == (2, 120)  # epoch 9 began past the end
    log.close()


def test_a_torn_tail_is_cut_to_the_last_whole_batch(tmp_path: Path, config: LogConfig) -> None:
    segments = write(tmp_path, config, crash=True)
    last = tmp_path / file_name(segments[-1][0], ".log")
    os.truncate(last, segments[-1][1] - 10)
    ld = loader(tmp_path, config, clean=False, recovery_point=segments[-1][0])
    log = ld.load()
    assert ld.result.truncated_bytes == batch_size() - 10
    assert os.path.getsize(last) == segments[-1][1] - batch_size()
    assert log.log_end_offset == 177 and offsets(log) == list(range(177))
    assert log.append_as_leader(values_batch(1)).first_offset == 177
    log.close()


def test_corruption_mid_log_drops_every_later_segment(tmp_path: Path, config: LogConfig) -> None:
    segments = write(tmp_path, config, crash=True)
    base, size = segments[1]
    victim = tmp_path / file_name(base, ".log")
    with open(victim, "r+b") as f:  # a byte inside the second batch's records
        f.seek(batch_size() + 100)
        b = f.read(1)
        f.seek(batch_size() + 100)
        f.write(bytes([b[0] ^ 0x40]))
    ld = loader(tmp_path, config, clean=False)
    log = ld.load()
    r = ld.result
    assert (r.truncated_bytes, r.deleted_segments) == (size - batch_size(), len(segments) - 2)
    assert log_files(tmp_path) == [file_name(segments[0][0], ".log"), file_name(base, ".log")]
    assert not any(n.startswith(file_name(segments[2][0], "")) for n in os.listdir(tmp_path))
    assert log.log_end_offset == base + PER_BATCH
    assert offsets(log) == list(range(base + PER_BATCH))
    log.close()


def test_recovery_below_the_log_start_starts_empty_there(tmp_path: Path, config: LogConfig) -> None:
    write(tmp_path, config, crash=True)
    first = tmp_path / file_name(0, ".log")
    with open(first, "r+b") as f:  # the first batch is corrupt: nothing survives
        f.seek(100)
        b = f.read(1)
        f.seek(100)
        f.write(bytes([b[0] ^ 0x01]))
    log = loader(tmp_path, config, clean=False, log_start_offset=100).load()
    assert (log.log_start_offset, log.log_end_offset, log.recovery_point) == (100, 100, 100)
    assert log_files(tmp_path) == [] and log.leader_epoch_cache.entries == []
    assert log.append_as_leader(values_batch(2)).first_offset == 100
    assert log_files(tmp_path) == [file_name(100, ".log")]
    log.close()


def test_a_stale_empty_segment_inside_the_last_one_is_removed(tmp_path: Path, config: LogConfig) -> None:
    segments = write(tmp_path, config, crash=True)
    stale = tmp_path / file_name(segments[-1][0] + 1, ".log")
    stale.write_bytes(b"")
    log = loader(tmp_path, config, clean=False).load()
    assert not stale.exists()
    assert log.active_segment.base_offset == segments[-1][0] and log.log_end_offset == 180
    log.close()


def test_leftovers_and_orphan_indexes_are_removed(tmp_path: Path, config: LogConfig) -> None:
    write(tmp_path, config)
    junk = [file_name(0, ".log.deleted"), file_name(0, ".index.deleted"), "partition.metadata.tmp",
            file_name(99_999, ".index"), file_name(99_999, ".timeindex")]
    for name in junk:
        (tmp_path / name).write_bytes(b"junk")
    log = loader(tmp_path, config, clean=True, recovery_point=180).load()
    assert not set(junk) & set(os.listdir(tmp_path))
    assert log.log_end_offset == 180 and offsets(log) == list(range(180))
    log.close()


def test_missing_indexes_are_rebuilt_on_a_clean_load(tmp_path: Path, config: LogConfig) -> None:
    """The active segment's when loading, an older one's when first used (Kafka rebuilds a
    missing index; an empty one would leave every read walking from the segment's start)."""
    segments = write(tmp_path, config)
    written = {}
    for base in (segments[0][0], segments[-1][0]):
        written[base] = os.path.getsize(tmp_path / file_name(base, ".index")) // 8
        os.unlink(tmp_path / file_name(base, ".index"))
    os.unlink(tmp_path / file_name(segments[0][0], ".timeindex"))
    assert all(written.values())
    log = loader(tmp_path, config, clean=True, recovery_point=180).load()
    assert log.log_end_offset == 180
    first, last = log.segments.first, log.active_segment
    assert first is not None and first._offset_index is None  # not opened yet
    for offset in (0, 10, segments[-1][0], 150, 179):
        info = log.read(offset, 1)
        assert info.records is not None
        batch = decode_batches(info.records.read_bytes())[0]
        assert batch[0] <= offset < batch[0] + PER_BATCH
    for seg in (first, last):
        assert seg.offset_index.entries == written[seg.base_offset]  # as they were written
    assert first.time_index.entries > 0
    log.close()
