"""OffsetDelete (key 47), v0: delete committed offsets of a group. Allowed for an
Empty group, or for topics a `consumer` group's members do not subscribe to
(GROUP_SUBSCRIBED_TO_TOPIC otherwise, and for every topic when a subscription does not
read); a group of another protocol type with members is NON_EMPTY_GROUP."""

from __future__ import annotations

from kbroker.protocol.messages.offset_delete import OffsetDeleteRequest, OffsetDeleteResponse
from kbroker.server.apis.group_support import coordinator
from kbroker.server.request_context import RequestContext

Topic = OffsetDeleteResponse.OffsetDeleteResponseTopic
Partition = OffsetDeleteResponse.OffsetDeleteResponsePartition


def handle(ctx: RequestContext, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
    tps = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    err, results = coordinator(ctx).delete_offsets(request.group_id, tps)
    if err:
        return OffsetDeleteResponse(error_code=err)
    return OffsetDeleteResponse(error_code=err, topics=[
        Topic(name=t.name, partitions=[
            Partition(partition_index=p.partition_index, error_code=results.get((t.name, p.partition_index), 0))
            for p in t.partitions])
        for t in request.topics])


def error_response(request: OffsetDeleteRequest, version: int, code: int) -> OffsetDeleteResponse:
    return OffsetDeleteResponse(error_code=code)
