"""One append's producer batches checked against a partition's producer state (Kafka's
ProducerAppendInfo, ProducerStateEntry, TxnMetadata and CompletedTxn).

For each producer id the state keeps an entry: its epoch, the coordinator epoch of its
last transaction marker, the timestamp of its last batch, the first offset of its
transaction in progress on this partition (-1: none), and the metadata of its last 5
batches (first and last sequence, first and last offset). An append is checked in
`ProducerAppend.append()` batch by batch against a copy of each producer's entry, and
applied by `ProducerStateManager.update()` once the batches are written. The rules,
as Kafka's, depend on where the append comes from (AppendOrigin):

  * every origin but REPLICATION: an epoch older than the entry's is
    INVALID_PRODUCER_EPOCH (a zombie producer, or a marker for a fenced epoch).
  * CLIENT only, data batches: the sequence rules (see ProducerStateManager), and a
    retry of one of the last 5 batches is a Duplicate with its first offsets.
  * a data batch while the producer has a transaction in progress must be
    transactional (INVALID_TXN_STATE; not checked for REPLICATION, which takes the
    leader's log as it is); a transactional batch with no transaction in
    progress starts one at its first offset.
  * a marker (control batch) whose coordinator epoch is older than the entry's is
    TRANSACTION_COORDINATOR_FENCED (not for REPLICATION); it ends the transaction in
    progress, if any, as a CompletedTxn (aborted or committed), moves the entry to the
    marker's epoch and records its coordinator epoch.

Lock: the broker's event-loop thread only (through the Log).
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass, field

from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.records import control_record
from kbroker.records.batch_header import ProducerBatch

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
INT32_MAX = 2**31 - 1


class AppendOrigin(enum.Enum):
    """Who appends: a producer (Produce), a coordinator (markers, transactional offset
    commits), or a follower copying its leader."""

    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"


class ProducerStateError(KafkaError):
    """A producer batch refused; `error_code` is the Kafka error for Produce."""

    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message, error_code)


@dataclass(slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    epoch: int
    last_timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def duplicate_of(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None

    def maybe_update_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.batches.clear()
            self.epoch = epoch

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(self.producer_id, self.epoch, self.last_timestamp,
                                  self.coordinator_epoch, self.current_txn_first_offset,
                                  deque(self.batches, maxlen=NUM_BATCHES_TO_RETAIN))


@dataclass(slots=True)
class TxnMetadata:
    """A transaction in progress (or completed, until its marker is below the high
    watermark) on this partition."""

    producer_id: int
    first_offset: int
    last_offset: int = -1


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    is_aborted: bool


@dataclass(slots=True)
class Duplicate:
    """A retried batch: the offsets it got the first time."""

    first_offset: int
    last_offset: int


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (last_seq == INT32_MAX and next_seq == 0)


class ProducerAppend:
    """The producer batches of one append, checked (`append`) against copies of the
    producers' entries; ProducerStateManager.update() applies them once written."""

    def __init__(self, current: dict[int, ProducerStateEntry], origin: AppendOrigin) -> None:
        self._current = current
        self.origin = origin
        self.updated: dict[int, ProducerStateEntry] = {}
        self.started: list[TxnMetadata] = []
        self.completed: list[CompletedTxn] = []

    def _entry(self, producer_id: int) -> ProducerStateEntry:
        entry = self.updated.get(producer_id)
        if entry is None:
            current = self._current.get(producer_id)
            entry = current.copy() if current is not None else ProducerStateEntry(producer_id, NO_PRODUCER_EPOCH)
            self.updated[producer_id] = entry
        return entry

    def append(self, batch: ProducerBatch, first_offset: int) -> Duplicate | None:
        """Check one batch whose offsets start at `first_offset`; a Duplicate when it is a
        client's retry of a batch already written. Raises ProducerStateError."""
        first_of_producer = batch.producer_id not in self.updated
        entry = self._entry(batch.producer_id)
        if batch.is_control:
            self._append_marker(entry, batch, first_offset)
            return None
        current = self._current.get(batch.producer_id)
        if self.origin is AppendOrigin.CLIENT and first_of_producer and current is not None:
            dup = current.duplicate_of(batch.producer_epoch, batch.base_sequence, batch.last_sequence)
            if dup is not None:
                return Duplicate(dup.first_offset, dup.last_offset)
        self._check_epoch(entry, batch.producer_epoch, first_offset)
        if self.origin is AppendOrigin.CLIENT:
            self._check_sequence(entry, batch)
        last_offset = first_offset + batch.last_offset_delta
        entry.maybe_update_epoch(batch.producer_epoch)
        if batch.base_sequence >= 0:
            entry.batches.append(BatchMetadata(batch.base_sequence, batch.last_sequence,
                                               first_offset, last_offset))
        entry.last_timestamp = batch.max_timestamp
        if (entry.current_txn_first_offset >= 0 and not batch.is_transactional
                and self.origin is not AppendOrigin.REPLICATION):
            raise ProducerStateError(
                ErrorCode.INVALID_TXN_STATE,
                f"producer {batch.producer_id}: a non-transactional batch at offset {first_offset} "
                f"while its transaction from offset {entry.current_txn_first_offset} is in progress")
        if entry.current_txn_first_offset < 0 and batch.is_transactional:
            entry.current_txn_first_offset = first_offset
            self.started.append(TxnMetadata(batch.producer_id, first_offset))
        return None

    def _check_epoch(self, entry: ProducerStateEntry, epoch: int, offset: int) -> None:
        if epoch < entry.epoch and self.origin is not AppendOrigin.REPLICATION:
            raise ProducerStateError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"producer {entry.producer_id} at offset {offset}: epoch {epoch} is older than {entry.epoch}")

    def _check_sequence(self, entry: ProducerStateEntry, batch: ProducerBatch) -> None:
        pid, epoch, first_seq, last_seq = (batch.producer_id, batch.producer_epoch,
                                           batch.base_sequence, batch.last_sequence)
        if pid not in self._current and entry.epoch == NO_PRODUCER_EPOCH:
            if first_seq != 0:
                raise ProducerStateError(
                    ErrorCode.UNKNOWN_PRODUCER_ID,
                    f"no state for producer {pid} and its first sequence is {first_seq}, not 0")
            return
        if epoch != entry.epoch:
            if first_seq != 0:
                raise ProducerStateError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {pid}: new epoch {epoch} must start at sequence 0, not {first_seq}")
            return
        cur_last = entry.last_seq
        if in_sequence(cur_last, first_seq):
            return
        if cur_last >= 0 and first_seq <= cur_last and last_seq <= cur_last and first_seq <= last_seq:
            raise ProducerStateError(
                ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
                f"producer {pid}: sequences {first_seq}..{last_seq} were written before (last {cur_last})")
        raise ProducerStateError(
            ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
            f"producer {pid}: sequence {first_seq} does not follow {cur_last} (epoch {epoch})")

    def _append_marker(self, entry: ProducerStateEntry, batch: ProducerBatch, offset: int) -> None:
        if batch.control_type not in (control_record.COMMIT, control_record.ABORT):
            if self.origin is AppendOrigin.REPLICATION:
                return
            raise ProducerStateError(ErrorCode.INVALID_RECORD,
                                     f"control batch of type {batch.control_type} at offset {offset}")
        self._check_epoch(entry, batch.producer_epoch, offset)
        if (entry.coordinator_epoch > batch.coordinator_epoch
                and self.origin is not AppendOrigin.REPLICATION):
            raise ProducerStateError(
                ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                f"producer {entry.producer_id} at offset {offset}: coordinator epoch "
                f"{batch.coordinator_epoch} is older than {entry.coordinator_epoch}")
        if entry.current_txn_first_offset >= 0:
            self.completed.append(CompletedTxn(entry.producer_id, entry.current_txn_first_offset, offset,
                                               batch.control_type == control_record.ABORT))
        entry.maybe_update_epoch(batch.producer_epoch)
        entry.coordinator_epoch = batch.coordinator_epoch
        entry.current_txn_first_offset = -1
        entry.last_timestamp = batch.max_timestamp
