"""DeleteShareGroupState (key 86), v0, broker to broker (cluster mode): the group
coordinator removes share partitions' states at their share coordinator (this broker
when it leads each key's `__share_group_state` partition), for DeleteShareGroupOffsets
and DeleteGroups of a share group (server/share_group_offsets.py;
server/share_state_persister.py sends it).

Per partition, once the tombstone is replicated: NONE (also for a key without state);
NOT_COORDINATOR when this broker does not coordinate the key; INVALID_REQUEST for a
negative partition. CLUSTER_ACTION on the cluster (REQUEST_CHECKS).
"""

from __future__ import annotations

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.delete_share_group_state import (
    DeleteShareGroupStateRequest,
    DeleteShareGroupStateResponse,
)
from kbroker.server.apis.share_state_results import write_states
from kbroker.server.request_context import RequestContext

R = DeleteShareGroupStateResponse
E = ErrorCode


async def handle(ctx: RequestContext, request: DeleteShareGroupStateRequest) -> DeleteShareGroupStateResponse:
    coordinator = ctx.services.share_groups.state
    rows = await write_states(request, lambda key, _p: coordinator.delete_state(key))
    return R(results=[R.DeleteStateResult(topic_id=t.topic_id, partitions=[
        R.PartitionResult(partition=partition, error_code=code, error_message=None) for partition, code in codes])
        for t, codes in rows])


def error_response(request: DeleteShareGroupStateRequest, version: int, code: int) -> DeleteShareGroupStateResponse:
    return R(results=[R.DeleteStateResult(topic_id=t.topic_id, partitions=[
        R.PartitionResult(partition=p.partition, error_code=code, error_message=None) for p in t.partitions])
        for t in request.topics])
