"""ProducerStateManager through Log.append_as_leader: dedupe, sequence errors, snapshots,
rebuild after restart and after a crash, truncation."""

from __future__ import annotations

import os

import pytest

from kbroker.common.error_code import ErrorCode as E
from kbroker.storage.producer_state import ProducerStateError
from tests.batches import make_batch

from .conftest import Env


def batch(pid: int, epoch: int, seq: int, n: int = 2) -> bytes:
    return make_batch([f"{pid}-{seq}-{i}".encode() * 20 for i in range(n)], producer_id=pid,
                      producer_epoch=epoch, base_sequence=seq)


def append(log: object, data: bytes) -> int:
    return log.append_as_leader(data).first_offset  # type: ignore[attr-defined, no-any-return]


def error_of(log: object, data: bytes) -> int:
    with pytest.raises(ProducerStateError) as info:
        log.append_as_leader(data)  # type: ignore[attr-defined]
    return info.value.error_code


def test_duplicates_of_last_five_return_original_offsets(env: Env) -> None:
    log = env.log
    assert [append(log, batch(7, 0, s)) for s in range(0, 14, 2)] == list(range(0, 14, 2))
    leo = log.log_end_offset
    for seq in (4, 6, 8, 10, 12):
        assert append(log, batch(7, 0, seq)) == seq
    assert log.log_end_offset == leo
    assert error_of(log, batch(7, 0, 2)) == E.DUPLICATE_SEQUENCE_NUMBER
    assert error_of(log, batch(7, 0, 20)) == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert error_of(log, batch(8, 0, 3)) == E.UNKNOWN_PRODUCER_ID
    assert append(log, batch(7, 1, 0)) == leo  # epoch bump restarts at 0
    assert error_of(log, batch(7, 0, 14)) == E.INVALID_PRODUCER_EPOCH
    assert error_of(log, batch(7, 2, 5)) == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert append(log, make_batch([b"plain"])) == leo + 2  # non-idempotent batches pass


def test_sequence_wraps_at_int32_max(env: Env) -> None:
    log = env.log
    append(log, batch(3, 0, 0))
    state = log.producer_state.producers[3]
    state.batches[-1].last_seq = 2**31 - 1
    assert append(log, batch(3, 0, 0)) == 2


@pytest.mark.parametrize("how", ["restart", "crash"])
def test_state_rebuilt_after_restart_and_crash(env: Env, how: str) -> None:
    log = env.log
    offsets = [append(log, batch(5, 0, s)) for s in range(0, 200, 2)]  # rolls 4 KiB segments
    assert len(log.segments) > 1
    if how == "restart":
        log = env.restart()
        assert any(n.endswith(".snapshot") for n in os.listdir(log.dir))
    else:
        env.crash()
        log = env.start()
    assert append(log, batch(5, 0, 198)) == offsets[-1]
    assert error_of(log, batch(5, 0, 300)) == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert append(log, batch(5, 0, 200)) == offsets[-1] + 2


def test_truncation_forgets_truncated_batches(env: Env) -> None:
    log = env.log
    for s in range(0, 10, 2):
        append(log, batch(9, 0, s))
    log.truncate_to(6)
    assert log.log_end_offset == 6
    assert error_of(log, batch(9, 0, 8)) == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert append(log, batch(9, 0, 6)) == 6


def test_silent_producers_expire(env: Env) -> None:
    from kbroker.storage.producer_state import expire_producers

    log = env.log
    append(log, batch(11, 0, 0))  # make_batch stamps 1_700_000_000_000
    ts = log.producer_state.producers[11].last_timestamp
    assert expire_producers([log], ts + 1000, 1000) == 0
    assert expire_producers([log], ts + 1001, 1000) == 1
    assert error_of(log, batch(11, 0, 2)) == E.UNKNOWN_PRODUCER_ID
