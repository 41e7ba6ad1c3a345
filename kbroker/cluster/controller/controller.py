"""KafkaController: the one broker that decides leaders and ISRs (Kafka's ZooKeeper-mode
KafkaController, on the broker's event loop). Owns the election (this broker's term as
controller), the event queue and the broker/topic changes; the partition states'
writes are PartitionStateMachine's (partition_state_machine.py), deletions
TopicDeletionManager's (topic_deletion.py), reassignments PartitionReassignment's
(reassignment.py), all on one ControllerContext (context.py). ZooKeeper is reached
through KafkaZkClient (kafka_zk_client.py), the brokers through ControllerChannels.

Election: every broker watches the ephemeral /controller znode; when it is absent, each
tries to create it in one ZooKeeper transaction with the increment of /controller_epoch
(version-checked). The winner is the active controller; the epoch's zk version guards
every write it makes afterwards (a multi with a check of /controller_epoch), so once
another broker has taken over, a zombie's writes fail and it resigns.

Events run one at a time from a queue (Kafka's ControllerEventManager), each a typed
event (events.py): ZooKeeper watches (brokers, topics, partition changes, deletions,
reassignments, preferred elections) and broker requests (ControlledShutdown,
AlterPartition, ElectLeaders, partition reassignments) all become events, so state
changes never interleave. Only ControllerChange runs on a broker that is not the active
controller: an event queued before it resigned is dropped when its turn comes. The requests come through the public methods
(alter_partition, controlled_shutdown, elect_leaders, alter_partition_reassignments),
each enqueueing its event and awaiting its result; NOT_CONTROLLER on a broker that is
not the active controller.

What happens on each (Kafka's rules, see election.py for the leader choices):
  failover          load brokers, topics and partition states; UpdateMetadata to every
                    broker; elect where there is no live leader; dead brokers leave the
                    ISRs; LeaderAndIsr for every partition to its live replicas
  broker gone       partitions it led elect a new leader from the live ISR (unclean only
  (or restarted)    when enabled for the topic); it leaves every ISR, except as the last
                    member (so that a clean election is possible when it returns)
  broker started    UpdateMetadata to all, LeaderAndIsr for its replicas, elections where
                    it makes one possible
  new topic or      leader = the first live replica, ISR = the live replicas (epoch 0)
  partitions
  topic deleted     see topic_deletion.py
  AlterPartition    a leader's ISR change: checked against the leader epoch and partition
                    epoch (zk version), written, answered, UpdateMetadata to all
  controlled        its leaderships move to another ISR member, it leaves the ISRs of
  shutdown          partitions it follows; answered with what it still leads
  reassignment      see reassignment.py
  auto rebalance    every leader.imbalance.check.interval.seconds, brokers whose share of
                    non-preferred leaders exceeds leader.imbalance.per.broker.percentage get
                    their preferred leaderships back

Lock: the broker's event-loop thread; events are processed one at a time.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError

from kbroker.cluster import zk_data
from kbroker.cluster.controller import election
from kbroker.cluster.controller.channel_manager import (
    ControllerChannelManager,
    ControllerChannels,
    RequestBatch,
)
from kbroker.cluster.controller.context import ControllerContext
from kbroker.cluster.controller.events import (
    PREFERRED,
    AlterPartitionReceived,
    ApiPartitionReassignment,
    AutoPreferredReplicaLeaderElection,
    BrokerChange,
    ControlledShutdown,
    ControllerChange,
    ControllerEvent,
    PartitionModifications,
    ReplicaLeaderElection,
    TopicChange,
    TopicDeletion,
    ZkPartitionReassignment,
)
from kbroker.cluster.controller.kafka_zk_client import KafkaZkClient, delete_quietly
from kbroker.cluster.controller.partition_state_machine import (
    ControllerMovedError,
    PartitionStateMachine,
)
from kbroker.cluster.controller.reassignment import PartitionReassignment
from kbroker.cluster.controller.topic_deletion import TopicDeletionManager
from kbroker.cluster.zk_data import BrokerRegistration, LeaderAndIsr, TopicAssignment
from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.common.topic_partition import TopicPartition
from kbroker.coordinator.timers import Timer, Timers
from kbroker.security.settings import InterBrokerLogin
from kbroker.utils.time import SYSTEM_TIME

log = logging.getLogger(__name__)

__all__ = ["ControllerConfig", "ControllerMovedError", "ElectionResult", "KafkaController"]

AlterPartitionItem = tuple[TopicPartition, int, int, tuple[int, ...]]


@dataclass(frozen=True)
class ControllerConfig:
    broker_id: int
    listener: str
    unclean_leader_election_enable: bool = False
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_s: int = 300
    leader_imbalance_per_broker_percentage: int = 10
    delete_topic_enable: bool = True
    login: InterBrokerLogin | None = None  # a SASL inter-broker listener's


@dataclass
class ElectionResult:
    error_code: int
    message: str | None = None


class KafkaController:
    def __init__(self, config: ControllerConfig, zk: KafkaZkClient,
                 channels: ControllerChannels | None = None, timers: Timers | None = None, *,
                 on_controller_change: Callable[[int], None] | None = None) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.zk = zk
        self.ctx = ControllerContext(config.broker_id, config.listener)
        self.channels: ControllerChannels = channels or ControllerChannelManager(
            config.broker_id, config.listener, config.login)
        self.partition_states = PartitionStateMachine(
            self.ctx, zk, lambda: self.config.unclean_leader_election_enable)
        self.topic_deletion = TopicDeletionManager(
            self.ctx, zk, self.partition_states, self.channels,
            lambda: self.config.delete_topic_enable, self._forget_topic)
        self.reassignment = PartitionReassignment(self.ctx, zk, self.partition_states, self.channels)
        self.active = False
        self.active_controller_id = -1
        self._queue: asyncio.Queue[tuple[ControllerEvent, asyncio.Future[Any] | None]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        # the auto rebalance's clock: the system's on the loop unless given (tests: a MockTime's)
        self._timers = timers
        self._rebalance_timer: Timer | None = None
        self._watched_topics: set[str] = set()
        self._watches_registered = False
        self._stopped = False
        # Called with the controller id whenever it changes (the broker's metadata).
        self.on_controller_change = on_controller_change

    # -- life cycle ----------------------------------------------------------------------------
    def reconfigure(self, config: ControllerConfig) -> None:
        """Kafka's Reconfigurable: the dynamic keys (unclean.leader.election.enable) take
        effect at the next election; the broker id and listener stay."""
        self.config = config

    def startup(self) -> None:
        self._task = asyncio.ensure_future(self._process_events())
        self.zk.watch_data(zk_data.CONTROLLER_PATH, lambda data, stat: self._enqueue(ControllerChange()))

    async def shutdown(self) -> None:
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
        await self._resign(delete_znode=True)
        if self._timers is not None:
            self._timers.close()

    async def idle(self) -> None:
        """Until every event queued so far, and every event they queued, is processed
        (Kafka's tests wait for an empty ControllerEventManager the same way)."""
        await self._queue.join()

    @property
    def pending_events(self) -> int:
        """Events queued and not yet taken up (Kafka's ControllerEventManager.isEmpty)."""
        return self._queue.qsize()

    # -- what other code asks (each an event, answered in order with the others) -----------------
    async def alter_partition(self, broker_id: int, broker_epoch: int, items: Iterable[AlterPartitionItem]
                              ) -> dict[TopicPartition, tuple[int, LeaderAndIsr | None]]:
        """A leader's ISR changes: (tp, leader epoch, partition epoch, new ISR) each;
        tp -> (error, the state now)."""
        result: dict[TopicPartition, tuple[int, LeaderAndIsr | None]] = await self._call(
            AlterPartitionReceived(broker_id, broker_epoch, tuple(items)))
        return result

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[TopicPartition]:
        """Move the broker's leaderships away; the partitions it still leads."""
        result: list[TopicPartition] = await self._call(ControlledShutdown(broker_id, broker_epoch))
        return result

    async def elect_leaders(self, election_type: int, tps: Iterable[TopicPartition] | None
                            ) -> dict[TopicPartition, ElectionResult]:
        """ElectLeaders: 0 preferred, 1 unclean, of `tps` (None: every partition)."""
        result: dict[TopicPartition, ElectionResult] = await self._call(ReplicaLeaderElection(
            election_type, None if tps is None else tuple(tps)))
        return result

    async def alter_partition_reassignments(self, moves: dict[TopicPartition, list[int] | None],
                                            allow_replication_factor_change: bool = True
                                            ) -> dict[TopicPartition, tuple[int, str | None]]:
        """Start (target replicas) or cancel (None) reassignments; tp -> (error, message)."""
        result: dict[TopicPartition, tuple[int, str | None]] = await self._call(ApiPartitionReassignment(
            tuple((tp, None if r is None else tuple(r)) for tp, r in moves.items()),
            allow_replication_factor_change))
        return result

    def list_partition_reassignments(self, tps: list[TopicPartition] | None
                                     ) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]]:
        """tp -> (replicas, adding, removing) of the ongoing reassignments, read from the
        context at once (no event: nothing changes)."""
        self._require_active()
        return self.reassignment.ongoing(tps)

    def _require_active(self) -> None:
        if not self.active:
            raise KafkaError(f"broker {self.broker_id} is not the controller", ErrorCode.NOT_CONTROLLER)

    # -- the event loop ------------------------------------------------------------------------------
    def _enqueue(self, event: ControllerEvent) -> None:
        if not self._stopped:
            self._queue.put_nowait((event, None))

    def _enqueue_if_active(self, event: ControllerEvent) -> None:
        if self.active:
            self._enqueue(event)

    async def _call(self, event: ControllerEvent) -> Any:
        """Run a request-driven event in order with the others; its result."""
        self._require_active()
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((event, fut))
        return await fut

    async def _process_events(self) -> None:
        while True:
            event, fut = await self._queue.get()
            try:
                await self._process_one(event, fut)
            finally:
                self._queue.task_done()

    async def _process_one(self, event: ControllerEvent, fut: asyncio.Future[Any] | None) -> None:
        if fut is None and not self.active and not isinstance(event, ControllerChange):
            # Queued while this broker was the controller, taken up after it resigned (a
            # ControllerChange ahead of it, or a write that found the epoch moved): Kafka's
            # process() returns at once when not active. Processed, it would act on a reset
            # context, electing and writing with controller epoch 0.
            log.info("controller %d: not the controller; ignoring %s", self.broker_id,
                     type(event).__name__)
            return
        try:
            if fut is not None:
                self._require_active()
            result = await self.process(event)
        except ControllerMovedError:
            log.warning("controller %d: another broker became the controller; resigning",
                        self.broker_id)
            await self._resign()
            if fut is not None and not fut.done():
                fut.set_exception(KafkaError("the controller moved", ErrorCode.NOT_CONTROLLER))
            self._enqueue(ControllerChange())
            return
        except asyncio.CancelledError:
            raise
        except Exception as e:
            if fut is not None:
                if not fut.done():
                    fut.set_exception(e)
            else:
                log.exception("controller event %s failed", type(event).__name__)
            return
        if fut is not None and not fut.done():
            fut.set_result(result)

    async def process(self, event: ControllerEvent) -> Any:
        """Process one event now (the event loop calls this, one event at a time)."""
        match event:
            case ControllerChange():
                return await self._process_controller_change()
            case BrokerChange():
                return await self._process_broker_change()
            case TopicChange():
                return await self._process_topic_change()
            case PartitionModifications(topic=topic):
                return await self._process_partition_modifications(topic)
            case TopicDeletion():
                return await self.topic_deletion.process()
            case ZkPartitionReassignment():
                return await self.reassignment.process_zk_node()
            case ApiPartitionReassignment(moves=moves, allow_replication_factor_change=allow_rf):
                return await self.reassignment.alter(
                    {tp: None if r is None else list(r) for tp, r in moves}, allow_rf)
            case ReplicaLeaderElection(zk_triggered=True):
                return await self._process_zk_preferred_election()
            case ReplicaLeaderElection(election_type=election_type, partitions=partitions):
                return await self._elect_leaders(election_type, partitions)
            case AutoPreferredReplicaLeaderElection():
                return await self._process_auto_rebalance()
            case AlterPartitionReceived(broker_id=broker_id, broker_epoch=epoch, items=items):
                return await self._process_alter_partition(broker_id, epoch, items)
            case ControlledShutdown(broker_id=broker_id, broker_epoch=epoch):
                return await self._process_controlled_shutdown(broker_id, epoch)
        raise TypeError(f"unknown controller event {event!r}")

    # -- election -------------------------------------------------------------------------------
    async def _process_controller_change(self) -> None:
        found = await self.zk.get(zk_data.CONTROLLER_PATH)
        if found is not None:
            active = zk_data.decode_controller(found[0])
            if self.active and active != self.broker_id:
                await self._resign()
            owner = found[1].ephemeralOwner
            if active == self.broker_id and not self.active and owner == self.zk.session_id:
                return  # our own znode, being set up by _elect
            self._set_active_controller(active)
            return
        if self.active:
            await self._resign()
        await self._elect()

    async def _elect(self) -> None:
        epoch_found = await self.zk.get(zk_data.CONTROLLER_EPOCH_PATH)
        if epoch_found is None:
            try:
                await self.zk.create(zk_data.CONTROLLER_EPOCH_PATH, b"0", makepath=True)
            except NodeExistsError:
                pass
            epoch_found = await self.zk.get(zk_data.CONTROLLER_EPOCH_PATH)
            if epoch_found is None:
                return
        epoch = int(epoch_found[0] or b"0") + 1
        version = epoch_found[1].version
        try:
            results = await self.zk.multi([
                ("create", zk_data.CONTROLLER_PATH,
                 zk_data.encode_controller(self.broker_id, int(time.time() * 1000)), True),
                ("set", zk_data.CONTROLLER_EPOCH_PATH, str(epoch).encode(), version),
            ])
        except (NodeExistsError, BadVersionError):
            found = await self.zk.get(zk_data.CONTROLLER_PATH)
            self._set_active_controller(zk_data.decode_controller(found[0]) if found else -1)
            return
        self.ctx.reset(epoch, results[1].version)
        self.active = True
        self._set_active_controller(self.broker_id)
        log.info("broker %d is the controller (epoch %d)", self.broker_id, epoch)
        try:
            await self._on_failover()
        except ControllerMovedError:
            raise
        except Exception:
            log.exception("controller failover failed; resigning")
            await self._resign(delete_znode=True)

    def _set_active_controller(self, controller_id: int) -> None:
        if controller_id != self.active_controller_id:
            self.active_controller_id = controller_id
            if self.on_controller_change is not None:
                self.on_controller_change(controller_id)

    async def _resign(self, delete_znode: bool = False) -> None:
        was_active = self.active
        self.active = False
        if self._rebalance_timer is not None:
            self._rebalance_timer.cancel()
            self._rebalance_timer = None
        self.channels.shutdown()
        if was_active:
            log.info("broker %d resigns as controller (epoch %d)", self.broker_id, self.ctx.epoch)
        if delete_znode and was_active:
            try:
                # at most zookeeper.connection.timeout.ms, as Kafka's ZooKeeperClient waits
                # for a connection: a broker stopping while ZooKeeper is away must still stop
                await asyncio.wait_for(self._delete_controller_znode(),
                                       self.zk.connection_timeout_ms / 1000)
            except Exception:  # the session is gone (so is the znode), or unreachable
                pass
        self.ctx.reset()

    async def _delete_controller_znode(self) -> None:
        found = await self.zk.get(zk_data.CONTROLLER_PATH)
        if found is not None and found[1].ephemeralOwner == self.zk.session_id:
            await self.zk.delete(zk_data.CONTROLLER_PATH, found[1].version)

    async def _on_failover(self) -> None:
        self._register_watches()
        ctx = self.ctx
        ctx.brokers = await self._read_brokers()
        for reg in ctx.brokers.values():
            self.channels.add_broker(reg)
        for topic in await self.zk.get_children(zk_data.TOPICS_PATH):
            await self._load_topic(topic)
        batch = RequestBatch(ctx)
        batch.add_update_metadata(ctx.brokers, ctx.all_partitions())
        await self.partition_states.elect_where_needed(ctx.all_partitions(), batch)
        # Brokers that died while no controller was watching (this one's predecessor's
        # last moments) leave the ISRs now, as _on_brokers_failure would have done.
        dead = {r for s in ctx.states.values() for r in s.isr} - set(ctx.brokers)
        if dead:
            await self.partition_states.remove_from_isrs(dead, batch)
        for tp in ctx.all_partitions():
            if tp in ctx.states:
                batch.add_leader_and_isr(ctx.live_replicas(tp), tp)
        batch.send(self.channels)
        log.info("controller %d: %d brokers, %d topics, %d partitions", self.broker_id,
                 len(ctx.brokers), len(ctx.assignments), len(ctx.states))
        await self.topic_deletion.process()
        await self.reassignment.maybe_complete(ctx.reassigning())
        await self.reassignment.process_zk_node()
        if self.config.auto_leader_rebalance_enable:
            self._schedule_rebalance()

    def _register_watches(self) -> None:
        if self._watches_registered:
            return
        self._watches_registered = True
        zk = self.zk
        zk.watch_children(zk_data.BROKER_IDS_PATH, lambda _c: self._enqueue_if_active(BrokerChange()))
        zk.watch_children(zk_data.TOPICS_PATH, lambda _c: self._enqueue_if_active(TopicChange()))
        zk.watch_children(zk_data.DELETE_TOPICS_PATH,
                          lambda _c: self._enqueue_if_active(TopicDeletion()))
        zk.watch_data(zk_data.REASSIGN_PARTITIONS_PATH,
                      lambda _d, _s: self._enqueue_if_active(ZkPartitionReassignment()))
        zk.watch_data(zk_data.PREFERRED_REPLICA_ELECTION_PATH,
                      lambda _d, _s: self._enqueue_if_active(ReplicaLeaderElection(zk_triggered=True)))

    # -- loading -----------------------------------------------------------------------------
    async def _read_brokers(self) -> dict[int, BrokerRegistration]:
        out = {}
        for child in await self.zk.get_children(zk_data.BROKER_IDS_PATH):
            try:
                broker_id = int(child)
            except ValueError:
                continue
            found = await self.zk.get(zk_data.broker_path(broker_id))
            if found is not None:
                out[broker_id] = BrokerRegistration.decode(broker_id, found[0], found[1].czxid)
        return out

    async def _load_topic(self, topic: str) -> list[TopicPartition]:
        """Read a topic's assignment and partition states into the context; the partitions
        it did not know before."""
        found = await self.zk.get(zk_data.topic_path(topic))
        if found is None:
            return []
        assignment = TopicAssignment.decode(topic, found[0])
        ctx = self.ctx
        old = ctx.assignments.get(topic)
        known = set(old.partitions) if old is not None else set()
        ctx.assignments[topic] = assignment
        new = [TopicPartition(topic, p) for p in sorted(assignment.partitions) if p not in known]
        states = await asyncio.gather(*(self.partition_states.read_state(tp) for tp in new))
        for tp, state in zip(new, states, strict=True):
            if state is not None:
                ctx.states[tp] = state
        if topic not in self._watched_topics:
            self._watched_topics.add(topic)
            self.zk.watch_data(zk_data.topic_path(topic), self._topic_watch(topic))
        return new

    def _topic_watch(self, topic: str) -> Callable[[bytes | None, Any], None]:
        def changed(data: bytes | None, _stat: Any) -> None:
            if data is not None:
                self._enqueue_if_active(PartitionModifications(topic))
        return changed

    def _forget_topic(self, topic: str) -> None:
        self._watched_topics.discard(topic)

    # -- brokers ------------------------------------------------------------------------------------
    async def _process_broker_change(self) -> None:
        ctx = self.ctx
        current = await self._read_brokers()
        dead = {b for b in ctx.brokers if b not in current}
        new = {b for b in current if b not in ctx.brokers}
        bounced = {b for b in current if b in ctx.brokers and current[b].epoch != ctx.brokers[b].epoch}
        if not (dead or new or bounced):
            return
        log.info("controller: brokers %s; new %s, dead %s, restarted %s", sorted(current),
                 sorted(new), sorted(dead), sorted(bounced))
        for b in dead | bounced:
            self.channels.remove_broker(b)
            ctx.shutting_down.discard(b)
            del ctx.brokers[b]
        if dead | bounced:
            await self._on_brokers_failure(dead | bounced)
        for b in new | bounced:
            ctx.brokers[b] = current[b]
            self.channels.add_broker(current[b])
        if new | bounced:
            await self._on_brokers_startup(new | bounced)

    async def _on_brokers_failure(self, gone: set[int]) -> None:
        ctx = self.ctx
        batch = RequestBatch(ctx)
        leaderless = [tp for tp, s in ctx.states.items() if s.leader in gone]
        await self.partition_states.elect_where_needed(leaderless, batch)
        await self.partition_states.remove_from_isrs(gone, batch)
        batch.add_update_metadata(ctx.brokers, [tp for tp in ctx.all_partitions()
                                                if set(ctx.replicas(tp)) & gone])
        batch.send(self.channels)
        await self.reassignment.maybe_complete(ctx.reassigning())

    async def _on_brokers_startup(self, started: set[int]) -> None:
        ctx = self.ctx
        batch = RequestBatch(ctx)
        batch.add_update_metadata(started, ctx.all_partitions())  # full metadata to newcomers
        batch.add_update_metadata(ctx.brokers, [])  # everyone learns the new broker list
        for b in started:
            for tp in ctx.partitions_on(b):
                if tp in ctx.states:
                    batch.add_leader_and_isr([b], tp)
        needing = [tp for tp in ctx.all_partitions()
                   if tp not in ctx.states or ctx.states[tp].leader not in ctx.live]
        await self.partition_states.elect_where_needed(needing, batch)
        batch.send(self.channels)
        await self.reassignment.maybe_complete(ctx.reassigning())

    # -- topics ---------------------------------------------------------------------------------------
    async def _process_topic_change(self) -> None:
        ctx = self.ctx
        children = set(await self.zk.get_children(zk_data.TOPICS_PATH))
        for gone in [t for t in ctx.assignments if t not in children]:
            for tp in ctx.partitions_of(gone):
                ctx.states.pop(tp, None)
            del ctx.assignments[gone]
        new_tps: list[TopicPartition] = []
        for topic in sorted(children - set(ctx.assignments)):
            new_tps += await self._load_topic(topic)
        if new_tps:
            await self._on_new_partitions(new_tps)

    async def _process_partition_modifications(self, topic: str) -> None:
        if topic not in self.ctx.assignments:
            return
        new_tps = await self._load_topic(topic)
        if new_tps:
            log.info("controller: new partitions %s", [str(tp) for tp in new_tps])
            await self._on_new_partitions(new_tps)

    async def _on_new_partitions(self, tps: list[TopicPartition]) -> None:
        batch = RequestBatch(self.ctx)
        await self.partition_states.elect_where_needed(tps, batch)
        batch.send(self.channels)

    # -- requests from brokers ------------------------------------------------------------------------
    async def _process_alter_partition(self, broker_id: int, broker_epoch: int,
                                       items: Iterable[AlterPartitionItem]
                                       ) -> dict[TopicPartition, tuple[int, LeaderAndIsr | None]]:
        """A leader's ISR changes: (tp, leader epoch, partition epoch, new ISR) each;
        tp -> (error, the state now)."""
        ctx = self.ctx
        reg = ctx.brokers.get(broker_id)
        if reg is None or (broker_epoch >= 0 and reg.epoch != broker_epoch):
            return {tp: (ErrorCode.STALE_BROKER_EPOCH, None) for tp, _e, _p, _i in items}
        out: dict[TopicPartition, tuple[int, LeaderAndIsr | None]] = {}
        changes: dict[TopicPartition, LeaderAndIsr] = {}
        for tp, leader_epoch, partition_epoch, new_isr in items:
            state = ctx.states.get(tp)
            if state is None:
                out[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
            elif state.leader != broker_id:
                out[tp] = (ErrorCode.NOT_LEADER_OR_FOLLOWER, state)
            elif leader_epoch < state.leader_epoch:
                out[tp] = (ErrorCode.FENCED_LEADER_EPOCH, state)
            elif leader_epoch > state.leader_epoch:
                out[tp] = (ErrorCode.UNKNOWN_LEADER_EPOCH, state)
            elif tuple(new_isr) == state.isr:
                # Already so: a retry whose answer was lost, whatever partition epoch it
                # names (Kafka checks this first, so retries are idempotent)
                out[tp] = (ErrorCode.NONE, state)
            elif partition_epoch != state.zk_version:
                out[tp] = (ErrorCode.INVALID_UPDATE_VERSION, state)
            elif broker_id not in new_isr or any(r not in ctx.replicas(tp) for r in new_isr):
                out[tp] = (ErrorCode.INVALID_REQUEST, state)
            elif any(r not in ctx.live for r in new_isr if r not in state.isr):
                out[tp] = (ErrorCode.INELIGIBLE_REPLICA, state)
            else:
                changes[tp] = LeaderAndIsr(state.leader, state.leader_epoch, tuple(new_isr),
                                           ctx.epoch, state.zk_version)
        written = await self.partition_states.write_states(changes)
        for tp in changes:
            if tp in written:
                out[tp] = (ErrorCode.NONE, written[tp])
                log.info("controller: %s ISR %s (partition epoch %d)", tp,
                         list(written[tp].isr), written[tp].zk_version)
            else:
                out[tp] = (ErrorCode.INVALID_UPDATE_VERSION, ctx.states.get(tp))
        if written:
            batch = RequestBatch(ctx)
            batch.add_update_metadata(ctx.brokers, written)
            batch.send(self.channels)
            await self.reassignment.maybe_complete([tp for tp in written if tp in ctx.reassigning()])
        return out

    async def _process_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[TopicPartition]:
        ctx = self.ctx
        reg = ctx.brokers.get(broker_id)
        if reg is None:
            raise KafkaError(f"broker {broker_id} is not alive", ErrorCode.BROKER_NOT_AVAILABLE)
        if broker_epoch >= 0 and reg.epoch != broker_epoch:
            raise KafkaError(f"broker epoch {broker_epoch} is stale", ErrorCode.STALE_BROKER_EPOCH)
        ctx.shutting_down.add(broker_id)
        log.info("controller: controlled shutdown of broker %d", broker_id)
        batch = RequestBatch(ctx)
        changes: dict[TopicPartition, LeaderAndIsr] = {}
        for tp in ctx.partitions_on(broker_id):
            state = ctx.states.get(tp)
            replicas = ctx.replicas(tp)
            if state is None or len(replicas) < 2:
                continue
            if state.leader == broker_id:
                elected = election.controlled_shutdown_leader(replicas, state.isr, ctx.live,
                                                              ctx.shutting_down)
                if elected is not None:
                    changes[tp] = self.partition_states.next_state(tp, *elected)
            else:
                batch.add_stop_replica(broker_id, tp, delete=False)
                if broker_id in state.isr and len(state.isr) > 1:
                    changes[tp] = self.partition_states.next_state(tp, state.leader,
                                                   [r for r in state.isr if r != broker_id])
        written = await self.partition_states.write_states(changes)
        for tp in written:
            batch.add_leader_and_isr(ctx.live_replicas(tp), tp)
        batch.send(self.channels)
        # What it still leads and could hand over (another ISR member is alive and staying):
        # the broker retries for those. Partitions with nobody to take over stay led by it
        # until it stops (Kafka lists them too, and the broker then retries in vain).
        return [tp for tp in ctx.partitions_on(broker_id)
                if len(ctx.replicas(tp)) > 1 and tp in ctx.states
                and ctx.states[tp].leader == broker_id
                and any(r != broker_id and r in ctx.live for r in ctx.states[tp].isr)]

    async def _elect_leaders(self, election_type: int, tps: Iterable[TopicPartition] | None
                             ) -> dict[TopicPartition, ElectionResult]:
        """ElectLeaders: 0 preferred, 1 unclean. None: every partition."""
        ctx = self.ctx
        candidates = ctx.all_partitions() if tps is None else tps
        results: dict[TopicPartition, ElectionResult] = {}
        changes: dict[TopicPartition, LeaderAndIsr] = {}
        for tp in candidates:
            state = ctx.states.get(tp)
            replicas = ctx.replicas(tp)
            if state is None:
                results[tp] = ElectionResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                             f"The partition {tp} does not exist.")
                continue
            if election_type == PREFERRED:
                if replicas and state.leader == replicas[0]:
                    results[tp] = ElectionResult(ErrorCode.ELECTION_NOT_NEEDED,
                                                 "Leader election not needed for topic partition.")
                    continue
                elected = election.preferred_leader(replicas, state.isr, ctx.live)
                if elected is None:
                    results[tp] = ElectionResult(
                        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                        f"Failed to elect leader for partition {tp} under strategy "
                        "PreferredReplicaPartitionLeaderElectionStrategy")
                    continue
            else:
                if state.leader in ctx.live:
                    results[tp] = ElectionResult(ErrorCode.ELECTION_NOT_NEEDED,
                                                 "Leader election not needed for topic partition.")
                    continue
                elected = election.offline_leader(replicas, state.isr, ctx.live, unclean=True)
                if elected is None:
                    results[tp] = ElectionResult(
                        ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                        f"Failed to elect leader for partition {tp}: no live replica")
                    continue
            changes[tp] = self.partition_states.next_state(tp, *elected)
        written = await self.partition_states.write_states(changes)
        batch = RequestBatch(ctx)
        for tp in changes:
            if tp in written:
                results[tp] = ElectionResult(ErrorCode.NONE)
                batch.add_leader_and_isr(ctx.live_replicas(tp), tp)
            else:
                results[tp] = ElectionResult(ErrorCode.UNKNOWN_SERVER_ERROR,
                                             "the partition state changed meanwhile")
        batch.send(self.channels)
        return results

    async def _process_zk_preferred_election(self) -> None:
        found = await self.zk.get(zk_data.PREFERRED_REPLICA_ELECTION_PATH)
        if found is None:
            return
        tps = [TopicPartition(t, p) for t, p in zk_data.decode_partition_list(found[0])]
        await self._elect_leaders(PREFERRED, tps)
        await delete_quietly(self.zk, zk_data.PREFERRED_REPLICA_ELECTION_PATH)

    def _schedule_rebalance(self) -> None:
        """AutoPreferredReplicaLeaderElection every leader.imbalance.check.interval.seconds."""
        def due() -> None:
            self._enqueue_if_active(AutoPreferredReplicaLeaderElection())
            self._schedule_rebalance()

        if self._timers is None:
            self._timers = Timers(SYSTEM_TIME, asyncio.get_running_loop())
        self._rebalance_timer = self._timers.schedule(
            self.config.leader_imbalance_check_interval_s * 1000, due)

    async def _process_auto_rebalance(self) -> None:
        ctx = self.ctx
        reassigning = set(ctx.reassigning())
        for broker in sorted(ctx.live):
            preferred = [tp for tp in ctx.all_partitions()
                         if ctx.replicas(tp)[:1] == [broker] and tp in ctx.states
                         and tp not in reassigning]
            if not preferred:
                continue
            not_led = [tp for tp in preferred if ctx.states[tp].leader != broker]
            ratio = len(not_led) / len(preferred)
            if ratio * 100 > self.config.leader_imbalance_per_broker_percentage:
                eligible = [tp for tp in not_led if broker in ctx.states[tp].isr]
                if eligible:
                    log.info("controller: broker %d leads %d of its %d preferred partitions: "
                             "rebalancing %d", broker, len(preferred) - len(not_led), len(preferred),
                             len(eligible))
                    await self._elect_leaders(PREFERRED, eligible)
