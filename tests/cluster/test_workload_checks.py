"""The fault tests' own checks (workload.py) on made-up logs: what they let through and
what they catch."""

from __future__ import annotations

import pytest

from .workload import Acknowledged, LoggedRecord, check_acknowledged, check_idempotent_log


def log(*records: tuple[int, int]) -> list[LoggedRecord]:
    """(producer epoch, sequence) per offset from 0."""
    return [LoggedRecord(offset, epoch, seq) for offset, (epoch, seq) in enumerate(records)]


def test_a_record_sent_again_after_an_epoch_bump_is_counted() -> None:
    records = log((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (1, 3))
    acked = Acknowledged(records=[(0, 0), (1, 3), (2, 4), (3, 5)])
    assert check_idempotent_log(0, acked, records) == 2  # 1 and 2, each written again
    assert check_idempotent_log(0, Acknowledged(), log((0, 0), (1, 0))) == 1


def test_duplicates_and_reorderings_within_an_epoch_fail() -> None:
    with pytest.raises(AssertionError, match="duplicate or a reordering"):
        check_idempotent_log(0, Acknowledged(), log((0, 0), (0, 1), (0, 1)))
    with pytest.raises(AssertionError, match="duplicate or a reordering"):
        check_idempotent_log(0, Acknowledged(), log((0, 0), (0, 2), (0, 1)))


def test_an_acknowledged_record_written_again_fails() -> None:
    with pytest.raises(AssertionError, match="acknowledged at"):
        check_idempotent_log(0, Acknowledged(records=[(1, 1)]), log((0, 0), (0, 1), (1, 1)))


def read(*seqs: int) -> dict[int, list[tuple[int, bytes]]]:
    """Partition 0 as a consumer reads it: the sequence at each offset from 0."""
    return {0: [(offset, str(seq).encode()) for offset, seq in enumerate(seqs)]}


def test_acknowledged_records_are_read_where_and_in_the_order_reported() -> None:
    check_acknowledged({0: Acknowledged(records=[(0, 0), (1, 1), (2, 2)])}, read(0, 1, 2))
    with pytest.raises(AssertionError, match="acknowledged sequence 1 at offset 1"):
        check_acknowledged({0: Acknowledged(records=[(0, 0), (1, 1)])}, read(0, 2, 1))
    with pytest.raises(AssertionError, match="acknowledged sequence 2 at offset 2"):
        check_acknowledged({0: Acknowledged(records=[(2, 2)])}, read(0, 1))


def test_a_record_acknowledged_without_an_offset_is_found_after_its_predecessor() -> None:
    # librdkafka's implicit acknowledgement: sequence 1 reported with no offset
    check_acknowledged({0: Acknowledged(records=[(0, 0), (1, None), (2, 2)])}, read(0, 1, 2))
    with pytest.raises(AssertionError, match="without an offset, is not in the log after offset 0"):
        check_acknowledged({0: Acknowledged(records=[(0, 0), (1, None), (2, 1)])}, read(0, 2))
    with pytest.raises(AssertionError, match="without an offset, is not in the log after offset 1"):
        check_acknowledged({0: Acknowledged(records=[(0, 1), (1, None), (2, 2)])}, read(1, 0, 2))
    with pytest.raises(AssertionError, match="out of order"):  # found, but after a later one
        check_acknowledged({0: Acknowledged(records=[(0, 0), (1, None), (2, 1)])}, read(0, 2, 1))
