"""OffsetForLeaderEpoch (key 23), v2-4: the end offset of a leader epoch.

A single broker leads every partition at epoch 0 (batches are stamped with
partitionLeaderEpoch 0), so: epoch 0 -> the log end offset; an epoch the log
does not know -> UNDEFINED (-1, -1). `current_leader_epoch` above ours is
UNKNOWN_LEADER_EPOCH, below it FENCED_LEADER_EPOCH, as Kafka checks it.
"""

from __future__ import annotations

from typing import Any

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from kbroker.server.request_context import RequestContext

TopicResult = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
EpochEndOffset = OffsetForLeaderEpochResponse.EpochEndOffset

LEADER_EPOCH = 0
UNDEFINED = -1


def handle(
    ctx: RequestContext, request: OffsetForLeaderEpochRequest
) -> OffsetForLeaderEpochResponse:
    topics = []
    for t in request.topics:
        partitions = [_end_offset(ctx, t.topic, p) for p in t.partitions]
        topics.append(TopicResult(topic=t.topic, partitions=partitions))
    return OffsetForLeaderEpochResponse(topics=topics)


def _end_offset(
    ctx: RequestContext, topic: str, p: OffsetForLeaderEpochRequest.OffsetForLeaderPartition
) -> EpochEndOffset:
    plog = ctx.broker.get_log(topic, p.partition)
    if plog is None:
        return _error(p.partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if p.current_leader_epoch > LEADER_EPOCH:
        return _error(p.partition, ErrorCode.UNKNOWN_LEADER_EPOCH)
    if 0 <= p.current_leader_epoch < LEADER_EPOCH:
        return _error(p.partition, ErrorCode.FENCED_LEADER_EPOCH)
    epoch, end_offset = _lookup(plog, p.leader_epoch)
    return EpochEndOffset(
        error_code=ErrorCode.NONE, partition=p.partition, leader_epoch=epoch, end_offset=end_offset
    )


def _lookup(plog: Any, epoch: int) -> tuple[int, int]:
    if epoch < 0 or epoch > LEADER_EPOCH:
        return UNDEFINED, UNDEFINED
    found = plog.end_offset_for_epoch(epoch)
    if found is None:
        return UNDEFINED, UNDEFINED
    if isinstance(found, tuple):
        return int(found[0]), int(found[1])
    return epoch, int(found)


def _error(partition: int, code: int) -> EpochEndOffset:
    return EpochEndOffset(error_code=code, partition=partition, leader_epoch=UNDEFINED, end_offset=UNDEFINED)


def error_response(
    request: OffsetForLeaderEpochRequest, version: int, code: int
) -> OffsetForLeaderEpochResponse:
    return OffsetForLeaderEpochResponse(
        topics=[
            TopicResult(topic=t.topic, partitions=[_error(p.partition, code) for p in t.partitions])
            for t in request.topics
        ]
    )
