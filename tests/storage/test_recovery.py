"""LogLoader: clean start trusts checkpoints; after a crash, scan, truncate, rebuild indexes."""

from __future__ import annotations

import os

from batches import decode_batches, values_batch
from log_bytes import read_all_bytes

from kbroker.storage.log import Log

from .conftest import TP, Env


def fill(log: Log, n: int = 60) -> None:
    for i in range(n):
        log.append_as_leader(values_batch(3, size=50, prefix=b"%d-" % i), leader_epoch=i // 20)


def files(env: Env, suffix: str) -> list[str]:
    d = os.path.join(env.path, TP.dir_name)
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(suffix))


def offsets(log: Log) -> list[int]:
    return [r[0] for b in decode_batches(read_all_bytes(log)) for r in b[2]]


def test_clean_restart_reads_only_last_index(env: Env) -> None:
    fill(env.log)
    before = read_all_bytes(env.log)
    log = env.restart()
    assert env.manager.last_load_recovered == []
    assert log.log_end_offset == 180 and log.recovery_point == 180
    assert sum(s._offset_index is not None for s in log.segments) == 1
    assert read_all_bytes(log) == before
    assert log.leader_epoch_cache.entries == [(0, 0), (1, 60), (2, 120)]
    assert not os.path.exists(os.path.join(env.path, ".kafka_cleanshutdown"))


def test_torn_tail(env: Env) -> None:
    fill(env.log)
    env.crash()
    last = files(env, ".log")[-1]
    os.truncate(last, os.path.getsize(last) - 10)
    log = env.start()
    assert env.manager.last_load_recovered == [TP]
    assert log.log_end_offset == 177
    assert offsets(log) == list(range(177))
    assert log.append_as_leader(values_batch(1)).first_offset == 177


def test_corrupt_crc_mid_segment_drops_the_rest(env: Env) -> None:
    fill(env.log)
    env.crash()
    logs = files(env, ".log")
    victim = logs[len(logs) // 2]
    base = int(os.path.basename(victim).split(".")[0])
    with open(victim, "r+b") as f:
        f.seek(200)
        b = f.read(1)
        f.seek(200)
        f.write(bytes([b[0] ^ 0x40]))
    log = env.start()
    # batches are 3 records; the flipped byte lies in the second or third batch of victim
    assert base <= log.log_end_offset <= base + 9
    assert offsets(log) == list(range(log.log_end_offset))
    assert len(files(env, ".log")) == len(logs) - (len(logs) - 1 - len(logs) // 2)


def test_missing_and_garbage_indexes_are_rebuilt(env: Env) -> None:
    fill(env.log)
    expected = read_all_bytes(env.log)
    env.manager.shutdown()
    idx = files(env, ".index")
    os.unlink(idx[0])
    with open(idx[1], "wb") as f:
        f.write(os.urandom(1 << 14))  # oversized garbage
    with open(idx[-1], "r+b") as f:
        f.write(b"\xff" * 8)
    log = env.start()
    assert read_all_bytes(log) == expected
    for off in (0, 5, 70, 100, 179):
        info = log.read(off, 1)
        assert info.records is not None
        first = decode_batches(info.records.read_bytes())[0]
        assert first[0] <= off < first[0] + 3


def test_stale_recovery_point(env: Env) -> None:
    fill(env.log)
    env.log.flush()
    fill(env.log, 30)
    env.crash()
    # the checkpoint on disk is older than the data: everything after it is scanned
    log = env.start()
    assert log.log_end_offset == 270
    assert offsets(log) == list(range(270))
    assert log.recovery_point == 270


def test_leftovers_are_removed(env: Env) -> None:
    fill(env.log)
    env.manager.shutdown()
    d = os.path.join(env.path, TP.dir_name)
    for name in ("00000000000000099999.index", "00000000000000000000.log.deleted", "x.tmp"):
        with open(os.path.join(d, name), "wb") as f:
            f.write(b"junk")
    env.start()
    names = os.listdir(d)
    assert "00000000000000099999.index" not in names
    assert not any(n.endswith((".deleted", ".tmp")) for n in names)


def test_crash_with_preallocated_active_index(env: Env) -> None:
    fill(env.log)
    active_index = env.log.active_segment.offset_index.path
    env.crash()
    assert os.path.getsize(active_index) == env.config.segment_index_bytes // 8 * 8
    log = env.start()
    assert offsets(log) == list(range(180))
