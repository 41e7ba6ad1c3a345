"""TransactionStateManager: the transactional ids this broker coordinates, per partition of
__transaction_state, and their copy in that topic (Kafka's TransactionStateManager).

Each partition this broker leads has a cache entry: the coordinator epoch (the
partition's leader epoch; 0 on a single broker, which leads every partition) and the
TransactionMetadata of its transactional ids, replayed from the partition when it became
leader (`load_partition`, later records winning, a tombstone removing the id). While a
partition loads its ids answer COORDINATOR_LOAD_IN_PROGRESS; ids of a partition not led
here answer NOT_COORDINATOR.

Every change is written before it is applied (`append_transaction_to_log`): the target
state goes to the id's partition, acks=all, and once it is replicated the metadata moves
to it, provided the partition is still led here at the same coordinator epoch. Append
errors map as Kafka maps them for clients (NOT_COORDINATOR: look the coordinator up
again; COORDINATOR_NOT_AVAILABLE: retry). Ids idle for transactional.id.expiration.ms
with no transaction in progress are removed with tombstones.

Lock: the broker's event-loop thread only; a change in flight is guarded by the
metadata's pending state.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.coordinator import transaction_log
from kbroker.coordinator.transaction_metadata import (
    DEAD,
    ONGOING,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from kbroker.coordinator.transaction_topic import TransactionTopic
from kbroker.utils.time import Time

if TYPE_CHECKING:
    from kbroker.config import BrokerConfig

log = logging.getLogger(__name__)

E = ErrorCode
TOMBSTONES_PER_BATCH = 500  # well below the partition's max.message.bytes


@dataclass(frozen=True)
class TransactionConfig:
    transactional_id_expiration_ms: int = 604800000
    transaction_max_timeout_ms: int = 900000
    load_buffer_size: int = 5242880
    request_timeout_ms: int = 30000

    @classmethod
    def from_broker_config(cls, c: BrokerConfig) -> TransactionConfig:
        return cls(c.transactional_id_expiration_ms, c.transaction_max_timeout_ms,
                   c.transaction_state_log_load_buffer_size, c.request_timeout_ms)


@dataclass
class TxnMetadataCacheEntry:
    coordinator_epoch: int
    metadata: dict[str, TransactionMetadata] = field(default_factory=dict)


@dataclass(frozen=True)
class CoordinatorEpochAndMetadata:
    coordinator_epoch: int
    metadata: TransactionMetadata


def append_error(code: int) -> int:
    """A failed __transaction_state append as the client sees it (Kafka's mapping)."""
    if code in (E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_ENOUGH_REPLICAS, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                E.REQUEST_TIMED_OUT):
        return E.COORDINATOR_NOT_AVAILABLE
    if code in (E.NOT_LEADER_OR_FOLLOWER, E.KAFKA_STORAGE_ERROR):
        return E.NOT_COORDINATOR
    if code in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE):
        return E.UNKNOWN_SERVER_ERROR
    return code


