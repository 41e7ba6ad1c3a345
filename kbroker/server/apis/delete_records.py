"""DeleteRecords (key 21), v0-2: move partitions' log start offsets forward.

Per partition (Kafka 3.9's ReplicaManager.deleteRecords / Partition.deleteRecordsOnLeader):
offset -1 means the high watermark; an offset below -1 or above the high watermark
-> OFFSET_OUT_OF_RANGE; an offset at or below the log start offset changes
nothing; a topic whose cleanup.policy lacks `delete` -> POLICY_VIOLATION; an
unknown topic or partition -> UNKNOWN_TOPIC_OR_PARTITION. The answer carries the
new low watermark (the log start offset), -1 on error. Log.delete_records
removes the segments wholly below the new start and checkpoints it.
"""

from __future__ import annotations

import logging

from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.common.topic_partition import TopicPartition
from kbroker.protocol.messages.delete_records import DeleteRecordsRequest, DeleteRecordsResponse
from kbroker.server import authorization as authz
from kbroker.server.request_context import RequestContext

log = logging.getLogger(__name__)

TopicResult = DeleteRecordsResponse.DeleteRecordsTopicResult
PartitionResult = DeleteRecordsResponse.DeleteRecordsPartitionResult

HIGH_WATERMARK = -1


def handle(ctx: RequestContext, request: DeleteRecordsRequest) -> DeleteRecordsResponse:
    deletable = authz.authorized_topics(ctx, "DELETE", (t.name for t in request.topics))
    return DeleteRecordsResponse(
        topics=[
            TopicResult(name=t.name, partitions=[
                _delete(ctx, t.name, p) if t.name in deletable
                else _error(p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                for p in t.partitions])
            for t in request.topics
        ]
    )


def _delete(ctx: RequestContext, topic: str, p: DeleteRecordsRequest.DeleteRecordsPartition) -> PartitionResult:
    try:
        plog = ctx.services.replica_manager.leader_log(TopicPartition(topic, p.partition_index))
    except KafkaError as e:
        return _error(p.partition_index, e.error_code)
    if not plog.config.delete:
        return _error(p.partition_index, ErrorCode.POLICY_VIOLATION)
    offset = plog.high_watermark if p.offset == HIGH_WATERMARK else p.offset
    if offset < 0 or offset > plog.high_watermark:
        return _error(p.partition_index, ErrorCode.OFFSET_OUT_OF_RANGE)
    try:
        low_watermark = plog.delete_records(offset)
    except KafkaError as e:
        return _error(p.partition_index, e.error_code)
    except Exception:
        log.exception("deleting records of %s-%d failed", topic, p.partition_index)
        return _error(p.partition_index, ErrorCode.UNKNOWN_SERVER_ERROR)
    return PartitionResult(
        partition_index=p.partition_index, low_watermark=low_watermark, error_code=ErrorCode.NONE
    )


def _error(partition: int, code: int) -> PartitionResult:
    return PartitionResult(partition_index=partition, low_watermark=-1, error_code=code)


def error_response(request: DeleteRecordsRequest, version: int, code: int) -> DeleteRecordsResponse:
    return DeleteRecordsResponse(
        topics=[
            TopicResult(name=t.name, partitions=[_error(p.partition_index, code) for p in t.partitions])
            for t in request.topics
        ]
    )
