"""Topic administration in cluster mode: CreateTopics, DeleteTopics and CreatePartitions
as Kafka 3.9 runs them on a ZooKeeper cluster.

Only the controller answers them (NOT_CONTROLLER elsewhere, as Kafka's KafkaApis: admin
clients send them to the controller named in Metadata). The checks are the single
broker's (server/topic_admin.py) plus the cluster's: the replication factor may not
exceed the live brokers, an explicit assignment must name live brokers, no broker
twice, the same number of replicas for every partition. The change is written to
ZooKeeper (AdminZkClient: config, then assignment; deletions as /admin/delete_topics)
and the answer waits, at most the request's timeout_ms (REQUEST_TIMED_OUT after it;
0: no wait), until this broker's metadata shows the result (Kafka's
DelayedCreatePartitions / DelayedDeleteTopics): every partition with a leader, or
the topic gone.

Lock: the broker's event-loop thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from kbroker.cluster.controller.replica_assignment import AssignmentError, assign_replicas
from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.metadata.topic_registry import TopicInfo
from kbroker.server.topic_admin import AdminError

if TYPE_CHECKING:
    from kbroker.broker import BrokerState


def check_controller(broker: BrokerState) -> None:
    zk = broker.zk_broker
    if zk is None or not zk.controller.active:
        raise AdminError(ErrorCode.NOT_CONTROLLER, "This is not the correct controller for this cluster.")


def live_brokers(broker: BrokerState) -> dict[int, str | None]:
    return {b.broker_id: b.rack for b in broker.cluster.alive_brokers()}


def check_assignment(broker: BrokerState, assignment: Mapping[int, Sequence[int]]) -> int:
    """Kafka's AdminZkClient.validateReplicaAssignment; returns the replication factor."""
    live = set(live_brokers(broker))
    sizes = {len(r) for r in assignment.values()}
    for p, replicas in assignment.items():
        if not replicas:
            raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Cannot have replication factor of 0 for partition id {p}.")
        if len(set(replicas)) != len(replicas):
            raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Duplicate brokers not allowed in replica assignment: "
                             f"{', '.join(map(str, replicas))} for partition id {p}.")
        unknown = [b for b in replicas if b not in live]
        if unknown:
            raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.")
    if len(sizes) > 1:
        raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         "All partitions should have the same number of replicas.")
    return sizes.pop() if sizes else 0


def plan_assignment(broker: BrokerState, partitions: int, rf: int,
                    first_partition: int = 0) -> dict[int, list[int]]:
    try:
        return assign_replicas(live_brokers(broker), partitions, rf, first_partition=first_partition)
    except AssignmentError as e:
        raise AdminError(e.error_code, str(e)) from None


async def create_topic(broker: BrokerState, name: str, assignment: Mapping[int, list[int]],
                       overrides: Mapping[str, str], timeout_ms: int) -> TopicInfo | None:
    assert broker.zk_broker is not None
    try:
        await broker.zk_broker.admin.create_topic(name, assignment, overrides)
    except KafkaError as e:
        raise AdminError(e.error_code, str(e)) from None
    count = len(assignment)

    def ready() -> bool:
        info = broker.topics.get(name)
        return info is not None and info.partitions >= count and all(
            pm.leader >= 0 for pm in broker.cluster.partitions(info))

    await wait_for_metadata(broker, ready, timeout_ms, f"creating topic {name}")
    return broker.topics.get(name)


async def delete_topic(broker: BrokerState, info: TopicInfo, timeout_ms: int) -> None:
    assert broker.zk_broker is not None
    await broker.zk_broker.admin.delete_topic(info.name)

    def gone() -> bool:
        current = broker.topics.get(info.name)
        return current is None or current.topic_id != info.topic_id

    await wait_for_metadata(broker, gone, timeout_ms, f"deleting topic {info.name}")


async def add_partitions(broker: BrokerState, info: TopicInfo, new: Mapping[int, list[int]],
                         timeout_ms: int) -> None:
    assert broker.zk_broker is not None
    try:
        await broker.zk_broker.admin.add_partitions(info.name, new)
    except KafkaError as e:
        raise AdminError(e.error_code, str(e)) from None
    count = max(new) + 1

    def ready() -> bool:
        current = broker.topics.get(info.name)
        return current is not None and current.partitions >= count and all(
            pm.leader >= 0 for pm in broker.cluster.partitions(current))

    await wait_for_metadata(broker, ready, timeout_ms, f"adding partitions to {info.name}")


async def wait_for_metadata(broker: BrokerState, done: Callable[[], bool], timeout_ms: int,
                            what: str) -> None:
    """Wait until `done()` holds for this broker's metadata (re-checked after each
    UpdateMetadata); REQUEST_TIMED_OUT after timeout_ms (none at all for 0)."""
    if timeout_ms <= 0 or done():
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_ms / 1000
    while not done():
        remaining = deadline - loop.time()
        if remaining <= 0:
            raise AdminError(ErrorCode.REQUEST_TIMED_OUT,
                             f"{what} did not complete within {timeout_ms} ms")
        await broker.metadata_changed(remaining)
