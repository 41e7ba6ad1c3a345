"""The internal compacted topic __consumer_offsets: where groups and offsets are stored.

A group lives in partition `abs(java_hash(group_id)) % offsets.topic.num.partitions`
(InternalTopic has how records are written, replicated and read back). Records use
Kafka's key/value formats (group_records.py). Transactional offset commits (TxnOffsetCommit)
are written in a transactional batch of the producer's id and epoch, and the transaction
coordinator's COMMIT or ABORT marker decides them, as in Kafka.

Created on first need (FindCoordinator for a group, or a group write) with
`cleanup.policy=compact`, `offsets.topic.segment.bytes` and
`offsets.topic.replication.factor`.

Lock: the broker's event-loop thread only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterator, Sequence

from kbroker.coordinator.internal_topic import InternalTopic, StoredRecord

GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"


class OffsetsTopic(InternalTopic):
    """Reads and appends __consumer_offsets through the broker's logs (the GroupStore of
    the group coordinator)."""

    name = GROUP_METADATA_TOPIC_NAME

    @property
    def configured_partitions(self) -> int:
        return self.broker.config.offsets_topic_num_partitions

    @property
    def configured_replication_factor(self) -> int:
        return self.broker.config.offsets_topic_replication_factor

    def topic_configs(self) -> dict[str, str]:
        return {
            "cleanup.policy": "compact",
            "compression.type": "producer",
            "segment.bytes": str(self.broker.config.offsets_topic_segment_bytes),
        }

    def append(self, group_id: str, records: Sequence[tuple[bytes, bytes | None]],
               producer_id: int = -1, producer_epoch: int = -1) -> int:
        """Append records for one group to its partition (this broker must lead it); with a
        producer id, as a transactional batch. Returns the batch's base offset (-1 for no
        records). Raises KafkaError (NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR, ...)."""
        if not records:
            return -1
        info = self.append_records(self.partition_for(group_id), records, producer_id=producer_id,
                                   producer_epoch=producer_epoch, transactional=producer_id >= 0)
        return info.first_offset

    def wait_group_replicated(self, group_id: str, timeout_s: float) -> Awaitable[int] | None:
        """After a write: wait until the group's partition is replicated up to its log end
        (cluster mode); None when it already is."""
        return self.wait_replicated(self.partition_for(group_id), timeout_s)

    def read_all(self) -> Iterator[StoredRecord]:
        """Every record of every partition, in log order per partition."""
        if not self.exists:
            return
        for partition in range(self.num_partitions):
            yield from self.read_partition(partition)
