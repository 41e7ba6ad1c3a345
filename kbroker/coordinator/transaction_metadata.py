"""TransactionMetadata: one transactional id's state at its coordinator (Kafka's
TransactionMetadata, TxnTransitMetadata and TransactionState, transaction.version 0).

States and the transitions the coordinator makes:

    Empty | CompleteCommit | CompleteAbort --AddPartitions/AddOffsets--> Ongoing
    Ongoing --EndTxn(commit)--> PrepareCommit --markers written--> CompleteCommit
    Ongoing --EndTxn(abort), timeout, InitProducerId fencing--> PrepareAbort
            --markers written--> CompleteAbort
    Ongoing --fencing (InitProducerId, timeout): epoch bumped--> PrepareEpochFence,
            which is never written: it becomes PrepareAbort at once
    Empty | CompleteCommit | CompleteAbort --InitProducerId--> Empty (epoch bumped)
    Empty | CompleteCommit | CompleteAbort --transactional.id.expiration.ms--> Dead
            (a tombstone; the id is forgotten)

A change is made in two steps, as Kafka's: `prepare_*` checks it and returns the target
(TxnTransitMetadata) with `pending_state` set, which refuses any other change meanwhile;
once the target is written to __transaction_state, `complete_transition` applies it (a
failed write clears `pending_state`). Epochs: a producer's epoch goes up by one on every
InitProducerId and on every fence; when it would reach 32766 the producer gets a new
producer id at epoch 0 (Kafka keeps 32767 free so that a fence is always possible).

Lock: the broker's event-loop thread only.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from kbroker.common.error_code import ErrorCode
from kbroker.common.topic_partition import TopicPartition

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767


class TransactionState(enum.Enum):
    """Kafka's states: the id written to the log, the name DescribeTransactions shows."""

    EMPTY = (0, "Empty")
    ONGOING = (1, "Ongoing")
    PREPARE_COMMIT = (2, "PrepareCommit")
    PREPARE_ABORT = (3, "PrepareAbort")
    COMPLETE_COMMIT = (4, "CompleteCommit")
    COMPLETE_ABORT = (5, "CompleteAbort")
    DEAD = (6, "Dead")
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence")

    @property
    def id(self) -> int:
        return self.value[0]

    @property
    def state_name(self) -> str:
        return self.value[1]

    @classmethod
    def from_id(cls, state_id: int) -> TransactionState:
        for state in cls:
            if state.id == state_id:
                return state
        raise ValueError(f"unknown transaction state id {state_id}")

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        for state in cls:
            if state.state_name == name:
                return state
        return None

    @property
    def expiration_allowed(self) -> bool:
        return self in (EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT)


EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT = (
    TransactionState.EMPTY, TransactionState.ONGOING, TransactionState.PREPARE_COMMIT,
    TransactionState.PREPARE_ABORT)
COMPLETE_COMMIT, COMPLETE_ABORT, DEAD, PREPARE_EPOCH_FENCE = (
    TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT, TransactionState.DEAD,
    TransactionState.PREPARE_EPOCH_FENCE)

VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    EMPTY: frozenset({EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT}),
    ONGOING: frozenset({ONGOING, EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT}),
    PREPARE_COMMIT: frozenset({ONGOING}),
    PREPARE_ABORT: frozenset({ONGOING, PREPARE_EPOCH_FENCE}),
    COMPLETE_COMMIT: frozenset({PREPARE_COMMIT}),
    COMPLETE_ABORT: frozenset({PREPARE_ABORT}),
    DEAD: frozenset({EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT}),
    PREPARE_EPOCH_FENCE: frozenset({ONGOING}),
}


def is_epoch_exhausted(epoch: int) -> bool:
    return epoch >= MAX_EPOCH - 1


class TransitionError(RuntimeError):
    """A transition the state machine does not allow (a bug, never a client's doing)."""


@dataclass(frozen=True, slots=True)
class TxnTransitMetadata:
    """The state a change leads to: what is written to the log, then applied."""

    producer_id: int
    prev_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int


