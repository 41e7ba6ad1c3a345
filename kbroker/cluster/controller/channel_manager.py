"""The controller's requests to brokers (Kafka's ControllerChannelManager and
ControllerBrokerRequestBatch).

Each live broker has a queue and a sender task: requests go out one at a time, in the
order queued, and a request that fails on the network is sent again (after a backoff)
until it is answered or the broker leaves the cluster. A RequestBatch gathers one
event's consequences and sends them as Kafka does: LeaderAndIsr to each broker for its
replicas, then UpdateMetadata to every live broker, then StopReplica.

Versions: LeaderAndIsr v5, UpdateMetadata v7 and StopReplica v3 (topic ids, per-partition
leader epochs); every kbroker speaks them.

Lock: the broker's event-loop thread (the controller's).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from kbroker.client.connection import KafkaClientError
from kbroker.cluster.broker_channel import BrokerChannel
from kbroker.cluster.controller.context import ControllerContext
from kbroker.cluster.zk_data import BrokerRegistration
from kbroker.common.topic_partition import TopicPartition
from kbroker.protocol.codec import ZERO_UUID
from kbroker.protocol.messages.leader_and_isr import LeaderAndIsrRequest
from kbroker.protocol.messages.stop_replica import StopReplicaRequest
from kbroker.protocol.messages.update_metadata import UpdateMetadataRequest
from kbroker.security.settings import PROTOCOL_IDS, InterBrokerLogin

log = logging.getLogger(__name__)

LEADER_AND_ISR_VERSION = 5
UPDATE_METADATA_VERSION = 7
STOP_REPLICA_VERSION = 3
RETRY_BACKOFF_S = 0.1
REQUEST_TIMEOUT_S = 30.0
LEADER_DURING_DELETE = -2


@dataclass
class _Queued:
    request: Any
    version: int
    callback: Callable[[Any], None] | None


class _BrokerSender:
    def __init__(self, registration: BrokerRegistration, listener: str, client_id: str,
                 login: InterBrokerLogin | None = None) -> None:
        self.registration = registration
        self.channel = BrokerChannel(registration.broker_id,
                                     lambda: self.registration.endpoint(listener), client_id, login)
        self.queue: asyncio.Queue[_Queued] = asyncio.Queue()
        self.task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        while True:
            item = await self.queue.get()
            while True:
                try:
                    response = await self.channel.request(item.request, item.version, REQUEST_TIMEOUT_S)
                    break
                except KafkaClientError as e:
                    if self.channel.closed:  # stopped (a cancellation wait_for turned into this)
                        return
                    log.debug("controller request to broker %d failed: %s; retrying",
                              self.registration.broker_id, e)
                    self.channel.reset()
                    await asyncio.sleep(RETRY_BACKOFF_S)
            if item.callback is not None:
                try:
                    item.callback(response)
                except Exception:
                    log.exception("handling a response of broker %d failed", self.registration.broker_id)

    def stop(self) -> None:
        self.task.cancel()
        self.channel.close()


class ControllerChannels(Protocol):
    """What the controller asks of its channels (a fake records it in tests)."""

    def add_broker(self, registration: BrokerRegistration) -> None: ...

    def remove_broker(self, broker_id: int) -> None: ...

    def send(self, broker_id: int, request: Any, version: int,
             callback: Callable[[Any], None] | None = None) -> None: ...

    def shutdown(self) -> None: ...


class ControllerChannelManager:
    def __init__(self, controller_id: int, listener: str,
                 login: InterBrokerLogin | None = None) -> None:
        self.login = login
        self.controller_id = controller_id
        self.listener = listener
        self._senders: dict[int, _BrokerSender] = {}

    def add_broker(self, registration: BrokerRegistration) -> None:
        self.remove_broker(registration.broker_id)
        self._senders[registration.broker_id] = _BrokerSender(
            registration, self.listener, f"controller-{self.controller_id}-to-{registration.broker_id}",
            self.login)

    def remove_broker(self, broker_id: int) -> None:
        sender = self._senders.pop(broker_id, None)
        if sender is not None:
            sender.stop()

    def send(self, broker_id: int, request: Any, version: int,
             callback: Callable[[Any], None] | None = None) -> None:
        sender = self._senders.get(broker_id)
        if sender is not None:
            sender.queue.put_nowait(_Queued(request, version, callback))

    def shutdown(self) -> None:
        for broker_id in list(self._senders):
            self.remove_broker(broker_id)


class RequestBatch:
    """One event's requests; see the module docstring."""

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.leader_and_isr: dict[int, dict[TopicPartition, bool]] = {}  # broker -> tp -> is_new
        self.update_metadata: set[TopicPartition] = set()
        self.update_metadata_brokers: set[int] = set()  # brokers owed an UpdateMetadata
        self.deleted: set[TopicPartition] = set()
        self.stop_replica: dict[int, dict[TopicPartition, bool]] = {}  # broker -> tp -> delete

    def add_leader_and_isr(self, brokers: Iterable[int], tp: TopicPartition, is_new: bool = False) -> None:
        for b in brokers:
            if b in self.ctx.brokers:
                self.leader_and_isr.setdefault(b, {})[tp] = is_new
        self.add_update_metadata(self.ctx.brokers, [tp])

    def add_update_metadata(self, brokers: Iterable[int], tps: Iterable[TopicPartition]) -> None:
        self.update_metadata_brokers.update(b for b in brokers if b in self.ctx.brokers)
        self.update_metadata.update(tps)

    def add_deleted(self, tps: Iterable[TopicPartition]) -> None:
        tps = list(tps)
        self.deleted.update(tps)
        self.update_metadata_brokers.update(self.ctx.brokers)

    def add_stop_replica(self, broker: int, tp: TopicPartition, delete: bool) -> None:
        if broker in self.ctx.brokers:
            self.stop_replica.setdefault(broker, {})[tp] = delete

    def send(self, channels: ControllerChannels,
             on_leader_and_isr: Callable[[int, Any], None] | None = None) -> None:
        ctx = self.ctx
        for broker, tps in self.leader_and_isr.items():
            request = self._leader_and_isr(broker, tps)
            callback = None
            if on_leader_and_isr is not None:
                callback = _bind(on_leader_and_isr, broker)
            channels.send(broker, request, LEADER_AND_ISR_VERSION, callback)
        if self.update_metadata_brokers:
            update = self._update_metadata()
            for broker in sorted(self.update_metadata_brokers):
                channels.send(broker, _with_broker_epoch(update, ctx.brokers[broker].epoch),
                              UPDATE_METADATA_VERSION)
        for broker, stops in self.stop_replica.items():
            channels.send(broker, self._stop_replica(broker, stops), STOP_REPLICA_VERSION)

    def _leader_and_isr(self, broker: int, tps: dict[TopicPartition, bool]) -> LeaderAndIsrRequest:
        ctx = self.ctx
        by_topic: dict[str, list[LeaderAndIsrRequest.LeaderAndIsrPartitionState]] = {}
        leaders: set[int] = set()
        for tp, is_new in sorted(tps.items()):
            state = ctx.states.get(tp)
            assignment = ctx.assignments.get(tp.topic)
            if state is None or assignment is None:
                continue
            leaders.add(state.leader)
            by_topic.setdefault(tp.topic, []).append(LeaderAndIsrRequest.LeaderAndIsrPartitionState(
                partition_index=tp.partition, controller_epoch=state.controller_epoch,
                leader=state.leader, leader_epoch=state.leader_epoch, isr=list(state.isr),
                partition_epoch=state.zk_version, replicas=ctx.replicas(tp),
                adding_replicas=list(assignment.adding.get(tp.partition, [])),
                removing_replicas=list(assignment.removing.get(tp.partition, [])),
                is_new=is_new))
        live_leaders = []
        for leader in sorted(leaders):
            reg = ctx.brokers.get(leader)
            endpoint = reg.endpoint(ctx.listener) if reg is not None else None
            if endpoint is not None:
                live_leaders.append(LeaderAndIsrRequest.LeaderAndIsrLiveLeader(
                    broker_id=leader, host_name=endpoint[0], port=endpoint[1]))
        return LeaderAndIsrRequest(
            controller_id=ctx.controller_id, controller_epoch=ctx.epoch,
            broker_epoch=ctx.brokers[broker].epoch, type=0,
            topic_states=[LeaderAndIsrRequest.LeaderAndIsrTopicState(
                topic_name=topic, topic_id=ctx.assignments[topic].topic_id, partition_states=states)
                for topic, states in by_topic.items()],
            live_leaders=live_leaders)

    def _update_metadata(self) -> UpdateMetadataRequest:
        ctx = self.ctx
        by_topic: dict[str, list[UpdateMetadataRequest.UpdateMetadataPartitionState]] = {}
        for tp in sorted(self.update_metadata | self.deleted):
            if tp in self.deleted:
                by_topic.setdefault(tp.topic, []).append(UpdateMetadataRequest.UpdateMetadataPartitionState(
                    partition_index=tp.partition, controller_epoch=ctx.epoch,
                    leader=LEADER_DURING_DELETE, leader_epoch=0, isr=[], zk_version=0,
                    replicas=[], offline_replicas=[]))
                continue
            state = ctx.states.get(tp)
            if state is None or tp.topic not in ctx.assignments:
                continue
            replicas = ctx.replicas(tp)
            by_topic.setdefault(tp.topic, []).append(UpdateMetadataRequest.UpdateMetadataPartitionState(
                partition_index=tp.partition, controller_epoch=state.controller_epoch,
                leader=state.leader, leader_epoch=state.leader_epoch, isr=list(state.isr),
                zk_version=state.zk_version, replicas=replicas,
                offline_replicas=[r for r in replicas if r not in ctx.brokers]))
        topic_ids = {t: a.topic_id for t, a in ctx.assignments.items()}
        topic_ids.update(ctx.deleted_topic_ids)
        return UpdateMetadataRequest(
            controller_id=ctx.controller_id, controller_epoch=ctx.epoch, broker_epoch=-1,
            topic_states=[UpdateMetadataRequest.UpdateMetadataTopicState(
                topic_name=topic, topic_id=topic_ids.get(topic, ZERO_UUID), partition_states=states)
                for topic, states in by_topic.items()],
            live_brokers=[UpdateMetadataRequest.UpdateMetadataBroker(
                id=reg.broker_id, rack=reg.rack, endpoints=[
                    UpdateMetadataRequest.UpdateMetadataEndpoint(
                        port=port, host=host, listener=name,
                        security_protocol=PROTOCOL_IDS.get(reg.protocol(name), 0))
                    for name, host, port in reg.endpoints])
                for _b, reg in sorted(ctx.brokers.items())])

    def _stop_replica(self, broker: int, stops: dict[TopicPartition, bool]) -> StopReplicaRequest:
        ctx = self.ctx
        by_topic: dict[str, list[StopReplicaRequest.StopReplicaPartitionState]] = {}
        for tp, delete in sorted(stops.items()):
            state = ctx.states.get(tp)
            epoch = -2 if delete else (state.leader_epoch if state is not None else -1)
            by_topic.setdefault(tp.topic, []).append(StopReplicaRequest.StopReplicaPartitionState(
                partition_index=tp.partition, leader_epoch=epoch, delete_partition=delete))
        return StopReplicaRequest(
            controller_id=ctx.controller_id, controller_epoch=ctx.epoch,
            broker_epoch=ctx.brokers[broker].epoch,
            topic_states=[StopReplicaRequest.StopReplicaTopicState(topic_name=t, partition_states=s)
                          for t, s in by_topic.items()])


def _with_broker_epoch(request: UpdateMetadataRequest, epoch: int) -> UpdateMetadataRequest:
    copy = UpdateMetadataRequest.__new__(UpdateMetadataRequest)
    for name in UpdateMetadataRequest.__slots__:
        setattr(copy, name, getattr(request, name))
    copy.broker_epoch = epoch
    return copy


def _bind(fn: Callable[[int, Any], None], broker: int) -> Callable[[Any], None]:
    return lambda response: fn(broker, response)
