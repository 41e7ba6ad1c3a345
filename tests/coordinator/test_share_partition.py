"""SharePartition (KIP-932) with a fake clock: acquisition, locks, acknowledgements,
redelivery, the delivery count limit, the record lock bound and the persisted state."""

from __future__ import annotations

import uuid

import pytest

from kbroker.common.error_code import ErrorCode
from kbroker.coordinator.share_partition import (
    AckBatch,
    AcknowledgeError,
    AcquiredRecords,
    RecordState,
    SharePartition,
    SharePartitionConfig,
    StateBatch,
)
from kbroker.coordinator.timers import Timers
from kbroker.utils.time import MockTime

ACCEPT, RELEASE, REJECT, RENEW, GAP = 1, 2, 3, 4, 0
TOPIC = uuid.uuid4()


def make(start: int = 0, lock_ms: int = 1000, limit: int = 3, locks: int = 100
         ) -> tuple[SharePartition, MockTime, Timers, list[int]]:
    time = MockTime()
    timers = Timers(time)
    expired: list[int] = []
    sp = SharePartition("g", TOPIC, 0, start, SharePartitionConfig(lock_ms, limit, locks), timers,
                        on_lock_expired=lambda: expired.append(1))
    return sp, time, timers, expired


def batches(*spans: tuple[int, int]) -> list[tuple[int, int, bool]]:
    return [(a, b, False) for a, b in spans]


def test_two_members_acquire_disjoint_records_and_accepts_move_the_start() -> None:
    sp, _, _, _ = make()
    assert sp.acquire("a", batches((0, 4)), 500) == [AcquiredRecords(0, 4, 1)]
    assert sp.next_fetch_offset() == 5
    assert sp.acquire("b", batches((0, 4), (5, 9)), 500) == [AcquiredRecords(5, 9, 1)]
    sp.acknowledge("b", [AckBatch(5, 9, [ACCEPT])])
    assert sp.start_offset == 0  # 0-4 still held by a
    sp.acknowledge("a", [AckBatch(0, 4, [ACCEPT])])
    assert (sp.start_offset, sp.end_offset, sp.records) == (10, 10, {})


def test_max_records_bounds_an_acquisition() -> None:
    sp, _, _, _ = make()
    assert sp.acquire("a", batches((0, 9)), 3) == [AcquiredRecords(0, 2, 1)]
    assert sp.acquire("b", batches((0, 9)), 3) == [AcquiredRecords(3, 5, 1)]


def test_release_redelivers_with_a_higher_count_and_the_limit_archives() -> None:
    sp, _, _, _ = make(limit=2)
    sp.acquire("a", batches((0, 1)), 500)
    sp.acknowledge("a", [AckBatch(0, 1, [RELEASE, ACCEPT])])
    assert sp.next_fetch_offset() == 0
    assert sp.acquire("b", batches((0, 1)), 500) == [AcquiredRecords(0, 0, 2)]
    sp.acknowledge("b", [AckBatch(0, 0, [RELEASE])])  # second delivery released: archived
    assert sp.state_of(0) is None and sp.start_offset == 2


def test_reject_archives_and_gap_archives() -> None:
    sp, _, _, _ = make()
    sp.acquire("a", batches((0, 2)), 500)
    sp.acknowledge("a", [AckBatch(0, 2, [REJECT, GAP, ACCEPT])])
    assert sp.start_offset == 3
    assert sp.acquire("a", batches((0, 2)), 500) == []


def test_lock_expiry_makes_records_available_again() -> None:
    sp, time, timers, expired = make(lock_ms=1000)
    sp.acquire("a", batches((0, 4)), 500)
    sp.acknowledge("a", [AckBatch(0, 0, [ACCEPT])])
    time.sleep(999)
    timers.run_due()
    assert sp.state_of(1) == (RecordState.ACQUIRED, 1)
    time.sleep(1)
    timers.run_due()
    assert expired == [1]
    assert sp.state_of(1) == (RecordState.AVAILABLE, 1)
    assert sp.acquire("b", batches((1, 4)), 500) == [AcquiredRecords(1, 4, 2)]
    with pytest.raises(AcknowledgeError) as e:  # a's lock is gone: its late ack is refused
        sp.acknowledge("a", [AckBatch(1, 1, [ACCEPT])])
    assert e.value.code == ErrorCode.INVALID_RECORD_STATE


def test_lock_expiry_at_the_limit_archives() -> None:
    sp, time, timers, _ = make(lock_ms=10, limit=2)
    for member in ("a", "b"):
        assert sp.acquire(member, batches((0, 0)), 500)
        time.sleep(10)
        timers.run_due()
    assert sp.state_of(0) is None and sp.start_offset == 1


def test_renew_restarts_the_lock() -> None:
    sp, time, timers, _ = make(lock_ms=100)
    sp.acquire("a", batches((0, 1)), 500)
    time.sleep(60)
    sp.acknowledge("a", [AckBatch(0, 0, [RENEW])])
    time.sleep(60)
    timers.run_due()
    assert sp.state_of(0) == (RecordState.ACQUIRED, 1)
    assert sp.state_of(1) == (RecordState.AVAILABLE, 1)
    time.sleep(40)
    timers.run_due()
    assert sp.state_of(0) == (RecordState.AVAILABLE, 1)


