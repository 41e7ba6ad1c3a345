"""ReadShareGroupStateSummary (key 87), v0-1, broker to broker (cluster mode): the group
coordinator reads the summary of share partitions' states from their share coordinator
(this broker when it leads each key's `__share_group_state` partition), for
DescribeShareGroupOffsets (server/share_group_offsets.py; server/share_state_persister.py
sends it).

Per partition: NOT_COORDINATOR when this broker does not coordinate the key; a share
partition never initialized answers start offset -1, state epoch 0; else its state
epoch, leader epoch, start offset and (v1, KIP-1226) the count of offsets at or above
the start offset whose delivery is complete (acknowledged or archived). The request's
leader epoch is not recorded (the group coordinator sends -1, as Kafka's).
CLUSTER_ACTION on the cluster (REQUEST_CHECKS).
"""

from __future__ import annotations

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.read_share_group_state_summary import (
    ReadShareGroupStateSummaryRequest,
    ReadShareGroupStateSummaryResponse,
)
from kbroker.server.apis.share_state_results import read_states
from kbroker.server.request_context import RequestContext
from kbroker.server.share_group_offsets import delivery_complete_count

R = ReadShareGroupStateSummaryResponse
E = ErrorCode


def handle(ctx: RequestContext, request: ReadShareGroupStateSummaryRequest) -> ReadShareGroupStateSummaryResponse:
    return R(results=[R.ReadStateSummaryResult(topic_id=topic.topic_id, partitions=[
        _partition(p.partition, code) if state is None else R.PartitionResult(
            partition=p.partition, error_code=E.NONE, error_message=None, state_epoch=state.state_epoch,
            leader_epoch=state.leader_epoch, start_offset=state.start_offset,
            delivery_complete_count=delivery_complete_count(state.batches, state.start_offset))
        for p, code, state in partitions]) for topic, partitions in read_states(ctx.services.share_groups.state,
                                                                                request)])


def _partition(partition: int, code: int) -> ReadShareGroupStateSummaryResponse.PartitionResult:
    return R.PartitionResult(partition=partition, error_code=code, error_message=None, state_epoch=0,
                             leader_epoch=-1, start_offset=-1, delivery_complete_count=-1)


def error_response(request: ReadShareGroupStateSummaryRequest, version: int, code: int
                   ) -> ReadShareGroupStateSummaryResponse:
    return R(results=[R.ReadStateSummaryResult(topic_id=t.topic_id, partitions=[
        _partition(p.partition, code) for p in t.partitions]) for t in request.topics])
