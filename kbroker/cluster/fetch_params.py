"""What a Fetch asks of the ReplicaManager and what its read found: Kafka's FetchParams,
the fetchInfos of ReplicaManager.fetchMessages, and its FetchPartitionData.

FetchParams: who fetches (`replica_id`: a follower's broker id, -1 for a consumer), how
long it may wait (`max_wait_ms`) for how many bytes (`min_bytes`), how many bytes the
response may carry (`max_bytes`: the request's, for a consumer also the broker's
fetch.max.bytes, KIP-541), how far it reads (`isolation`, Kafka's FetchIsolation: a
follower to the log end offset, a consumer to the high watermark, or to the last stable
offset with read_committed), and kbroker's own record bounds of a consumer's read
(`max_partition_records`, fetch.partition.response.max.records; `max_response_records`,
fetch.response.max.records, None: no bound; see server/apis/fetch.py). A consumer's slice
of at most `inline_bytes` is read into memory at once (the response writer would copy it
anyway, to send it with the bytes around it): a read over thousands of partitions then
holds no segment descriptor per partition while its response is built.

A partition to read is any object with PartitionFetchInfo's attributes (the FetchInfo
protocol): the Fetch handler makes a PartitionFetchInfo for each partition of a
sessionless request; a fetch session's CachedPartition (cluster/fetch_session.py) is one
itself, so that a follower's incremental fetch hands its session's partitions over as
they are. An info whose `topic_partition` is None is not read: it answers its
`error_code` (a topic the request may not read, a topic id no topic has). Each read
(a consumer's, and a follower's but for a session's quiet partitions, which a deletion
makes read again) checks that `topic_id` is still its topic's: UNKNOWN_TOPIC_ID once the
topic is deleted, or made again under the same name, while the fetch waits (Kafka's
readFromLog checks it too). None, or zero in a session opened by name: the request
named the topic. `quiet` and `unchanged` are the session's memory of what the follower
was last told (see ReplicaManager.read_from_log); a sessionless info remembers nothing.

The answer of a partition is the response's own FetchResponse.PartitionData (no copy
between the read and the response): Kafka's FetchPartitionData.

Values built and read on the broker's event-loop thread.
"""

from __future__ import annotations

from typing import Any, Protocol

from kbroker.common.error_code import ErrorCode
from kbroker.common.topic_partition import TopicPartition
from kbroker.protocol.messages.fetch import FetchResponse

PartitionData = FetchResponse.PartitionData

# FetchIsolation: up to where a fetch reads.
FETCH_LOG_END = 0  # a follower: everything the leader holds
FETCH_HIGH_WATERMARK = 1  # a consumer, read_uncommitted
FETCH_TXN_COMMITTED = 2  # a consumer, read_committed: up to the last stable offset
READ_COMMITTED = 1  # the request's isolation_level


class FetchParams:
    """See the module docstring."""

    __slots__ = ("replica_id", "max_wait_ms", "min_bytes", "max_bytes", "isolation",
                 "max_partition_records", "max_response_records", "inline_bytes")

    def __init__(self, replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int,
                 isolation_level: int = 0, max_partition_records: int = 0,
                 max_response_records: int | None = None, inline_bytes: int = 0) -> None:
        self.replica_id = replica_id
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        if replica_id >= 0:
            self.isolation = FETCH_LOG_END
        else:
            self.isolation = FETCH_TXN_COMMITTED if isolation_level == READ_COMMITTED else FETCH_HIGH_WATERMARK
        self.max_partition_records = max_partition_records
        self.max_response_records = max_response_records
        self.inline_bytes = inline_bytes

    @property
    def is_from_follower(self) -> bool:
        return self.replica_id >= 0

    @property
    def is_from_consumer(self) -> bool:
        return self.replica_id < 0

    def __repr__(self) -> str:
        return (f"FetchParams(replica_id={self.replica_id}, max_wait_ms={self.max_wait_ms}, "
                f"min_bytes={self.min_bytes}, max_bytes={self.max_bytes}, isolation={self.isolation})")


class FetchInfo(Protocol):
    """A partition to read (see the module docstring)."""

    topic_partition: TopicPartition | None
    topic_id: Any
    partition: int
    fetch_offset: int
    current_leader_epoch: int
    partition_max_bytes: int
    error_code: int
    quiet: Any

    def unchanged(self, high_watermark: int, log_start_offset: int) -> bool: ...


class PartitionFetchInfo:
    """One partition of a sessionless Fetch: the request's FetchPartition and its topic."""

    __slots__ = ("topic_partition", "topic_id", "partition", "fetch_offset", "current_leader_epoch",
                 "partition_max_bytes", "error_code")

    quiet = None  # a sessionless fetch remembers nothing of what the last one told

    def __init__(self, topic_partition: TopicPartition | None, fp: Any, topic_id: Any = None,
                 error_code: int = ErrorCode.NONE) -> None:
        self.topic_partition = topic_partition
        self.topic_id = topic_id
        self.partition = fp.partition
        self.fetch_offset = fp.fetch_offset
        self.current_leader_epoch = fp.current_leader_epoch
        self.partition_max_bytes = fp.partition_max_bytes
        self.error_code = error_code

    def unchanged(self, high_watermark: int, log_start_offset: int) -> bool:
        return False


class FetchResult:
    """What a read found: each partition read with something to tell and its answer, in
    the order read (a sessionless fetch: every partition; a session's follower partition
    caught up with nothing new is left out), the bytes of records, whether a partition
    failed, the partitions read (the keys a DelayedFetch waits on), and whether a record
    bound left records out (waiting would bring no more)."""

    __slots__ = ("partitions", "bytes_readable", "error", "topic_partitions", "records_held_back")

    def __init__(self, partitions: list[tuple[Any, PartitionData]], bytes_readable: int, error: bool,
                 topic_partitions: list[TopicPartition], records_held_back: bool = False) -> None:
        self.partitions = partitions
        self.bytes_readable = bytes_readable
        self.error = error
        self.topic_partitions = topic_partitions
        self.records_held_back = records_held_back


def error_data(partition: int, code: int) -> PartitionData:
    """A partition's answer that is only an error."""
    return PartitionData(partition_index=partition, error_code=code, high_watermark=-1,
                         last_stable_offset=-1, log_start_offset=-1, records=b"")


def records_size(records: Any) -> int:
    """The bytes of an answer's records: bytes or a FileSlice."""
    if records is None:
        return 0
    return len(records) if isinstance(records, bytes | bytearray | memoryview) else int(records.size)
