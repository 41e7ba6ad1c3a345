"""JoinGroup (key 11), v0-9: parks until the rebalance completes (see GroupCoordinator).

v4+ asks unknown members to rejoin with the id it hands out (MEMBER_ID_REQUIRED);
v5+ static membership (group_instance_id); v7+ echoes protocol type and name;
v9 skip_assignment for a static leader rejoining a stable group.

A classic member of a KIP-848 consumer group (coordinator/consumer_group_classic.py) is
answered at once, and in a cluster once the records of its join are replicated, as a
ConsumerGroupHeartbeat is.
"""

from __future__ import annotations

from collections.abc import Awaitable
from inspect import isawaitable

from kbroker.common.error_code import ErrorCode
from kbroker.coordinator.group_metadata import JoinRequest, JoinResult
from kbroker.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse
from kbroker.server.apis.group_support import (
    client_host,
    complete_or_park,
    coordinator,
    when_group_replicated,
)
from kbroker.server.request_context import RequestContext

Member = JoinGroupResponse.JoinGroupResponseMember


def handle(ctx: RequestContext, request: JoinGroupRequest) -> JoinGroupResponse | Awaitable[JoinGroupResponse]:
    version = ctx.api_version
    req = JoinRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id if version >= 5 else None,
        protocol_type=request.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=request.rebalance_timeout_ms if version >= 1 else request.session_timeout_ms,
        require_known_member_id=version >= 4,
        client_id=ctx.client_id or "",
        client_host=client_host(ctx),
    )
    coord = coordinator(ctx)
    response = complete_or_park(lambda cb: coord.join_group(req, cb), lambda r: _response(r, version))
    if isawaitable(response) or response.error_code != ErrorCode.NONE or not coord.is_consumer_group(req.group_id):
        return response
    return when_group_replicated(ctx, req.group_id, response,
                                 lambda code: _response(JoinResult(code, req.member_id), version))


def _response(r: JoinResult, version: int) -> JoinGroupResponse:
    name = r.protocol_name
    return JoinGroupResponse(
        error_code=r.error_code,
        generation_id=r.generation_id,
        protocol_type=r.protocol_type,
        protocol_name=name if version >= 7 else (name or ""),
        leader=r.leader_id,
        skip_assignment=r.skip_assignment and version >= 9,
        member_id=r.member_id,
        members=[Member(member_id=m, group_instance_id=i, metadata=md) for m, i, md in r.members or ()],
    )


def error_response(request: JoinGroupRequest, version: int, code: int) -> JoinGroupResponse:
    return _response(JoinResult(code, request.member_id), version)
