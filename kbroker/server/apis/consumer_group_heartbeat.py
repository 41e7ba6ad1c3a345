"""ConsumerGroupHeartbeat (key 68), v0-1 (v1, KIP-1082: the client generates its member
id; adds subscribed_topic_regex): a KIP-848 consumer group member joins (epoch 0),
heartbeats, acknowledges revocations (its owned partitions) and leaves (-1; static
members -2); the coordinator answers its member id, epoch, heartbeat interval and,
when it changed, its assignment by topic id (coordinator/consumer_group_coordinator.py).

Authorization as Kafka's: READ on the group, else GROUP_AUTHORIZATION_FAILED (checked
before the handler, kbroker.server.authorization's REQUEST_CHECKS).

In a cluster the answer waits until the group's records are replicated to the ISR of its
__consumer_offsets partition (offsets.commit.timeout.ms at most), as Kafka's coordinator
runtime holds a response until the high watermark passes its records: a member never
acts on an epoch or assignment that a coordinator failover could lose. A failed wait
answers NOT_COORDINATOR (leadership lost) or COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

from collections.abc import Awaitable

from kbroker.common.error_code import ErrorCode
from kbroker.coordinator.consumer_group_coordinator import HeartbeatRequest
from kbroker.coordinator.consumer_group_member import Assignment
from kbroker.protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from kbroker.server.apis.group_support import (
    client_host,
    coordinator,
    heartbeat_response,
    when_group_replicated,
)
from kbroker.server.request_context import RequestContext

R = ConsumerGroupHeartbeatResponse


def handle(ctx: RequestContext, request: ConsumerGroupHeartbeatRequest
           ) -> ConsumerGroupHeartbeatResponse | Awaitable[ConsumerGroupHeartbeatResponse]:
    owned: Assignment | None = None
    if request.topic_partitions is not None:
        owned = {}
        for t in request.topic_partitions:
            owned[t.topic_id] = owned.get(t.topic_id, frozenset()) | frozenset(t.partitions)
        owned = {t: ps for t, ps in owned.items() if ps}
    result = coordinator(ctx).consumer_heartbeat(HeartbeatRequest(
        request.group_id, request.member_id, request.member_epoch, request.instance_id, request.rack_id,
        request.rebalance_timeout_ms, request.subscribed_topic_names,
        request.subscribed_topic_regex if ctx.api_version >= 1 else None, request.server_assignor, owned,
        ctx.client_id or "", client_host(ctx), ctx.api_version), ctx.services.topics)
    response = heartbeat_response(R, result)
    if result.error_code != ErrorCode.NONE:
        return response
    return when_group_replicated(ctx, request.group_id, response, lambda code: R(
        error_code=code, error_message="The group's records were not replicated.", member_id=None, member_epoch=-1))


def error_response(request: ConsumerGroupHeartbeatRequest, version: int, code: int
                   ) -> ConsumerGroupHeartbeatResponse:
    return R(error_code=code, member_id=None, member_epoch=-1)
