"""AlterPartitionReassignments (key 45), v0, answered by the controller (KIP-455): move a
partition's replicas to a new list (the new ones are added, catch up and join the ISR,
then a leader among the targets is elected and the old ones are deleted), or cancel a
move (replicas null). NOT_CONTROLLER on another broker; a single broker can only keep
its one replica (INVALID_REPLICA_ASSIGNMENT).
"""

from __future__ import annotations

from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.common.topic_partition import TopicPartition
from kbroker.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from kbroker.server.request_context import RequestContext

TopicResponse = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
PartitionResponse = AlterPartitionReassignmentsResponse.ReassignablePartitionResponse


async def handle(ctx: RequestContext, request: AlterPartitionReassignmentsRequest
                 ) -> AlterPartitionReassignmentsResponse:
    broker = ctx.broker
    moves = {TopicPartition(t.name, p.partition_index): p.replicas
             for t in request.topics for p in t.partitions}
    if broker.zk_broker is None:
        results = {tp: (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        "a single broker holds the only replica of every partition")
                   for tp in moves}
    else:
        try:
            results = await broker.zk_broker.controller.call("alter_reassignments", moves)
        except KafkaError as e:
            return error_response(request, ctx.api_version, e.error_code)
    by_topic: dict[str, list[PartitionResponse]] = {}
    for tp, (code, message) in results.items():
        by_topic.setdefault(tp.topic, []).append(
            PartitionResponse(partition_index=tp.partition, error_code=code, error_message=message))
    return AlterPartitionReassignmentsResponse(error_code=ErrorCode.NONE, error_message=None,
                                               responses=[TopicResponse(name=t, partitions=parts)
                                                          for t, parts in by_topic.items()])


def error_response(request: AlterPartitionReassignmentsRequest, version: int, code: int
                   ) -> AlterPartitionReassignmentsResponse:
    return AlterPartitionReassignmentsResponse(error_code=code, error_message=None, responses=[
        TopicResponse(name=t.name, partitions=[
            PartitionResponse(partition_index=p.partition_index, error_code=code, error_message=None)
            for p in t.partitions]) for t in request.topics])
