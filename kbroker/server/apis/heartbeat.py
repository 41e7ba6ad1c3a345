"""Heartbeat (key 12), v0-4: keeps a member alive; REBALANCE_IN_PROGRESS tells it to rejoin."""

from __future__ import annotations

from kbroker.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from kbroker.server.apis.group_support import coordinator
from kbroker.server.request_context import RequestContext


def handle(ctx: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
    instance_id = request.group_instance_id if ctx.api_version >= 3 else None
    code = coordinator(ctx).heartbeat(request.group_id, request.member_id, instance_id,
                                      request.generation_id)
    return HeartbeatResponse(error_code=code)


def error_response(request: HeartbeatRequest, version: int, code: int) -> HeartbeatResponse:
    return HeartbeatResponse(error_code=code)
