"""Topic administration: the checks and state changes behind CreateTopics,
DeleteTopics, CreatePartitions, AlterConfigs and IncrementalAlterConfigs, as one
interface (Kafka's ZkAdminManager) with two implementations:

    SingleBrokerTopicAdmin  here: the topic registry and this broker's logs
    ZkTopicAdmin            server/zk_topic_admin.py: written to ZooKeeper by the controller

The checks every mode shares are TopicAdmin's own methods. Each check raises AdminError
carrying the Kafka error code and the message Kafka 3.9 would send (ZkAdminManager,
KafkaApis); a `validate_only` request runs the checks and stops there. On a single
broker a change is persisted in the topic registry and applied to the live logs
before the handler answers.

Crash safety of a deletion: the partition directories are renamed away
(`<topic>-<p>.<uuid>-delete`) before the registry forgets the topic, so a crash
in between leaves a registered topic with empty logs, never stray data that the
next start would adopt back.

Owns: nothing but the references it is given (SingleBrokerTopicAdmin changes the
registry and the LogManager through them).
Threading: the broker's event-loop thread only (as the registry and LogManager).
"""

from __future__ import annotations

import gc
import logging
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.common.kafka_uuid import uuid_to_base64
from kbroker.common.topic_partition import TopicPartition
from kbroker.metadata.topic_registry import InvalidTopicError, TopicInfo, validate_topic_name
from kbroker.storage.errors import KafkaStorageError
from kbroker.storage.log_config import LogConfig

if TYPE_CHECKING:
    from kbroker.cluster.broker_topic_stats import BrokerTopicStats
    from kbroker.cluster.metadata_cache import ClusterView, TopicCatalog
    from kbroker.cluster.replica_manager import ReplicaManager
    from kbroker.coordinator.group_coordinator import GroupCoordinator
    from kbroker.metadata.topic_registry import TopicRegistry
    from kbroker.protocol.messages.create_partitions import CreatePartitionsRequest
    from kbroker.server.request_services import CurrentBrokerConfig
    from kbroker.storage.log_manager import LogManager

    NewPartitions = CreatePartitionsRequest.CreatePartitionsTopic

USE_DEFAULT = -1
# Each partition is a directory with open segment files: a bound keeps one bad or
# fuzzed request from trying to create millions of them (Kafka has no such bound).
MAX_PARTITIONS_PER_TOPIC = 10_000


log = logging.getLogger(__name__)


class AdminError(KafkaError):
    """An admin request item failed with `error_code`; str(self) is the error message."""

    def __init__(self, error_code: int, message: str | None = None) -> None:
        super().__init__(message or "", error_code)
        self.message = message


