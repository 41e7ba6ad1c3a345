"""KafkaController: the one broker that decides leaders and ISRs (Kafka's ZooKeeper-mode
KafkaController, on the broker's event loop).

Election: every broker watches the ephemeral /controller znode; when it is absent, each
tries to create it in one ZooKeeper transaction with the increment of /controller_epoch
(version-checked). The winner is the active controller; the epoch's zk version guards
every write it makes afterwards (a multi with a check of /controller_epoch), so once
another broker has taken over, a zombie's writes fail and it resigns.

Events run one at a time from a queue (Kafka's ControllerEventManager): ZooKeeper watches
(brokers, topics, partition changes, deletions, reassignments, preferred elections)
and broker requests (ControlledShutdown, AlterPartition, ElectLeaders, partition
reassignments) all become events, so state changes never interleave.

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
  topic deleted     UpdateMetadata marking its partitions deleted, StopReplica(delete) to
                    its replicas, its znodes removed
  AlterPartition    a leader's ISR change: checked against the leader epoch and partition
                    epoch (zk version), written, answered, UpdateMetadata to all
  controlled        its leaderships move to another ISR member, it leaves the ISRs of
  shutdown          partitions it follows; answered with what it still leads
  reassignment      KIP-455: add the target replicas, wait until they are all in the ISR,
                    elect a leader among them, drop and delete the others
  auto rebalance    every leader.imbalance.check.interval.seconds, brokers whose share of
                    non-preferred leaders exceeds leader.imbalance.per.broker.percentage get
                    their preferred leaderships back

Lock: the broker's event-loop thread; event handlers are serial.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from kbroker.cluster import zk_data
from kbroker.cluster.controller import election
from kbroker.cluster.controller.channel_manager import ControllerChannelManager, RequestBatch
from kbroker.cluster.controller.context import ControllerContext
from kbroker.cluster.controller.reassignment_target import target_error
from kbroker.cluster.zk_client import ZooKeeperClient
from kbroker.cluster.zk_data import BrokerRegistration, LeaderAndIsr, TopicAssignment
from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.common.topic_partition import TopicPartition
from kbroker.security.settings import InterBrokerLogin

log = logging.getLogger(__name__)

ZK_BATCH = 200


class ControllerMovedError(Exception):
    """A write failed its controller epoch check: another broker is the controller."""


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
    def __init__(self, config: ControllerConfig, zk: ZooKeeperClient) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.zk = zk
        self.ctx = ControllerContext(config.broker_id, config.listener)
        self.channels = ControllerChannelManager(config.broker_id, config.listener, config.login)
        self.active = False
        self.active_controller_id = -1
        self._queue: asyncio.Queue[tuple[str, tuple[Any, ...], asyncio.Future[Any] | None]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._rebalance_task: asyncio.Task[None] | None = None
        self._watched_topics: set[str] = set()
        self._watches_registered = False
        self._stopped = False
        # Called with the controller id whenever it changes (the broker's metadata).
        self.on_controller_change: Callable[[int], None] | None = None

    # -- life cycle ----------------------------------------------------------------------------
    def startup(self) -> None:
        self._task = asyncio.ensure_future(self._process_events())
        self.zk.watch_data(zk_data.CONTROLLER_PATH, lambda data, stat: self._enqueue("controller_change"))

    async def shutdown(self) -> None:
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
        await self._resign(delete_znode=True)

    def _enqueue(self, kind: str, *args: Any) -> None:
        if not self._stopped:
            self._queue.put_nowait((kind, args, None))

    async def call(self, kind: str, *args: Any) -> Any:
        """Run a request-driven event (controlled shutdown, AlterPartition, ...) in order
        with the others; its result. NOT_CONTROLLER when this broker is not active."""
        if not self.active:
            raise KafkaError(f"broker {self.broker_id} is not the controller", ErrorCode.NOT_CONTROLLER)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((kind, args, fut))
        return await fut

    async def _process_events(self) -> None:
        while True:
            kind, args, fut = await self._queue.get()
            handler: Callable[..., Awaitable[Any]] = getattr(self, f"_on_{kind}")
            try:
                if fut is not None and not self.active:
                    raise KafkaError(f"broker {self.broker_id} is not the controller",
                                     ErrorCode.NOT_CONTROLLER)
                result = await handler(*args)
            except ControllerMovedError:
                log.warning("controller %d: another broker became the controller; resigning",
                            self.broker_id)
                await self._resign()
                if fut is not None and not fut.done():
                    fut.set_exception(KafkaError("the controller moved", ErrorCode.NOT_CONTROLLER))
                self._enqueue("controller_change")
                continue
            except asyncio.CancelledError:
                raise
            except Exception as e:
                if fut is not None:
                    if not fut.done():
                        fut.set_exception(e)
                else:
                    log.exception("controller event %s failed", kind)
                continue
            if fut is not None and not fut.done():
                fut.set_result(result)

    # -- election -------------------------------------------------------------------------------
    async def _on_controller_change(self) -> None:
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
        self.ctx = ControllerContext(self.broker_id, self.config.listener, epoch, results[1].version)
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
        if self._rebalance_task is not None:
            self._rebalance_task.cancel()
            self._rebalance_task = None
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
        self.ctx = ControllerContext(self.broker_id, self.config.listener)

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
        await self._elect_where_needed(ctx.all_partitions(), batch)
        # Brokers that died while no controller was watching (this one's predecessor's
        # last moments) leave the ISRs now, as _on_brokers_failure would have done.
        dead = {r for s in ctx.states.values() for r in s.isr} - set(ctx.brokers)
        if dead:
            await self._remove_from_isrs(dead, batch)
        for tp in ctx.all_partitions():
            if tp in ctx.states:
                batch.add_leader_and_isr(ctx.live_replicas(tp), tp)
        batch.send(self.channels)
        log.info("controller %d: %d brokers, %d topics, %d partitions", self.broker_id,
                 len(ctx.brokers), len(ctx.assignments), len(ctx.states))
        await self._on_topic_deletion()
        await self._maybe_complete_reassignments(ctx.reassigning())
        await self._on_zk_reassignment()
        if self.config.auto_leader_rebalance_enable:
            self._rebalance_task = asyncio.ensure_future(self._rebalance_periodically())

    def _register_watches(self) -> None:
        if self._watches_registered:
            return
        self._watches_registered = True
        zk = self.zk
        zk.watch_children(zk_data.BROKER_IDS_PATH, lambda _c: self._enqueue_if_active("broker_change"))
        zk.watch_children(zk_data.TOPICS_PATH, lambda _c: self._enqueue_if_active("topic_change"))
        zk.watch_children(zk_data.DELETE_TOPICS_PATH, lambda _c: self._enqueue_if_active("topic_deletion"))
        zk.watch_data(zk_data.REASSIGN_PARTITIONS_PATH,
                      lambda _d, _s: self._enqueue_if_active("zk_reassignment"))
        zk.watch_data(zk_data.PREFERRED_REPLICA_ELECTION_PATH,
                      lambda _d, _s: self._enqueue_if_active("zk_preferred_election"))

    def _enqueue_if_active(self, kind: str, *args: Any) -> None:
        if self.active:
            self._enqueue(kind, *args)

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
        states = await asyncio.gather(*(self._read_state(tp) for tp in new))
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
                self._enqueue_if_active("partition_modification", topic)
        return changed

    async def _read_state(self, tp: TopicPartition) -> LeaderAndIsr | None:
        found = await self.zk.get(zk_data.partition_state_path(tp.topic, tp.partition))
        if found is None:
            return None
        return LeaderAndIsr.decode(found[0], found[1].version)

    # -- writing partition states -----------------------------------------------------------------
    def _check_epoch(self) -> tuple[str, str, int]:
        return ("check", zk_data.CONTROLLER_EPOCH_PATH, self.ctx.epoch_zk_version)

    async def _write_states(self, changes: dict[TopicPartition, LeaderAndIsr]) -> dict[TopicPartition, LeaderAndIsr]:
        """Write new partition states, each version-checked against the one we hold and
        guarded by our controller epoch; returns those written (with their new version)."""
        written: dict[TopicPartition, LeaderAndIsr] = {}
        items = list(changes.items())
        for i in range(0, len(items), ZK_BATCH):
            chunk = items[i:i + ZK_BATCH]
            results = await asyncio.gather(*(self._write_state(tp, s) for tp, s in chunk),
                                           return_exceptions=True)
            for (tp, _s), r in zip(chunk, results, strict=True):
                if isinstance(r, ControllerMovedError):
                    raise r
                if isinstance(r, BaseException):
                    log.warning("controller: writing the state of %s failed: %r", tp, r)
                    fresh = await self._read_state(tp)
                    if fresh is not None:
                        self.ctx.states[tp] = fresh
                    continue
                written[tp] = r
                self.ctx.states[tp] = r
        return written

    async def _write_state(self, tp: TopicPartition, state: LeaderAndIsr) -> LeaderAndIsr:
        path = zk_data.partition_state_path(tp.topic, tp.partition)
        current = self.ctx.states.get(tp)
        try:
            if current is None:
                await self.zk.ensure_path(f"{zk_data.partitions_path(tp.topic)}/{tp.partition}")
                await self.zk.multi([self._check_epoch(), ("create", path, state.encode())])
                version = 0
            else:
                results = await self.zk.multi([self._check_epoch(),
                                               ("set", path, state.encode(), current.zk_version)])
                version = results[1].version
        except BadVersionError:
            if await self._epoch_moved():
                raise ControllerMovedError() from None
            raise
        return LeaderAndIsr(state.leader, state.leader_epoch, state.isr, state.controller_epoch, version)

    async def _epoch_moved(self) -> bool:
        found = await self.zk.get(zk_data.CONTROLLER_EPOCH_PATH)
        return found is None or found[1].version != self.ctx.epoch_zk_version

    def _next_state(self, tp: TopicPartition, leader: int, isr: Iterable[int]) -> LeaderAndIsr:
        current = self.ctx.states[tp]
        return LeaderAndIsr(leader, current.leader_epoch + 1, tuple(isr), self.ctx.epoch,
                            current.zk_version)

    async def _unclean_allowed(self, topic: str) -> bool:
        config = await self._topic_config(topic)
        value = config.get("unclean.leader.election.enable")
        if value is None:
            return self.config.unclean_leader_election_enable
        return value.strip().lower() == "true"

    async def _topic_config(self, topic: str) -> dict[str, str]:
        found = await self.zk.get(zk_data.config_path("topics", topic))
        return zk_data.decode_config(found[0]) if found is not None else {}

    # -- elections --------------------------------------------------------------------------------
    async def _elect_where_needed(self, tps: Iterable[TopicPartition], batch: RequestBatch) -> None:
        """New partitions (no state yet) get their first leader; partitions whose leader is
        gone get an offline election."""
        ctx = self.ctx
        live = ctx.live
        creates: dict[TopicPartition, LeaderAndIsr] = {}
        changes: dict[TopicPartition, LeaderAndIsr] = {}
        for tp in tps:
            replicas = ctx.replicas(tp)
            state = ctx.states.get(tp)
            if state is None:
                live_replicas = [r for r in replicas if r in live]
                if live_replicas:
                    creates[tp] = LeaderAndIsr(live_replicas[0], 0, tuple(live_replicas), ctx.epoch)
                else:
                    log.warning("controller: no live replica of new partition %s (replicas %s)",
                                tp, replicas)
                continue
            if state.leader in live:
                continue
            elected = election.offline_leader(replicas, state.isr, live,
                                              await self._unclean_allowed(tp.topic))
            if elected is None:
                if state.leader != zk_data.NO_LEADER:
                    isr = tuple(r for r in state.isr if r in live) or state.isr
                    changes[tp] = self._next_state(tp, zk_data.NO_LEADER, isr)
                    log.warning("controller: %s has no eligible leader (replicas %s, ISR %s)",
                                tp, replicas, list(state.isr))
                continue
            leader, isr = elected
            if leader not in state.isr:
                log.warning("controller: unclean election of %s: %d leads without being in the "
                            "ISR %s (records may be lost)", tp, leader, list(state.isr))
            changes[tp] = self._next_state(tp, leader, isr)
        if creates:
            written = await self._write_states(creates)
            for tp in written:
                batch.add_leader_and_isr(ctx.live_replicas(tp), tp, is_new=True)
        if changes:
            written = await self._write_states(changes)
            for tp in written:
                batch.add_leader_and_isr(ctx.live_replicas(tp), tp)

    # -- brokers ------------------------------------------------------------------------------------
    async def _on_broker_change(self) -> None:
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
        await self._elect_where_needed(leaderless, batch)
        await self._remove_from_isrs(gone, batch)
        batch.add_update_metadata(ctx.brokers, [tp for tp in ctx.all_partitions()
                                                if set(ctx.replicas(tp)) & gone])
        batch.send(self.channels)
        await self._maybe_complete_reassignments(ctx.reassigning())

    async def _remove_from_isrs(self, gone: set[int], batch: RequestBatch) -> None:
        """Dead brokers leave the ISR of every partition still led by a live broker
        (never as the last member: Kafka keeps it, for a clean election when it
        returns); a partition led by a dead broker is the elections' business."""
        ctx = self.ctx
        shrink: dict[TopicPartition, LeaderAndIsr] = {}
        for tp, s in ctx.states.items():
            if s.leader in gone or s.leader < 0 or not set(s.isr) & gone:
                continue
            isr = tuple(r for r in s.isr if r not in gone) or s.isr
            if isr != s.isr:
                shrink[tp] = self._next_state(tp, s.leader, isr)
        written = await self._write_states(shrink)
        for tp in written:
            batch.add_leader_and_isr(ctx.live_replicas(tp), tp)

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
        await self._elect_where_needed(needing, batch)
        batch.send(self.channels)
        await self._maybe_complete_reassignments(ctx.reassigning())

    # -- topics ---------------------------------------------------------------------------------------
    async def _on_topic_change(self) -> None:
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

    async def _on_partition_modification(self, topic: str) -> None:
        if topic not in self.ctx.assignments:
            return
        new_tps = await self._load_topic(topic)
        if new_tps:
            log.info("controller: new partitions %s", [str(tp) for tp in new_tps])
            await self._on_new_partitions(new_tps)

    async def _on_new_partitions(self, tps: list[TopicPartition]) -> None:
        batch = RequestBatch(self.ctx)
        await self._elect_where_needed(tps, batch)
        batch.send(self.channels)

    async def _on_topic_deletion(self) -> None:
        ctx = self.ctx
        for topic in await self.zk.get_children(zk_data.DELETE_TOPICS_PATH):
            if topic not in ctx.assignments or not self.config.delete_topic_enable:
                await self._delete_quietly(f"{zk_data.DELETE_TOPICS_PATH}/{topic}")
                continue
            if any(tp.topic == topic for tp in ctx.reassigning()):
                continue  # Kafka waits for a reassignment to finish first
            await self._delete_topic(topic)

    async def _delete_topic(self, topic: str) -> None:
        ctx = self.ctx
        tps = ctx.partitions_of(topic)
        assignment = ctx.assignments[topic]
        batch = RequestBatch(ctx)
        ctx.deleted_topic_ids[topic] = assignment.topic_id
        batch.add_deleted(tps)
        for tp in tps:
            for r in ctx.replicas(tp):
                batch.add_stop_replica(r, tp, delete=True)
        paths = []
        for tp in tps:
            base = f"{zk_data.partitions_path(topic)}/{tp.partition}"
            if tp in ctx.states:
                paths.append(f"{base}/state")
            paths.append(base)
        ops: list[tuple[Any, ...]] = [self._check_epoch()]
        for path in paths + [zk_data.partitions_path(topic), zk_data.topic_path(topic)]:
            ops.append(("delete", path, -1))
        try:
            await self.zk.multi(ops)
        except NoNodeError:  # some znode was missing: remove what is there, one by one
            await self.zk.delete_recursive(zk_data.topic_path(topic))
        except BadVersionError:
            raise ControllerMovedError() from None
        await self._delete_quietly(zk_data.config_path("topics", topic))
        await self._delete_quietly(f"{zk_data.DELETE_TOPICS_PATH}/{topic}")
        for tp in tps:
            ctx.states.pop(tp, None)
        del ctx.assignments[topic]
        self._watched_topics.discard(topic)
        batch.send(self.channels)
        ctx.deleted_topic_ids.pop(topic, None)
        log.info("controller: deleted topic %s", topic)

    async def _delete_quietly(self, path: str) -> None:
        try:
            await self.zk.delete(path)
        except NoNodeError:
            pass

    # -- requests from brokers ------------------------------------------------------------------------
    async def _on_alter_partition(self, broker_id: int, broker_epoch: int,
                                  items: list[tuple[TopicPartition, int, int, tuple[int, ...]]]
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
        written = await self._write_states(changes)
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
            await self._maybe_complete_reassignments([tp for tp in written if tp in ctx.reassigning()])
        return out

    async def _on_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[TopicPartition]:
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
                    changes[tp] = self._next_state(tp, *elected)
            else:
                batch.add_stop_replica(broker_id, tp, delete=False)
                if broker_id in state.isr and len(state.isr) > 1:
                    changes[tp] = self._next_state(tp, state.leader,
                                                   [r for r in state.isr if r != broker_id])
        written = await self._write_states(changes)
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

    async def _on_elect_leaders(self, election_type: int, tps: list[TopicPartition] | None
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
            if election_type == 0:
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
            changes[tp] = self._next_state(tp, *elected)
        written = await self._write_states(changes)
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

    async def _on_zk_preferred_election(self) -> None:
        found = await self.zk.get(zk_data.PREFERRED_REPLICA_ELECTION_PATH)
        if found is None:
            return
        tps = [TopicPartition(t, p) for t, p in zk_data.decode_partition_list(found[0])]
        await self._on_elect_leaders(0, tps)
        await self._delete_quietly(zk_data.PREFERRED_REPLICA_ELECTION_PATH)

    async def _rebalance_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.config.leader_imbalance_check_interval_s)
            self._enqueue_if_active("auto_rebalance")

    async def _on_auto_rebalance(self) -> None:
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
                    await self._on_elect_leaders(0, eligible)

    # -- reassignments (KIP-455) ---------------------------------------------------------------------
    async def _on_alter_reassignments(self, moves: dict[TopicPartition, list[int] | None]
                                      ) -> dict[TopicPartition, tuple[int, str | None]]:
        ctx = self.ctx
        out: dict[TopicPartition, tuple[int, str | None]] = {}
        by_topic: dict[str, dict[int, list[int] | None]] = {}
        for tp, target in moves.items():
            a = ctx.assignments.get(tp.topic)
            if a is None or tp.partition not in a.partitions:
                out[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
                continue
            if target is None:
                if tp.partition not in a.adding and tp.partition not in a.removing:
                    out[tp] = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                               f"No ongoing reassignment for {tp}.")
                    continue
            else:
                original = [r for r in a.partitions[tp.partition]
                            if r not in a.adding.get(tp.partition, [])]
                error = target_error(target, original, ctx.live)
                if error is not None:
                    out[tp] = error
                    continue
            by_topic.setdefault(tp.topic, {})[tp.partition] = target
        for topic, parts in by_topic.items():
            a = ctx.assignments[topic]
            for p, target in parts.items():
                tp = TopicPartition(topic, p)
                original = [r for r in a.partitions[p] if r not in a.adding.get(p, [])]
                if target is None:  # cancel: back to the original replicas
                    target = original
                    a.adding.pop(p, None)
                    a.removing.pop(p, None)
                    a.partitions[p] = list(original)
                    out[tp] = (ErrorCode.NONE, None)
                    continue
                full = list(dict.fromkeys(target + original))
                a.partitions[p] = full
                adding = [r for r in target if r not in original]
                removing = [r for r in original if r not in target]
                if adding or removing:
                    a.adding[p], a.removing[p] = adding, removing
                else:
                    a.adding.pop(p, None)
                    a.removing.pop(p, None)
                    a.partitions[p] = list(target)
                out[tp] = (ErrorCode.NONE, None)
            await self._write_assignment(topic)
            batch = RequestBatch(ctx)
            bumped: dict[TopicPartition, LeaderAndIsr] = {}
            for p in parts:
                tp = TopicPartition(topic, p)
                if tp in ctx.states:
                    s = ctx.states[tp]
                    bumped[tp] = self._next_state(tp, s.leader,
                                                  [r for r in s.isr if r in ctx.replicas(tp)] or s.isr)
            written = await self._write_states(bumped)
            for tp in written:
                batch.add_leader_and_isr(ctx.live_replicas(tp), tp, is_new=False)
            batch.send(self.channels)
            await self._maybe_complete_reassignments([TopicPartition(topic, p) for p in parts])
        return out

    async def _write_assignment(self, topic: str) -> None:
        a = self.ctx.assignments[topic]
        try:
            await self.zk.multi([self._check_epoch(), ("set", zk_data.topic_path(topic), a.encode(), -1)])
        except BadVersionError:
            raise ControllerMovedError() from None

    def list_reassignments(self, tps: list[TopicPartition] | None) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]]:
        """tp -> (replicas, adding, removing) of the ongoing reassignments."""
        ctx = self.ctx
        if not self.active:
            raise KafkaError(f"broker {self.broker_id} is not the controller", ErrorCode.NOT_CONTROLLER)
        out = {}
        for tp in (tps if tps is not None else ctx.reassigning()):
            a = ctx.assignments.get(tp.topic)
            if a is None:
                continue
            adding, removing = a.adding.get(tp.partition), a.removing.get(tp.partition)
            if adding is not None or removing is not None:
                out[tp] = (list(a.partitions.get(tp.partition, [])), list(adding or []),
                           list(removing or []))
        return out

    async def _maybe_complete_reassignments(self, tps: list[TopicPartition]) -> None:
        ctx = self.ctx
        for tp in tps:
            a = ctx.assignments.get(tp.topic)
            state = ctx.states.get(tp)
            if a is None or state is None:
                continue
            p = tp.partition
            if p not in a.adding and p not in a.removing:
                continue
            removing = a.removing.get(p, [])
            target = [r for r in a.partitions[p] if r not in removing]
            if not all(r in state.isr for r in target):
                continue  # phase A: the new replicas are still catching up
            batch = RequestBatch(ctx)
            leader, isr = state.leader, [r for r in state.isr if r in target]
            if leader not in target or leader not in ctx.live:
                elected = election.reassignment_leader(target, state.isr, ctx.live)
                if elected is None:
                    continue
                leader = elected[0]
            a.partitions[p] = target
            a.adding.pop(p, None)
            a.removing.pop(p, None)
            written = await self._write_states({tp: self._next_state(tp, leader, isr)})
            await self._write_assignment(tp.topic)
            if tp in written:
                batch.add_leader_and_isr(ctx.live_replicas(tp), tp)
            for r in removing:
                batch.add_stop_replica(r, tp, delete=True)
            batch.send(self.channels)
            log.info("controller: reassignment of %s done: replicas %s", tp, target)
        await self._update_zk_reassignment_node()

    async def _on_zk_reassignment(self) -> None:
        found = await self.zk.get(zk_data.REASSIGN_PARTITIONS_PATH)
        if found is None:
            return
        moves = {TopicPartition(t, p): r for (t, p), r in zk_data.decode_reassignment(found[0]).items()}
        pending = set(self.ctx.reassigning())
        fresh: dict[TopicPartition, list[int] | None] = {
            tp: r for tp, r in moves.items() if tp not in pending}
        if fresh:
            await self._on_alter_reassignments(fresh)
        await self._update_zk_reassignment_node()

    async def _update_zk_reassignment_node(self) -> None:
        """Drop finished moves from /admin/reassign_partitions (deleted when empty)."""
        found = await self.zk.get(zk_data.REASSIGN_PARTITIONS_PATH)
        if found is None:
            return
        moves = zk_data.decode_reassignment(found[0])
        pending = {(tp.topic, tp.partition) for tp in self.ctx.reassigning()}
        left = {k: v for k, v in moves.items() if k in pending}
        if len(left) == len(moves):
            return
        try:
            if left:
                await self.zk.set(zk_data.REASSIGN_PARTITIONS_PATH, zk_data.encode_reassignment(left),
                                  found[1].version)
            else:
                await self.zk.delete(zk_data.REASSIGN_PARTITIONS_PATH, found[1].version)
        except (BadVersionError, NoNodeError):
            pass
