"""InternalTopic: a coordinator's compacted internal topic (__consumer_offsets for groups,
__transaction_state for transactions), read and appended through the broker's logs.

A key (group id, transactional id) lives in partition `abs(java_hash(key)) % partitions`,
Kafka's `Utils.abs(key.hashCode) % n`, so a kbroker data directory maps keys to
partitions as Kafka would. Records go in uncompressed batches appended through the
partition's leader (ReplicaManager.append_to_leader: a single broker leads them all; in a
cluster, the coordinator of a key is the leader of its partition); reading back is a scan of a
partition from its log start (`read_partition`), records with their offsets and batch
attributes, control records included (the group coordinator's loader needs both to
replay transactional offset commits). In a cluster a write is acknowledged once
replicated (the high watermark passed it): `wait_replicated`, the ReplicaManager's
DelayedProduce.

Like Kafka, the topic is created on first need (FindCoordinator, or a write), with the
coordinator's configs, never by Metadata auto-creation; Metadata lists it with
is_internal=True.

Lock: the broker's event-loop thread only.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple, Protocol

from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.common.topic_partition import TopicPartition
from kbroker.records import control_record
from kbroker.records.batch_header import CONTROL_NONE, TRANSACTIONAL_BIT
from kbroker.records.builder import build_batch
from kbroker.records.record_iter import iter_batches
from kbroker.storage.producer_state import AppendOrigin
from kbroker.utils.java_hash import java_abs, java_string_hash

if TYPE_CHECKING:
    from kbroker.cluster.metadata_cache import TopicCatalog
    from kbroker.cluster.replica_manager import ReplicaManager
    from kbroker.config import BrokerConfig
    from kbroker.storage.log import Log
    from kbroker.storage.log_manager import LogManager
    from kbroker.storage.values import LogAppendInfo
    from kbroker.utils.time import Time

log = logging.getLogger(__name__)

READ_CHUNK = 4 * 1024 * 1024


class CoordinatorBroker(Protocol):
    """What a coordinator's topic uses of the broker (BrokerComponents)."""

    @property
    def config(self) -> BrokerConfig: ...

    time: Time
    topics: TopicCatalog
    replica_manager: ReplicaManager
    log_manager: LogManager
    clustered: bool

    def create_internal_topic(self, name: str, partitions: int, replication_factor: int,
                              configs: Mapping[str, str]) -> bool: ...


class StoredRecord(NamedTuple):
    """A record of an internal topic as read back, with what its batch says of it."""

    key: bytes | None
    value: bytes | None
    offset: int
    producer_id: int = -1
    transactional: bool = False
    control_type: int = CONTROL_NONE  # a control record: control_record.COMMIT / ABORT


class InternalTopic:
    """See the module docstring. Subclasses name the topic and its settings."""

    name = ""

    def __init__(self, broker: CoordinatorBroker) -> None:
        self.broker = broker

    # -- settings (the broker's config at the time of asking)
    @property
    def configured_partitions(self) -> int:
        raise NotImplementedError

    @property
    def configured_replication_factor(self) -> int:
        raise NotImplementedError

    def topic_configs(self) -> dict[str, str]:
        raise NotImplementedError

    @property
    def replication_factor(self) -> int:
        """The configured replication factor in a cluster; a single broker has one replica."""
        return self.configured_replication_factor if self.broker.clustered else 1

    @property
    def min_insync_replicas(self) -> int:
        return 1

    # -- partitions
    @property
    def num_partitions(self) -> int:
        info = self.broker.topics.get(self.name)
        return info.partitions if info is not None else self.configured_partitions

    def partition_for(self, key: str) -> int:
        return java_abs(java_string_hash(key)) % self.num_partitions

    @property
    def exists(self) -> bool:
        return self.broker.topics.get(self.name) is not None

    def ensure_created(self) -> bool:
        """True once the topic exists; else start creating it (a cluster creates it in the
        background: False until its partitions have leaders)."""
        if self.exists:
            return True
        return self.broker.create_internal_topic(self.name, self.configured_partitions,
                                                 self.replication_factor, self.topic_configs())

    # -- writes
    def append_records(self, partition: int, records: Sequence[tuple[bytes, bytes | None]], *,
                       producer_id: int = -1, producer_epoch: int = -1,
                       transactional: bool = False, acks: int = 1) -> LogAppendInfo:
        """Append records to a partition (this broker must lead it), in one batch; a
        transactional one carries the producer's id and epoch (origin COORDINATOR, as
        Kafka writes transactional offset commits). Raises KafkaError
        (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, KAFKA_STORAGE_ERROR, ...)."""
        if not self.ensure_created():
            raise KafkaError(f"{self.name} is being created", ErrorCode.COORDINATOR_NOT_AVAILABLE)
        tp = TopicPartition(self.name, partition)
        replica_manager = self.broker.replica_manager
        replica_manager.leader_partition(tp)  # refused before the batch is built
        batch = build_batch([(key, value, 0, ()) for key, value in records], self.broker.time.milliseconds(),
                            attributes=TRANSACTIONAL_BIT if transactional else 0,
                            producer_id=producer_id, producer_epoch=producer_epoch,
                            base_sequence=0 if producer_id >= 0 else -1)
        origin = AppendOrigin.COORDINATOR if producer_id >= 0 else AppendOrigin.CLIENT
        return replica_manager.append_to_leader(tp, batch, acks, origin, self.min_insync_replicas)

    def wait_replicated(self, partition: int, timeout_s: float,
                        end_offset: int | None = None) -> Awaitable[int] | None:
        """After a write: wait until the partition is replicated up to `end_offset` (default:
        its log end; cluster mode); None when it already is. Resolves to an error code
        (NONE, REQUEST_TIMED_OUT, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS_AFTER_APPEND)."""
        tp = TopicPartition(self.name, partition)
        replica_manager = self.broker.replica_manager
        leader = replica_manager.get_partition(tp)
        if leader is None or leader.log is None:
            return None
        end = leader.log.log_end_offset if end_offset is None else end_offset
        if leader.log.high_watermark >= end:
            return None
        waited = replica_manager.wait_for_replication(tp, end, self.min_insync_replicas, int(timeout_s * 1000))
        if waited is None:
            return None
        if isinstance(waited, int):
            return None if waited == ErrorCode.NONE else completed(waited)
        return waited

    # -- reads
    def read_partition(self, partition: int, chunk: int = READ_CHUNK) -> Iterator[StoredRecord]:
        plog = self.broker.log_manager.get_log(TopicPartition(self.name, partition))
        if plog is not None:
            yield from read_partition(plog, chunk)


async def completed(code: int) -> int:
    return code


def read_partition(plog: Log, chunk: int = READ_CHUNK) -> Iterator[StoredRecord]:
    """Every record of a partition from its log start to its log end, in log order."""
    offset = plog.log_start_offset
    end = plog.log_end_offset
    while offset < end:
        info = plog.read(offset, chunk, max_offset=end)
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
            for rec in batch.records():
                if header.is_control:
                    yield StoredRecord(rec.key, rec.value, rec.offset, header.producer_id, True,
                                       control_record.control_type(rec.key))
                elif rec.key is not None:
                    yield StoredRecord(rec.key, rec.value, rec.offset, header.producer_id,
                                       header.is_transactional)
        if not advanced:
            log.warning("%s: cannot read past offset %d", plog.topic_partition, offset)
            return
