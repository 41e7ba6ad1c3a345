"""OffsetForLeaderEpoch (key 23), v2-4: the end offset of a leader epoch.

Answered by the partition's leader from its leader-epoch cache, by Kafka's rules
(LeaderEpochFileCache.endOffsetFor): the current epoch ends at the log end offset,
an older one where the next begins, an unknown one is UNDEFINED (-1, -1). Followers
ask it to find where their log diverges from the leader's; consumers (KIP-320) to
detect truncation. `current_leader_epoch` above ours is UNKNOWN_LEADER_EPOCH, below
it FENCED_LEADER_EPOCH; another broker's partition is NOT_LEADER_OR_FOLLOWER. A single
broker leads every partition at epoch 0.
"""

from __future__ import annotations

from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.common.topic_partition import TopicPartition
from kbroker.protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from kbroker.server import authorization as authz
from kbroker.server.request_context import RequestContext

TopicResult = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
EpochEndOffset = OffsetForLeaderEpochResponse.EpochEndOffset

UNDEFINED = -1


def handle(
    ctx: RequestContext, request: OffsetForLeaderEpochRequest
) -> OffsetForLeaderEpochResponse:
    topics = []
    if ctx.api_version >= 3 and request.replica_id >= 0:  # a follower: CLUSTER_ACTION
        allowed = ({t.topic for t in request.topics}
                   if authz.authorize_cluster(ctx, "CLUSTER_ACTION") else set())
    else:
        allowed = authz.authorized_topics(ctx, "DESCRIBE", (t.topic for t in request.topics))
    for t in request.topics:
        if t.topic not in allowed:
            partitions = [_error(p.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                          for p in t.partitions]
        else:
            partitions = [_end_offset(ctx, t.topic, p) for p in t.partitions]
        topics.append(TopicResult(topic=t.topic, partitions=partitions))
    return OffsetForLeaderEpochResponse(topics=topics)


def _end_offset(
    ctx: RequestContext, topic: str, p: OffsetForLeaderEpochRequest.OffsetForLeaderPartition
) -> EpochEndOffset:
    try:
        plog = ctx.services.replica_manager.leader_log(TopicPartition(topic, p.partition),
                                                     p.current_leader_epoch)
    except KafkaError as e:
        return _error(p.partition, e.error_code)
    epoch, end_offset = plog.end_offset_for_epoch(p.leader_epoch)
    return EpochEndOffset(
        error_code=ErrorCode.NONE, partition=p.partition, leader_epoch=epoch, end_offset=end_offset
    )


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
