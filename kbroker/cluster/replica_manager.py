"""ReplicaManager: the partitions this broker holds a replica of, and who leads them
(Kafka's ReplicaManager). Request handlers reach partition data only through it, so
they never need to know whether they run on a single broker or in a cluster.

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
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kbroker.cluster.partition import NotLeaderError, Partition, PartitionState
from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.common.topic_partition import TopicPartition
from kbroker.metadata.topic_registry import TopicInfo
from kbroker.storage.errors import KafkaStorageError
from kbroker.storage.log import Log
from kbroker.storage.log_config import LogConfig
from kbroker.storage.log_manager import LogManager

if TYPE_CHECKING:
    from kbroker.cluster.metadata_cache import TopicCatalog
    from kbroker.cluster.partition import AlterIsr
    from kbroker.cluster.replica_fetcher import ReplicaFetcherManager

log = logging.getLogger(__name__)

LeadershipListener = Callable[[list[Partition], list[Partition]], None]


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
                 replica_lag_time_max_ms: int = 30000,
                 on_change: Callable[[TopicPartition], None] | None = None) -> None:
        self.node_id = node_id
        self.log_manager = log_manager
        self.topics = topics
        self.now_ms = now_ms
        self.clustered = clustered
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.on_change = on_change
        self.partitions: dict[TopicPartition, Partition] = {}
        self.controller_epoch = -1
        self.state_change_lock = asyncio.Lock()
        self.fetchers: ReplicaFetcherManager | None = None
        self.alter_isr: AlterIsr | None = None
        # Where a new log's topic config comes from (cluster mode: ZooKeeper).
        self.topic_config: Callable[[str], Awaitable[LogConfig]] | None = None
        self.leadership_listeners: list[LeadershipListener] = []
        self.zk_fenced = False  # ZooKeeper silent for most of the session timeout
        # After a session expiry: partitions that take no writes until the controller's
        # next LeaderAndIsr for them (it may have moved them meanwhile).
        self.awaiting_controller: set[TopicPartition] = set()
        self.broker_epoch = -1  # the czxid of our registration; older requests are stale
        # Whether a broker is registered (cluster mode: the controller's live brokers).
        self.is_alive: Callable[[int], bool] | None = None
        # ISR changes this broker made as leader (Kafka's IsrShrinksPerSec/IsrExpandsPerSec)
        self.isr_shrinks = 0
        self.isr_expands = 0

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
        partition = Partition(tp, self.node_id, plog, self.now_ms, on_change=self.on_change)
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
        """Topics deleted on a single broker: drop their partitions."""
        for tp in tps:
            p = self.partitions.pop(tp, None)
            if p is not None:
                p.fail_waiters(ErrorCode.NOT_LEADER_OR_FOLLOWER)

    def _isr_changed(self, old_size: int, new_size: int) -> None:
        if new_size < old_size:
            self.isr_shrinks += 1
        elif new_size > old_size:
            self.isr_expands += 1

    def leader_partitions(self) -> list[Partition]:
        return [p for p in self.partitions.values() if p.is_leader]

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
                                  alter_isr=self.alter_isr, on_change=self.on_change,
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
                p.fail_waiters(ErrorCode.NOT_LEADER_OR_FOLLOWER)

    def session_expired(self) -> None:
        """ZooKeeper deleted our registration: the controller has moved or will move every
        leadership; lead nothing until it says otherwise (its next LeaderAndIsr)."""
        self.awaiting_controller = set(self.partitions)
        for p in self.partitions.values():
            p.fenced = True
            p.fail_waiters(ErrorCode.NOT_LEADER_OR_FOLLOWER)

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
