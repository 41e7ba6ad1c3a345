"""ListPartitionReassignments (key 46), v0, answered by the controller: the ongoing
reassignments (all, or of the partitions named) with each one's full replica list and
its adding and removing replicas. Another broker forwards it to the controller
(kbroker.server.forwarding); nothing ongoing on
a single broker.
"""

from __future__ import annotations

from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.common.topic_partition import TopicPartition
from kbroker.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from kbroker.server.metadata_support import ZkRequired
from kbroker.server.request_context import RequestContext

Topic = ListPartitionReassignmentsResponse.OngoingTopicReassignment
Partition = ListPartitionReassignmentsResponse.OngoingPartitionReassignment


def handle(ctx: RequestContext, request: ListPartitionReassignmentsRequest
           ) -> ListPartitionReassignmentsResponse:
    tps = None if request.topics is None else [
        TopicPartition(t.name, p) for t in request.topics for p in t.partition_indexes]
    try:
        zk = ctx.services.support.require_zk()
    except ZkRequired:
        ongoing = {}
    else:
        try:
            ongoing = zk.controller.list_partition_reassignments(tps)
        except KafkaError as e:
            return error_response(request, ctx.api_version, e.error_code)
    by_topic: dict[str, list[Partition]] = {}
    for tp, (replicas, adding, removing) in sorted(ongoing.items()):
        by_topic.setdefault(tp.topic, []).append(Partition(
            partition_index=tp.partition, replicas=replicas, adding_replicas=adding,
            removing_replicas=removing))
    return ListPartitionReassignmentsResponse(error_code=ErrorCode.NONE, error_message=None, topics=[
        Topic(name=t, partitions=parts) for t, parts in by_topic.items()])


def error_response(request: ListPartitionReassignmentsRequest, version: int, code: int
                   ) -> ListPartitionReassignmentsResponse:
    return ListPartitionReassignmentsResponse(error_code=code, error_message=None, topics=[])
