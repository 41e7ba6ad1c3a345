"""AlterPartitionReassignments (key 45), v0-1, answered by the controller (KIP-455): move a
partition's replicas to a new list (the new ones are added, catch up and join the ISR,
then a leader among the targets is elected and the old ones are deleted), or cancel a
move (replicas null). Another broker of the cluster forwards it to the controller
(kbroker.server.forwarding). A single broker is its own
controller with one live broker, itself, and no reassignment ever under way: as Kafka's
controller, it accepts a target of its one replica (nothing moves), refuses any other
(INVALID_REPLICA_ASSIGNMENT: kbroker.cluster.controller.reassignment_target), a
cancellation finds nothing to cancel (NO_REASSIGNMENT_IN_PROGRESS) and a partition it
does not have is UNKNOWN_TOPIC_OR_PARTITION. v1 (Kafka 4.0) adds
allow_replication_factor_change: when false a target with more or fewer replicas than the
partition has (its original ones, during a move) is INVALID_REPLICATION_FACTOR.
"""

from __future__ import annotations

from kbroker.cluster.controller.reassignment_target import target_error
from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.common.topic_partition import TopicPartition
from kbroker.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from kbroker.server.metadata_support import ZkRequired
from kbroker.server.request_context import RequestContext

TopicResponse = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
PartitionResponse = AlterPartitionReassignmentsResponse.ReassignablePartitionResponse


async def handle(ctx: RequestContext, request: AlterPartitionReassignmentsRequest
                 ) -> AlterPartitionReassignmentsResponse:
    moves = {TopicPartition(t.name, p.partition_index): p.replicas
             for t in request.topics for p in t.partitions}
    allow_rf = ctx.api_version < 1 or request.allow_replication_factor_change
    try:
        zk = ctx.services.support.require_zk()
    except ZkRequired:
        results = {tp: _single_broker_result(ctx, tp, target, allow_rf) for tp, target in moves.items()}
    else:
        try:
            results = await zk.controller.alter_partition_reassignments(moves, allow_rf)
        except KafkaError as e:
            return error_response(request, ctx.api_version, e.error_code)
    by_topic: dict[str, list[PartitionResponse]] = {}
    for tp, (code, message) in results.items():
        by_topic.setdefault(tp.topic, []).append(
            PartitionResponse(partition_index=tp.partition, error_code=code, error_message=message))
    return AlterPartitionReassignmentsResponse(error_code=ErrorCode.NONE, error_message=None,
                                               responses=[TopicResponse(name=t, partitions=parts)
                                                          for t, parts in by_topic.items()])


def _single_broker_result(ctx: RequestContext, tp: TopicPartition, target: list[int] | None,
                          allow_rf: bool) -> tuple[int, str | None]:
    info = ctx.services.topics.get(tp.topic)
    if info is None or not 0 <= tp.partition < info.partitions:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
    if target is None:
        return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, f"No ongoing reassignment for {tp}."
    node = ctx.services.node_id
    return target_error(target, [node], [node], allow_rf) or (ErrorCode.NONE, None)


def error_response(request: AlterPartitionReassignmentsRequest, version: int, code: int
                   ) -> AlterPartitionReassignmentsResponse:
    return AlterPartitionReassignmentsResponse(error_code=code, error_message=None, responses=[
        TopicResponse(name=t.name, partitions=[
            PartitionResponse(partition_index=p.partition_index, error_code=code, error_message=None)
            for p in t.partitions]) for t in request.topics])