@dataclass
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    txn_timeout_ms: int = 60000
    state: TransactionState = EMPTY
    topic_partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    previous_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    pending_state: TransactionState | None = None
    # a fence whose write failed: the epoch was bumped in memory but never returned to a
    # client, so the next fence does not bump it again
    has_failed_epoch_fence: bool = False

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in (ONGOING, PREPARE_ABORT, PREPARE_COMMIT)

    def remove_partition(self, tp: TopicPartition) -> None:
        """A marker was written to `tp`."""
        if self.state not in (PREPARE_COMMIT, PREPARE_ABORT):
            raise TransitionError(f"{self.transactional_id}: removing {tp} in state {self.state}")
        self.topic_partitions.discard(tp)

    # -- preparing changes
    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        if self.producer_epoch == MAX_EPOCH:
            raise TransitionError(f"{self.transactional_id}: cannot fence epoch {MAX_EPOCH}")
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(PREPARE_EPOCH_FENCE, self.producer_id, bumped, NO_PRODUCER_EPOCH,
                             self.txn_timeout_ms, frozenset(self.topic_partitions),
                             self.txn_start_timestamp, self.txn_last_update_timestamp)

    def prepare_increment_producer_epoch(self, txn_timeout_ms: int, expected_epoch: int | None,
                                         now_ms: int) -> TxnTransitMetadata | int:
        """InitProducerId (KIP-360): the bumped epoch, or PRODUCER_FENCED for a producer that
        presents an epoch neither current nor the one before a successful bump."""
        if self.is_producer_epoch_exhausted:
            raise TransitionError(f"{self.transactional_id}: epochs of {self.producer_id} exhausted")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch  # a retry: no second bump
        else:
            return ErrorCode.PRODUCER_FENCED
        return self._prepare(EMPTY, self.producer_id, epoch, last, txn_timeout_ms, frozenset(), -1, now_ms)

    def prepare_producer_id_rotation(self, new_producer_id: int, txn_timeout_ms: int, now_ms: int,
                                     record_last_epoch: bool) -> TxnTransitMetadata:
        if self.has_pending_transaction:
            raise TransitionError(f"{self.transactional_id}: a transaction is pending")
        return self._prepare(EMPTY, new_producer_id, 0,
                             self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                             txn_timeout_ms, frozenset(), -1, now_ms)

    def prepare_add_partitions(self, partitions: set[TopicPartition], now_ms: int) -> TxnTransitMetadata:
        start = now_ms if self.state in (EMPTY, COMPLETE_ABORT, COMPLETE_COMMIT) else self.txn_start_timestamp
        return self._prepare(ONGOING, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(self.topic_partitions | partitions), start, now_ms)

    def prepare_abort_or_commit(self, state: TransactionState, now_ms: int) -> TxnTransitMetadata:
        return self._prepare(state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(self.topic_partitions),
                             self.txn_start_timestamp, now_ms)

    def prepare_complete(self, now_ms: int) -> TxnTransitMetadata:
        state = COMPLETE_COMMIT if self.state == PREPARE_COMMIT else COMPLETE_ABORT
        self.has_failed_epoch_fence = False
        return self._prepare(state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(), self.txn_start_timestamp, now_ms)

    def prepare_dead(self) -> TxnTransitMetadata:
        return self._prepare(DEAD, self.producer_id, self.producer_epoch, self.last_producer_epoch,
                             self.txn_timeout_ms, frozenset(), self.txn_start_timestamp,
                             self.txn_last_update_timestamp)

    def _prepare(self, state: TransactionState, producer_id: int, epoch: int, last_epoch: int,
                 txn_timeout_ms: int, partitions: frozenset[TopicPartition], start: int,
                 now_ms: int) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise TransitionError(f"{self.transactional_id}: preparing {state} while {self.pending_state} "
                                  "is pending")
        if producer_id < 0 or (state is not DEAD and epoch < 0):
            raise TransitionError(f"{self.transactional_id}: producer id {producer_id}, epoch {epoch}")
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise TransitionError(f"{self.transactional_id}: {self.state} cannot become {state}")
        self.pending_state = state
        return TxnTransitMetadata(producer_id, self.producer_id, epoch, last_epoch, txn_timeout_ms, state,
                                  partitions, start, now_ms)

    # -- applying a written change
    def complete_transition(self, t: TxnTransitMetadata) -> None:
        """Apply `t` once it is in the log (Kafka's completeTransitionTo, with its checks)."""
        if self.pending_state is None or self.pending_state is not t.state:
            raise TransitionError(f"{self.transactional_id}: completing {t.state}, pending {self.pending_state}")
        state = t.state
        if state is EMPTY:
            bump_ok = t.producer_epoch == self.producer_epoch + 1 or (
                t.producer_epoch == 0 and t.producer_id != self.producer_id)
            if (self.producer_epoch != t.producer_epoch and not bump_ok) or t.topic_partitions \
                    or t.txn_start_timestamp != -1:
                raise TransitionError(f"{self.transactional_id}: bad transition to {t}")
            self.txn_timeout_ms = t.txn_timeout_ms
            self.producer_epoch = t.producer_epoch
            self.last_producer_epoch = t.last_producer_epoch
            self.producer_id = t.producer_id
            self.previous_producer_id = t.prev_producer_id
        elif state is ONGOING:
            if not self._same_producer(t) or not self.topic_partitions <= t.topic_partitions:
                raise TransitionError(f"{self.transactional_id}: bad transition to {t}")
            self.txn_start_timestamp = t.txn_start_timestamp
            self.topic_partitions |= t.topic_partitions
        elif state in (PREPARE_ABORT, PREPARE_COMMIT):
            if not self._same_producer(t) or self.topic_partitions != t.topic_partitions \
                    or self.txn_start_timestamp != t.txn_start_timestamp:
                raise TransitionError(f"{self.transactional_id}: bad transition to {t}")
        elif state in (COMPLETE_ABORT, COMPLETE_COMMIT):
            if not self._same_producer(t) or t.txn_start_timestamp == -1:
                raise TransitionError(f"{self.transactional_id}: bad transition to {t}")
            self.txn_start_timestamp = t.txn_start_timestamp
            self.topic_partitions.clear()
        else:  # PrepareEpochFence is never written; Dead is removed, never completed
            raise TransitionError(f"{self.transactional_id}: cannot complete a transition to {state}")
        self.txn_last_update_timestamp = t.txn_last_update_timestamp
        self.pending_state = None
        self.state = state

    def _same_producer(self, t: TxnTransitMetadata) -> bool:
        return (t.producer_epoch == self.producer_epoch and t.producer_id == self.producer_id
                and t.txn_timeout_ms == self.txn_timeout_ms)
