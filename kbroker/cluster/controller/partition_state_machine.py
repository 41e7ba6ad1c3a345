"""PartitionStateMachine: the controller's writes of partition states (Kafka's
PartitionStateMachine with the ZooKeeper side of its ReplicaStateMachine), and the
elections that need them.

Owns the partition states' znodes (/brokers/topics/<t>/partitions/<p>/state): every
write is version-checked against the state the context holds (its zk version, Kafka's
partition epoch) and guarded by the controller epoch (a multi with a check of
/controller_epoch's version); a failed epoch check raises ControllerMovedError (another
broker is the controller), any other failure re-reads the state. A write whose outcome
is unknown (the connection dropped before the answer) and whose state is read back
counts as done (ZooKeeper committed it), so the brokers are told of it; else the
partition is not written (another writer's state: a version check failed). What it
writes goes into the context's `states`; the requests telling brokers go into the caller's
RequestBatch.

  elect_where_needed  new partitions (no state): leader = the first live replica, ISR =
                      the live replicas, leader epoch 0; partitions whose leader is gone:
                      an offline election (election.py; unclean only where the topic's
                      unclean.leader.election.enable, or the broker default, allows it);
                      none eligible: leader -1, the ISR keeps its live members (or all)
  remove_from_isrs    dead brokers leave the ISRs of partitions led by live brokers,
                      never as the last member

Lock: the controller's event processing (one event at a time, on the loop).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from kazoo.exceptions import BadVersionError

from kbroker.cluster import zk_data
from kbroker.cluster.controller import election
from kbroker.cluster.controller.channel_manager import RequestBatch
from kbroker.cluster.controller.context import ControllerContext
from kbroker.cluster.controller.kafka_zk_client import KafkaZkClient
from kbroker.cluster.zk_data import LeaderAndIsr
from kbroker.common.topic_partition import TopicPartition

log = logging.getLogger(__name__)

ZK_BATCH = 200


class ControllerMovedError(Exception):
    """A write failed its controller epoch check: another broker is the controller."""


class PartitionStateMachine:
    def __init__(self, ctx: ControllerContext, zk: KafkaZkClient,
                 unclean_default: Callable[[], bool]) -> None:
        self.ctx = ctx
        self.zk = zk
        self._unclean_default = unclean_default  # unclean.leader.election.enable of the broker

    def check_epoch(self) -> tuple[str, str, int]:
        """The multi op that fails once another controller has bumped the epoch."""
        return ("check", zk_data.CONTROLLER_EPOCH_PATH, self.ctx.epoch_zk_version)

    async def read_state(self, tp: TopicPartition) -> LeaderAndIsr | None:
        found = await self.zk.get(zk_data.partition_state_path(tp.topic, tp.partition))
        if found is None:
            return None
        return LeaderAndIsr.decode(found[0], found[1].version)

    def next_state(self, tp: TopicPartition, leader: int, isr: Iterable[int]) -> LeaderAndIsr:
        """The state after `tp`'s current one with this leader and ISR (leader epoch + 1)."""
        current = self.ctx.states[tp]
        return LeaderAndIsr(leader, current.leader_epoch + 1, tuple(isr), self.ctx.epoch,
                            current.zk_version)

    async def write_states(self, changes: dict[TopicPartition, LeaderAndIsr]
                           ) -> dict[TopicPartition, LeaderAndIsr]:
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
                    fresh = await self.read_state(tp)
                    if fresh is not None:
                        self.ctx.states[tp] = fresh
                        if not isinstance(r, BadVersionError) and _same_state(fresh, _s):
                            # committed, then the answer was lost (ConnectionLoss): ours
                            log.info("controller: the state of %s was written (%r lost the "
                                     "answer)", tp, r)
                            written[tp] = fresh
                            continue
                    log.warning("controller: writing the state of %s failed: %r", tp, r)
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
                await self.zk.multi([self.check_epoch(), ("create", path, state.encode())])
                version = 0
            else:
                results = await self.zk.multi([self.check_epoch(),
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

    async def _unclean_allowed(self, topic: str) -> bool:
        found = await self.zk.get(zk_data.config_path("topics", topic))
        config = zk_data.decode_config(found[0]) if found is not None else {}
        value = config.get("unclean.leader.election.enable")
        if value is None:
            return self._unclean_default()
        return value.strip().lower() == "true"

    # -- elections --------------------------------------------------------------------------------
    async def elect_where_needed(self, tps: Iterable[TopicPartition], batch: RequestBatch) -> None:
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
                    changes[tp] = self.next_state(tp, zk_data.NO_LEADER, isr)
                    log.warning("controller: %s has no eligible leader (replicas %s, ISR %s)",
                                tp, replicas, list(state.isr))
                continue
            leader, isr = elected
            if leader not in state.isr:
                log.warning("controller: unclean election of %s: %d leads without being in the "
                            "ISR %s (records may be lost)", tp, leader, list(state.isr))
            changes[tp] = self.next_state(tp, leader, isr)
        if creates:
            written = await self.write_states(creates)
            for tp in written:
                batch.add_leader_and_isr(ctx.live_replicas(tp), tp, is_new=True)
        if changes:
            written = await self.write_states(changes)
            for tp in written:
                batch.add_leader_and_isr(ctx.live_replicas(tp), tp)

    async def remove_from_isrs(self, gone: set[int], batch: RequestBatch) -> None:
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
                shrink[tp] = self.next_state(tp, s.leader, isr)
        written = await self.write_states(shrink)
        for tp in written:
            batch.add_leader_and_isr(ctx.live_replicas(tp), tp)


def _same_state(a: LeaderAndIsr, b: LeaderAndIsr) -> bool:
    """The same state, whatever its zk version: a write read back."""
    return (a.leader, a.leader_epoch, a.isr, a.controller_epoch) == (
        b.leader, b.leader_epoch, b.isr, b.controller_epoch)
