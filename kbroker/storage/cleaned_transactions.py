"""CleanedTransactionMetadata: what the log cleaner needs to know about transactions while
it walks a log in offset order (Kafka's CleanedTransactionMetadata, in LogCleaner.scala).

The aborted transactions overlapping the walked range come from the transaction indexes
(sorted by first offset). Walking the transactional and control batches in order:

  * a transactional data batch of an aborted transaction (its producer has an aborted
    transaction that started at or before the batch) is discarded; the transaction is
    remembered as observed (it still had data in this cleaning);
  * a transactional data batch of any other transaction marks that producer's
    transaction as committed-with-data;
  * an ABORT marker may be discarded (once its delete horizon passed) only when this
    cleaning saw no data of its transaction: the data goes first, the marker in a later
    cleaning. A marker kept with data seen goes to the cleaned segment's transaction
    index, so read_committed consumers still skip what is left;
  * a COMMIT marker may be discarded when no data of its transaction was seen;
  * an empty control batch (already cleaned) may be discarded.

Lock: none; one instance per walk, on the cleaner's thread.
"""

from __future__ import annotations

from kbroker.storage.transaction_index import AbortedTxn

CONTROL_ABORT = 0
CONTROL_COMMIT = 1


class _Aborted:
    __slots__ = ("txn", "observed")

    def __init__(self, txn: AbortedTxn) -> None:
        self.txn = txn
        self.observed = False


class CleanedTransactionMetadata:
    def __init__(self, aborted: list[AbortedTxn] | None = None) -> None:
        self._pending = sorted(aborted or [], key=lambda t: t.first_offset)
        self._next = 0
        self._ongoing_aborted: dict[int, _Aborted] = {}
        self._ongoing_committed: set[int] = set()
        # the aborted transactions to write to the cleaned segment's transaction index
        self.cleaned_index: list[AbortedTxn] = []

    def add_aborted(self, aborted: list[AbortedTxn]) -> None:
        self._pending = sorted(self._pending[self._next:] + aborted, key=lambda t: t.first_offset)
        self._next = 0

    def _consume_up_to(self, offset: int) -> None:
        pending = self._pending
        while self._next < len(pending) and pending[self._next].first_offset <= offset:
            txn = pending[self._next]
            self._ongoing_aborted[txn.producer_id] = _Aborted(txn)
            self._next += 1

    def on_batch_read(self, last_offset: int, producer_id: int, transactional: bool) -> bool:
        """A data batch: whether it belongs to an aborted transaction (discard it)."""
        self._consume_up_to(last_offset)
        if not transactional:
            return False
        aborted = self._ongoing_aborted.get(producer_id)
        if aborted is not None:
            aborted.observed = True
            return True
        self._ongoing_committed.add(producer_id)
        return False

    def on_control_batch_read(self, last_offset: int, producer_id: int, control_type: int) -> bool:
        """A control batch: whether it may be discarded (no data of its transaction seen
        in this walk). control_type < 0: an empty (already cleaned) control batch."""
        self._consume_up_to(last_offset)
        if control_type < 0:
            return True
        if control_type == CONTROL_ABORT:
            aborted = self._ongoing_aborted.pop(producer_id, None)
            if aborted is not None and aborted.observed:
                self.cleaned_index.append(aborted.txn)
                return False
            return True
        if control_type == CONTROL_COMMIT:
            if producer_id in self._ongoing_committed:
                self._ongoing_committed.discard(producer_id)
                return False
            return True
        return False
