"""Topic administration in cluster mode (TopicAdmin's ZooKeeper implementation):
CreateTopics, DeleteTopics and CreatePartitions as Kafka 3.9 runs them on a
ZooKeeper cluster.

Only the controller answers them: admin clients send them to the controller named in
Metadata, and another broker forwards them to it (KIP-590, kbroker.server.forwarding);
NOT_CONTROLLER still answers one that reaches a broker as it stops being the controller.
The checks are the single broker's (server/topic_admin.py) plus the cluster's: the
replication factor may not exceed the live brokers, an explicit assignment must name
live brokers, no broker twice, the same number of replicas for every partition. The
change is written to ZooKeeper (AdminZkClient: config, then assignment; deletions as
/admin/delete_topics) and the answer waits, at most the request's timeout_ms
(REQUEST_TIMED_OUT after it; 0: no wait), until this broker's metadata shows the result
(Kafka's DelayedCreatePartitions / DelayedDeleteTopics): every partition with a leader,
or the topic gone. Topics created on first need (auto-creation, the coordinators'
internal topics) are written in the background, once at a time per name.

Owns: the names being created in the background.
Lock: the broker's event-loop thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from kbroker.cluster.controller.replica_assignment import AssignmentError, assign_replicas
from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.metadata.topic_registry import TopicInfo
from kbroker.server.topic_admin import (
    AdminError,
    TopicAdmin,
    check_assignment_count,
    check_new_partition_count,
)

if TYPE_CHECKING:
    from kbroker.cluster.metadata_cache import ClusterView, TopicCatalog
    from kbroker.server.metadata_support import ZkSupport
    from kbroker.server.request_services import CurrentBrokerConfig
    from kbroker.server.topic_admin import NewPartitions

log = logging.getLogger(__name__)


class ZkTopicAdmin(TopicAdmin):
    """See the module docstring."""

    def __init__(self, config: CurrentBrokerConfig, node_id: int, topics: TopicCatalog,
                 cluster: ClusterView, zk: ZkSupport) -> None:
        super().__init__(config, node_id, topics, cluster)
        self.zk = zk
        self._creating: set[str] = set()

    def check_controller(self) -> None:
        if not self.zk.controller.active:
            raise AdminError(ErrorCode.NOT_CONTROLLER, "This is not the correct controller for this cluster.")

    def check_partition_budget(self, added: int) -> None:
        """Partitions spread over the brokers: max.broker.partitions is not checked here."""

    def live_brokers(self) -> dict[int, str | None]:
        return {b.broker_id: b.rack for b in self.cluster.alive_brokers()}

    def check_replica_assignment(self, assignment: Mapping[int, Sequence[int]]) -> int:
        """Kafka's AdminZkClient.validateReplicaAssignment; returns the replication factor."""
        live = set(self.live_brokers())
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

    def plan_assignment(self, partitions: int, rf: int,
                        first_partition: int = 0) -> dict[int, list[int]]:
        try:
            return assign_replicas(self.live_brokers(), partitions, rf, first_partition=first_partition)
        except AssignmentError as e:
            raise AdminError(e.error_code, str(e)) from None

    async def create_topic(self, name: str, assignment: Mapping[int, list[int]],
                           overrides: Mapping[str, str], timeout_ms: int) -> TopicInfo | None:
        try:
            await self.zk.admin.create_topic(name, assignment, overrides)
        except KafkaError as e:
            raise AdminError(e.error_code, str(e)) from None
        count = len(assignment)

        def ready() -> bool:
            info = self.topics.get(name)
            return info is not None and info.partitions >= count and all(
                pm.leader >= 0 for pm in self.cluster.partitions(info))

        await self.wait_for_metadata(ready, timeout_ms, f"creating topic {name}")
        return self.topics.get(name)

    async def delete_topic(self, info: TopicInfo, timeout_ms: int) -> None:
        """The controller marks the topic for deletion in ZooKeeper; the answer comes once
        this broker's metadata no longer has it (timeout_ms)."""
        self.check_deletion(info)
        await self.zk.admin.delete_topic(info.name)

        def gone() -> bool:
            current = self.topics.get(info.name)
            return current is None or current.topic_id != info.topic_id

        await self.wait_for_metadata(gone, timeout_ms, f"deleting topic {info.name}")

    async def create_partitions(self, topic: NewPartitions, validate_only: bool,
                                timeout_ms: int) -> None:
        self.check_controller()
        info = self.find_topic(topic.name)
        check_new_partition_count(info, topic.count)
        existing = self.cluster.partitions(info)
        rf = len(existing[0].replicas) if existing else 1
        added = topic.count - info.partitions
        if topic.assignments:
            check_assignment_count(topic, added)
            new = {info.partitions + i: list(a.broker_ids) for i, a in enumerate(topic.assignments)}
            if self.check_replica_assignment(new) != rf:
                raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Inconsistent replication factor between partitions, partition 0 has {rf}.")
        else:
            self.resolve_replication_factor(rf)
            new = self.plan_assignment(added, rf, first_partition=info.partitions)
        if validate_only:
            return
        await self.add_partitions(info, new, timeout_ms)

    async def add_partitions(self, info: TopicInfo, new: Mapping[int, list[int]],
                             timeout_ms: int) -> None:
        try:
            await self.zk.admin.add_partitions(info.name, new)
        except KafkaError as e:
            raise AdminError(e.error_code, str(e)) from None
        count = max(new) + 1

        def ready() -> bool:
            current = self.topics.get(info.name)
            return current is not None and current.partitions >= count and all(
                pm.leader >= 0 for pm in self.cluster.partitions(current))

        await self.wait_for_metadata(ready, timeout_ms, f"adding partitions to {info.name}")

    async def set_topic_configs(self, info: TopicInfo, overrides: Mapping[str, str]) -> None:
        """Written to ZooKeeper, from where every broker applies them."""
        self.topic_config(overrides)
        await self.zk.change_topic_config(info.name, dict(overrides))

    async def wait_for_metadata(self, done: Callable[[], bool], timeout_ms: int, what: str) -> None:
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
            await self.zk.metadata_changed(remaining)

    # -- topics created on first need

    def auto_create_topic(self, name: str) -> TopicInfo | None:
        config = self._config.current
        self.create_in_background(name, config.num_partitions, config.default_replication_factor, {})
        return None

    def create_internal_topic(self, name: str, partitions: int, replication_factor: int,
                              configs: Mapping[str, str]) -> bool:
        """Written to ZooKeeper in the background: False until the controller has elected
        its leaders here."""
        if self.topics.get(name) is not None:
            return True
        self.create_in_background(name, partitions, replication_factor, configs)
        return False

    def create_in_background(self, name: str, partitions: int, replication_factor: int,
                             configs: Mapping[str, str]) -> None:
        """Write a new topic to ZooKeeper in the background (once at a time per name)."""
        if name in self._creating:
            return
        self._creating.add(name)

        async def create() -> None:
            try:
                assignment = assign_replicas(self.live_brokers(), partitions, replication_factor)
                await self.zk.admin.create_topic(name, assignment, configs)
                log.info("creating topic %s (%d partitions, replication factor %d)", name,
                         partitions, replication_factor)
            except KafkaError as e:
                if e.error_code != ErrorCode.TOPIC_ALREADY_EXISTS:
                    log.warning("cannot create topic %s: %s", name, e)
            except Exception:
                log.exception("creating topic %s failed", name)
            finally:
                self._creating.discard(name)

        asyncio.ensure_future(create())
