"""Transactions in one partition's log: the last stable offset, markers, the aborted
transaction index (.txnindex, Kafka's format), and what survives a restart or a crash."""

from __future__ import annotations

import os
import struct

import pytest

from kbroker.common.error_code import ErrorCode as E
from kbroker.common.errors import KafkaError
from kbroker.records.batch_header import TRANSACTIONAL_BIT
from kbroker.records.control_record import end_txn_marker
from kbroker.storage.log import Log
from kbroker.storage.producer_state import AppendOrigin
from kbroker.storage.transaction_index import ENTRY_SIZE, AbortedTxn
from tests.batches import make_batch

from .conftest import Env


def txn_batch(pid: int, seq: int, n: int = 2, epoch: int = 0, size: int = 20) -> bytes:
    return make_batch([f"{pid}-{seq}-{i}".encode().ljust(size, b".") for i in range(n)],
                      producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                      attributes=TRANSACTIONAL_BIT)


def marker(log: Log, pid: int, commit: bool, epoch: int = 0, coordinator_epoch: int = 0) -> int:
    info = log.append_as_leader(end_txn_marker(pid, epoch, commit, coordinator_epoch, 1_700_000_000_000),
                                origin=AppendOrigin.COORDINATOR)
    return info.first_offset


def aborted_in(log: Log, fetch_offset: int = 0) -> list[AbortedTxn]:
    """What read_committed fetches from `fetch_offset` to the LSO are told, one segment's
    read at a time (as a consumer reads), without repeats."""
    out: list[AbortedTxn] = []
    offset = fetch_offset
    while offset < log.last_stable_offset:
        data = log.read(offset, 1 << 30, max_offset=log.last_stable_offset)
        assert data.records is not None
        out += [t for t in log.collect_aborted_transactions(offset, data) if t not in out]
        offset = log.segments.higher(data.fetch_offset_metadata.segment_base_offset).base_offset \
            if log.segments.higher(data.fetch_offset_metadata.segment_base_offset) else log.log_end_offset
    return out


def test_lso_stops_at_the_oldest_open_transaction(env: Env) -> None:
    log = env.log
    log.append_as_leader(make_batch([b"plain"]))
    assert log.last_stable_offset == log.high_watermark == 1
    log.append_as_leader(txn_batch(1, 0))          # 1-2, producer 1 opens at 1
    log.append_as_leader(make_batch([b"plain"]))   # 3
    log.append_as_leader(txn_batch(2, 0))          # 4-5, producer 2 opens at 4
    assert log.high_watermark == 6 and log.last_stable_offset == 1
    assert marker(log, 1, commit=True) == 6
    assert log.last_stable_offset == 4
    assert marker(log, 2, commit=False) == 7
    assert log.last_stable_offset == log.log_end_offset == 8
    assert aborted_in(log) == [AbortedTxn(2, 4, 7, 8)]
    assert aborted_in(log, 8) == []


def test_abort_entry_records_the_lso_of_other_open_transactions(env: Env) -> None:
    log = env.log
    log.append_as_leader(txn_batch(1, 0))   # 0-1
    log.append_as_leader(txn_batch(2, 0))   # 2-3
    marker(log, 2, commit=False)            # 4: LSO stays at 0 (producer 1 still open)
    assert log.last_stable_offset == 0
    assert aborted_in(log) == []            # nothing readable yet
    marker(log, 1, commit=False)            # 5
    assert aborted_in(log) == [AbortedTxn(2, 2, 4, 0), AbortedTxn(1, 0, 5, 6)]


def test_producer_rules_for_transactions(env: Env) -> None:
    log = env.log
    log.append_as_leader(txn_batch(1, 0, epoch=3))
    with pytest.raises(KafkaError) as e:  # a plain batch in the middle of its transaction
        log.append_as_leader(make_batch([b"x"], producer_id=1, producer_epoch=3, base_sequence=2))
    assert e.value.error_code == E.INVALID_TXN_STATE
    with pytest.raises(KafkaError) as e:  # a client writing a marker
        log.append_as_leader(end_txn_marker(1, 3, True, 0, 0))
    assert e.value.error_code == E.INVALID_RECORD
    marker(log, 1, commit=False, epoch=4, coordinator_epoch=2)  # the coordinator fenced epoch 3
    with pytest.raises(KafkaError) as e:
        log.append_as_leader(txn_batch(1, 2, epoch=3))
    assert e.value.error_code == E.INVALID_PRODUCER_EPOCH
    with pytest.raises(KafkaError) as e:
        marker(log, 1, commit=True, epoch=4, coordinator_epoch=1)
    assert e.value.error_code == E.TRANSACTION_COORDINATOR_FENCED
    with pytest.raises(KafkaError) as e:
        marker(log, 1, commit=True, epoch=3, coordinator_epoch=2)
    assert e.value.error_code == E.INVALID_PRODUCER_EPOCH
    assert log.append_as_leader(txn_batch(1, 0, epoch=5)).first_offset == 3  # new epoch, seq 0
    assert marker(log, 1, commit=True, epoch=5, coordinator_epoch=2) == 5
    assert marker(log, 1, commit=True, epoch=5, coordinator_epoch=2) == 6  # a retried marker: no txn
    assert log.last_stable_offset == 7


