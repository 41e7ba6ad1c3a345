"""InitializeShareGroupState (key 83), v0, broker to broker (cluster mode): the group
coordinator gives share partitions a new state at their share coordinator (this broker
when it leads each key's `__share_group_state` partition): the start offset as asked,
nothing in flight, at the state epoch asked, as Kafka's alterShareGroupOffsets does
(server/share_group_offsets.py; server/share_state_persister.py sends it).

Per partition, once the ShareSnapshot record is replicated: NONE; NOT_COORDINATOR when
this broker does not coordinate the key; FENCED_STATE_EPOCH for a state epoch below the
state's (Kafka's ShareCoordinatorShard.initializeState); INVALID_REQUEST for a negative
partition. CLUSTER_ACTION on the cluster (REQUEST_CHECKS).
"""

from __future__ import annotations

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.initialize_share_group_state import (
    InitializeShareGroupStateRequest,
    InitializeShareGroupStateResponse,
)
from kbroker.server.apis.share_state_results import write_states
from kbroker.server.request_context import RequestContext

R = InitializeShareGroupStateResponse
E = ErrorCode


async def handle(ctx: RequestContext, request: InitializeShareGroupStateRequest) -> InitializeShareGroupStateResponse:
    coordinator = ctx.services.share_groups.state
    rows = await write_states(request, lambda key, p: coordinator.initialize_state(key, p.state_epoch,
                                                                                   p.start_offset))
    return R(results=[R.InitializeStateResult(topic_id=t.topic_id, partitions=[
        R.PartitionResult(partition=partition, error_code=code, error_message=None) for partition, code in codes])
        for t, codes in rows])


def error_response(request: InitializeShareGroupStateRequest, version: int, code: int
                   ) -> InitializeShareGroupStateResponse:
    return R(results=[R.InitializeStateResult(topic_id=t.topic_id, partitions=[
        R.PartitionResult(partition=p.partition, error_code=code, error_message=None) for p in t.partitions])
        for t in request.topics])
