"""The internal compacted topic __consumer_offsets: where groups and offsets are stored.

A group lives in partition `abs(java_hash(group_id)) % offsets.topic.num.partitions`,
Kafka's `Utils.abs(groupId.hashCode) % n`, so a kbroker data directory maps groups
to partitions as Kafka would. Records use Kafka's key/value formats
(group_records.py) in ordinary uncompressed batches appended with
Log.append_as_leader; reading back is a scan of each partition from its log start.

Like Kafka, the topic is created on first need (FindCoordinator for a group, or a
group write), with `cleanup.policy=compact` and `offsets.topic.segment.bytes`,
never by Metadata auto-creation; Metadata lists it with is_internal=True.

Lock: the broker's event-loop thread only.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

from kbroker.records.builder import build_batch
from kbroker.records.record_iter import iter_batches

log = logging.getLogger(__name__)

GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"
_READ_CHUNK = 4 * 1024 * 1024


def java_string_hash(s: str) -> int:
    """java.lang.String.hashCode over UTF-16 code units, as a signed int32."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def java_abs(n: int) -> int:
    """Kafka's Utils.abs: Integer.MIN_VALUE maps to 0."""
    return 0 if n == -(2**31) else abs(n)


class OffsetsTopic:
    """Reads and appends __consumer_offsets through the broker's logs."""

    def __init__(self, broker: Any) -> None:
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

    def ensure_created(self) -> None:
        if self.exists:
            return
        configs = {
            "cleanup.policy": "compact",
            "compression.type": "producer",
            "segment.bytes": str(self.config.offsets_topic_segment_bytes),
        }
        self.broker.create_topic(GROUP_METADATA_TOPIC_NAME, self.config.offsets_topic_num_partitions, configs)

    def append(self, group_id: str, records: Sequence[tuple[bytes, bytes | None]]) -> None:
        """Append records for one group to its partition. Raises on a storage failure."""
        if not records:
            return
        self.ensure_created()
        partition = self.partition_for(group_id)
        plog = self.broker.get_log(GROUP_METADATA_TOPIC_NAME, partition)
        if plog is None:
            raise RuntimeError(f"{GROUP_METADATA_TOPIC_NAME}-{partition} has no log")
        batch = build_batch([(key, value, 0, ()) for key, value in records], self.broker.time.milliseconds())
        plog.append_as_leader(batch, leader_epoch=0)
        self.broker.append_notifier.notify(plog.topic_partition)

    def read_all(self) -> Iterator[tuple[bytes, bytes | None]]:
        """Every (key, value) record of every partition, in log order per partition."""
        if not self.exists:
            return
        for partition in range(self.num_partitions):
            plog = self.broker.get_log(GROUP_METADATA_TOPIC_NAME, partition)
            if plog is not None:
                yield from read_partition(plog)


def read_partition(plog: Any) -> Iterator[tuple[bytes, bytes | None]]:
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
