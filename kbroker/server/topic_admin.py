"""Topic administration on a single broker: the checks and state changes behind
CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs and
IncrementalAlterConfigs.

Each check raises AdminError carrying the Kafka error code and the message
Kafka 3.9 would send (ZkAdminManager, KafkaApis); a `validate_only` request runs
the checks and stops there. A change is persisted in the topic registry and
applied to the live logs before the handler answers.

Crash safety of a deletion: the partition directories are renamed away
(`<topic>-<p>.<uuid>-delete`) before the registry forgets the topic, so a crash
in between leaves a registered topic with empty logs, never stray data that the
next start would adopt back.

Threading: the broker's event-loop thread only (as the registry and LogManager).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.common.topic_partition import TopicPartition
from kbroker.metadata.topic_registry import InvalidTopicError, TopicInfo, validate_topic_name
from kbroker.storage.errors import KafkaStorageError
from kbroker.storage.log_config import LogConfig

if TYPE_CHECKING:
    from kbroker.broker import BrokerState

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


def check_new_topic_name(broker: BrokerState, name: str) -> None:
    try:
        validate_topic_name(name)
    except InvalidTopicError as e:
        raise AdminError(ErrorCode.INVALID_TOPIC_EXCEPTION, str(e)) from None
    if name in broker.topics:
        raise AdminError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    # Kafka's Topic.hasCollision: '.' and '_' collide in metric names.
    if "." in name or "_" in name:
        folded = name.replace(".", "_")
        for other in broker.topics.names():
            if other.replace(".", "_") == folded:
                raise AdminError(
                    ErrorCode.INVALID_TOPIC_EXCEPTION,
                    f"Topic '{name}' collides with existing topic: {other}",
                )


def resolve_partitions(broker: BrokerState, num_partitions: int) -> int:
    if num_partitions == USE_DEFAULT:
        return broker.config.num_partitions
    if num_partitions < 1:
        raise AdminError(
            ErrorCode.INVALID_PARTITIONS,
            "Number of partitions was set to an invalid non-positive value.",
        )
    check_partition_limit(num_partitions)
    return num_partitions


def check_broker_partitions(broker: BrokerState, added: int) -> None:
    """KIP-578's max.broker.partitions: refuse what would take the broker over it."""
    limit = broker.config.max_broker_partitions
    current = sum(t.partitions for t in broker.topics)
    if current + added > limit:
        raise AdminError(
            ErrorCode.POLICY_VIOLATION,
            f"Cannot add {added} partition(s): broker {broker.node_id} has {current} and "
            f"max.broker.partitions is {limit}.",
        )


def check_partition_limit(count: int) -> None:
    if count > MAX_PARTITIONS_PER_TOPIC:
        raise AdminError(
            ErrorCode.INVALID_PARTITIONS,
            f"Number of partitions {count} exceeds kbroker's limit of {MAX_PARTITIONS_PER_TOPIC} "
            "per topic.",
        )


def resolve_replication_factor(broker: BrokerState, replication_factor: int) -> int:
    rf = broker.config.default_replication_factor if replication_factor == USE_DEFAULT else replication_factor
    if rf < 1:
        raise AdminError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            "Replication factor must be larger than 0, or -1 to use the default value.",
        )
    live = len(broker.cluster.alive_brokers())
    if rf > live:
        raise AdminError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Replication factor: {rf} larger than available brokers: {live}.",
        )
    return rf


def check_assignment(broker: BrokerState, broker_ids: Sequence[int], partition: int) -> None:
    """A replica assignment must name exactly this broker (the only one)."""
    if list(broker_ids) != [broker.node_id]:
        raise AdminError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Replica assignment {list(broker_ids)} of partition {partition} names brokers "
            f"other than the only one, {broker.node_id}.",
        )


def topic_config(broker: BrokerState, overrides: Mapping[str, str | None]) -> LogConfig:
    """The effective LogConfig for these overrides; INVALID_CONFIG for unknown or bad ones."""
    nulls = sorted(k for k, v in overrides.items() if v is None)
    if nulls:
        raise AdminError(
            ErrorCode.INVALID_CONFIG, f"Null value not supported for topic configs: {','.join(nulls)}"
        )
    try:
        return LogConfig.from_props(overrides, base=broker.default_log_config)
    except ValueError as e:
        raise AdminError(ErrorCode.INVALID_CONFIG, str(e)) from None


def find_topic(broker: BrokerState, name: str | None) -> TopicInfo:
    info = broker.topics.get(name) if name is not None else None
    if info is None:
        raise AdminError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
        )
    return info


def check_not_internal(info: TopicInfo, action: str) -> None:
    """Internal topics (__consumer_offsets, __transaction_state) belong to the coordinators,
    which keep their partitions open and map keys onto the partition count: kbroker refuses
    to delete or grow them (Kafka's brokers allow it; its TopicCommand refuses deletion)."""
    if info.is_internal:
        raise AdminError(
            ErrorCode.INVALID_REQUEST,
            f"Topic {info.name} is a Kafka internal topic and is not allowed to be {action}.",
        )


def delete_topic(broker: BrokerState, info: TopicInfo) -> None:
    """Remove the topic's partition logs, then the topic."""
    if not broker.config.delete_topic_enable:
        raise AdminError(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
    check_not_internal(info, "marked for deletion")
    manager = broker.log_manager
    tps = [TopicPartition(info.name, p) for p in range(info.partitions)]
    manager.delete_logs(tps)
    broker.replica_manager.forget(tps)
    broker.local_registry().delete(info.name)
    manager.topic_configs.pop(info.name, None)
    broker.group_coordinator.on_topic_deleted(info.name)
    broker.topic_stats.remove_topic(info.name)


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


def add_partitions(broker: BrokerState, info: TopicInfo, count: int) -> None:
    """Grow the topic to `count` partitions (checked by check_new_partition_count)."""
    old = info.partitions
    registry = broker.local_registry()
    try:
        registry.set_partitions(info.name, count)
    except OSError as e:  # nothing was kept: the registry undid it in memory
        raise KafkaStorageError(f"cannot write the topic registry: {e}") from e
    try:
        broker.create_logs(info, range(old, count))
    except BaseException:
        registry.set_partitions_in_memory(info.name, old)
        try:
            registry.save()
        except OSError as e:  # a restart creates the logs the registry lists
            log.warning("could not restore %s to %d partitions in the registry: %s", info.name, old, e)
        raise


async def set_topic_configs(broker: BrokerState, info: TopicInfo, overrides: Mapping[str, str]) -> None:
    """Replace the topic's overrides: persist them, then apply them to its live logs (in a
    cluster: write them to ZooKeeper, from where every broker applies them)."""
    config = topic_config(broker, overrides)
    if broker.zk_broker is not None:
        await broker.zk_broker.change_topic_config(info.name, dict(overrides))
        return
    broker.local_registry().set_configs(info.name, dict(overrides))
    broker.log_manager.update_topic_config(info.name, config)


def check_broker_name(broker: BrokerState, name: str) -> None:
    """A BROKER config resource must name this broker's node.id (ConfigHelper's checks)."""
    try:
        node = int(name)
    except ValueError:
        raise AdminError(ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, got {name!r}.") from None
    if node != broker.node_id:
        raise AdminError(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {broker.node_id} or empty string, but received {name}",
        )
