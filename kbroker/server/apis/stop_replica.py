"""StopReplica (key 5), v0-4, cluster mode only: stop following (and, with
delete_partition, delete) replicas this broker should no longer hold: the topic was
deleted, the replica moved away in a reassignment, or this broker is shutting down.
A leader epoch older than the partition's is FENCED_LEADER_EPOCH.
"""

from __future__ import annotations

from kbroker.common.error_code import ErrorCode
from kbroker.common.topic_partition import TopicPartition
from kbroker.protocol.messages.stop_replica import StopReplicaRequest, StopReplicaResponse
from kbroker.server.metadata_support import ZkRequired
from kbroker.server.request_context import RequestContext

PartitionError = StopReplicaResponse.StopReplicaPartitionError


async def handle(ctx: RequestContext, request: StopReplicaRequest) -> StopReplicaResponse:
    services = ctx.services
    try:
        services.support.require_zk()
    except ZkRequired:
        return error_response(request, ctx.api_version, ErrorCode.STALE_CONTROLLER_EPOCH)
    rm = services.replica_manager
    if 0 <= request.broker_epoch < rm.broker_epoch:
        return error_response(request, ctx.api_version, ErrorCode.STALE_BROKER_EPOCH)
    version = ctx.api_version
    items: list[tuple[TopicPartition, int, bool]] = []
    if version >= 3:
        for ts in request.topic_states:
            for ps in ts.partition_states:
                items.append((TopicPartition(ts.topic_name, ps.partition_index), ps.leader_epoch,
                              ps.delete_partition))
    elif version >= 1:
        for t in request.topics:
            items += [(TopicPartition(t.name, p), -1, request.delete_partitions)
                      for p in t.partition_indexes]
    else:
        items = [(TopicPartition(p.topic_name, p.partition_index), -1, request.delete_partitions)
                 for p in request.ungrouped_partitions]
    errors = await rm.stop_replicas(request.controller_epoch, items)
    return StopReplicaResponse(error_code=ErrorCode.NONE, partition_errors=[
        PartitionError(topic_name=tp.topic, partition_index=tp.partition, error_code=code)
        for tp, code in errors.items()])


def error_response(request: StopReplicaRequest, version: int, code: int) -> StopReplicaResponse:
    return StopReplicaResponse(error_code=code, partition_errors=[])
