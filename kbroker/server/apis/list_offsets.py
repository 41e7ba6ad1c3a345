"""ListOffsets (key 2), v1-7: offsets by timestamp.

timestamp -1 (latest): the high watermark, or the last stable offset for
read_committed (v2+); -2 (earliest): the log start offset; -3 (max timestamp,
v7): the offset of the record with the largest timestamp; any other value: the
first offset whose timestamp is >= it, via the time index, or -1 when none is.
"""

from __future__ import annotations

import logging

from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.common.topic_partition import TopicPartition
from kbroker.protocol.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from kbroker.server import authorization as authz
from kbroker.server.request_context import RequestContext
from kbroker.storage.log import Log

log = logging.getLogger(__name__)

TopicResponse = ListOffsetsResponse.ListOffsetsTopicResponse
PartitionResponse = ListOffsetsResponse.ListOffsetsPartitionResponse

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
READ_COMMITTED = 1


def handle(ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    committed = ctx.api_version >= 2 and request.isolation_level == READ_COMMITTED
    from_follower = request.replica_id >= 0 and ctx.services.support.serves_followers
    topics = []
    described = authz.authorized_topics(ctx, "DESCRIBE", (t.name for t in request.topics))
    for t in request.topics:
        if t.name not in described:
            partitions = [_error(p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                          for p in t.partitions]
        else:
            partitions = [_lookup(ctx, t.name, p, committed, from_follower) for p in t.partitions]
        topics.append(TopicResponse(name=t.name, partitions=partitions))
    return ListOffsetsResponse(topics=topics)


def _lookup(
    ctx: RequestContext, topic: str, p: ListOffsetsRequest.ListOffsetsPartition, committed: bool,
    from_follower: bool = False,
) -> PartitionResponse:
    try:
        partition = ctx.services.replica_manager.leader_partition(
            TopicPartition(topic, p.partition_index), p.current_leader_epoch)
    except KafkaError as e:
        return _error(p.partition_index, e.error_code)
    plog = partition.local_log()
    epoch = partition.leader_epoch
    ts = p.timestamp
    if ts == LATEST:
        if from_follower:  # a replica asks for the log end, as Kafka answers it
            return _found(p.partition_index, plog.log_end_offset, -1, epoch)
        offset = plog.last_stable_offset if committed else plog.high_watermark
        return _found(p.partition_index, offset, -1, epoch)
    if ts == EARLIEST:
        return _found(p.partition_index, plog.log_start_offset, -1, epoch)
    if ts < 0 and ts != MAX_TIMESTAMP:
        return _error(p.partition_index, ErrorCode.INVALID_REQUEST)
    found = _by_timestamp(plog, ts)
    if found is None:
        return _found(p.partition_index, -1, -1, leader_epoch=-1)
    offset, timestamp, found_epoch = found
    limit = plog.last_stable_offset if committed else plog.high_watermark
    if offset >= limit:
        return _found(p.partition_index, -1, -1, leader_epoch=-1)
    return _found(p.partition_index, offset, timestamp, found_epoch if found_epoch is not None else 0)


def _by_timestamp(plog: Log, ts: int) -> tuple[int, int, int | None] | None:
    try:
        result = plog.fetch_offset_by_timestamp(ts)
    except KafkaError:
        return None
    return result


def _found(partition: int, offset: int, timestamp: int, leader_epoch: int = 0) -> PartitionResponse:
    return PartitionResponse(
        partition_index=partition,
        error_code=ErrorCode.NONE,
        timestamp=timestamp,
        offset=offset,
        leader_epoch=leader_epoch,
    )


def _error(partition: int, code: int) -> PartitionResponse:
    return PartitionResponse(partition_index=partition, error_code=code, timestamp=-1, offset=-1)


def error_response(request: ListOffsetsRequest, version: int, code: int) -> ListOffsetsResponse:
    return ListOffsetsResponse(
        topics=[
            TopicResponse(name=t.name, partitions=[_error(p.partition_index, code) for p in t.partitions])
            for t in request.topics
        ]
    )
