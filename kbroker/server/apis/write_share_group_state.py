"""WriteShareGroupState (key 85), v0-1, broker to broker (cluster mode): a share-partition
leader writes the new state of its share partitions to their share coordinator, this
broker when it leads each key's `__share_group_state` partition
(coordinator/share_coordinator.py; server/share_state_persister.py sends it).

Per partition, once the ShareSnapshot record is replicated (acks=all): NONE;
NOT_COORDINATOR when this broker does not coordinate the key; FENCED_LEADER_EPOCH for a
leader epoch below the state's (a share-partition leader that lost its leadership);
NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, ... when the write failed. v1's
DeliveryCompleteCount is not kept (kbroker counts it from the state batches).
CLUSTER_ACTION on the cluster (REQUEST_CHECKS).
"""

from __future__ import annotations

from kbroker.common.error_code import ErrorCode
from kbroker.coordinator.share_coordinator import PersistedState
from kbroker.coordinator.share_partition import StateBatch
from kbroker.protocol.messages.write_share_group_state import (
    WriteShareGroupStateRequest,
    WriteShareGroupStateResponse,
)
from kbroker.server.apis.share_state_results import write_states
from kbroker.server.request_context import RequestContext

R = WriteShareGroupStateResponse
E = ErrorCode


async def handle(ctx: RequestContext, request: WriteShareGroupStateRequest) -> WriteShareGroupStateResponse:
    coordinator = ctx.services.share_groups.state
    rows = await write_states(request, lambda key, p: coordinator.write_state(key, PersistedState(
        p.state_epoch, p.start_offset, [StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                                        for b in p.state_batches], p.leader_epoch)))
    return R(results=[R.WriteStateResult(topic_id=t.topic_id, partitions=[
        R.PartitionResult(partition=partition, error_code=code, error_message=None) for partition, code in codes])
        for t, codes in rows])


def error_response(request: WriteShareGroupStateRequest, version: int, code: int) -> WriteShareGroupStateResponse:
    return R(results=[R.WriteStateResult(topic_id=t.topic_id, partitions=[
        R.PartitionResult(partition=p.partition, error_code=code, error_message=None) for p in t.partitions])
        for t in request.topics])