class TransactionStateManager:
    def __init__(self, config: TransactionConfig, time: Time, topic: TransactionTopic) -> None:
        self.config = config
        self.time = time
        self.topic = topic
        self.caches: dict[int, TxnMetadataCacheEntry] = {}
        self.loading: set[int] = set()

    def partition_for(self, transactional_id: str) -> int:
        return self.topic.partition_for(transactional_id)

    def validate_transaction_timeout_ms(self, timeout_ms: int) -> bool:
        return 0 < timeout_ms <= self.config.transaction_max_timeout_ms

    # -- lookups
    def get_transaction_state(self, transactional_id: str
                              ) -> tuple[int, CoordinatorEpochAndMetadata | None]:
        """(NONE, the id's metadata or None when unknown), or the error: the partition is
        loading or not led here."""
        partition = self.partition_for(transactional_id)
        if partition in self.loading:
            return E.COORDINATOR_LOAD_IN_PROGRESS, None
        entry = self.caches.get(partition)
        if entry is None:
            return E.NOT_COORDINATOR, None
        metadata = entry.metadata.get(transactional_id)
        return E.NONE, None if metadata is None else CoordinatorEpochAndMetadata(entry.coordinator_epoch, metadata)

    def put_transaction_state_if_not_exists(self, metadata: TransactionMetadata
                                            ) -> tuple[int, CoordinatorEpochAndMetadata | None]:
        err, found = self.get_transaction_state(metadata.transactional_id)
        if err != E.NONE or found is not None:
            return err, found
        entry = self.caches[self.partition_for(metadata.transactional_id)]
        entry.metadata[metadata.transactional_id] = metadata
        return E.NONE, CoordinatorEpochAndMetadata(entry.coordinator_epoch, metadata)

    def all_metadata(self) -> list[TransactionMetadata]:
        return [m for entry in self.caches.values() for m in entry.metadata.values()]

    # -- writes
    async def append_transaction_to_log(self, transactional_id: str, coordinator_epoch: int,
                                        transit: TxnTransitMetadata,
                                        retry_on_error: Callable[[int], bool] = lambda code: False) -> int:
        """Write `transit` and, once replicated, apply it; the error code the caller answers."""
        err, found = self.get_transaction_state(transactional_id)
        if err != E.NONE:
            return err
        if found is None or found.coordinator_epoch != coordinator_epoch:
            return E.NOT_COORDINATOR
        code = await self._append(self.partition_for(transactional_id),
                                  [(transaction_log.key_to_bytes(transactional_id),
                                    transaction_log.value_to_bytes(transit))],
                                  transit.txn_timeout_ms / 1000)
        err, found = self.get_transaction_state(transactional_id)
        if code == E.NONE:
            if err != E.NONE:
                return err
            if found is None or found.coordinator_epoch != coordinator_epoch:
                log.info("%s: the coordinator epoch changed while writing %s", transactional_id, transit.state)
                return E.NOT_COORDINATOR
            found.metadata.complete_transition(transit)
            return E.NONE
        if found is not None and found.coordinator_epoch == coordinator_epoch and not retry_on_error(code):
            found.metadata.pending_state = None
        log.info("%s: writing %s to %s failed: %s", transactional_id, transit.state.state_name,
                 self.topic.name, ErrorCode(code).name)
        return code

    async def _append(self, partition: int, records: list[tuple[bytes, bytes | None]], timeout_s: float) -> int:
        try:
            info = self.topic.append_records(partition, records, acks=-1)
            waited = self.topic.wait_replicated(partition, timeout_s, info.last_offset + 1)
            code = E.NONE if waited is None else await waited
        except KafkaError as e:
            code = e.error_code
        except Exception:
            log.exception("appending to %s-%d failed", self.topic.name, partition)
            code = E.UNKNOWN_SERVER_ERROR
        return append_error(code)

    # -- partitions led here
    def load_partition(self, partition: int, coordinator_epoch: int) -> list[TransactionMetadata]:
        """Become the coordinator of the partition's ids (Kafka's
        loadTransactionsForTxnTopicPartition): replay it; returns the metadata of the
        transactions caught in PrepareCommit or PrepareAbort, whose markers must be written."""
        self.loading.add(partition)
        loaded: dict[str, TransactionMetadata] = {}
        try:
            for rec in self.topic.read_partition(partition, self.config.load_buffer_size):
                if rec.key is None or rec.control_type >= 0:
                    continue
                try:
                    transactional_id = transaction_log.read_key(rec.key)
                    if transactional_id is None:
                        continue
                    metadata = transaction_log.read_value(transactional_id, rec.value)
                except (ValueError, IndexError) as e:
                    log.warning("skipping an unreadable %s record at %d: %s", self.topic.name, rec.offset, e)
                    continue
                if metadata is None:
                    loaded.pop(transactional_id, None)
                else:
                    loaded[transactional_id] = metadata
        finally:
            self.loading.discard(partition)
        self.caches[partition] = TxnMetadataCacheEntry(coordinator_epoch, loaded)
        if loaded:
            log.info("loaded %d transactional ids from %s-%d (coordinator epoch %d)", len(loaded),
                     self.topic.name, partition, coordinator_epoch)
        return [m for m in loaded.values()
                if m.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)]

    def remove_partition(self, partition: int) -> None:
        self.loading.discard(partition)
        if self.caches.pop(partition, None) is not None:
            log.info("no longer the transaction coordinator of %s-%d", self.topic.name, partition)

    # -- periodic work
    def timed_out_transactions(self) -> list[tuple[str, int, int]]:
        """(transactional id, producer id, epoch) of the transactions older than their timeout."""
        now = self.time.milliseconds()
        return [(m.transactional_id, m.producer_id, m.producer_epoch) for m in self.all_metadata()
                if m.pending_state is None and m.state is ONGOING
                and m.txn_start_timestamp + m.txn_timeout_ms < now]

    async def remove_expired_transactional_ids(self) -> int:
        """Tombstones for ids idle past transactional.id.expiration.ms; returns how many went."""
        now = self.time.milliseconds()
        removed = 0
        for partition, entry in list(self.caches.items()):
            idle = [m for m in list(entry.metadata.values())
                    if m.pending_state is None and m.state.expiration_allowed
                    and m.txn_last_update_timestamp <= now - self.config.transactional_id_expiration_ms]
            for start in range(0, len(idle), TOMBSTONES_PER_BATCH):
                removed += await self._expire(partition, entry, idle[start:start + TOMBSTONES_PER_BATCH])
        if removed:
            log.info("removed %d expired transactional ids", removed)
        return removed

    async def _expire(self, partition: int, entry: TxnMetadataCacheEntry,
                      idle: list[TransactionMetadata]) -> int:
        """One batch of tombstones; the ids go once it is written (at the same epoch)."""
        expired = [(m, m.prepare_dead()) for m in idle]
        code = await self._append(partition, [(transaction_log.key_to_bytes(m.transactional_id), None)
                                              for m, _ in expired], self.config.request_timeout_ms / 1000)
        removed = 0
        current = self.caches.get(partition)
        for m, transit in expired:
            if (code == E.NONE and current is entry and m.pending_state is DEAD
                    and m.producer_epoch == transit.producer_epoch):
                entry.metadata.pop(m.transactional_id, None)
                removed += 1
            else:
                m.pending_state = None
        return removed
