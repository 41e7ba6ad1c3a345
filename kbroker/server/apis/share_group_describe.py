"""ShareGroupDescribe (key 77), v1: a share group's state, epochs, assignor and members
(subscription, assignment with topic names).

As Kafka's: GROUP_ID_NOT_FOUND for an unknown group or one of another type; DESCRIBE on
the group, else GROUP_AUTHORIZATION_FAILED; include_authorized_operations fills the bit
field of the group operations the principal may do. In a cluster, NOT_COORDINATOR
for a group coordinated elsewhere (share_group_heartbeat.py).
"""

from __future__ import annotations

import uuid

from kbroker.common.error_code import ErrorCode
from kbroker.coordinator.share_group import Assignment
from kbroker.protocol.messages.share_group_describe import (
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
)
from kbroker.security.acl import ResourceType
from kbroker.server import authorization as authz
from kbroker.server.apis.group_support import (
    UNSET_OPERATIONS,
    described_assignment,
    described_failure,
)
from kbroker.server.apis.group_support import coordinator as group_coordinator
from kbroker.server.request_context import RequestContext

R = ShareGroupDescribeResponse
ASSIGNOR = "simple"  # Kafka's SimpleAssignor's name


def handle(ctx: RequestContext, request: ShareGroupDescribeRequest) -> ShareGroupDescribeResponse:
    coordinator = ctx.services.share_groups.coordinator
    names = {info.topic_id: info.name for info in ctx.services.topics}
    out = []
    for group_id in request.group_ids:
        if not authz.authorize_group(ctx, "DESCRIBE", group_id):
            out.append(_failed(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED))
            continue
        code = group_coordinator(ctx).coordinator_error(group_id)
        if code != ErrorCode.NONE:
            out.append(_failed(group_id, code))
            continue
        group = coordinator.describe(group_id)
        if group is None:
            out.append(_failed(group_id, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."))
            continue
        ops = (authz.authorized_operations(ctx, ResourceType.GROUP, group_id)
               if request.include_authorized_operations else UNSET_OPERATIONS)
        out.append(R.DescribedGroup(
            error_code=ErrorCode.NONE, group_id=group_id, group_state=group.state,
            group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch, assignor_name=ASSIGNOR,
            authorized_operations=ops,
            members=[R.Member(member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
                              client_id=m.client_id, client_host=m.client_host,
                              subscribed_topic_names=list(m.subscribed_topic_names),
                              assignment=_assignment(m.assignment, names))
                     for m in group.members.values()]))
    return R(groups=out)


def _assignment(a: Assignment, names: dict[uuid.UUID, str]) -> R.Assignment:
    return described_assignment(R, a, names)


def _failed(group_id: str, code: int, message: str | None = None) -> R.DescribedGroup:
    return described_failure(R, group_id, code, message)


def error_response(request: ShareGroupDescribeRequest, version: int, code: int) -> ShareGroupDescribeResponse:
    return R(groups=[_failed(g, code) for g in request.group_ids])