def test_acknowledgements_are_checked_whole_before_any_applies() -> None:
    sp, _, _, _ = make()
    sp.acquire("a", batches((0, 4)), 500)
    for bad, code in (([AckBatch(0, 1, [ACCEPT]), AckBatch(3, 6, [ACCEPT])], ErrorCode.INVALID_RECORD_STATE),
                      ([AckBatch(0, 2, [ACCEPT, ACCEPT])], ErrorCode.INVALID_REQUEST),
                      ([AckBatch(0, 0, [9])], ErrorCode.INVALID_REQUEST)):
        with pytest.raises(AcknowledgeError) as e:
            sp.acknowledge("a", bad)
        assert e.value.code == code
        assert sp.state_of(0) == (RecordState.ACQUIRED, 1)
    with pytest.raises(AcknowledgeError):
        sp.acknowledge("b", [AckBatch(0, 0, [ACCEPT])])  # not b's
    with pytest.raises(AcknowledgeError) as e:  # refused before any offset is looked at
        sp.acknowledge("a", [AckBatch(0, 2**62, [ACCEPT])])
    assert e.value.code == ErrorCode.INVALID_RECORD_STATE


def test_release_member_frees_what_it_holds() -> None:
    sp, _, _, _ = make()
    sp.acquire("a", batches((0, 2)), 500)
    sp.acquire("b", batches((0, 5)), 500)
    assert sp.release_member("a") == 3
    assert sp.acquire("c", batches((0, 5)), 500) == [AcquiredRecords(0, 2, 2)]


def test_max_record_locks_bounds_the_records_in_flight() -> None:
    sp, _, _, _ = make(locks=4)
    assert sp.acquire("a", batches((0, 9)), 500) == [AcquiredRecords(0, 3, 1)]
    assert not sp.can_acquire()
    sp.acknowledge("a", [AckBatch(0, 1, [ACCEPT])])
    assert sp.acquire("b", batches((4, 9)), 500) == [AcquiredRecords(4, 5, 1)]


def test_control_batches_are_archived_never_delivered() -> None:
    sp, _, _, _ = make()
    got = sp.acquire("a", [(0, 1, False), (2, 2, True), (3, 4, False)], 500)
    assert got == [AcquiredRecords(0, 1, 1), AcquiredRecords(3, 4, 1)]
    sp.acknowledge("a", [AckBatch(0, 1, [ACCEPT])])
    assert sp.start_offset == 3


def test_snapshot_and_restore_keep_acknowledged_and_counts_and_free_locks() -> None:
    sp, _, timers, _ = make(start=10)
    sp.acquire("a", batches((10, 15)), 500)
    sp.acknowledge("a", [AckBatch(10, 15, [RELEASE, ACCEPT, REJECT, ACCEPT, ACCEPT, RELEASE])])
    sp.acquire("b", batches((10, 15)), 500)  # 10 again (count 2), 15 again
    snap = sp.snapshot()
    assert snap == [StateBatch(10, 10, 0, 2), StateBatch(11, 11, 2, 1), StateBatch(12, 12, 4, 1),
                    StateBatch(13, 14, 2, 1), StateBatch(15, 15, 0, 2)]
    again = SharePartition.restore("g", TOPIC, 0, sp.start_offset, snap, sp.config, timers)
    assert again.next_fetch_offset() == 10
    assert again.acquire("c", batches((10, 20)), 500) == [
        AcquiredRecords(10, 10, 3), AcquiredRecords(15, 15, 3), AcquiredRecords(16, 20, 1)]


def test_log_start_moving_up_moves_the_start() -> None:
    sp, _, _, _ = make()
    sp.acquire("a", batches((0, 4)), 500)
    sp.move_start_to(3)
    assert sp.start_offset == 3 and sp.state_of(2) is None
    with pytest.raises(AcknowledgeError):
        sp.acknowledge("a", [AckBatch(2, 2, [ACCEPT])])
    sp.acknowledge("a", [AckBatch(3, 4, [ACCEPT])])
    assert sp.start_offset == 5


def test_an_acknowledgement_not_persisted_is_reopened() -> None:
    sp, _time, _timers, _expired = make(start=0, limit=3)
    sp.acquire("m1", [(0, 5, False)], 100)
    done = sp.acknowledge("m1", [AckBatch(0, 3, [ACCEPT, REJECT, ACCEPT, RELEASE]), AckBatch(4, 5, [RENEW])])
    assert done == {0: 1, 1: 1, 2: 1}  # what was accepted or rejected, with its delivery count
    assert sp.start_offset == 3
    sp.reopen(done)  # its state could not be written: delivered again
    assert sp.start_offset == 0
    assert [sp.state_of(o) for o in range(4)] == [(RecordState.AVAILABLE, 1)] * 4
    assert sp.state_of(4) == (RecordState.ACQUIRED, 1)  # a renewal is not undone
    again = sp.acquire("m2", [(0, 3, False)], 100)
    assert again == [AcquiredRecords(0, 3, 2)]
