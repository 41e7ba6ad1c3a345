"""DescribeProducers (key 61), v0: the active producers of partitions this broker leads
(`kafka-transactions.sh describe-producers`, and `find-hanging`): each producer's id,
epoch, last sequence and timestamp, the coordinator epoch of its last marker, and the
first offset of its transaction in progress (-1: none). NOT_LEADER_OR_FOLLOWER elsewhere.
"""

from __future__ import annotations

from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.common.topic_partition import TopicPartition
from kbroker.protocol.messages.describe_producers import (
    DescribeProducersRequest,
    DescribeProducersResponse,
)
from kbroker.server import authorization as authz
from kbroker.server.request_context import RequestContext

R = DescribeProducersResponse


def handle(ctx: RequestContext, request: DescribeProducersRequest) -> DescribeProducersResponse:
    topics = []
    readable = authz.authorized_topics(ctx, "READ", (t.name for t in request.topics))
    for t in request.topics:
        partitions = []
        for index in t.partition_indexes:
            if t.name not in readable:
                partitions.append(R.PartitionResponse(
                    partition_index=index, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    error_message=None))
                continue
            partitions.append(_describe(ctx, TopicPartition(t.name, index)))
        topics.append(R.TopicResponse(name=t.name, partitions=partitions))
    return R(topics=topics)


def _describe(ctx: RequestContext, tp: TopicPartition) -> R.PartitionResponse:
    try:
        plog = ctx.services.replica_manager.leader_log(tp)
    except KafkaError as e:
        return R.PartitionResponse(partition_index=tp.partition, error_code=e.error_code, error_message=str(e))
    state = plog.producer_state
    state.ensure_loaded(plog)
    return R.PartitionResponse(partition_index=tp.partition, error_code=ErrorCode.NONE, active_producers=[
        R.ProducerState(producer_id=e.producer_id, producer_epoch=e.epoch, last_sequence=e.last_seq,
                        last_timestamp=e.last_timestamp, coordinator_epoch=e.coordinator_epoch,
                        current_txn_start_offset=e.current_txn_first_offset)
        for e in state.producers.values()])


def error_response(request: DescribeProducersRequest, version: int, code: int) -> DescribeProducersResponse:
    return R(topics=[R.TopicResponse(name=t.name, partitions=[
        R.PartitionResponse(partition_index=p, error_code=code) for p in t.partition_indexes])
        for t in request.topics])
