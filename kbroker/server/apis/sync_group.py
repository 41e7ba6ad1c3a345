"""SyncGroup (key 14), v0-5: the leader's assignments in, each member's assignment out.

Parks until the leader's SyncGroup arrives; v5+ checks protocol type and name.
"""

from __future__ import annotations

from collections.abc import Awaitable

from kbroker.coordinator.group_metadata import SyncResult
from kbroker.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse
from kbroker.server.apis.group_support import complete_or_park, coordinator
from kbroker.server.request_context import RequestContext


def handle(ctx: RequestContext, request: SyncGroupRequest) -> SyncGroupResponse | Awaitable[SyncGroupResponse]:
    version = ctx.api_version
    coord = coordinator(ctx)
    assignments = {a.member_id: bytes(a.assignment) for a in request.assignments}
    instance_id = request.group_instance_id if version >= 3 else None
    ptype = request.protocol_type if version >= 5 else None
    pname = request.protocol_name if version >= 5 else None
    return complete_or_park(
        lambda cb: coord.sync_group(request.group_id, request.generation_id, request.member_id,
                                    instance_id, ptype, pname, assignments, cb),
        _response)


def _response(r: SyncResult) -> SyncGroupResponse:
    return SyncGroupResponse(error_code=r.error_code, protocol_type=r.protocol_type,
                             protocol_name=r.protocol_name, assignment=r.assignment)


def error_response(request: SyncGroupRequest, version: int, code: int) -> SyncGroupResponse:
    return _response(SyncResult(code))
