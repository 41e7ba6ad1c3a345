"""ListGroups (key 16), v0-5: every group this coordinator knows; v4+ filter by
state, v5+ by type ("classic", "consumer" (KIP-848) or "share" (KIP-932); the answer
names each group's). A share group's protocol type is "share", as Kafka lists it."""

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
    if err == 0:
        groups += _share_groups(ctx, {s.lower() for s in states}, {t.lower() for t in types})
    if authz.enabled(ctx) and not authz.authorize_cluster(ctx, "DESCRIBE"):
        groups = [g for g in groups if authz.authorize_group(ctx, "DESCRIBE", g[0])]
    return ListGroupsResponse(error_code=err, groups=[
        Listed(group_id=g, protocol_type=ptype, group_state=state, group_type=kind)
        for g, ptype, state, kind in sorted(groups)])


def _share_groups(ctx: RequestContext, states: set[str], types: set[str]) -> list[tuple[str, str, str, str]]:
    if types and "share" not in types:
        return []
    return [(g.group_id, "share", g.state, "share")
            for g in ctx.services.share_groups.coordinator.groups.values()
            if not states or g.state.lower() in states]


def error_response(request: ListGroupsRequest, version: int, code: int) -> ListGroupsResponse:
    return ListGroupsResponse(error_code=code)
