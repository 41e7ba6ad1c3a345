"""TransactionMarkerChannel: the transaction coordinator's side of the markers (Kafka's
TransactionMarkerChannelManager and TransactionMarkerRequestCompletionHandler).

Once a transaction is in PrepareCommit or PrepareAbort (written to __transaction_state),
its COMMIT or ABORT marker goes to every partition of the transaction, through each
partition's leader: the MarkerWriter of this broker for the partitions it leads, a
WriteTxnMarkers request over a BrokerChannel for the others (their endpoint on the
inter-broker listener, from the cluster metadata). A partition is done when its leader
wrote the marker; one that answers NOT_LEADER_OR_FOLLOWER (or any retriable error), whose
leader is unknown, or whose leader cannot be reached is tried again after the next
metadata change (or a short pause); one whose topic is gone is dropped, as Kafka does.
INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED means a newer producer or
coordinator took over: sending stops. When no partition is left, CompleteCommit or
CompleteAbort is written (retried while COORDINATOR_NOT_AVAILABLE).

Everything stops when this broker is no longer the coordinator of the transactional id
at the same coordinator epoch: the new coordinator resends the markers when it loads the
partition (markers are idempotent: a second one finds no transaction in progress).

Lock: the broker's event-loop thread; one task per transaction being completed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from kbroker.client.connection import KafkaClientError
from kbroker.cluster.broker_channel import BrokerChannel
from kbroker.common.error_code import ErrorCode
from kbroker.common.topic_partition import TopicPartition
from kbroker.coordinator.transaction_metadata import TransactionMetadata, TxnTransitMetadata
from kbroker.coordinator.transaction_state_manager import TransactionStateManager
from kbroker.coordinator.txn_marker_writer import MarkerWriter
from kbroker.protocol.messages.write_txn_markers import (
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from kbroker.security.settings import InterBrokerLogin

log = logging.getLogger(__name__)

E = ErrorCode
WRITE_TXN_MARKERS_VERSION = 1
RETRY_BACKOFF_S = 0.1
RETRIABLE = frozenset({E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_LEADER_OR_FOLLOWER, E.NOT_ENOUGH_REPLICAS,
                       E.NOT_ENOUGH_REPLICAS_AFTER_APPEND, E.REQUEST_TIMED_OUT, E.KAFKA_STORAGE_ERROR,
                       E.NETWORK_EXCEPTION, E.BROKER_NOT_AVAILABLE, E.LEADER_NOT_AVAILABLE,
                       E.FENCED_LEADER_EPOCH, E.UNKNOWN_LEADER_EPOCH})
DONE = frozenset({E.NONE, E.UNSUPPORTED_FOR_MESSAGE_FORMAT, E.UNSUPPORTED_VERSION})
FENCED = frozenset({E.INVALID_PRODUCER_EPOCH, E.TRANSACTION_COORDINATOR_FENCED})
NO_PARTITION, NO_LEADER = -2, -1

# The leader of a partition: a broker id, NO_LEADER, or NO_PARTITION when it does not exist.
LeaderOf = Callable[[TopicPartition], int]


@dataclass
class PendingCompleteTxn:
    transactional_id: str
    coordinator_epoch: int
    metadata: TransactionMetadata
    transit: TxnTransitMetadata  # CompleteCommit / CompleteAbort, written once all markers are
    commit: bool


class TransactionMarkerChannel:
    def __init__(self, state: TransactionStateManager, node_id: int, local: MarkerWriter,
                 leader_of: LeaderOf,
                 endpoint_of: Callable[[int], tuple[str, int] | None] | None = None,
                 metadata_changed: Callable[[float], Awaitable[None]] | None = None,
                 login: InterBrokerLogin | None = None) -> None:
        self.state = state
        self.login = login
        self.node_id = node_id
        self.local = local
        self.leader_of = leader_of
        self.endpoint_of = endpoint_of
        self.metadata_changed = metadata_changed
        self.pending: dict[str, PendingCompleteTxn] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._channels: dict[int, BrokerChannel] = {}

    def add_txn_markers_to_send(self, coordinator_epoch: int, commit: bool, metadata: TransactionMetadata,
                                transit: TxnTransitMetadata) -> None:
        pending = PendingCompleteTxn(metadata.transactional_id, coordinator_epoch, metadata, transit, commit)
        self.pending[metadata.transactional_id] = pending
        task = asyncio.ensure_future(self._complete(pending))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _current(self, pending: PendingCompleteTxn) -> bool:
        """Whether this broker still coordinates the transaction as when it started."""
        err, found = self.state.get_transaction_state(pending.transactional_id)
        return (err == E.NONE and found is not None and found.coordinator_epoch == pending.coordinator_epoch
                and found.metadata is pending.metadata
                and self.pending.get(pending.transactional_id) is pending)

    async def _complete(self, pending: PendingCompleteTxn) -> None:
        metadata = pending.metadata
        try:
            # One turn of the loop first: the EndTxn answer (sent at the end of the turn that
            # wrote PrepareCommit) leaves before the markers are written, as in Kafka, and
            # the markers still come before any request read after it.
            await asyncio.sleep(0)
            while metadata.topic_partitions:
                if not self._current(pending):
                    return
                if not await self._send_round(pending):
                    self._forget(pending)
                    return
                if metadata.topic_partitions and self._current(pending):
                    await self._wait_for_metadata()
            await self._write_completion(pending)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("%s: completing the transaction failed", pending.transactional_id)
        finally:
            self._forget(pending)

    def _forget(self, pending: PendingCompleteTxn) -> None:
        if self.pending.get(pending.transactional_id) is pending:
            del self.pending[pending.transactional_id]

    async def _send_round(self, pending: PendingCompleteTxn) -> bool:
        """Send the marker to every partition still without one; False when a newer producer
        or coordinator fenced the transaction."""
        metadata = pending.metadata
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in sorted(metadata.topic_partitions, key=lambda x: (x.topic, x.partition)):
            leader = self.leader_of(tp)
            if leader == NO_PARTITION:
                log.info("%s: %s no longer exists; no marker for it", pending.transactional_id, tp)
                metadata.remove_partition(tp)
            elif leader >= 0:
                by_leader.setdefault(leader, []).append(tp)
        # This broker's partitions first and directly: on a single broker the whole
        # completion then runs in one step of the loop, before the producer's next request
        # (which would otherwise find the transaction still completing).
        local = by_leader.pop(self.node_id, None)
        results = [] if local is None else [await self._send(self.node_id, local, pending)]
        results += await asyncio.gather(*(self._send(leader, tps, pending) for leader, tps in by_leader.items()))
        if not self._current(pending):
            return True
        for errors in results:
            for tp, code in errors.items():
                if code in DONE:
                    if tp in metadata.topic_partitions:
                        metadata.remove_partition(tp)
                elif code in FENCED:
                    log.info("%s: the marker for %s was refused (%s); the transaction is someone else's now",
                             pending.transactional_id, tp, ErrorCode(code).name)
                    return False
                elif code not in RETRIABLE:
                    log.error("%s: unexpected %s writing the marker for %s; retrying",
                              pending.transactional_id, ErrorCode(code).name, tp)
        return True

    async def _send(self, leader: int, partitions: list[TopicPartition],
                    pending: PendingCompleteTxn) -> dict[TopicPartition, int]:
        metadata = pending.metadata
        if leader == self.node_id:
            return await self.local.write(metadata.producer_id, metadata.producer_epoch,
                                          pending.coordinator_epoch, pending.commit, partitions)
        channel = self._channel(leader)
        if channel is None:
            return dict.fromkeys(partitions, E.BROKER_NOT_AVAILABLE)
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = WriteTxnMarkersRequest(markers=[WriteTxnMarkersRequest.WritableTxnMarker(
            producer_id=metadata.producer_id, producer_epoch=metadata.producer_epoch,
            transaction_result=pending.commit, coordinator_epoch=pending.coordinator_epoch,
            topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                    for t, ps in by_topic.items()])])
        try:
            response: WriteTxnMarkersResponse = await channel.request(request, WRITE_TXN_MARKERS_VERSION)
        except (KafkaClientError, OSError, TimeoutError) as e:
            log.info("%s: markers to broker %d not sent: %s", pending.transactional_id, leader, e)
            channel.reset()
            return dict.fromkeys(partitions, E.NETWORK_EXCEPTION)
        errors = dict.fromkeys(partitions, int(E.UNKNOWN_SERVER_ERROR))
        for result in response.markers:
            for topic in result.topics:
                for p in topic.partitions:
                    errors[TopicPartition(topic.name, p.partition_index)] = p.error_code
        return errors

    def _channel(self, broker_id: int) -> BrokerChannel | None:
        if self.endpoint_of is None:
            return None
        channel = self._channels.get(broker_id)
        if channel is None:
            endpoint_of = self.endpoint_of
            channel = self._channels[broker_id] = BrokerChannel(
                broker_id, lambda: endpoint_of(broker_id), f"broker-{self.node_id}-txn-markers",
                self.login)
        return channel

    async def _wait_for_metadata(self) -> None:
        if self.metadata_changed is not None:
            await self.metadata_changed(RETRY_BACKOFF_S * 5)
        else:
            await asyncio.sleep(RETRY_BACKOFF_S)

    async def _write_completion(self, pending: PendingCompleteTxn) -> None:
        while self._current(pending):
            code = await self.state.append_transaction_to_log(
                pending.transactional_id, pending.coordinator_epoch, pending.transit,
                retry_on_error=lambda c: c == E.COORDINATOR_NOT_AVAILABLE)
            if code != E.COORDINATOR_NOT_AVAILABLE:
                if code != E.NONE:
                    log.info("%s: %s not written: %s", pending.transactional_id,
                             pending.transit.state.state_name, ErrorCode(code).name)
                return
            await asyncio.sleep(RETRY_BACKOFF_S)

    def remove_markers_for_partition(self, partition: int) -> None:
        """The coordinator resigned the __transaction_state partition: its transactions'
        markers are the new coordinator's to send."""
        for txn_id in [t for t in self.pending if self.state.partition_for(t) == partition]:
            del self.pending[txn_id]

    def shutdown(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()
        self.pending.clear()
