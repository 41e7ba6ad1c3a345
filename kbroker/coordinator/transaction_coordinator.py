"""TransactionCoordinator: the transaction protocol of KIP-98 (with KIP-360 epoch bumps),
as Kafka's TransactionCoordinator at transaction.version 0: InitProducerId with a
transactional id, AddPartitionsToTxn (and its verify-only form), AddOffsetsToTxn's
partition, EndTxn, DescribeTransactions, ListTransactions, the abort of timed-out
transactions and the expiration of idle transactional ids.

It coordinates the transactional ids of the __transaction_state partitions this broker
leads (all of them on a single broker, at coordinator epoch 0; in a cluster it follows
the leadership of each partition: `on_elected` loads the partition's ids and completes
the transactions caught between prepare and complete, `on_resigned` forgets them). The
states and their transitions are TransactionMetadata's; every change is written to
__transaction_state before it is applied (TransactionStateManager); the markers are sent
by the TransactionMarkerChannel once EndTxn has written PrepareCommit or PrepareAbort,
and EndTxn answers at that point, as Kafka does.

Fencing: InitProducerId for an id with a transaction in progress bumps the epoch
(PrepareEpochFence), aborts the transaction with the bumped epoch (the old producer's
writes and its EndTxn then fail with INVALID_PRODUCER_EPOCH / PRODUCER_FENCED) and
answers CONCURRENT_TRANSACTIONS; the client retries and gets the epoch after that. A
transaction older than its transaction.timeout.ms is aborted the same way.

Lock: the broker's event-loop thread; requests for one id interleave only at awaits,
where the metadata's pending state refuses concurrent changes (CONCURRENT_TRANSACTIONS).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from kbroker.common.error_code import ErrorCode
from kbroker.common.topic_partition import TopicPartition
from kbroker.coordinator.transaction_metadata import (
    COMPLETE_ABORT,
    COMPLETE_COMMIT,
    DEAD,
    EMPTY,
    NO_PRODUCER_EPOCH,
    ONGOING,
    PREPARE_ABORT,
    PREPARE_COMMIT,
    PREPARE_EPOCH_FENCE,
    TransactionMetadata,
    TransactionState,
    TransitionError,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from kbroker.coordinator.transaction_state_manager import TransactionStateManager
from kbroker.coordinator.txn_marker_channel import TransactionMarkerChannel
from kbroker.utils.time import Time

log = logging.getLogger(__name__)

E = ErrorCode
NO_PRODUCER_ID = -1


@dataclass(frozen=True)
class InitProducerIdResult:
    error_code: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True)
class TransactionDescription:
    error_code: int
    transactional_id: str
    state: str = ""
    timeout_ms: int = 0
    start_time_ms: int = -1
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str


class TransactionCoordinator:
    def __init__(self, state: TransactionStateManager, markers: TransactionMarkerChannel, time: Time,
                 generate_producer_id: Callable[[], Awaitable[int]]) -> None:
        self.state = state
        self.markers = markers
        self.time = time
        self.generate_producer_id = generate_producer_id

    def now(self) -> int:
        return self.time.milliseconds()

    # -- leadership of __transaction_state partitions
    def on_elected(self, partition: int, coordinator_epoch: int) -> None:
        """Coordinate the partition's ids: load them, then complete the transactions that
        were between prepare and complete (their markers may be missing)."""
        self.markers.remove_markers_for_partition(partition)
        for metadata in self.state.load_partition(partition, coordinator_epoch):
            commit = metadata.state is PREPARE_COMMIT
            transit = metadata.prepare_complete(self.now())
            log.info("%s: sending the %s markers of its transaction again after loading %s-%d",
                     metadata.transactional_id, "COMMIT" if commit else "ABORT", self.state.topic.name,
                     partition)
            self.markers.add_txn_markers_to_send(coordinator_epoch, commit, metadata, transit)

    def on_resigned(self, partition: int) -> None:
        self.state.remove_partition(partition)
        self.markers.remove_markers_for_partition(partition)

    def owns(self, partition: int) -> bool:
        return partition in self.state.caches or partition in self.state.loading

    # -- InitProducerId
    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None) -> InitProducerIdResult:
        if not transactional_id:
            return InitProducerIdResult(E.INVALID_REQUEST)
        if not self.state.validate_transaction_timeout_ms(timeout_ms):
            return InitProducerIdResult(E.INVALID_TRANSACTION_TIMEOUT)
        err, found = self.state.get_transaction_state(transactional_id)
        if err == E.NONE and found is None:
            try:
                producer_id = await self.generate_producer_id()
            except Exception as e:
                log.warning("%s: no producer id: %s", transactional_id, e)
                return InitProducerIdResult(E.COORDINATOR_NOT_AVAILABLE)
            err, found = self.state.put_transaction_state_if_not_exists(TransactionMetadata(
                transactional_id, producer_id, NO_PRODUCER_EPOCH, timeout_ms, EMPTY,
                txn_last_update_timestamp=self.now()))
        if err != E.NONE or found is None:
            return InitProducerIdResult(err if err != E.NONE else E.NOT_COORDINATOR)
        metadata, coordinator_epoch = found.metadata, found.coordinator_epoch
        new_producer_id = NO_PRODUCER_ID
        if metadata.is_producer_epoch_exhausted and metadata.state in (EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT):
            try:
                new_producer_id = await self.generate_producer_id()
            except Exception as e:
                log.warning("%s: no producer id: %s", transactional_id, e)
                return InitProducerIdResult(E.COORDINATOR_NOT_AVAILABLE)
        prepared = self._prepare_init_producer_id(metadata, timeout_ms, expected, new_producer_id)
        if isinstance(prepared, int):
            return InitProducerIdResult(prepared)
        if prepared.state is PREPARE_EPOCH_FENCE:
            code, _pid, _epoch = await self._end_transaction(
                transactional_id, prepared.producer_id, prepared.producer_epoch, commit=False, from_client=False)
            return InitProducerIdResult(code if code != E.NONE else E.CONCURRENT_TRANSACTIONS)
        code = await self.state.append_transaction_to_log(transactional_id, coordinator_epoch, prepared)
        if code != E.NONE:
            return InitProducerIdResult(code)
        log.info("initialized transactional id %s with producer id %d and epoch %d on partition %s-%d",
                 transactional_id, prepared.producer_id, prepared.producer_epoch, self.state.topic.name,
                 self.state.partition_for(transactional_id))
        return InitProducerIdResult(E.NONE, prepared.producer_id, prepared.producer_epoch)

    def _prepare_init_producer_id(self, metadata: TransactionMetadata, timeout_ms: int,
                                  expected: tuple[int, int] | None,
                                  new_producer_id: int) -> TxnTransitMetadata | int:
        if metadata.pending_transition_in_progress:
            return E.CONCURRENT_TRANSACTIONS
        if expected is not None and not (
                metadata.producer_epoch == NO_PRODUCER_EPOCH or expected[0] == metadata.producer_id
                or (expected[0] == metadata.previous_producer_id and is_epoch_exhausted(expected[1]))):
            return E.PRODUCER_FENCED
        state = metadata.state
        if state in (PREPARE_ABORT, PREPARE_COMMIT):
            return E.CONCURRENT_TRANSACTIONS
        if state in (EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT):
            if metadata.is_producer_epoch_exhausted and (expected is None or expected[1] == metadata.producer_epoch):
                if new_producer_id < 0:
                    return E.CONCURRENT_TRANSACTIONS  # exhausted meanwhile: the client retries
                return metadata.prepare_producer_id_rotation(new_producer_id, timeout_ms, self.now(),
                                                             expected is not None)
            return metadata.prepare_increment_producer_epoch(timeout_ms, None if expected is None else expected[1],
                                                             self.now())
        if state is ONGOING:
            return metadata.prepare_fence_producer_epoch()
        log.error("%s: InitProducerId in state %s", metadata.transactional_id, state)
        return E.UNKNOWN_SERVER_ERROR

    # -- AddPartitionsToTxn, AddOffsetsToTxn
    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: Iterable[TopicPartition]) -> int:
        if not transactional_id:
            return E.INVALID_REQUEST
        wanted = set(partitions)
        err, found = self.state.get_transaction_state(transactional_id)
        if err != E.NONE:
            return err
        if found is None:
            return E.INVALID_PRODUCER_ID_MAPPING
        metadata = found.metadata
        err = _check_producer(metadata, producer_id, producer_epoch)
        if err != E.NONE:
            return err
        if metadata.pending_transition_in_progress or metadata.state in (PREPARE_COMMIT, PREPARE_ABORT):
            return E.CONCURRENT_TRANSACTIONS
        if metadata.state is ONGOING and wanted <= metadata.topic_partitions:
            return E.NONE
        transit = metadata.prepare_add_partitions(wanted, self.now())
        return await self.state.append_transaction_to_log(transactional_id, found.coordinator_epoch, transit)

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """AddPartitionsToTxn v4+ verify_only: whether each partition is in the transaction
        (a partition leader asks before it takes a transactional batch, KIP-890)."""
        tps = list(partitions)
        if not transactional_id:
            return dict.fromkeys(tps, int(E.INVALID_REQUEST))
        err, found = self.state.get_transaction_state(transactional_id)
        if err == E.NONE:
            if found is None:
                err = E.INVALID_PRODUCER_ID_MAPPING
            else:
                metadata = found.metadata
                err = _check_producer(metadata, producer_id, producer_epoch)
                if err == E.NONE and metadata.state in (PREPARE_COMMIT, PREPARE_ABORT):
                    err = E.CONCURRENT_TRANSACTIONS
                if err == E.NONE:
                    return {tp: E.NONE if tp in metadata.topic_partitions else E.TRANSACTION_ABORTABLE
                            for tp in tps}
        return dict.fromkeys(tps, int(err))

    # -- EndTxn
    async def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              commit: bool) -> tuple[int, int, int]:
        """EndTxn: (error, producer id, epoch)."""
        return await self._end_transaction(transactional_id, producer_id, producer_epoch, commit, True)

    async def _end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                               commit: bool, from_client: bool) -> tuple[int, int, int]:
        if not transactional_id:
            return E.INVALID_REQUEST, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        err, found = self.state.get_transaction_state(transactional_id)
        if err != E.NONE:
            return err, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if found is None:
            return E.INVALID_PRODUCER_ID_MAPPING, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        metadata, coordinator_epoch = found.metadata, found.coordinator_epoch
        prepared = self._prepare_end(metadata, producer_id, producer_epoch, commit, from_client)
        if isinstance(prepared, int):
            if prepared == E.NONE:  # already completed this way: a retry
                return E.NONE, metadata.producer_id, metadata.producer_epoch
            return prepared, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        transit, is_epoch_fence = prepared
        code = await self.state.append_transaction_to_log(transactional_id, coordinator_epoch, transit)
        if code != E.NONE:
            if is_epoch_fence:
                err, found = self.state.get_transaction_state(transactional_id)
                if found is not None and found.coordinator_epoch == coordinator_epoch:
                    found.metadata.has_failed_epoch_fence = True
                    log.warning("%s: the epoch fence was not written (%s); epoch %d was never returned",
                                transactional_id, ErrorCode(code).name, transit.producer_epoch)
            return code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        complete = self._prepare_complete(transactional_id, coordinator_epoch, producer_id, producer_epoch, commit)
        if isinstance(complete, int):
            return complete, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        metadata, complete_transit = complete
        self.markers.add_txn_markers_to_send(coordinator_epoch, commit, metadata, complete_transit)
        return E.NONE, metadata.producer_id, metadata.producer_epoch

    def _prepare_end(self, metadata: TransactionMetadata, producer_id: int, producer_epoch: int, commit: bool,
                     from_client: bool) -> tuple[TxnTransitMetadata, bool] | int:
        valid_epoch = (not from_client or producer_epoch == metadata.producer_epoch) \
            and producer_epoch >= metadata.producer_epoch
        if metadata.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING
        if not valid_epoch:
            return E.PRODUCER_FENCED
        if metadata.pending_transition_in_progress and metadata.pending_state is not PREPARE_EPOCH_FENCE:
            return E.CONCURRENT_TRANSACTIONS
        state = metadata.state
        if state is ONGOING:
            target = PREPARE_COMMIT if commit else PREPARE_ABORT
            is_epoch_fence = False
            if target is PREPARE_ABORT and metadata.pending_state is PREPARE_EPOCH_FENCE:
                is_epoch_fence = True
                metadata.pending_state = None
                metadata.producer_epoch = producer_epoch
                metadata.last_producer_epoch = NO_PRODUCER_EPOCH
            elif metadata.pending_state is PREPARE_EPOCH_FENCE:
                return E.CONCURRENT_TRANSACTIONS
            return metadata.prepare_abort_or_commit(target, self.now()), is_epoch_fence
        if state is COMPLETE_COMMIT:
            return E.NONE if commit else E.INVALID_TXN_STATE
        if state is COMPLETE_ABORT:
            return E.NONE if not commit else E.INVALID_TXN_STATE
        if state is PREPARE_COMMIT:
            return E.CONCURRENT_TRANSACTIONS if commit else E.INVALID_TXN_STATE
        if state is PREPARE_ABORT:
            return E.CONCURRENT_TRANSACTIONS if not commit else E.INVALID_TXN_STATE
        if state is EMPTY:
            return E.INVALID_TXN_STATE
        log.error("%s: EndTxn in state %s", metadata.transactional_id, state)
        return E.UNKNOWN_SERVER_ERROR

    def _prepare_complete(self, transactional_id: str, coordinator_epoch: int, producer_id: int,
                          producer_epoch: int, commit: bool
                          ) -> tuple[TransactionMetadata, TxnTransitMetadata] | int:
        """After PrepareCommit/PrepareAbort is written: the CompleteCommit/CompleteAbort
        target, pending until the markers are written."""
        err, found = self.state.get_transaction_state(transactional_id)
        if err != E.NONE or found is None or found.coordinator_epoch != coordinator_epoch:
            return E.NOT_COORDINATOR
        metadata = found.metadata
        err = _check_producer(metadata, producer_id, producer_epoch)
        if err != E.NONE:
            return err
        if metadata.pending_transition_in_progress:
            return E.CONCURRENT_TRANSACTIONS
        if metadata.state is not (PREPARE_COMMIT if commit else PREPARE_ABORT):
            return E.INVALID_TXN_STATE
        return metadata, metadata.prepare_complete(self.now())

    # -- admin
    def describe(self, transactional_id: str) -> TransactionDescription:
        if not transactional_id:
            return TransactionDescription(E.INVALID_REQUEST, transactional_id)
        err, found = self.state.get_transaction_state(transactional_id)
        if err != E.NONE:
            return TransactionDescription(err, transactional_id)
        if found is None or found.metadata.state is DEAD:
            return TransactionDescription(E.TRANSACTIONAL_ID_NOT_FOUND, transactional_id)
        m = found.metadata
        return TransactionDescription(
            E.NONE, transactional_id, m.state.state_name, m.txn_timeout_ms, m.txn_start_timestamp,
            m.producer_id, m.producer_epoch,
            tuple(sorted(m.topic_partitions, key=lambda tp: (tp.topic, tp.partition))))

    def list_transactions(self, states: Iterable[str], producer_ids: Iterable[int], duration_ms: int = -1,
                          transactional_id_pattern: str | None = None
                          ) -> tuple[int, list[str], list[TransactionListing]]:
        """(error, unknown state filters, the transactions that pass every filter). A
        transactional id pattern (KIP-1152; null or empty: none) must match the whole id, as
        TransactionStateManager.listTransactionStates matches it; one that does not compile
        answers INVALID_REGULAR_EXPRESSION."""
        if self.state.loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS, [], []
        id_pattern = None
        if transactional_id_pattern:
            try:
                id_pattern = re.compile(transactional_id_pattern)
            except re.error:
                return E.INVALID_REGULAR_EXPRESSION, [], []
        wanted: set[TransactionState] = set()
        unknown = []
        names = list(states)
        for name in names:
            found = TransactionState.from_name(name)
            if found is None:
                unknown.append(name)
            else:
                wanted.add(found)
        pids = set(producer_ids)
        now = self.now()
        out = []
        for m in self.state.all_metadata():
            if m.state is DEAD or (pids and m.producer_id not in pids) or (names and m.state not in wanted):
                continue
            if duration_ms >= 0 and now - m.txn_start_timestamp <= duration_ms:
                continue
            if id_pattern is not None and id_pattern.fullmatch(m.transactional_id) is None:
                continue
            out.append(TransactionListing(m.transactional_id, m.producer_id, m.state.state_name))
        return E.NONE, unknown, out

    # -- periodic work
    async def abort_timed_out_transactions(self) -> int:
        """Fence and abort every transaction older than its transaction.timeout.ms."""
        aborted = 0
        for transactional_id, producer_id, _epoch in self.state.timed_out_transactions():
            err, found = self.state.get_transaction_state(transactional_id)
            if found is None:
                continue
            metadata = found.metadata
            if metadata.producer_id != producer_id or metadata.pending_transition_in_progress:
                continue
            try:
                transit = metadata.prepare_fence_producer_epoch()
            except TransitionError as e:
                log.error("%s: cannot abort the timed-out transaction: %s", transactional_id, e)
                continue
            log.info("%s: aborting the transaction of producer %d epoch %d: older than %d ms",
                     transactional_id, producer_id, metadata.producer_epoch, metadata.txn_timeout_ms)
            code, _pid, _epoch = await self._end_transaction(
                transactional_id, transit.producer_id, transit.producer_epoch, commit=False, from_client=False)
            if code == E.NONE:
                aborted += 1
            elif code not in (E.INVALID_PRODUCER_ID_MAPPING, E.PRODUCER_FENCED, E.CONCURRENT_TRANSACTIONS):
                log.warning("%s: the rollback of its timed-out transaction failed: %s", transactional_id,
                            ErrorCode(code).name)
        return aborted

    async def remove_expired_transactional_ids(self) -> int:
        return await self.state.remove_expired_transactional_ids()

    def shutdown(self) -> None:
        self.markers.shutdown()


def _check_producer(metadata: TransactionMetadata, producer_id: int, producer_epoch: int) -> int:
    """A request's producer against the id's: another id, or an older epoch (fenced)."""
    if metadata.producer_id != producer_id:
        return E.INVALID_PRODUCER_ID_MAPPING
    if metadata.producer_epoch != producer_epoch:
        return E.PRODUCER_FENCED
    return E.NONE