class TopicAdmin(ABC):
    """See the module docstring: the shared checks here, the changes in each mode."""

    def __init__(self, config: CurrentBrokerConfig, node_id: int, topics: TopicCatalog,
                 cluster: ClusterView) -> None:
        self._config = config
        self.node_id = node_id
        self.topics = topics
        self.cluster = cluster

    # -- what differs by mode

    @abstractmethod
    def check_controller(self) -> None:
        """Only the controller changes topics (NOT_CONTROLLER elsewhere)."""

    @abstractmethod
    def plan_assignment(self, partitions: int, rf: int,
                        first_partition: int = 0) -> dict[int, list[int]]:
        """Replicas for new partitions, numbered from `first_partition`."""

    @abstractmethod
    def check_replica_assignment(self, assignment: Mapping[int, Sequence[int]]) -> int:
        """An explicit assignment the broker can take; returns its replication factor."""

    @abstractmethod
    def check_partition_budget(self, added: int) -> None:
        """KIP-578's max.broker.partitions, where this broker holds every partition."""

    @abstractmethod
    async def create_topic(self, name: str, assignment: Mapping[int, list[int]],
                           overrides: Mapping[str, str], timeout_ms: int) -> TopicInfo | None:
        """Create the topic (checked); its TopicInfo, or None when the metadata does not
        show it yet."""

    @abstractmethod
    async def delete_topic(self, info: TopicInfo, timeout_ms: int) -> None: ...

    @abstractmethod
    async def create_partitions(self, topic: NewPartitions, validate_only: bool,
                                timeout_ms: int) -> None:
        """Grow the topic to topic.count partitions (checks included)."""

    @abstractmethod
    async def set_topic_configs(self, info: TopicInfo, overrides: Mapping[str, str]) -> None:
        """Replace the topic's overrides."""

    @abstractmethod
    def auto_create_topic(self, name: str) -> TopicInfo | None:
        """Metadata's auto-creation (auto.create.topics.enable): the topic now, or None
        while it is being created (the client sees LEADER_NOT_AVAILABLE and asks again)."""

    @abstractmethod
    def create_internal_topic(self, name: str, partitions: int, replication_factor: int,
                              configs: Mapping[str, str]) -> bool:
        """Create an internal topic on first need; True once it exists with leaders."""

    # -- the checks every mode shares

    def check_new_topic_name(self, name: str) -> None:
        try:
            validate_topic_name(name)
        except InvalidTopicError as e:
            raise AdminError(ErrorCode.INVALID_TOPIC_EXCEPTION, str(e)) from None
        if name in self.topics:
            raise AdminError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        # Kafka's Topic.hasCollision: '.' and '_' collide in metric names.
        if "." in name or "_" in name:
            folded = name.replace(".", "_")
            for other in self.topics.names():
                if other.replace(".", "_") == folded:
                    raise AdminError(
                        ErrorCode.INVALID_TOPIC_EXCEPTION,
                        f"Topic '{name}' collides with existing topic: {other}",
                    )

    def resolve_partitions(self, num_partitions: int) -> int:
        if num_partitions == USE_DEFAULT:
            return self._config.current.num_partitions
        if num_partitions < 1:
            raise AdminError(
                ErrorCode.INVALID_PARTITIONS,
                "Number of partitions was set to an invalid non-positive value.",
            )
        check_partition_limit(num_partitions)
        return num_partitions

    def resolve_replication_factor(self, replication_factor: int) -> int:
        config = self._config.current
        rf = config.default_replication_factor if replication_factor == USE_DEFAULT else replication_factor
        if rf < 1:
            raise AdminError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                "Replication factor must be larger than 0, or -1 to use the default value.",
            )
        live = len(self.cluster.alive_brokers())
        if rf > live:
            raise AdminError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Replication factor: {rf} larger than available brokers: {live}.",
            )
        return rf

    def topic_config(self, overrides: Mapping[str, str | None]) -> LogConfig:
        """The effective LogConfig for these overrides; INVALID_CONFIG for unknown or bad ones."""
        nulls = sorted(k for k, v in overrides.items() if v is None)
        if nulls:
            raise AdminError(
                ErrorCode.INVALID_CONFIG, f"Null value not supported for topic configs: {','.join(nulls)}"
            )
        try:
            return LogConfig.from_props(overrides, base=self._config.default_log_config)
        except ValueError as e:
            raise AdminError(ErrorCode.INVALID_CONFIG, str(e)) from None

    def find_topic(self, name: str | None) -> TopicInfo:
        info = self.topics.get(name) if name is not None else None
        if info is None:
            raise AdminError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
            )
        return info

    def check_deletion(self, info: TopicInfo) -> None:
        if not self._config.current.delete_topic_enable:
            raise AdminError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
        check_not_internal(info, "marked for deletion")

    def check_broker_name(self, name: str) -> None:
        """A BROKER config resource must name this broker's node.id (ConfigHelper's checks)."""
        try:
            node = int(name)
        except ValueError:
            raise AdminError(ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, got {name!r}.") from None
        if node != self.node_id:
            raise AdminError(
                ErrorCode.INVALID_REQUEST,
                f"Unexpected broker id, expected {self.node_id} or empty string, but received {name}",
            )


def check_partition_limit(count: int) -> None:
    if count > MAX_PARTITIONS_PER_TOPIC:
        raise AdminError(
            ErrorCode.INVALID_PARTITIONS,
            f"Number of partitions {count} exceeds kbroker's limit of {MAX_PARTITIONS_PER_TOPIC} "
            "per topic.",
        )


def check_not_internal(info: TopicInfo, action: str) -> None:
    """Internal topics (__consumer_offsets, __transaction_state) belong to the coordinators,
    which keep their partitions open and map keys onto the partition count: kbroker refuses
    to delete or grow them (Kafka's brokers allow it; its TopicCommand refuses deletion)."""
    if info.is_internal:
        raise AdminError(
            ErrorCode.INVALID_REQUEST,
            f"Topic {info.name} is a Kafka internal topic and is not allowed to be {action}.",
        )


def check_new_partition_count(info: TopicInfo, count: int) -> None:
    check_not_internal(info, "given more partitions")
    if count < info.partitions:
        raise AdminError(
            ErrorCode.INVALID_PARTITIONS,
            f"Topic currently has {info.partitions} partitions, which is higher than the "
            f"requested {count}.",
        )
    if count == info.partitions:
        raise AdminError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {count} partitions.")
    check_partition_limit(count)


def check_assignment_count(topic: NewPartitions, added: int) -> None:
    given = len(topic.assignments or ())
    if given != added:
        raise AdminError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Increasing the number of partitions by {added} but {given} "
            "assignments provided.",
        )