def test_follower_appends_track_transactions(env: Env, tmp_path: object) -> None:
    leader = env.log
    leader.append_as_leader(txn_batch(1, 0))
    leader.append_as_leader(txn_batch(2, 0))
    marker(leader, 1, commit=False)
    data = leader.read(0, 1 << 20, max_offset=leader.log_end_offset)
    assert data.records is not None
    raw = data.records.read_bytes()
    from kbroker.common.topic_partition import TopicPartition
    from kbroker.storage.log_config import LogConfig
    from kbroker.storage.log_manager import LogManager
    other = LogManager([os.path.join(str(tmp_path), "f")], LogConfig(), env.time)
    other.startup()
    try:
        follower = other.get_or_create_log(TopicPartition("f", 0), leader.topic_id or __import__("uuid").uuid4())
        follower.append_as_follower(raw)
        assert follower.last_stable_offset == 2
        assert [t for seg in follower.segments for t in seg.txn_index.entries] == [AbortedTxn(1, 0, 4, 2)]
    finally:
        other.shutdown()


@pytest.mark.parametrize("how", ["restart", "crash"])
def test_open_transaction_and_index_survive(env: Env, how: str) -> None:
    log = env.log
    offsets = []
    for i in range(30):  # rolls 4 KiB segments; every other transaction aborted
        pid = 100 + i
        offsets.append(log.append_as_leader(txn_batch(pid, 0, n=3, size=60)).first_offset)
        marker(log, pid, commit=i % 2 == 0)
    log.append_as_leader(txn_batch(999, 0))
    open_at = log.log_end_offset - 2
    assert len(log.segments) > 2
    before = aborted_in(log)
    assert len(before) == 15 and log.last_stable_offset == open_at
    files = sorted(n for n in os.listdir(log.dir) if n.endswith(".txnindex"))
    assert files and all(os.path.getsize(os.path.join(log.dir, n)) % ENTRY_SIZE == 0 for n in files)
    if how == "restart":
        log = env.restart()
    else:
        log.flush()
        for name in files:  # a crash: every index is rebuilt from the log
            os.unlink(os.path.join(log.dir, name))
        env.crash()
        log = env.start()
    assert log.last_stable_offset == open_at
    assert aborted_in(log) == before
    marker(log, 999, commit=False)
    assert log.last_stable_offset == log.log_end_offset
    assert aborted_in(log)[-1].producer_id == 999


def test_crash_recovery_rebuilds_index_of_scanned_segments(env: Env) -> None:
    log = env.log
    log.append_as_leader(txn_batch(1, 0))
    log.flush()  # the recovery point passes the transaction's start
    marker(log, 1, commit=False)
    path = log.segments.active.txn_index.path
    assert os.path.getsize(path) == ENTRY_SIZE
    os.unlink(path)
    env.crash()
    log = env.start()
    assert aborted_in(log) == [AbortedTxn(1, 0, 2, 3)]
    assert os.path.getsize(path) == ENTRY_SIZE


def test_torn_index_is_rebuilt_after_clean_shutdown(env: Env) -> None:
    log = env.log
    log.append_as_leader(txn_batch(1, 0))
    marker(log, 1, commit=False)
    path = log.segments.active.txn_index.path
    log = env.restart()
    with open(path, "ab") as f:
        f.write(b"\x00" * 7)
    log = env.restart()
    assert aborted_in(log) == [AbortedTxn(1, 0, 2, 3)]
    assert os.path.getsize(path) == ENTRY_SIZE


def test_index_truncated_and_deleted_with_its_segment(env: Env) -> None:
    log = env.log
    for i in range(30):
        log.append_as_leader(txn_batch(100 + i, 0, n=3, size=60))
        marker(log, 100 + i, commit=False)
    first = log.segments.first
    assert first is not None
    first_index = first.txn_index.path
    assert os.path.exists(first_index)
    last_marker = log.log_end_offset - 1
    log.truncate_to(last_marker)
    assert all(t.last_offset < last_marker for seg in log.segments for t in seg.txn_index.entries)
    log.delete_records(log.high_watermark)
    assert not os.path.exists(first_index)


def test_snapshot_version_1_is_read(env: Env) -> None:
    from kbroker._core.crc32c import crc32c
    log = env.log
    log.append_as_leader(make_batch([b"a", b"b"], producer_id=9, producer_epoch=2, base_sequence=0))
    log = env.restart()
    snap = [n for n in os.listdir(log.dir) if n.endswith(".snapshot")]
    assert snap == [f"{log.log_end_offset:020d}.snapshot"]
    body = struct.pack(">iqhqb", 1, 9, 2, 1_700_000_000_000, 1) + struct.pack(">iiqq", 0, 1, 0, 1)
    with open(os.path.join(log.dir, snap[0]), "wb") as f:
        f.write(struct.pack(">hI", 1, crc32c(body)) + body)
    log = env.restart()
    assert log.append_as_leader(
        make_batch([b"c"], producer_id=9, producer_epoch=2, base_sequence=2)).first_offset == 2
    assert log.producer_state.producers[9].coordinator_epoch == -1


def test_clean_restart_trusts_the_snapshot_at_the_log_end(env: Env) -> None:
    log = env.log
    log.append_as_leader(txn_batch(1, 0))
    log = env.restart()
    assert log.producer_state.trusted and not log.producer_state.loaded
    for _ in range(3):  # plain appends never load the state; each clean close moves the snapshot
        log.append_as_leader(make_batch([b"plain"]))
        log = env.restart()
        assert log.producer_state.trusted
    assert log.last_stable_offset == 0
    assert [n for n in os.listdir(log.dir) if n.endswith(".snapshot")] == [
        f"{log.log_end_offset:020d}.snapshot"]
