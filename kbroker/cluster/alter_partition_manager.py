"""AlterPartitionManager: a leader's ISR changes on their way to the controller (Kafka's
AlterPartitionManager, KIP-497).

A leading Partition proposes a new ISR (`submit`); the proposals of one loop turn go
out together in one AlterPartition request to the active controller. Each carries the
leader epoch and partition epoch of the state it was computed from, so the controller
refuses a proposal about a state that has moved on. A proposal whose partition moved on
here before the controller took it (a LeaderAndIsr: another leader epoch or partition
epoch, or no longer the leader) is dropped, never sent again with the new epochs: it
was computed from an ISR that no longer holds (a shrink computed before a leader change
would otherwise put back into the ISR a replica that restarted empty meanwhile).

A network error or an answer without a per-partition verdict (NOT_CONTROLLER: the
controller moved) is retried after RETRY_BACKOFF_S. A proposal's future resolves to the
state the controller wrote, or fails with the error it answered; any other failure
fails it too, never leaves it unresolved (its Partition proposes nothing else until it
resolves).

Lock: the broker's event-loop thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from kbroker.client.connection import KafkaClientError
from kbroker.cluster.broker_channel import BrokerChannel
from kbroker.cluster.partition import Partition, PartitionState
from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.common.topic_partition import TopicPartition
from kbroker.protocol.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse

log = logging.getLogger(__name__)

ALTER_PARTITION_VERSION = 1
RETRY_BACKOFF_S = 0.2


@dataclass
class IsrProposal:
    """A new ISR and the partition state it was computed from."""

    partition: Partition
    new_isr: tuple[int, ...]
    leader_epoch: int
    partition_epoch: int
    future: asyncio.Future[PartitionState]

    @property
    def topic_partition(self) -> TopicPartition:
        return self.partition.topic_partition

    @property
    def stale(self) -> bool:
        """The partition's state moved on since the proposal was made."""
        state = self.partition.state
        return (not self.partition.is_leader or state.leader_epoch != self.leader_epoch
                or state.partition_epoch != self.partition_epoch)

    def fail(self, error: KafkaError) -> None:
        if not self.future.done():
            self.future.set_exception(error)
            self.future.exception()  # retrieved: nobody need wait for it


class AlterPartitionManager:
    """See the module docstring."""

    def __init__(self, broker_id: int, controller_channel: Callable[[], BrokerChannel | None],
                 broker_epoch: Callable[[], int], request_timeout_s: float) -> None:
        self.broker_id = broker_id
        self._channel = controller_channel
        self._broker_epoch = broker_epoch
        self.request_timeout_s = request_timeout_s
        self._queued: list[IsrProposal] = []
        self._sender: asyncio.Task[None] | None = None
        self._stopped = False

    def submit(self, partition: Partition, new_isr: tuple[int, ...]) -> asyncio.Future[PartitionState]:
        state = partition.state
        fut: asyncio.Future[PartitionState] = asyncio.get_running_loop().create_future()
        self._queued.append(IsrProposal(partition, new_isr, state.leader_epoch,
                                        state.partition_epoch, fut))
        if self._sender is None or self._sender.done():
            self._sender = asyncio.ensure_future(self._send_queued())
        return fut

    def shutdown(self) -> None:
        self._stopped = True
        if self._sender is not None:
            self._sender.cancel()

    async def _send_queued(self) -> None:
        await asyncio.sleep(0)  # gather the proposals of this loop turn
        while self._queued and not self._stopped:
            proposals, self._queued = self._current(self._queued), []
            if not proposals:
                continue
            try:
                response = await self._send(list(proposals.values()))
            except (KafkaClientError, KafkaError) as e:
                log.debug("AlterPartition failed (%s); retrying", e)
                channel = self._channel()
                if channel is not None:
                    channel.reset()
                self._queued = [p for p in proposals.values() if not p.future.done()] + self._queued
                await asyncio.sleep(RETRY_BACKOFF_S)
                continue
            except Exception as e:
                # Not a network error nor an answer: fail the proposals rather than let this
                # task die with them, which would leave each Partition's pending ISR waiting
                # forever (no other change proposed, no expansion)
                log.exception("AlterPartition failed")
                for p in proposals.values():
                    p.fail(KafkaError(f"AlterPartition failed: {e!r}"))
                continue
            try:
                self._apply(proposals, response)
            except Exception as e:
                log.exception("AlterPartition: cannot apply the controller's answer")
                for p in proposals.values():
                    p.fail(KafkaError(f"AlterPartition answer not applied: {e!r}"))

    def _current(self, proposals: list[IsrProposal]) -> dict[TopicPartition, IsrProposal]:
        """The latest proposal per partition, if its partition has not moved on; the others
        fail (the Partition ignores an answer about an epoch it has left)."""
        latest: dict[TopicPartition, IsrProposal] = {}
        for p in proposals:
            previous = latest.get(p.topic_partition)
            if previous is not None:
                previous.fail(KafkaError(f"{p.topic_partition}: a newer ISR proposal replaced it"))
            latest[p.topic_partition] = p
        for tp, p in list(latest.items()):
            if p.stale:
                log.info("%s: dropping the ISR proposal %s made at leader epoch %d, partition "
                         "epoch %d: the partition has moved on", tp, list(p.new_isr),
                         p.leader_epoch, p.partition_epoch)
                p.fail(KafkaError(f"{tp}: the partition state changed before the controller "
                                  "took the ISR change", ErrorCode.FENCED_LEADER_EPOCH))
                del latest[tp]
        return latest

    async def _send(self, proposals: list[IsrProposal]) -> AlterPartitionResponse:
        channel = self._channel()
        if channel is None:
            raise KafkaError("no controller known", ErrorCode.NOT_CONTROLLER)
        by_topic: dict[str, list[AlterPartitionRequest.PartitionData]] = {}
        for p in proposals:
            by_topic.setdefault(p.topic_partition.topic, []).append(
                AlterPartitionRequest.PartitionData(
                    partition_index=p.topic_partition.partition, leader_epoch=p.leader_epoch,
                    new_isr=list(p.new_isr), partition_epoch=p.partition_epoch))
        response: AlterPartitionResponse = await channel.request(AlterPartitionRequest(
            broker_id=self.broker_id, broker_epoch=self._broker_epoch(),
            topics=[AlterPartitionRequest.TopicData(topic_name=t, partitions=parts)
                    for t, parts in by_topic.items()]), ALTER_PARTITION_VERSION,
            timeout_s=self.request_timeout_s)
        if response.error_code != ErrorCode.NONE:
            raise KafkaError(f"AlterPartition: {ErrorCode(response.error_code).name}",
                             response.error_code)
        return response

    def _apply(self, proposals: dict[TopicPartition, IsrProposal], response: AlterPartitionResponse) -> None:
        for t in response.topics:
            for answer in t.partitions:
                p = proposals.pop(TopicPartition(t.topic_name, answer.partition_index), None)
                if p is None or p.future.done():
                    continue
                if answer.error_code != ErrorCode.NONE:
                    p.fail(KafkaError(f"AlterPartition of {p.topic_partition}: "
                                      f"{ErrorCode(answer.error_code).name}", answer.error_code))
                    continue
                old = p.partition.state
                p.future.set_result(PartitionState(
                    answer.leader_id, answer.leader_epoch, tuple(answer.isr), old.replicas,
                    answer.partition_epoch, old.controller_epoch, old.adding, old.removing))
        for p in proposals.values():
            p.fail(KafkaError("no answer for the partition"))
