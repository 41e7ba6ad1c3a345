"""ListGroups (key 16), v0-5: every group this coordinator knows; v4+ filter by
state, v5+ by type ("classic" or "consumer", KIP-848; the answer names each group's)."""

from __future__ import annotations

from kbroker.protocol.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from kbroker.server import authorization as authz
from kbroker.server.apis.group_support import coordinator
from kbroker.server.request_context import RequestContext

Listed = ListGroupsResponse.ListedGroup


def handle(ctx: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
    states = request.states_filter if ctx.api_version >= 4 else []
    types = request.types_filter if ctx.api_version >= 5 else []
    err, groups = coordinator(ctx).list_groups(states, types)
    if authz.enabled(ctx) and not authz.authorize_cluster(ctx, "DESCRIBE"):
        groups = [g for g in groups if authz.authorize_group(ctx, "DESCRIBE", g[0])]
    return ListGroupsResponse(error_code=err, groups=[
        Listed(group_id=g, protocol_type=ptype, group_state=state, group_type=kind)
        for g, ptype, state, kind in sorted(groups)])


def error_response(request: ListGroupsRequest, version: int, code: int) -> ListGroupsResponse:
    return ListGroupsResponse(error_code=code)
