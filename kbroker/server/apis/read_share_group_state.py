"""ReadShareGroupState (key 84), v0, broker to broker (cluster mode): a share-partition
leader reads the persisted state of its share partitions from their share coordinator,
this broker when it leads each key's `__share_group_state` partition
(coordinator/share_coordinator.py; server/share_state_persister.py sends it).

Per partition: NOT_COORDINATOR when this broker does not coordinate the key (the sender
asks again where the metadata says); a share partition never written answers start
offset -1 and state epoch 0 (Kafka's uninitialized state); else its state epoch, start
offset and state batches. CLUSTER_ACTION on the cluster (REQUEST_CHECKS).
"""

from __future__ import annotations

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.read_share_group_state import (
    ReadShareGroupStateRequest,
    ReadShareGroupStateResponse,
)
from kbroker.server.apis.share_state_results import read_states
from kbroker.server.request_context import RequestContext

R = ReadShareGroupStateResponse
E = ErrorCode


def handle(ctx: RequestContext, request: ReadShareGroupStateRequest) -> ReadShareGroupStateResponse:
    rows = read_states(ctx.services.share_groups.state, request)
    return R(results=[R.ReadStateResult(topic_id=topic.topic_id, partitions=[R.PartitionResult(
        partition=p.partition, error_code=code, error_message=None,
        state_epoch=state.state_epoch if state is not None else 0,
        start_offset=state.start_offset if state is not None else -1,
        state_batches=[R.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                    delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                       for b in (state.batches if state is not None else [])])
        for p, code, state in partitions]) for topic, partitions in rows])


def error_response(request: ReadShareGroupStateRequest, version: int, code: int) -> ReadShareGroupStateResponse:
    return R(results=[R.ReadStateResult(topic_id=t.topic_id, partitions=[
        R.PartitionResult(partition=p.partition, error_code=code, error_message=None, state_epoch=0,
                          start_offset=-1, state_batches=[]) for p in t.partitions]) for t in request.topics])
