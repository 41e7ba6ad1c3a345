"""Which batches a read_committed share fetch never delivers (server/share_partition_manager.py
aborted_spans): the walk of Kafka's read_committed consumer over the aborted transactions
the log reports for the read."""

from __future__ import annotations

from kbroker.server.share_partition_manager import BatchSpan, aborted_spans
from kbroker.storage.transaction_index import AbortedTxn


def data(first: int, last: int, pid: int = -1) -> BatchSpan:
    return BatchSpan(first, last, False, pid >= 0, pid, 0)


def marker(offset: int, pid: int) -> BatchSpan:
    return BatchSpan(offset, offset, True, True, pid, 0)


def test_an_aborted_transactions_batches_until_its_marker() -> None:
    spans = [data(0, 1, 7), data(2, 2), data(3, 4, 8), marker(5, 7), data(6, 6, 7), marker(7, 8)]
    # 7's transaction from 0 aborted at 5; 8's committed (not listed); 7's next one is not aborted
    assert aborted_spans(spans, [AbortedTxn(7, 0, 5, 0)]) == {0}
    assert aborted_spans(spans, [AbortedTxn(7, 0, 5, 0), AbortedTxn(8, 3, 7, 0)]) == {0, 2}
    assert aborted_spans(spans, []) == set()


def test_a_transaction_aborted_later_opens_at_its_first_offset() -> None:
    spans = [data(0, 0, 7), marker(1, 7), data(2, 3, 7), data(4, 4), marker(5, 7)]
    assert aborted_spans(spans, [AbortedTxn(7, 2, 5, 0)]) == {2}