class SingleBrokerTopicAdmin(TopicAdmin):
    """No ZooKeeper: topics live in the TopicRegistry, every partition's log on this broker."""

    def __init__(self, config: CurrentBrokerConfig, node_id: int, registry: TopicRegistry,
                 cluster: ClusterView, log_manager: LogManager, replica_manager: ReplicaManager,
                 group_coordinator: GroupCoordinator,
                 topic_stats: BrokerTopicStats) -> None:
        super().__init__(config, node_id, registry, cluster)
        self.registry = registry
        self.log_manager = log_manager
        self.replica_manager = replica_manager
        self.group_coordinator = group_coordinator
        self.topic_stats = topic_stats

    def check_controller(self) -> None:
        """A single broker is its own controller."""

    def plan_assignment(self, partitions: int, rf: int,
                        first_partition: int = 0) -> dict[int, list[int]]:
        return {p: [self.node_id] for p in range(first_partition, first_partition + partitions)}

    def check_replica_assignment(self, assignment: Mapping[int, Sequence[int]]) -> int:
        for p, ids in assignment.items():
            self.check_assignment(ids, p)
        return 1

    def check_assignment(self, broker_ids: Sequence[int], partition: int) -> None:
        """A replica assignment must name exactly this broker (the only one)."""
        if list(broker_ids) != [self.node_id]:
            raise AdminError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Replica assignment {list(broker_ids)} of partition {partition} names brokers "
                f"other than the only one, {self.node_id}.",
            )

    def check_partition_budget(self, added: int) -> None:
        """KIP-578's max.broker.partitions: refuse what would take the broker over it."""
        limit = self._config.current.max_broker_partitions
        current = sum(t.partitions for t in self.topics)
        if current + added > limit:
            raise AdminError(
                ErrorCode.POLICY_VIOLATION,
                f"Cannot add {added} partition(s): broker {self.node_id} has {current} and "
                f"max.broker.partitions is {limit}.",
            )

    async def create_topic(self, name: str, assignment: Mapping[int, list[int]],
                           overrides: Mapping[str, str], timeout_ms: int) -> TopicInfo | None:
        return self.create_topic_now(name, len(assignment), overrides)

    def create_topic_now(
        self, name: str, partitions: int | None = None, configs: Mapping[str, str] | None = None
    ) -> TopicInfo:
        """Register the topic and create its partition logs. Raises InvalidTopicError, KeyError."""
        registry = self.registry
        count = self._config.current.num_partitions if partitions is None else partitions
        try:
            info = registry.create(name, count, configs)
        except OSError as e:  # nothing was kept: the registry undid it in memory
            raise KafkaStorageError(f"cannot write the topic registry: {e}") from e
        try:
            self.create_logs(info, range(count))
            if count >= 1000:
                gc.freeze()  # see Broker._run: long-lived logs out of full collections
        except BaseException:
            registry.forget(name)
            try:
                registry.save()
            except OSError as e:  # the registry on disk still lists it: a restart creates its logs
                log.warning("could not remove the failed topic %s from the registry: %s", name, e)
            raise
        log.info("created topic %s (%d partitions, id %s)", name, count,
                 uuid_to_base64(info.topic_id))
        return info

    def create_logs(self, info: TopicInfo, partitions: range) -> None:
        """Create the topic's partition logs, all or none: a failure part-way (no space, no
        descriptors) removes the ones this call created and raises KafkaStorageError
        naming the cause."""
        config = self._config.log_config_for(info)
        created: list[TopicPartition] = []
        try:
            for p in partitions:
                tp = TopicPartition(info.name, p)
                self.log_manager.get_or_create_log(tp, info.topic_id, config, sync=False)
                created.append(tp)
            self.log_manager.sync_dirs()  # one syncfs per log dir, not fsyncs per file
        except Exception as e:
            for tp in created:
                self.log_manager.discard_log(tp)
            raise KafkaStorageError(
                f"creating partition {partitions.start + len(created)} of {info.name} failed "
                f"({len(created)} of {len(partitions)} created, now removed): {e}") from e

    async def delete_topic(self, info: TopicInfo, timeout_ms: int) -> None:
        self.delete_topic_now(info)

    def delete_topic_now(self, info: TopicInfo) -> None:
        """Remove the topic's partition logs, then the topic."""
        self.check_deletion(info)
        manager = self.log_manager
        tps = [TopicPartition(info.name, p) for p in range(info.partitions)]
        manager.delete_logs(tps)
        self.replica_manager.forget(tps)
        self.registry.delete(info.name)
        manager.topic_configs.pop(info.name, None)
        self.group_coordinator.on_topic_deleted(info.name)
        self.topic_stats.remove_topic(info.name)

    async def create_partitions(self, topic: NewPartitions, validate_only: bool,
                                timeout_ms: int) -> None:
        info = self.find_topic(topic.name)
        check_new_partition_count(info, topic.count)
        self.check_partition_budget(topic.count - info.partitions)
        if topic.assignments is not None and topic.assignments:
            check_assignment_count(topic, topic.count - info.partitions)
            for i, a in enumerate(topic.assignments):
                self.check_assignment(a.broker_ids, info.partitions + i)
        if validate_only:
            return
        self.add_partitions(info, topic.count)

    def add_partitions(self, info: TopicInfo, count: int) -> None:
        """Grow the topic to `count` partitions (checked by check_new_partition_count)."""
        old = info.partitions
        registry = self.registry
        try:
            registry.set_partitions(info.name, count)
        except OSError as e:  # nothing was kept: the registry undid it in memory
            raise KafkaStorageError(f"cannot write the topic registry: {e}") from e
        try:
            self.create_logs(info, range(old, count))
        except BaseException:
            registry.set_partitions_in_memory(info.name, old)
            try:
                registry.save()
            except OSError as e:  # a restart creates the logs the registry lists
                log.warning("could not restore %s to %d partitions in the registry: %s", info.name, old, e)
            raise

    async def set_topic_configs(self, info: TopicInfo, overrides: Mapping[str, str]) -> None:
        """Persist the overrides, then apply them to the topic's live logs."""
        config = self.topic_config(overrides)
        self.registry.set_configs(info.name, dict(overrides))
        self.log_manager.update_topic_config(info.name, config)

    def auto_create_topic(self, name: str) -> TopicInfo | None:
        return self.create_topic_now(name)

    def create_internal_topic(self, name: str, partitions: int, replication_factor: int,
                              configs: Mapping[str, str]) -> bool:
        if self.topics.get(name) is None:
            self.create_topic_now(name, partitions, configs)
        return True
