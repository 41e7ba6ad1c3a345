"""The internal compacted topic __consumer_offsets: where groups and offsets are stored.

A group lives in partition `abs(java_hash(group_id)) % offsets.topic.num.partitions`,
Kafka's `Utils.abs(groupId.hashCode) % n`, so a kbroker data directory maps groups
to partitions as Kafka would. Records use Kafka's key/value formats
(group_records.py) in ordinary uncompressed batches appended through the partition's
leader (ReplicaManager: a single broker leads them all; in a cluster, the coordinator
of a group is the leader of its partition); reading back is a scan of a partition from
its log start. In a cluster, a write is acknowledged once it is replicated (the high
watermark passed it), as Kafka appends offsets with acks=all: `wait_replicated`.

Like Kafka, the topic is created on first need (FindCoordinator for a group, or a
group write), with `cleanup.policy=compact`, `offsets.topic.segment.bytes` and
`offsets.topic.replication.factor`, never by Metadata auto-creation; Metadata lists
it with is_internal=True.

Lock: the broker's event-loop thread only.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.common.topic_partition import TopicPartition
from kbroker.records.builder import build_batch
from kbroker.records.record_iter import iter_batches
from kbroker.utils.java_hash import java_abs, java_string_hash

if TYPE_CHECKING:
    from kbroker.cluster.metadata_cache import TopicCatalog
    from kbroker.cluster.replica_manager import ReplicaManager
    from kbroker.config import BrokerConfig
    from kbroker.storage.log import Log
    from kbroker.storage.log_manager import LogManager
    from kbroker.utils.time import Time

log = logging.getLogger(__name__)

GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"
_READ_CHUNK = 4 * 1024 * 1024


class OffsetsBroker(Protocol):
    """What the offsets topic uses of the broker (BrokerState)."""

    config: BrokerConfig
    time: Time
    topics: TopicCatalog
    replica_manager: ReplicaManager
    log_manager: LogManager

    @property
    def offsets_topic_replication_factor(self) -> int: ...

    def create_internal_topic(self, name: str, partitions: int, replication_factor: int,
                              configs: Mapping[str, str]) -> bool: ...


class OffsetsTopic:
    """Reads and appends __consumer_offsets through the broker's logs."""

    def __init__(self, broker: OffsetsBroker) -> None:
        self.broker = broker
        self.config = broker.config

    @property
    def num_partitions(self) -> int:
        info = self.broker.topics.get(GROUP_METADATA_TOPIC_NAME)
        return info.partitions if info is not None else self.config.offsets_topic_num_partitions

    def partition_for(self, group_id: str) -> int:
        return java_abs(java_string_hash(group_id)) % self.num_partitions

    @property
    def exists(self) -> bool:
        return self.broker.topics.get(GROUP_METADATA_TOPIC_NAME) is not None

    def ensure_created(self) -> bool:
        """True once the topic exists; else start creating it (a cluster creates it in the
        background: False until its partitions have leaders)."""
        if self.exists:
            return True
        configs = {
            "cleanup.policy": "compact",
            "compression.type": "producer",
            "segment.bytes": str(self.config.offsets_topic_segment_bytes),
        }
        return self.broker.create_internal_topic(
            GROUP_METADATA_TOPIC_NAME, self.config.offsets_topic_num_partitions,
            self.broker.offsets_topic_replication_factor, configs)

    def append(self, group_id: str, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        """Append records for one group to its partition (this broker must lead it).
        Raises KafkaError (NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR, ...) on failure."""
        if not records:
            return
        if not self.ensure_created():
            raise KafkaError(f"{GROUP_METADATA_TOPIC_NAME} is being created",
                             ErrorCode.COORDINATOR_NOT_AVAILABLE)
        tp = TopicPartition(GROUP_METADATA_TOPIC_NAME, self.partition_for(group_id))
        partition = self.broker.replica_manager.leader_partition(tp)
        batch = build_batch([(key, value, 0, ()) for key, value in records], self.broker.time.milliseconds())
        partition.append_records_to_leader(batch, acks=1, min_insync_replicas=1)

    def wait_replicated(self, group_id: str, timeout_s: float) -> Awaitable[int] | None:
        """After a write: wait until the group's partition is replicated up to its log end
        (cluster mode); None when it already is. Resolves to an error code (NONE,
        REQUEST_TIMED_OUT, NOT_LEADER_OR_FOLLOWER, ...)."""
        tp = TopicPartition(GROUP_METADATA_TOPIC_NAME, self.partition_for(group_id))
        partition = self.broker.replica_manager.get_partition(tp)
        if partition is None or partition.log is None:
            return None
        end = partition.log.log_end_offset
        if partition.log.high_watermark >= end:
            return None
        waited = partition.wait_for_high_watermark(end, 1, timeout_s)
        if isinstance(waited, int):
            return None if waited == ErrorCode.NONE else _completed(waited)
        return waited

    def read_all(self) -> Iterator[tuple[bytes, bytes | None]]:
        """Every (key, value) record of every partition, in log order per partition."""
        if not self.exists:
            return
        for partition in range(self.num_partitions):
            yield from self.read_partition(partition)

    def read_partition(self, partition: int) -> Iterator[tuple[bytes, bytes | None]]:
        plog = self.broker.log_manager.get_log(TopicPartition(GROUP_METADATA_TOPIC_NAME, partition))
        if plog is not None:
            yield from read_partition(plog)


async def _completed(code: int) -> int:
    return code


def read_partition(plog: Log) -> Iterator[tuple[bytes, bytes | None]]:
    offset = plog.log_start_offset
    end = plog.log_end_offset
    while offset < end:
        info = plog.read(offset, _READ_CHUNK, max_offset=end)
        if info.records is None:
            return
        data = info.records.read_bytes()
        advanced = False
        for batch in iter_batches(data):
            header = batch.header
            if header.next_offset <= offset:
                continue
            offset = header.next_offset
            advanced = True
            if header.is_control:
                continue
            for rec in batch.records():
                if rec.key is not None:
                    yield rec.key, rec.value
        if not advanced:
            log.warning("%s: cannot read past offset %d", plog.topic_partition, offset)
            return
