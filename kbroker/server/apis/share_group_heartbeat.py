"""ShareGroupHeartbeat (key 76), v1 (KIP-932; v0 was Kafka 4.0's early access and is not
served): a share group member joins (epoch 0, with its client-generated member id and
subscription), heartbeats and leaves (-1); the coordinator answers its epoch, the
heartbeat interval and, when it changed, its assignment by topic id
(coordinator/share_group.py).

Authorization as Kafka's: READ on the group (REQUEST_CHECKS), else
GROUP_AUTHORIZATION_FAILED; a group id held by a classic or consumer group answers
GROUP_ID_NOT_FOUND, as Kafka's "is not a share group". In a cluster the share group
coordinator is the group id's coordinator (the leader of its __consumer_offsets
partition): elsewhere NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS while it loads).
Membership is not persisted: after the coordinator moves, members get UNKNOWN_MEMBER_ID
from the new one and join again.
"""

from __future__ import annotations

from kbroker.common.error_code import ErrorCode
from kbroker.coordinator.share_group import ShareHeartbeatRequest
from kbroker.protocol.messages.share_group_heartbeat import (
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from kbroker.server.apis.group_support import client_host, coordinator, heartbeat_response
from kbroker.server.request_context import RequestContext

R = ShareGroupHeartbeatResponse


def handle(ctx: RequestContext, request: ShareGroupHeartbeatRequest) -> ShareGroupHeartbeatResponse:
    code = coordinator(ctx).coordinator_error(request.group_id)
    if code != ErrorCode.NONE:
        return R(error_code=code, member_id=None, member_epoch=-1)
    result = ctx.services.share_groups.coordinator.heartbeat(ShareHeartbeatRequest(
        request.group_id, request.member_id, request.member_epoch, request.rack_id,
        request.subscribed_topic_names, ctx.client_id or "", client_host(ctx)), ctx.services.topics)
    return heartbeat_response(R, result)


def error_response(request: ShareGroupHeartbeatRequest, version: int, code: int) -> ShareGroupHeartbeatResponse:
    return R(error_code=code, member_id=None, member_epoch=-1)
