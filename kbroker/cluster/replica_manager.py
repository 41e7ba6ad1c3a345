"""ReplicaManager: the partitions this broker holds a replica of, who leads them, and
the requests waiting on them (Kafka's ReplicaManager). Request handlers reach partition
data only through it, so they never need to know whether they run on a single broker or
in a cluster.

Appends: `append_records` is the one way records reach a leader's log (Produce, the
transaction coordinator's markers; the coordinators' internal topics append with
`append_to_leader` and wait with `wait_for_replication`): each partition is appended in
order (Kafka's appendToLocalLog), its fsync awaited when the append reached
flush.messages, and acks=all waits in the produce purgatory (DelayedProduce) until the
high watermark passes the batch or `timeout_ms` passes.

Fetches: `fetch_messages` (Kafka's fetchMessages) reads every partition of a Fetch
(`read_from_log`: leader checks and leader-epoch fencing; a consumer up to the high
watermark or the last stable offset, with the aborted transactions, a follower up to the
log end offset, moving its fetch state; the byte and record bounds; cluster/fetch_params.py
names the request's parameters and the read's result) and answers at once, or parks a
DelayedFetch (cluster/delayed_fetch.py) in the fetch purgatory until min_bytes or the
deadline. The Fetch handler only translates the request and builds the response.

A Partition tells both purgatories when its data, high watermark or leadership moves
(`check_and_complete_fetch` / `_produce`). Both purgatories run on the injected Timer.

Single broker: a Partition is made on first use for every partition of the topic
registry, led here alone at leader epoch 0; its high watermark is its log end offset.

Cluster mode: Partitions are made and changed only by the controller's LeaderAndIsr
(`become_leader_or_follower`) and removed by its StopReplica. A LeaderAndIsr whose
controller epoch is older than the newest seen is refused (STALE_CONTROLLER_EPOCH), a
partition state whose leader epoch is not newer than the one held is ignored (the
same), so a zombie controller changes nothing here. Becoming a follower hands the
partition to the ReplicaFetcherManager; becoming a leader takes it away. While the
broker is fenced (ZooKeeper silent for most of the session timeout) no partition it
leads takes writes; after a session expiry it waits for the controller to speak.

Lock: the broker's event-loop thread; LeaderAndIsr and StopReplica are applied one at a
time (`state_change_lock`), as Kafka's replicaStateChangeLock.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kbroker.cluster.broker_topic_stats import BrokerTopicStats
from kbroker.cluster.delayed_fetch import DelayedFetch, FetchResponder, answers_now
from kbroker.cluster.delayed_produce import (
    DelayedProduce,
    PartitionAppendResult,
    ProducePartitionStatus,
)
from kbroker.cluster.fetch_params import (
    FETCH_TXN_COMMITTED,
    FetchInfo,
    FetchParams,
    FetchResult,
    PartitionData,
    error_data,
    records_size,
)
from kbroker.cluster.partition import NotLeaderError, Partition, PartitionState
from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.common.topic_partition import TopicPartition
from kbroker.metadata.topic_registry import TopicInfo
from kbroker.protocol.codec import ZERO_UUID
from kbroker.protocol.messages.fetch import FetchResponse
from kbroker.storage.errors import KafkaStorageError
from kbroker.storage.log import Log
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_manager import LogManager
from kbroker.storage.producer_state import AppendOrigin
from kbroker.storage.values import LogAppendInfo
from kbroker.utils.purgatory import DelayedOperationPurgatory
from kbroker.utils.timer import LoopTimer, Timer

if TYPE_CHECKING:
    from kbroker.cluster.metadata_cache import TopicCatalog
    from kbroker.cluster.partition import AlterIsr
    from kbroker.cluster.replica_fetcher import ReplicaFetcherManager

log = logging.getLogger(__name__)

LeadershipListener = Callable[[list[Partition], list[Partition]], None]
# What append_records answers: one result per entry, in the entries' order.
AppendCallback = Callable[[list[PartitionAppendResult]], None]
Records = bytes | bytearray | memoryview
# Batches refused for their size count in BytesRejectedPerSec, as Kafka counts them.
_REJECTED_FOR_SIZE = (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE)
AbortedTransaction = FetchResponse.AbortedTransaction


@dataclass(slots=True)
class LeaderAndIsrPartition:
    tp: TopicPartition
    topic_id: uuid.UUID | None
    state: PartitionState
    is_new: bool = False


@dataclass(slots=True)
class LeaderAndIsrResult:
    errors: dict[TopicPartition, int] = field(default_factory=dict)
    became_leader: list[Partition] = field(default_factory=list)
    became_follower: list[Partition] = field(default_factory=list)


class ReplicaManager:
    """See the module docstring."""

    def __init__(self, node_id: int, log_manager: LogManager, topics: TopicCatalog,
                 now_ms: Callable[[], int], *, clustered: bool = False,
                 replica_lag_time_max_ms: int = 30000, timer: Timer | None = None,
                 topic_stats: BrokerTopicStats | None = None,
                 fetchers: ReplicaFetcherManager | None = None, alter_isr: AlterIsr | None = None,
                 topic_config: Callable[[str], Awaitable[LogConfig]] | None = None,
                 is_alive: Callable[[int], bool] | None = None,
                 broker_epoch: Callable[[], int] | None = None) -> None:
        self.node_id = node_id
        self.log_manager = log_manager
        self.topics = topics
        self.now_ms = now_ms
        self.clustered = clustered
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.timer: Timer = timer if timer is not None else LoopTimer()
        self.topic_stats = topic_stats if topic_stats is not None else BrokerTopicStats()
        self.delayed_produce_purgatory = DelayedOperationPurgatory("Produce", self.timer)
        self.delayed_fetch_purgatory = DelayedOperationPurgatory("Fetch", self.timer)
        self.partitions: dict[TopicPartition, Partition] = {}
        self.controller_epoch = -1
        self.state_change_lock = asyncio.Lock()
        # Cluster mode: the followers' fetchers and the leaders' ISR changes to the
        # controller (the ZkBroker's), where a new log's topic config comes from
        # (ZooKeeper), whether a broker is registered (the controller's live brokers) and
        # the czxid of our registration (older requests are stale).
        self.fetchers = fetchers
        self.alter_isr = alter_isr
        self.topic_config = topic_config
        self.is_alive = is_alive
        self._broker_epoch = broker_epoch
        # Told of the partitions that became leaders and followers (the coordinators).
        self.leadership_listeners: list[LeadershipListener] = []
        self.zk_fenced = False  # ZooKeeper silent for most of the session timeout
        # After a session expiry: partitions that take no writes until the controller's
        # next LeaderAndIsr for them (it may have moved them meanwhile).
        self.awaiting_controller: set[TopicPartition] = set()
        # ISR changes this broker made as leader (Kafka's IsrShrinksPerSec/IsrExpandsPerSec)
        self.isr_shrinks = 0
        self.isr_expands = 0

    def add_leadership_listener(self, listener: LeadershipListener) -> None:
        """Told, after each LeaderAndIsr and StopReplica, the partitions that became
        leaders and followers here (Kafka's onLeadershipChange callback)."""
        self.leadership_listeners.append(listener)

    @property
    def broker_epoch(self) -> int:
        """The czxid of our registration in ZooKeeper (-1: none yet, or a single broker)."""
        return self._broker_epoch() if self._broker_epoch is not None else -1

    # -- lookups for request handlers ----------------------------------------------------
    def get_partition(self, tp: TopicPartition) -> Partition | None:
        partition = self.partitions.get(tp)
        if partition is None and not self.clustered:
            partition = self._local_partition(tp)
        return partition

    def _local_partition(self, tp: TopicPartition) -> Partition | None:
        plog = self.log_manager.get_log(tp)
        if plog is None:
            return None
        info = self.topics.get(tp.topic)
        if info is None or not 0 <= tp.partition < info.partitions:
            return None
        partition = Partition(tp, self.node_id, plog, self.now_ms, delayed_operations=self)
        partition.make_local_leader()
        self.partitions[tp] = partition
        return partition

    def leader_partition(self, tp: TopicPartition, current_leader_epoch: int = -1) -> Partition:
        """The partition, if this broker leads it (at `current_leader_epoch`, -1: any).
        KafkaError otherwise: UNKNOWN_TOPIC_OR_PARTITION for a partition that does not
        exist, NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH for one
        led elsewhere or at another epoch, KAFKA_STORAGE_ERROR for an offline log dir."""
        partition = self.get_partition(tp)
        if partition is None:
            info = self.topics.get(tp.topic)
            if info is None or not 0 <= tp.partition < info.partitions:
                raise KafkaError(f"unknown partition {tp}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            if self.log_manager.is_offline(tp):
                raise KafkaStorageError(f"the log dir of {tp} is offline")
            raise NotLeaderError(f"broker {self.node_id} holds no replica of {tp}")
        if partition.log is not None and partition.log.closed and self.log_manager.is_offline(tp):
            raise KafkaStorageError(f"the log dir of {tp} is offline")
        partition.check_leader(current_leader_epoch)
        return partition

    def leader_log(self, tp: TopicPartition, current_leader_epoch: int = -1) -> Log:
        return self.leader_partition(tp, current_leader_epoch).local_log()

    def forget(self, tps: Iterable[TopicPartition]) -> None:
        """Topics deleted on a single broker: drop their partitions; requests waiting on
        them answer (acks=all: NOT_LEADER_OR_FOLLOWER; a parked Fetch reads again)."""
        for tp in tps:
            p = self.partitions.pop(tp, None)
            if p is not None:
                p.try_complete_delayed_produces()
            self.check_and_complete_fetch(tp)

    def _isr_changed(self, old_size: int, new_size: int) -> None:
        if new_size < old_size:
            self.isr_shrinks += 1
        elif new_size > old_size:
            self.isr_expands += 1

    def leader_partitions(self) -> list[Partition]:
        return [p for p in self.partitions.values() if p.is_leader]

    # -- appends ---------------------------------------------------------------------------
    def append_records(self, timeout_ms: int, required_acks: int, origin: AppendOrigin,
                       entries: Sequence[tuple[TopicPartition, Records]], response_callback: AppendCallback,
                       ) -> None:
        """Append each entry's batches to its partition's leader log, in order, and call
        `response_callback(results)` once every partition is answered (Kafka's
        appendRecords): inside this call when nothing waits; else after the fsyncs
        (flush.messages) and, for acks=all, once the high watermark passed each batch or
        `timeout_ms` passed (DelayedProduce). Parked Fetches on the partitions are tried
        once every entry is appended. A client's appends count in BrokerTopicStats."""
        results: list[PartitionAppendResult] = []
        waits: list[ProducePartitionStatus] = []
        flushes: list[tuple[PartitionAppendResult, Future[None]]] = []
        with self.delayed_fetch_purgatory.held():
            for tp, records in entries:
                result, partition = self._append_to_local_log(tp, records, required_acks, origin)
                results.append(result)
                info = result.info
                if partition is None or info is None or result.error_code != ErrorCode.NONE:
                    continue
                if info.flushed is not None:
                    flushes.append((result, info.flushed))
                if required_acks == -1 and info.last_offset >= 0:
                    waits.append(ProducePartitionStatus(partition, info.last_offset + 1,
                                                        partition.min_insync_replicas, result))
        if flushes:
            self._after_flushes(flushes, lambda: self._maybe_delay(timeout_ms, waits, results, response_callback))
        else:
            self._maybe_delay(timeout_ms, waits, results, response_callback)

    def _append_to_local_log(self, tp: TopicPartition, records: Records, required_acks: int,
                             origin: AppendOrigin) -> tuple[PartitionAppendResult, Partition | None]:
        try:
            partition = self.leader_partition(tp)
        except KafkaError as e:  # not a failure of the topic (Kafka marks none either)
            return PartitionAppendResult(e.error_code), None
        stats = self.topic_stats.topic(tp.topic) if origin is AppendOrigin.CLIENT else None
        if stats is not None:
            stats.total_produce_requests += 1
        if not isinstance(records, memoryview | bytes | bytearray) or len(records) == 0:
            if stats is not None:
                stats.failed_produce_requests += 1
            return PartitionAppendResult(ErrorCode.CORRUPT_MESSAGE, "no records"), None
        try:
            info = partition.append_records_to_leader(records, required_acks, origin=origin)
        except KafkaError as e:
            if stats is not None:
                stats.failed_produce_requests += 1
                if e.error_code in _REJECTED_FOR_SIZE:
                    stats.bytes_rejected += len(records)
            return PartitionAppendResult(e.error_code, str(e) or None,
                                         record_errors=getattr(e, "record_errors", None)), None
        except Exception as e:
            if stats is not None:
                stats.failed_produce_requests += 1
            log.exception("append to %s failed", tp)
            return PartitionAppendResult(ErrorCode.UNKNOWN_SERVER_ERROR, str(e) or None), None
        if stats is not None:
            stats.messages_in += info.record_count
            stats.bytes_in += len(records)
        return PartitionAppendResult(info=info), partition

    def _after_flushes(self, flushes: list[tuple[PartitionAppendResult, Future[None]]],
                       then: Callable[[], None]) -> None:
        """Call `then()` once every fsync (on the flush thread) is over; a failed fsync
        fails its partition."""
        left = len(flushes)

        def flushed(result: PartitionAppendResult, fut: asyncio.Future[None]) -> None:
            nonlocal left
            error = fut.exception()
            if error is not None:  # the flush thread raises KafkaStorageError
                result.fail(error.error_code if isinstance(error, KafkaError) else ErrorCode.KAFKA_STORAGE_ERROR,
                            str(error))
            left -= 1
            if not left:
                then()
        for result, done in flushes:
            asyncio.wrap_future(done).add_done_callback(
                lambda fut, result=result: flushed(result, fut))  # type: ignore[misc]

    def _maybe_delay(self, timeout_ms: int, waits: list[ProducePartitionStatus],
                     results: list[PartitionAppendResult], response_callback: AppendCallback) -> None:
        waits = [w for w in waits if w.result.error_code == ErrorCode.NONE]
        if not waits:
            response_callback(results)
            return
        op = DelayedProduce(self.timer.time() + max(timeout_ms, 0) / 1000, waits,
                            lambda: response_callback(results), self._is_current)
        self.delayed_produce_purgatory.try_complete_else_watch(op, [w.partition.topic_partition for w in waits])

    def append_to_leader(self, tp: TopicPartition, records: Records, required_acks: int,
                         origin: AppendOrigin, min_insync_replicas: int | None = None) -> LogAppendInfo:
        """One batch to one partition led here, answered at once (the coordinators' internal
        topics, whose writes are acknowledged by `wait_for_replication`); raises KafkaError."""
        partition = self.leader_partition(tp)
        with self.delayed_fetch_purgatory.held():
            return partition.append_records_to_leader(records, required_acks, min_insync_replicas, origin)

    def wait_for_replication(self, tp: TopicPartition, required_offset: int, min_insync_replicas: int,
                             timeout_ms: int) -> asyncio.Future[int] | int | None:
        """After an append: the error code once the high watermark reaches `required_offset`
        (as acks=all answers it); an int when known at once, None when this broker holds no
        replica. Cancelling the future forgets the wait."""
        partition = self.get_partition(tp)
        if partition is None or partition.log is None:
            return None
        result = PartitionAppendResult()
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        def done() -> None:
            if not fut.done():
                fut.set_result(result.error_code)
        op = DelayedProduce(self.timer.time() + max(timeout_ms, 0) / 1000,
                            [ProducePartitionStatus(partition, required_offset, min_insync_replicas, result)],
                            done, self._is_current)
        if self.delayed_produce_purgatory.try_complete_else_watch(op, [tp]):
            return result.error_code
        fut.add_done_callback(lambda _f: op.force_complete())
        return fut

    def _is_current(self, partition: Partition) -> bool:
        return self.partitions.get(partition.topic_partition) is partition

    # -- fetches -----------------------------------------------------------------------------
    def fetch_messages(self, params: FetchParams, fetch_infos: Iterable[FetchInfo],
                       responder: FetchResponder) -> None:
        """Read each partition of `fetch_infos` (Kafka's fetchMessages) and answer
        `responder.respond(result)`: inside this call when the read answers
        (delayed_fetch.answers_now), else from a DelayedFetch parked in the fetch purgatory on
        the partitions read. Exceptions of the first read propagate."""
        deadline_ms = self.timer.time() * 1000 + max(0, params.max_wait_ms)
        purgatory = self.delayed_fetch_purgatory
        # A follower's read may move the high watermark: the other followers' parked Fetches
        # (and consumers') re-read once this read is over.
        with purgatory.held():
            result = self.read_from_log(params, fetch_infos)
            if answers_now(params, result, deadline_ms, self.timer.time() * 1000, responder):
                responder.respond(result)
                return
        # Parked now, not on a later loop turn: an append in between must wake it, or a
        # follower's Fetch (and every acks=all Produce waiting on it) would sleep the whole
        # max_wait_ms.
        purgatory.watch(DelayedFetch(deadline_ms / 1000, params, fetch_infos, self, responder),
                        result.topic_partitions)

    def read_from_log(self, params: FetchParams, fetch_infos: Iterable[FetchInfo]) -> FetchResult:
        """Read each partition this broker leads (Kafka's readFromLog), as the module
        docstring of cluster/fetch_params.py and the rules below say. Leader checks:
        leader_partition (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH
        for an older / newer `current_leader_epoch`, ...). Each partition read counts one
        fetch request of its topic, a failed read (but OFFSET_OUT_OF_RANGE, as Kafka) one
        failed fetch request."""
        if params.replica_id >= 0:
            return self._read_for_follower(params, fetch_infos)
        return self._read_for_consumer(params, fetch_infos)

    def _read_for_consumer(self, params: FetchParams, fetch_infos: Iterable[FetchInfo]) -> FetchResult:
        """Up to the high watermark, or with read_committed the last stable offset (and
        the aborted transactions overlapping what is read). Bytes: each partition at most
        its `partition_max_bytes`, all at most `max_bytes`, but the first partition with
        data gives at least one whole batch (KIP-74). Records: a partition stops at the
        batch boundary after about `max_partition_records`; the partitions share about
        `max_response_records` in order, those left without any answer no records and are
        not read."""
        committed = params.isolation == FETCH_TXN_COMMITTED
        budget = params.max_bytes
        step = params.max_partition_records
        records_left = params.max_response_records  # still to give; None: no bound
        total = 0
        error = cut = False
        tps: list[TopicPartition] = []
        answers: list[tuple[FetchInfo, PartitionData]] = []
        stats_of = self.topic_stats.topic
        for info in fetch_infos:
            partition = self._partition_to_read(info, answers, tps)
            if partition is None:
                error = True
                continue
            if records_left is not None and records_left <= 0:
                # The response's records are given out: this partition answers no records
                # this time (librdkafka starts its next Fetch at the next partition), and
                # its log is not read (a consumer of 64 partitions asks for all of them).
                pd = _unread_partition(partition.local_log(), info, committed)
                cut = cut or pd.high_watermark > info.fetch_offset
            else:
                cap = step if records_left is None else min(step or records_left, records_left)
                pd, upper = _read_partition(partition.local_log(), info, committed, budget - total,
                                            total == 0, cap, params.inline_bytes)
                if records_size(pd.records) and cap and pd.high_watermark - info.fetch_offset > cap:
                    cut = True
                if records_left is not None and records_size(pd.records):
                    # The budget's last partition may overshoot it by up to a batch.
                    records_left -= max(1, min(pd.high_watermark, upper) - info.fetch_offset)
            if pd.error_code:
                if pd.error_code != ErrorCode.OFFSET_OUT_OF_RANGE:  # Kafka: not a failure
                    stats_of(partition.topic_partition.topic).failed_fetch_requests += 1
                error = True
            else:
                total += records_size(pd.records)
            answers.append((info, pd))
        return FetchResult(answers, total, error, tps, cut)

    def _read_for_follower(self, params: FetchParams, fetch_infos: Iterable[FetchInfo]) -> FetchResult:
        """Up to the log end offset; the fetch offset tells how far the follower copied
        (Partition.update_follower_fetch_state: ISR expansion, the high watermark). Out of
        range: the leader's log start offset and high watermark, to start over.

        A fetch session's partition caught up with nothing new to tell (its `unchanged`) is
        left out of the answer, and keeps what was looked up for it in `quiet`: while
        nothing that read depended on moved (the partition's state and log, the follower's
        position, the log's offsets), the next read would find the same, so it only moves
        the follower's fetch time, without the lookups."""
        replica_id = params.replica_id
        budget = params.max_bytes
        total = 0
        error = False
        tps: list[TopicPartition] = []
        answers: list[tuple[FetchInfo, PartitionData]] = []
        partitions = self.partitions
        stats_of = self.topic_stats.topic
        now_ms = -1
        for info in fetch_infos:
            quiet = info.quiet
            if quiet is not None:
                tp, led, state, plog, follower, stats = quiet
                offset = info.fetch_offset
                if (led.state is state and not led.fenced and led.log is plog
                        and not plog.closed and partitions.get(tp) is led
                        and follower.log_end_offset == offset and plog.log_end_offset == offset
                        and info.unchanged(plog.high_watermark, plog.log_start_offset)):
                    tps.append(tp)
                    stats.total_fetch_requests += 1
                    if now_ms < 0:
                        now_ms = self.now_ms()  # the clock of every Partition's followers
                    follower.update(offset, offset, now_ms)
                    continue
                info.quiet = None
            partition = self._partition_to_read(info, answers, tps)
            if partition is None:
                error = True
                continue
            plog = partition.local_log()
            offset = info.fetch_offset
            if (offset == plog.log_end_offset and offset >= plog.log_start_offset
                    and info.unchanged(plog.high_watermark, plog.log_start_offset)):
                # caught up, nothing new to tell: the usual case for most partitions
                partition.update_follower_fetch_state(replica_id, offset, offset)
                follower = partition.followers.get(replica_id)
                if (follower is not None and follower.log_end_offset == offset
                        and replica_id in partition.state.isr):
                    info.quiet = (partition.topic_partition, partition, partition.state, plog, follower,
                                  stats_of(partition.topic_partition.topic))
                continue
            pd = _read_for_follower(partition, replica_id, info, budget - total, total == 0)
            if pd.error_code:
                if pd.error_code != ErrorCode.OFFSET_OUT_OF_RANGE:
                    stats_of(partition.topic_partition.topic).failed_fetch_requests += 1
                error = True
            else:
                total += records_size(pd.records)
            answers.append((info, pd))
        return FetchResult(answers, total, error, tps)

    def _partition_to_read(self, info: FetchInfo,
                           answers: list[tuple[FetchInfo, PartitionData]], tps: list[TopicPartition],
                           ) -> Partition | None:
        """The partition led here that `info` reads (counted as a fetch request of its topic,
        added to `tps`), or None with its error added to `answers`."""
        tp = info.topic_partition
        if tp is None:
            code = info.error_code
        elif info.topic_id is not None and info.topic_id != ZERO_UUID and (
                (topic := self.topics.get(tp.topic)) is None or topic.topic_id != info.topic_id):
            code = ErrorCode.UNKNOWN_TOPIC_ID
        else:
            try:
                partition = self.leader_partition(tp, info.current_leader_epoch)
            except KafkaError as e:
                code = e.error_code
            else:
                tps.append(tp)
                self.topic_stats.topic(tp.topic).total_fetch_requests += 1
                return partition
        answers.append((info, error_data(info.partition, code)))
        return None

    # -- the purgatories, as a Partition's DelayedOperations --------------------------------
    def check_and_complete_fetch(self, tp: TopicPartition) -> None:
        self.delayed_fetch_purgatory.check_and_complete(tp)

    def check_and_complete_produce(self, tp: TopicPartition) -> None:
        self.delayed_produce_purgatory.check_and_complete(tp)

    # -- cluster mode: the controller's requests --------------------------------------------
    async def become_leader_or_follower(self, controller_id: int, controller_epoch: int,
                                        partitions: list[LeaderAndIsrPartition]) -> LeaderAndIsrResult:
        async with self.state_change_lock:
            result = LeaderAndIsrResult()
            if controller_epoch < self.controller_epoch:
                log.warning("ignoring LeaderAndIsr from controller %d with epoch %d (current %d)",
                            controller_id, controller_epoch, self.controller_epoch)
                for p in partitions:
                    result.errors[p.tp] = ErrorCode.STALE_CONTROLLER_EPOCH
                return result
            self.controller_epoch = controller_epoch
            leaders: list[tuple[Partition, PartitionState]] = []
            followers: list[tuple[Partition, PartitionState]] = []
            configs = await self._configs_of_new_logs(partitions)
            for p in partitions:
                code = self._prepare(p, leaders, followers, configs)
                result.errors[p.tp] = code
            if self.fetchers is not None:
                self.fetchers.remove_partitions([pt.topic_partition for pt, _s in leaders])
            for partition, state in leaders:
                try:
                    partition.make_leader(state)
                    result.became_leader.append(partition)
                    log.info("%s: leader at epoch %d, ISR %s", partition.topic_partition,
                             state.leader_epoch, list(state.isr))
                except KafkaError as e:
                    result.errors[partition.topic_partition] = e.error_code
            moved = []
            for partition, state in followers:
                partition.make_follower(state)
                result.became_follower.append(partition)
                moved.append(partition)
            if self.fetchers is not None and moved:
                self.fetchers.add_partitions(moved)
            for listener in self.leadership_listeners:
                listener(result.became_leader, result.became_follower)
            return result

    async def _configs_of_new_logs(self, partitions: list[LeaderAndIsrPartition]) -> dict[str, LogConfig]:
        """The topic config of each topic that gets a new log here: read once per topic."""
        topics = {p.tp.topic for p in partitions
                  if self.node_id in p.state.replicas and self.log_manager.get_log(p.tp) is None}
        if self.topic_config is None or not topics:
            return {}
        return {t: await self.topic_config(t) for t in sorted(topics)}

    def _prepare(self, p: LeaderAndIsrPartition, leaders: list[tuple[Partition, PartitionState]],
                 followers: list[tuple[Partition, PartitionState]],
                 configs: dict[str, LogConfig]) -> int:
        state = p.state
        if self.node_id not in state.replicas:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        partition = self.partitions.get(p.tp)
        if partition is not None:
            stale = state.leader_epoch < partition.leader_epoch or (
                state.leader_epoch == partition.leader_epoch
                and p.tp not in self.awaiting_controller
                and state.partition_epoch <= partition.state.partition_epoch)
            if stale:
                return ErrorCode.STALE_CONTROLLER_EPOCH
        else:
            try:
                plog = self._get_or_create_log(p.tp, p.topic_id, configs.get(p.tp.topic))
            except KafkaError as e:
                log.error("cannot create the log of %s: %s", p.tp, e)
                return e.error_code
            partition = Partition(p.tp, self.node_id, plog, self.now_ms,
                                  replica_lag_time_max_ms=self.replica_lag_time_max_ms,
                                  alter_isr=self.alter_isr, delayed_operations=self,
                                  is_alive=self.is_alive, on_isr_change=self._isr_changed)
            self.partitions[p.tp] = partition
        self.awaiting_controller.discard(p.tp)
        partition.fenced = self.zk_fenced
        if partition.log is not None and partition.log.closed:
            return ErrorCode.KAFKA_STORAGE_ERROR
        (leaders if state.leader == self.node_id else followers).append((partition, state))
        return ErrorCode.NONE

    def _get_or_create_log(self, tp: TopicPartition, topic_id: uuid.UUID | None,
                           config: LogConfig | None) -> Log:
        existing = self.log_manager.get_log(tp)
        if existing is not None:
            return existing
        return self.log_manager.get_or_create_log(tp, topic_id or uuid.uuid4(), config)

    async def stop_replicas(self, controller_epoch: int,
                            partitions: list[tuple[TopicPartition, int, bool]]) -> dict[TopicPartition, int]:
        """StopReplica: (tp, leader epoch, delete) each. Stops fetching; deletes the log
        when asked (the topic is deleted, or the replica moved away)."""
        async with self.state_change_lock:
            if controller_epoch < self.controller_epoch:
                return {tp: ErrorCode.STALE_CONTROLLER_EPOCH for tp, _e, _d in partitions}
            self.controller_epoch = controller_epoch
            errors: dict[TopicPartition, int] = {}
            if self.fetchers is not None:
                self.fetchers.remove_partitions([tp for tp, _e, _d in partitions])
            doomed = []
            for tp, epoch, delete in partitions:
                partition = self.partitions.get(tp)
                if partition is not None and 0 <= epoch < partition.leader_epoch:
                    errors[tp] = ErrorCode.FENCED_LEADER_EPOCH
                    continue
                errors[tp] = ErrorCode.NONE
                if partition is not None:
                    partition.make_follower(PartitionState(-1, max(epoch, partition.leader_epoch),
                                                           (), partition.state.replicas))
                if delete:
                    self.partitions.pop(tp, None)
                    doomed.append(tp)
            if doomed:
                self.log_manager.delete_logs(doomed)
                for listener in self.leadership_listeners:
                    listener([], [])
            return errors

    def set_zk_fenced(self, fenced: bool) -> None:
        """The broker lost (or regained) ZooKeeper: its leaderships stop (resume) writes,
        except those still awaiting the controller after a session expiry."""
        self.zk_fenced = fenced
        for tp, p in self.partitions.items():
            p.fenced = fenced or tp in self.awaiting_controller
            if p.fenced and p.is_leader:
                p.try_complete_delayed_produces()

    def session_expired(self) -> None:
        """ZooKeeper deleted our registration: the controller has moved or will move every
        leadership; lead nothing until it says otherwise (its next LeaderAndIsr)."""
        self.awaiting_controller = set(self.partitions)
        for p in self.partitions.values():
            p.fenced = True
            p.try_complete_delayed_produces()

    # -- moving replicas between log dirs (AlterReplicaLogDirs) ----------------------------
    def move_replica(self, tp: TopicPartition, target_dir: str) -> asyncio.Task[None]:
        """Copy the replica into `target_dir` in steps that let the loop serve meanwhile,
        then swap it in (storage/replica_move.py); the task doing it."""
        if tp in self.log_manager.moves:
            self.log_manager.cancel_move(tp)
        move = self.log_manager.start_move(tp, target_dir)
        return asyncio.ensure_future(self._copy_and_swap(tp, move.copy))

    async def _copy_and_swap(self, tp: TopicPartition, copy: Callable[[], bool]) -> None:
        try:
            while not copy():
                await asyncio.sleep(0)
            if self.log_manager.moves.get(tp) is None:
                return  # cancelled (another move, a deletion)
            new_log = self.log_manager.complete_move(tp)
        except Exception:
            log.exception("moving %s between log dirs failed", tp)
            self.log_manager.cancel_move(tp)
            return
        partition = self.partitions.get(tp)
        if partition is not None:
            partition.log = new_log
        log.info("moved %s to %s", tp, self.log_manager.dir_of(tp))

    # -- periodic duties (cluster mode) ----------------------------------------------------
    def maybe_shrink_isr(self) -> None:
        for p in self.leader_partitions():
            try:
                p.maybe_shrink_isr()
            except Exception:
                log.exception("shrinking the ISR of %s failed", p.topic_partition)

    def topic_info(self, topic: str) -> TopicInfo | None:
        return self.topics.get(topic)


def _read_for_follower(partition: Partition, replica_id: int, info: FetchInfo, budget: int,
                       first: bool) -> PartitionData:
    """A follower's read of one partition: everything up to the log end; its offset moves
    its progress."""
    plog = partition.local_log()
    leo = plog.log_end_offset
    if info.fetch_offset < plog.log_start_offset or info.fetch_offset > leo:
        pd = error_data(info.partition, ErrorCode.OFFSET_OUT_OF_RANGE)
        pd.log_start_offset, pd.high_watermark = plog.log_start_offset, plog.high_watermark
        return pd
    partition.update_follower_fetch_state(replica_id, info.fetch_offset, leo)
    pd = PartitionData(
        partition_index=info.partition, error_code=ErrorCode.NONE,
        high_watermark=plog.high_watermark, last_stable_offset=plog.last_stable_offset,
        log_start_offset=plog.log_start_offset, records=b"")
    if info.fetch_offset == leo:  # caught up: nothing to read
        return pd
    max_bytes = max(0, min(info.partition_max_bytes, budget))
    try:
        data = plog.read(info.fetch_offset, max_bytes, max_offset=leo, min_one_message=first)
    except KafkaError as e:
        pd.error_code = e.error_code
        return pd
    if data.records is not None and data.records.size > 0:
        pd.records = data.records
    return pd


def _read_partition(plog: Log, info: FetchInfo, committed: bool, budget: int, first: bool,
                    max_records: int, inline_bytes: int) -> tuple[PartitionData, int]:
    """A consumer's read of one partition: its answer, and an offset above every record in
    it (for the response's record budget: a slice cut short by bytes holds fewer records
    than its cap)."""
    high_watermark = plog.high_watermark
    last_stable = plog.last_stable_offset
    max_offset = last_stable if committed else high_watermark
    max_bytes = max(0, min(info.partition_max_bytes, budget))
    pd = PartitionData(
        partition_index=info.partition,
        error_code=ErrorCode.NONE,
        high_watermark=high_watermark,
        last_stable_offset=last_stable,
        log_start_offset=plog.log_start_offset,
        aborted_transactions=[] if committed else None,
        records=b"",
    )
    try:
        data = plog.read(info.fetch_offset, max_bytes, max_offset=max_offset, min_one_message=first,
                         max_records=max_records)
    except KafkaError as e:
        pd.error_code = e.error_code
        return pd, info.fetch_offset
    records = data.records
    if committed and records is not None:
        pd.aborted_transactions = [
            AbortedTransaction(producer_id=t.producer_id, first_offset=t.first_offset)
            for t in plog.collect_aborted_transactions(info.fetch_offset, data)]
    if records is not None and records.size > 0:
        pd.records = records.read_bytes() if records.size <= inline_bytes else records
    bounded = max_records and records is not None and records.size > 0
    return pd, plog.read_upper_bound_offset(data) if bounded else high_watermark


def _unread_partition(plog: Log, info: FetchInfo, committed: bool) -> PartitionData:
    """A partition's answer without records: its offsets, or OFFSET_OUT_OF_RANGE as a read
    would have answered."""
    out_of_range = not plog.log_start_offset <= info.fetch_offset <= plog.log_end_offset
    return PartitionData(
        partition_index=info.partition,
        error_code=ErrorCode.OFFSET_OUT_OF_RANGE if out_of_range else ErrorCode.NONE,
        high_watermark=plog.high_watermark, last_stable_offset=plog.last_stable_offset,
        log_start_offset=plog.log_start_offset, aborted_transactions=[] if committed else None,
        records=b"")
