"""PartitionReassignment: KIP-455 reassignments, from AlterPartitionReassignments and from
/admin/reassign_partitions (Kafka's controller reassignment code, onPartitionReassignment).

  start       the target must pass reassignment_target.target_error; the assignment
              becomes target + original replicas, with adding = target - original and
              removing = original - target (none of either: the target, at once); the
              topic znode is written (epoch-guarded) and the leader epoch bumped, so that
              LeaderAndIsr brings the new replicas up
  complete    once every target replica is in the ISR: a leader among the target (the
              current one if it is there and alive), ISR = its target members, replicas =
              the target, StopReplica(delete) to the removed ones
  cancel      (target None) back to the original replicas
  znode       /admin/reassign_partitions keeps only the moves in progress (deleted when
              none is left); moves of partitions already reassigning are ignored

Owns: the adding/removing lists of the context's assignments and the topic znodes'
writes that carry them. Lock: the controller's event processing (one event at a time).
"""

from __future__ import annotations

import logging

from kazoo.exceptions import BadVersionError, NoNodeError

from kbroker.cluster import zk_data
from kbroker.cluster.controller import election
from kbroker.cluster.controller.channel_manager import ControllerChannels, RequestBatch
from kbroker.cluster.controller.context import ControllerContext
from kbroker.cluster.controller.kafka_zk_client import KafkaZkClient
from kbroker.cluster.controller.partition_state_machine import (
    ControllerMovedError,
    PartitionStateMachine,
)
from kbroker.cluster.controller.reassignment_target import target_error
from kbroker.cluster.zk_data import LeaderAndIsr
from kbroker.common.error_code import ErrorCode
from kbroker.common.topic_partition import TopicPartition

log = logging.getLogger(__name__)

Moves = dict[TopicPartition, list[int] | None]


class PartitionReassignment:
    def __init__(self, ctx: ControllerContext, zk: KafkaZkClient, states: PartitionStateMachine,
                 channels: ControllerChannels) -> None:
        self.ctx = ctx
        self.zk = zk
        self.states = states
        self.channels = channels

    async def alter(self, moves: Moves, allow_replication_factor_change: bool = True
                    ) -> dict[TopicPartition, tuple[int, str | None]]:
        """Start or cancel reassignments; tp -> (error code, message)."""
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
                error = target_error(target, original, ctx.live, allow_replication_factor_change)
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
                    bumped[tp] = self.states.next_state(
                        tp, s.leader, [r for r in s.isr if r in ctx.replicas(tp)] or s.isr)
            written = await self.states.write_states(bumped)
            for tp in written:
                batch.add_leader_and_isr(ctx.live_replicas(tp), tp, is_new=False)
            batch.send(self.channels)
            await self.maybe_complete([TopicPartition(topic, p) for p in parts])
        return out

    def ongoing(self, tps: list[TopicPartition] | None
                ) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]]:
        """tp -> (replicas, adding, removing) of the ongoing reassignments (of `tps`, or all)."""
        ctx = self.ctx
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

    async def maybe_complete(self, tps: list[TopicPartition]) -> None:
        """Finish the reassignments of `tps` whose target replicas are all in the ISR."""
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
            written = await self.states.write_states({tp: self.states.next_state(tp, leader, isr)})
            await self._write_assignment(tp.topic)
            if tp in written:
                batch.add_leader_and_isr(ctx.live_replicas(tp), tp)
            for r in removing:
                batch.add_stop_replica(r, tp, delete=True)
            batch.send(self.channels)
            log.info("controller: reassignment of %s done: replicas %s", tp, target)
        await self._update_zk_node()

    async def process_zk_node(self) -> None:
        """Start the moves /admin/reassign_partitions names (those not already under way)."""
        found = await self.zk.get(zk_data.REASSIGN_PARTITIONS_PATH)
        if found is None:
            return
        moves = {TopicPartition(t, p): r for (t, p), r in zk_data.decode_reassignment(found[0]).items()}
        pending = set(self.ctx.reassigning())
        fresh: Moves = {tp: r for tp, r in moves.items() if tp not in pending}
        if fresh:
            await self.alter(fresh)
        await self._update_zk_node()

    async def _write_assignment(self, topic: str) -> None:
        a = self.ctx.assignments[topic]
        try:
            await self.zk.multi([self.states.check_epoch(),
                                 ("set", zk_data.topic_path(topic), a.encode(), -1)])
        except BadVersionError:
            raise ControllerMovedError() from None

    async def _update_zk_node(self) -> None:
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
