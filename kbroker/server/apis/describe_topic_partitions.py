"""DescribeTopicPartitions (key 75), v0: topics and their partitions, paginated (KIP-966).

Topics are answered in name order: the requested ones, or all when the list is
empty. At most `response_partition_limit` partitions (capped at 2000, Kafka's
`max.request.partition.size.limit` default) go into one response; when more
remain, `next_cursor` names the topic and partition to continue from, and the
client sends it back as `cursor`. As Kafka 3.9's
DescribeTopicPartitionsRequestHandler: a cursor with a negative partition, or
naming a topic the request does not list -> INVALID_REQUEST (on every topic);
topics before the cursor's are skipped; an unknown topic ->
UNKNOWN_TOPIC_OR_PARTITION. One broker leads every partition (epoch 0); the
eligible leader replica lists are empty (ELR is off).
"""

from __future__ import annotations

from kbroker.common.error_code import ErrorCode
from kbroker.metadata.topic_registry import TopicInfo
from kbroker.protocol.codec import ZERO_UUID
from kbroker.protocol.messages.describe_topic_partitions import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
)
from kbroker.security.acl import ResourceType
from kbroker.server import authorization as authz
from kbroker.server.request_context import RequestContext

Response = DescribeTopicPartitionsResponse
Topic = Response.DescribeTopicPartitionsResponseTopic
Partition = Response.DescribeTopicPartitionsResponsePartition

MAX_PARTITION_LIMIT = 2000


def handle(ctx: RequestContext, request: DescribeTopicPartitionsRequest) -> Response:
    services = ctx.services
    requested = sorted({t.name for t in request.topics})
    cursor = request.cursor
    if cursor is not None and (
        cursor.partition_index < 0 or (requested and cursor.topic_name not in requested)
    ):
        return error_response(request, 0, ErrorCode.INVALID_REQUEST)
    names = requested or services.topics.names()
    if cursor is not None:
        names = [n for n in names if n >= cursor.topic_name]
    remaining = max(1, min(request.response_partition_limit, MAX_PARTITION_LIMIT))
    topics: list[Topic] = []
    next_cursor = None
    for name in names:
        start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        if remaining == 0:
            next_cursor = Response.Cursor(topic_name=name, partition_index=start)
            break
        info = services.topics.get(name)
        if not authz.authorize_topic(ctx, "DESCRIBE", name):
            if requested:  # asked for by name; listing all topics leaves it out
                topics.append(_unknown(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            continue
        if info is None:
            topics.append(_unknown(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            continue
        end = min(info.partitions, start + remaining)
        topics.append(_describe(ctx, info, start, end))
        remaining -= max(0, end - start)
        if end < info.partitions:
            next_cursor = Response.Cursor(topic_name=name, partition_index=end)
            break
    return Response(topics=topics, next_cursor=next_cursor)


def _describe(ctx: RequestContext, info: TopicInfo, start: int, end: int) -> Topic:
    return Topic(
        error_code=ErrorCode.NONE,
        name=info.name,
        topic_id=info.topic_id,
        is_internal=info.is_internal,
        partitions=[
            Partition(
                error_code=ErrorCode.NONE if pm.leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
                partition_index=pm.partition,
                leader_id=pm.leader,
                leader_epoch=pm.leader_epoch,
                replica_nodes=list(pm.replicas),
                isr_nodes=list(pm.isr),
                eligible_leader_replicas=[],
                last_known_elr=[],
                offline_replicas=list(pm.offline_replicas),
            )
            for pm in ctx.services.cluster.partitions(info) if start <= pm.partition < end
        ],
        topic_authorized_operations=authz.authorized_operations(ctx, ResourceType.TOPIC, info.name),
    )


def _unknown(name: str, code: int) -> Topic:
    return Topic(error_code=code, name=name, topic_id=ZERO_UUID, is_internal=False, partitions=[])


def error_response(request: DescribeTopicPartitionsRequest, version: int, code: int) -> Response:
    return Response(topics=[_unknown(t.name, code) for t in request.topics], next_cursor=None)
