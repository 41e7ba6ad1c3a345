"""ShareStatePersister: how a share-partition leader reads and writes its share
partitions' state through the share coordinator, as Kafka's DefaultStatePersister and
PersisterStateManager (KIP-932; read, not copied).

The share coordinator of a share partition (group, topic id, partition) is the leader of
the `__share_group_state` partition its key hashes to (coordinator/share_coordinator.py).
On a single broker that is always this one, and a read or write is answered at once
(an int, a state). In a cluster the persister asks the metadata who leads the key's
partition and then:
- this broker: calls the ShareCoordinator directly (a write is answered once replicated);
- another broker: sends ReadShareGroupState (key 84) / WriteShareGroupState (key 85), v0,
  over a BrokerChannel of its own to that broker (the inter-broker listener and login).
NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS,
NOT_LEADER_OR_FOLLOWER and a failed connection are asked again, to the leader known
then, every 100 ms until request.timeout.ms (then REQUEST_TIMED_OUT); any other error
is the answer. A cluster's answers are awaitables.

The writes of one share partition run one after the other (each waits for the one
before), so a retried write never lands after a later one: the last state written is
the share partition's last state. A read waits for the writes before it, so a share
partition rebuilt here (a new leader epoch) starts from the last state it wrote.

The group coordinator's calls for the share-group admin APIs go the same way:
ReadShareGroupStateSummary (key 87, v1), InitializeShareGroupState (83) and
DeleteShareGroupState (86); and the partition leader's high watermark (ListOffsets) for
DescribeShareGroupOffsets' lag. A read that finds no state asks once more where the old
key form (topic id in dashed hex) placed the key's state, and a delete deletes it there
too (coordinator/share_coordinator.py).

Owns: its channels to the other brokers. Lock: the broker's event-loop thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kbroker.client.connection import KafkaClientError
from kbroker.cluster.broker_channel import BrokerChannel
from kbroker.common.error_code import ErrorCode
from kbroker.common.topic_partition import TopicPartition
from kbroker.coordinator.share_coordinator import (
    PersistedState,
    ShareCoordinator,
    SharePartitionKey,
    coordinator_key,
)
from kbroker.coordinator.share_partition import StateBatch
from kbroker.protocol.messages.delete_share_group_state import DeleteShareGroupStateRequest
from kbroker.protocol.messages.initialize_share_group_state import InitializeShareGroupStateRequest
from kbroker.protocol.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from kbroker.protocol.messages.read_share_group_state import (
    ReadShareGroupStateRequest,
    ReadShareGroupStateResponse,
)
from kbroker.protocol.messages.read_share_group_state_summary import (
    ReadShareGroupStateSummaryRequest,
    ReadShareGroupStateSummaryResponse,
)
from kbroker.protocol.messages.write_share_group_state import WriteShareGroupStateRequest
from kbroker.security.settings import InterBrokerLogin

log = logging.getLogger(__name__)
E = ErrorCode

RETRY_BACKOFF_S = 0.1
RPC_VERSION = 0
SUMMARY_VERSION = 1  # with DeliveryCompleteCount (KIP-1226)
LIST_OFFSETS_VERSION = 7
LATEST_TIMESTAMP = -1
RETRIABLE = frozenset({E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_LOAD_IN_PROGRESS,
                       E.NOT_LEADER_OR_FOLLOWER, E.UNKNOWN_TOPIC_OR_PARTITION})
ReadResult = tuple[int, PersistedState | None]


class SummaryState(PersistedState):
    """A ReadShareGroupStateSummary answer from another broker: no batches, but the
    count of offsets above the start offset whose delivery is complete."""

    __slots__ = ("delivery_complete_count",)

    def __init__(self, state_epoch: int, start_offset: int, leader_epoch: int, delivery_complete_count: int) -> None:
        super().__init__(state_epoch, start_offset, leader_epoch=leader_epoch)
        self.delivery_complete_count = delivery_complete_count


class ShareStatePersister:
    """See the module docstring. `leader_of(tp)` is the metadata's leader of a partition
    (-1: none), `endpoint_of(broker)` the broker's inter-broker endpoint; both None on a
    single broker."""

    def __init__(self, coordinator: ShareCoordinator, node_id: int, timeout_ms: int,
                 leader_of: Callable[[TopicPartition], int] | None = None,
                 endpoint_of: Callable[[int], tuple[str, int] | None] | None = None,
                 login: InterBrokerLogin | None = None) -> None:
        self.coordinator = coordinator
        self.node_id = node_id
        self.timeout_s = timeout_ms / 1000
        self._leader_of = leader_of
        self._endpoint_of = endpoint_of
        self._login = login
        self._channels: dict[int, BrokerChannel] = {}
        self._writes: dict[SharePartitionKey, asyncio.Task[int]] = {}

    @property
    def clustered(self) -> bool:
        return self._leader_of is not None

    # -- the two calls of a share-partition leader
    def read_state(self, key: SharePartitionKey) -> ReadResult | Awaitable[ReadResult]:
        if not self.clustered:
            return E.NONE, self.coordinator.read_state(key)
        return self._read(key)

    async def _read(self, key: SharePartitionKey) -> ReadResult:
        before = self._writes.get(key)
        if before is not None:  # a share partition rebuilt here reads what it wrote last
            await asyncio.wait([before])
        answer = await self._retrying(key, lambda: self._read_once(key))
        if answer == (E.NONE, None):
            return await self._legacy_read(key)
        return answer if isinstance(answer, tuple) else (answer, None)  # an error: no state

    def write_state(self, key: SharePartitionKey, state: PersistedState) -> int | Awaitable[int]:
        if not self.clustered:
            return self.coordinator.write_state(key, state)
        before = self._writes.get(key)

        async def write() -> int:
            if before is not None:
                await asyncio.wait([before])
            code: int = await self._retrying(key, lambda: self._write_once(key, state))
            return code

        task = asyncio.get_running_loop().create_task(write())
        self._writes[key] = task
        task.add_done_callback(lambda t: self._writes.pop(key, None) if self._writes.get(key) is t else None)
        return task

    # -- the group coordinator's calls (the share-group admin APIs, DeleteGroups)
    def read_summary(self, key: SharePartitionKey) -> ReadResult | Awaitable[ReadResult]:
        """ReadShareGroupStateSummary: the key's state (start offset, epochs, batches);
        (NONE, None) for a key never initialized."""
        if not self.clustered:
            return E.NONE, self.coordinator.read_state(key)
        return self._summary(key)

    async def _summary(self, key: SharePartitionKey) -> ReadResult:
        answer = await self._retrying(key, lambda: self._summary_once(key))
        if answer == (E.NONE, None):
            return await self._legacy_read(key)
        return answer if isinstance(answer, tuple) else (answer, None)

    def initialize_state(self, key: SharePartitionKey, state_epoch: int,
                         start_offset: int) -> int | Awaitable[int]:
        """InitializeShareGroupState: a new state at `start_offset`, nothing in flight."""
        if not self.clustered:
            return self.coordinator.initialize_state(key, state_epoch, start_offset)
        return self._retrying(key, lambda: self._initialize_once(key, state_epoch, start_offset))

    def delete_state(self, key: SharePartitionKey) -> int | Awaitable[int]:
        """DeleteShareGroupState: the key's state removed."""
        if not self.clustered:
            return self.coordinator.delete_state(key)
        return self._delete(key)

    async def _delete(self, key: SharePartitionKey) -> int:
        code: int = await self._retrying(key, lambda: self._delete_once(key))
        if code == E.NONE:  # and where the old key form placed it (once; its own error logged)
            legacy = await self._legacy_attempt(key, lambda: self._delete_once(key, self._legacy_coordinator_id(key)))
            if legacy not in (E.NONE, E.NOT_COORDINATOR):
                log.warning("share state of %s: its old placement not deleted (error %s)", coordinator_key(key),
                            legacy)
        return code

    # -- states written under the old key form (the topic id in dashed hex)
    async def _legacy_read(self, key: SharePartitionKey) -> ReadResult:
        """The key's state where the old key form placed it: one ReadShareGroupState to that
        partition's leader, which answers it only while it holds one (else no state)."""
        answer = await self._legacy_attempt(key, lambda: self._read_once(key, self._legacy_coordinator_id(key)))
        return answer if isinstance(answer, tuple) else (E.NONE, None)

    async def _legacy_attempt(self, key: SharePartitionKey, attempt: Callable[[], Awaitable[Any]]) -> Any:
        try:
            return await attempt()
        except (TimeoutError, KafkaClientError, OSError) as e:
            log.info("share state of %s: its old placement not reached (%s)", coordinator_key(key), e)
            return E.COORDINATOR_NOT_AVAILABLE

    def _legacy_coordinator_id(self, key: SharePartitionKey) -> int:
        assert self._leader_of is not None
        return self._leader_of(TopicPartition(self.coordinator.topic.name, self.coordinator.legacy_partition_of(key)))

    async def latest_offset(self, tp: TopicPartition) -> int | None:
        """The partition's high watermark as its leader answers ListOffsets (LATEST,
        read_uncommitted), for DescribeShareGroupOffsets' lag (Kafka's
        PartitionMetadataClient.listLatestOffsets); None when no leader answers."""
        assert self._leader_of is not None
        node = self._leader_of(tp)
        if node < 0:
            return None
        L = ListOffsetsRequest
        request = L(replica_id=-1, isolation_level=0, timeout_ms=int(self.timeout_s * 1000), topics=[
            L.ListOffsetsTopic(name=tp.topic, partitions=[L.ListOffsetsPartition(
                partition_index=tp.partition, current_leader_epoch=-1, timestamp=LATEST_TIMESTAMP)])])
        try:
            response: ListOffsetsResponse = await self._channel(node).request(request, LIST_OFFSETS_VERSION,
                                                                              self.timeout_s)
        except (TimeoutError, KafkaClientError, OSError):
            return None
        p = response.topics[0].partitions[0]
        return int(p.offset) if p.error_code == E.NONE else None

    # -- one attempt, to the coordinator known now
    def _coordinator_id(self, key: SharePartitionKey) -> int:
        assert self._leader_of is not None
        topic = self.coordinator.topic
        if not topic.ensure_created():
            return -1
        return self._leader_of(TopicPartition(topic.name, self.coordinator.partition_of(key)))

    async def _attempt(self, key: SharePartitionKey, local: Callable[[], Any],
                       remote: Callable[[BrokerChannel], Awaitable[Any]], node: int | None = None) -> Any:
        """One attempt at the key's share coordinator known now (or at broker `node`):
        `local()` when it is this broker (an answer, or an awaitable of one), else
        `remote(channel)` to it."""
        node = self._coordinator_id(key) if node is None else node
        if node < 0:
            return E.COORDINATOR_NOT_AVAILABLE
        if node == self.node_id:
            answer = local()
            return answer if isinstance(answer, (int, tuple)) else await answer
        return await remote(self._channel(node))

    def _local_read(self, key: SharePartitionKey) -> Any:
        code, state = self.coordinator.read_with_legacy(key)
        return code if code != E.NONE else (E.NONE, state)

    async def _read_once(self, key: SharePartitionKey, node: int | None = None) -> Any:
        group_id, topic_id, partition = key
        request = ReadShareGroupStateRequest(group_id=group_id, topics=[ReadShareGroupStateRequest.ReadStateData(
            topic_id=topic_id, partitions=[ReadShareGroupStateRequest.PartitionData(partition=partition)])])

        async def remote(channel: BrokerChannel) -> Any:
            response: ReadShareGroupStateResponse = await channel.request(request, RPC_VERSION, self.timeout_s)
            result = response.results[0].partitions[0]
            if result.error_code != E.NONE:
                return result.error_code
            if result.start_offset < 0:
                return E.NONE, None
            return E.NONE, PersistedState(result.state_epoch, result.start_offset, [
                StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                for b in result.state_batches])
        return await self._attempt(key, lambda: self._local_read(key), remote, node)

    async def _write_once(self, key: SharePartitionKey, state: PersistedState) -> Any:
        group_id, topic_id, partition = key
        W = WriteShareGroupStateRequest
        request = W(group_id=group_id, topics=[W.WriteStateData(topic_id=topic_id, partitions=[W.PartitionData(
            partition=partition, state_epoch=state.state_epoch, leader_epoch=state.leader_epoch,
            start_offset=state.start_offset, state_batches=[
                W.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                             delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                for b in state.batches])])])
        return await self._attempt(key, lambda: self.coordinator.write_state(key, state),
                                   lambda channel: self._code(channel, request, RPC_VERSION))

    async def _summary_once(self, key: SharePartitionKey) -> Any:
        S = ReadShareGroupStateSummaryRequest
        request = S(group_id=key[0], topics=[S.ReadStateSummaryData(
            topic_id=key[1], partitions=[S.PartitionData(partition=key[2], leader_epoch=-1)])])

        async def remote(channel: BrokerChannel) -> Any:
            response: ReadShareGroupStateSummaryResponse = await channel.request(request, SUMMARY_VERSION,
                                                                                 self.timeout_s)
            result = response.results[0].partitions[0]
            if result.error_code != E.NONE:
                return result.error_code
            if result.start_offset < 0:
                return E.NONE, None
            return E.NONE, SummaryState(result.state_epoch, result.start_offset, result.leader_epoch,
                                        result.delivery_complete_count)
        return await self._attempt(key, lambda: self._local_read(key), remote)

    async def _initialize_once(self, key: SharePartitionKey, state_epoch: int, start_offset: int) -> Any:
        Q = InitializeShareGroupStateRequest
        request = Q(group_id=key[0], topics=[Q.InitializeStateData(topic_id=key[1], partitions=[
            Q.PartitionData(partition=key[2], state_epoch=state_epoch, start_offset=start_offset)])])
        return await self._attempt(key, lambda: self.coordinator.initialize_state(key, state_epoch, start_offset),
                                   lambda channel: self._code(channel, request, 0))

    async def _delete_once(self, key: SharePartitionKey, node: int | None = None) -> Any:
        Q = DeleteShareGroupStateRequest
        request = Q(group_id=key[0], topics=[Q.DeleteStateData(topic_id=key[1], partitions=[
            Q.PartitionData(partition=key[2])])])
        return await self._attempt(key, lambda: self.coordinator.delete_state(key),
                                   lambda channel: self._code(channel, request, 0), node)

    async def _code(self, channel: BrokerChannel, request: Any, version: int) -> int:
        """The one partition's error code of a write-like RPC's answer."""
        response = await channel.request(request, version, self.timeout_s)
        return int(response.results[0].partitions[0].error_code)

    async def _retrying(self, key: SharePartitionKey, attempt: Callable[[], Awaitable[Any]]) -> Any:
        """The attempt's answer (an error code, or a read's (NONE, state)), asked again
        while it is retriable, until the timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        while True:
            try:
                answer = await attempt()
            except (TimeoutError, KafkaClientError, OSError) as e:
                log.info("share state of %s: the coordinator did not answer (%s); retrying",
                         coordinator_key(key), e)
                answer = E.COORDINATOR_NOT_AVAILABLE
                self._reset_channels()
            if not (isinstance(answer, int) and answer in RETRIABLE):
                return answer
            if loop.time() >= deadline:
                log.warning("share state of %s: no share coordinator answered in %g s (last error %d)",
                            coordinator_key(key), self.timeout_s, answer)
                return E.REQUEST_TIMED_OUT
            await asyncio.sleep(RETRY_BACKOFF_S)

    def _channel(self, node: int) -> BrokerChannel:
        channel = self._channels.get(node)
        if channel is None:
            endpoint_of = self._endpoint_of
            assert endpoint_of is not None
            channel = self._channels[node] = BrokerChannel(
                node, lambda: endpoint_of(node), f"broker-{self.node_id}-share-persister", self._login)
        return channel

    def _reset_channels(self) -> None:
        for channel in self._channels.values():
            channel.reset()

    def close(self) -> None:
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()
