"""DeleteGroups (key 42), v0-2: delete Empty groups and their offsets (tombstones in
__consumer_offsets); NON_EMPTY_GROUP while members remain, GROUP_ID_NOT_FOUND."""

from __future__ import annotations

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
from kbroker.server import authorization as authz
from kbroker.server.apis.group_support import coordinator
from kbroker.server.request_context import RequestContext

Result = DeleteGroupsResponse.DeletableGroupResult


def handle(ctx: RequestContext, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
    allowed = [g for g in request.groups_names if authz.authorize_group(ctx, "DELETE", g)]
    results = coordinator(ctx).delete_groups(allowed) if allowed else {}
    for g in request.groups_names:
        results.setdefault(g, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    return DeleteGroupsResponse(results=[Result(group_id=g, error_code=results[g])
                                         for g in dict.fromkeys(request.groups_names)])


def error_response(request: DeleteGroupsRequest, version: int, code: int) -> DeleteGroupsResponse:
    return DeleteGroupsResponse(results=[Result(group_id=g, error_code=code)
                                         for g in dict.fromkeys(request.groups_names)])
