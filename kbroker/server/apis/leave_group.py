"""LeaveGroup (key 13), v0-5: v0-2 one member_id; v3+ a batch of members (by member
id and/or group_instance_id), each with its own error."""

from __future__ import annotations

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse
from kbroker.server.apis.group_support import coordinator
from kbroker.server.request_context import RequestContext

MemberResponse = LeaveGroupResponse.MemberResponse


def handle(ctx: RequestContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
    if ctx.api_version < 3:
        members: list[tuple[str, str | None]] = [(request.member_id, None)]
    else:
        members = [(m.member_id, m.group_instance_id) for m in request.members]
    top, results = coordinator(ctx).leave_group(request.group_id, members)
    if ctx.api_version < 3:
        code = top if top != ErrorCode.NONE else (results[0][2] if results else ErrorCode.NONE)
        return LeaveGroupResponse(error_code=code)
    return LeaveGroupResponse(
        error_code=top,
        members=[MemberResponse(member_id=m, group_instance_id=i, error_code=e) for m, i, e in results])


def error_response(request: LeaveGroupRequest, version: int, code: int) -> LeaveGroupResponse:
    return LeaveGroupResponse(error_code=code)
