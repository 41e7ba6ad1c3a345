"""DeleteGroups (key 42), v0-3: delete Empty groups and their offsets (tombstones in
__consumer_offsets); NON_EMPTY_GROUP while members remain, GROUP_ID_NOT_FOUND.

A share group (KIP-932) is deleted first, as Kafka's GroupCoordinatorService.deleteGroups
does: its share partition states get tombstones in __share_group_state (in a cluster
through DeleteShareGroupState to each key's share coordinator), then the group goes
(server/share_group_offsets.py); when a state could not be deleted the group stays and
answers that error (Kafka's: the persister's error code). DELETE on each group, else GROUP_AUTHORIZATION_FAILED.

v3 (Kafka 4.4) adds a per-group error_message: null when the group was deleted, else the
error's message (Kafka's default message of each code)."""

from __future__ import annotations

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
from kbroker.server import authorization as authz
from kbroker.server.apis.group_support import coordinator
from kbroker.server.request_context import RequestContext

Result = DeleteGroupsResponse.DeletableGroupResult


async def handle(ctx: RequestContext, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
    allowed = [g for g in request.groups_names if authz.authorize_group(ctx, "DELETE", g)]
    share = ctx.services.share_groups
    results = {g: await share.offsets.delete_group(g) for g in allowed if share.coordinator.describe(g) is not None}
    others = [g for g in allowed if g not in results]
    if others:
        results.update(coordinator(ctx).delete_groups(others))
    for g in request.groups_names:
        results.setdefault(g, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    return DeleteGroupsResponse(results=[_result(g, results[g])
                                         for g in dict.fromkeys(request.groups_names)])


def _result(group_id: str, code: int) -> DeleteGroupsResponse.DeletableGroupResult:
    message = None if code == ErrorCode.NONE else ErrorCode(code).message
    return Result(group_id=group_id, error_code=code, error_message=message)


def error_response(request: DeleteGroupsRequest, version: int, code: int) -> DeleteGroupsResponse:
    return DeleteGroupsResponse(results=[_result(g, code)
                                         for g in dict.fromkeys(request.groups_names)])
