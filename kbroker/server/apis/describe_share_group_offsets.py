"""DescribeShareGroupOffsets (key 90), v0-1 (KIP-932; v1 adds each partition's Lag,
KIP-1226): the start offset of each share partition of a share group (what
kafka-share-groups.sh --describe --offsets and Admin.listShareGroupOffsets show).

As Kafka's KafkaApis and GroupCoordinatorService (server/share_group_offsets.py):
DESCRIBE on the group, else GROUP_AUTHORIZATION_FAILED for that group; an empty group id
INVALID_GROUP_ID; in a cluster NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS) when the
group id's group coordinator is another broker: the states are read there, from each
key's share coordinator (ReadShareGroupStateSummary). Named topics: DESCRIBE on each, else TOPIC_AUTHORIZATION_FAILED for
its partitions; a topic that does not exist and a partition the group never initialized
answer start offset -1 without error (absence of data, as OffsetFetch). Topics null:
every share partition of the group (GROUP_ID_NOT_FOUND when it is no share group),
leaving out the topics the principal may not describe.
"""

from __future__ import annotations

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.describe_share_group_offsets import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
)
from kbroker.server import authorization as authz
from kbroker.server.apis.group_support import coordinator as group_coordinator
from kbroker.server.request_context import RequestContext
from kbroker.server.share_group_offsets import ZERO_UUID, GroupError, PartitionOffset, TopicOffsets

R = DescribeShareGroupOffsetsResponse
Group = R.DescribeShareGroupOffsetsResponseGroup
Topic = R.DescribeShareGroupOffsetsResponseTopic
Partition = R.DescribeShareGroupOffsetsResponsePartition
E = ErrorCode


async def handle(ctx: RequestContext, request: DescribeShareGroupOffsetsRequest
                 ) -> DescribeShareGroupOffsetsResponse:
    return R(groups=[await _group(ctx, g) for g in request.groups])


async def _group(ctx: RequestContext, g: DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup
           ) -> DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponseGroup:
    if not authz.authorize_group(ctx, "DESCRIBE", g.group_id):
        return _failed(g.group_id, E.GROUP_AUTHORIZATION_FAILED, E.GROUP_AUTHORIZATION_FAILED.message)
    code = group_coordinator(ctx).coordinator_error(g.group_id)
    if code != E.NONE:  # in a cluster: the group coordinator is another broker
        return _failed(g.group_id, code, E(code).message)
    offsets = ctx.services.share_groups.offsets
    refused: list[TopicOffsets] = []
    wanted = None
    if g.topics is not None:
        wanted = [(t.topic_name, list(t.partitions)) for t in g.topics
                  if authz.authorize_topic(ctx, "DESCRIBE", t.topic_name)]
        refused = [TopicOffsets(t.topic_name, ZERO_UUID, [PartitionOffset(p, error_code=E.TOPIC_AUTHORIZATION_FAILED)
                                                          for p in t.partitions])
                   for t in g.topics if not authz.authorize_topic(ctx, "DESCRIBE", t.topic_name)]
    try:
        described = await offsets.describe(g.group_id, wanted)
    except GroupError as e:
        return _failed(g.group_id, e.code, e.message)
    if g.topics is None:
        described = [t for t in described if authz.authorize_topic(ctx, "DESCRIBE", t.name)]
    return Group(group_id=g.group_id, error_code=E.NONE, topics=[_topic(t) for t in described + refused])


def _topic(t: TopicOffsets) -> DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponseTopic:
    return Topic(topic_name=t.name, topic_id=t.topic_id, partitions=[
        Partition(partition_index=p.partition, start_offset=p.start_offset, leader_epoch=p.leader_epoch,
                  lag=p.lag, error_code=p.error_code,
                  error_message=None if p.error_code == E.NONE else E(p.error_code).message)
        for p in t.partitions])


def _failed(group_id: str, code: int, message: str | None
            ) -> DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponseGroup:
    return Group(group_id=group_id, topics=[], error_code=code, error_message=message)


def error_response(request: DescribeShareGroupOffsetsRequest, version: int, code: int
                   ) -> DescribeShareGroupOffsetsResponse:
    return R(groups=[_failed(g.group_id, code, None) for g in request.groups])
