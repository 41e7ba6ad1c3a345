"""AlterReplicaLogDirs (key 34), v0-2: move replicas to another of this broker's log dirs
(ReplicaManager.move_replica: a future log is copied in the background, then swapped
in). LOG_DIR_NOT_FOUND for a path that is not one of log.dirs, KAFKA_STORAGE_ERROR for
an offline dir, REPLICA_NOT_AVAILABLE for a partition this broker holds no replica of;
a replica already there answers NONE and does nothing. DescribeLogDirs shows the copy
in progress as a future replica.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from kbroker.common.error_code import ErrorCode
from kbroker.common.topic_partition import TopicPartition
from kbroker.protocol.messages.alter_replica_log_dirs import (
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
)
from kbroker.server.request_context import RequestContext

if TYPE_CHECKING:
    from kbroker.server.request_services import RequestServices

TopicResult = AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult
PartitionResult = AlterReplicaLogDirsResponse.AlterReplicaLogDirPartitionResult


def handle(ctx: RequestContext, request: AlterReplicaLogDirsRequest) -> AlterReplicaLogDirsResponse:
    services = ctx.services
    manager = services.log_manager
    results: dict[str, list[PartitionResult]] = {}
    for d in request.dirs:
        path = os.path.abspath(d.path)
        for t in d.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p)
                code = _move(services, tp, path) if path in manager.log_dirs else ErrorCode.LOG_DIR_NOT_FOUND
                results.setdefault(t.name, []).append(PartitionResult(partition_index=p, error_code=code))
    return AlterReplicaLogDirsResponse(results=[
        TopicResult(topic_name=name, partitions=parts) for name, parts in results.items()])


def _move(services: RequestServices, tp: TopicPartition, path: str) -> int:
    manager = services.log_manager
    if manager.failures.is_offline(path) or manager.is_offline(tp):
        return ErrorCode.KAFKA_STORAGE_ERROR
    if manager.get_log(tp) is None:
        return ErrorCode.REPLICA_NOT_AVAILABLE
    if manager.dir_of(tp) == path:
        manager.cancel_move(tp)
        return ErrorCode.NONE
    move = manager.moves.get(tp)
    if move is not None and move.target_dir == path:
        return ErrorCode.NONE
    services.replica_manager.move_replica(tp, path)
    return ErrorCode.NONE


def error_response(request: AlterReplicaLogDirsRequest, version: int, code: int
                   ) -> AlterReplicaLogDirsResponse:
    return AlterReplicaLogDirsResponse(results=[
        TopicResult(topic_name=t.name, partitions=[
            PartitionResult(partition_index=p, error_code=code) for p in t.partitions])
        for d in request.dirs for t in d.topics])
