"""__transaction_state records in Kafka's layout, and the coordinator's state machine."""

from __future__ import annotations

import struct

import pytest

from kbroker.common.error_code import ErrorCode as E
from kbroker.common.topic_partition import TopicPartition
from kbroker.coordinator import transaction_log
from kbroker.coordinator.transaction_metadata import (
    COMPLETE_COMMIT,
    EMPTY,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    PREPARE_EPOCH_FENCE,
    TransactionMetadata,
    TransitionError,
)


def test_key_and_value_bytes_are_kafkas() -> None:
    assert transaction_log.key_to_bytes("tx") == struct.pack(">hh", 0, 2) + b"tx"
    m = TransactionMetadata("tx", 7, 3, 60000, ONGOING, {TopicPartition("a", 1), TopicPartition("a", 0),
                                                         TopicPartition("b", 2)}, 100, 200)
    m.pending_state = None
    t = m.prepare_abort_or_commit(PREPARE_COMMIT, 300)
    value = transaction_log.value_to_bytes(t)
    expected = (struct.pack(">hqhib", 0, 7, 3, 60000, 2) + struct.pack(">i", 2)
                + struct.pack(">h", 1) + b"a" + struct.pack(">iii", 2, 0, 1)
                + struct.pack(">h", 1) + b"b" + struct.pack(">ii", 1, 2)
                + struct.pack(">qq", 300, 100))
    assert value == expected
    back = transaction_log.read_value("tx", value)
    assert back is not None and back.state is PREPARE_COMMIT and back.producer_epoch == 3
    assert back.topic_partitions == m.topic_partitions
    assert transaction_log.read_value("tx", None) is None
    assert transaction_log.read_key(struct.pack(">hh", 1, 2) + b"tx") is None


def test_empty_is_written_without_partitions() -> None:
    m = TransactionMetadata("tx", 7, -1, 1000, EMPTY, txn_last_update_timestamp=5)
    t = m.prepare_increment_producer_epoch(1000, None, 10)
    assert not isinstance(t, int)
    value = transaction_log.value_to_bytes(t)
    assert value[2 + 8 + 2 + 4 + 1:][:4] == struct.pack(">i", -1)  # null array


def test_transitions_follow_kafkas_state_machine() -> None:
    m = TransactionMetadata("tx", 1, -1, 1000, EMPTY)
    m.complete_transition(m.prepare_increment_producer_epoch(1000, None, 1))  # epoch 0
    assert (m.producer_epoch, m.state) == (0, EMPTY)
    with pytest.raises(TransitionError):
        m.prepare_abort_or_commit(PREPARE_COMMIT, 2)  # Empty cannot commit
    m.pending_state = None
    m.complete_transition(m.prepare_add_partitions({TopicPartition("t", 0)}, 3))
    assert m.state is ONGOING and m.txn_start_timestamp == 3
    fence = m.prepare_fence_producer_epoch()
    assert fence.state is PREPARE_EPOCH_FENCE and fence.producer_epoch == 1
    with pytest.raises(TransitionError):
        m.prepare_add_partitions(set(), 4)  # a change is pending
    m.pending_state = None
    m.complete_transition(m.prepare_abort_or_commit(PREPARE_ABORT, 5))
    m.complete_transition(m.prepare_complete(6))
    assert m.state.state_name == "CompleteAbort" and not m.topic_partitions
    with pytest.raises(TransitionError):
        m.prepare_abort_or_commit(PREPARE_COMMIT, 7)  # CompleteAbort cannot commit


def test_epoch_bump_retries_and_fencing() -> None:
    m = TransactionMetadata("tx", 1, 4, 1000, COMPLETE_COMMIT, txn_start_timestamp=1)
    t = m.prepare_increment_producer_epoch(1000, 4, 10)  # the producer recovers (KIP-360)
    assert not isinstance(t, int) and (t.producer_epoch, t.last_producer_epoch) == (5, 4)
    m.complete_transition(t)
    retry = m.prepare_increment_producer_epoch(1000, 4, 11)  # its retry: no second bump
    assert not isinstance(retry, int) and retry.producer_epoch == 5
    m.pending_state = None
    assert m.prepare_increment_producer_epoch(1000, 2, 12) == E.PRODUCER_FENCED
