"""What the transaction tests share: reading a partition back at an isolation level, the
last stable offset and high watermark as ListOffsets answers them, and transactional
producers' delivery bookkeeping."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, TopicPartition

from kbroker.protocol.messages.list_offsets import ListOffsetsRequest
from tests.cluster.support import wait_until

from .wire import WireClient

__all__ = ["read_values", "offsets", "wait_until"]

DEADLINE_S = 60.0


def read_values(bootstrap: str, topic: str, partition: int = 0, *, isolation: str = "read_committed",
                timeout: float = DEADLINE_S, start: int = 0) -> list[bytes]:
    """The values from `start` to the end of the partition at the isolation level: to the
    last stable offset (read_committed, aborted records dropped) or the high watermark."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.monotonic_ns()}",
                  "isolation.level": isolation, "enable.auto.commit": False,
                  "enable.partition.eof": True})
    out: list[bytes] = []
    try:
        c.assign([TopicPartition(topic, partition, start)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            err = m.error()
            if err is None:
                out.append(m.value())
            elif err.code() == KafkaError._PARTITION_EOF:
                return out
            else:
                raise AssertionError(f"consumer error: {err}")
        raise AssertionError(f"no end of partition {topic}-{partition} within {timeout} s")
    finally:
        c.close()


def offsets(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
    """(last stable offset, high watermark) from ListOffsets latest."""
    def latest(c: WireClient, isolation: int) -> int:
        req = ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
                ListOffsetsRequest.ListOffsetsPartition(partition_index=partition, timestamp=-1)])])
        p = c.call(req, 5).topics[0].partitions[0]
        assert p.error_code == 0, p
        return int(p.offset)

    with WireClient(bootstrap) as c:
        return latest(c, 1), latest(c, 0)


