"""ConsumerGroupDescribe (key 69), v0-1: a KIP-848 consumer group's state, epochs,
assignor and members (subscription, current and target assignment with topic names;
v1, KIP-1099: each member's type, classic for a member that joined by JoinGroup).

As Kafka's: GROUP_ID_NOT_FOUND for an unknown group or a classic one; DESCRIBE on the
group, else GROUP_AUTHORIZATION_FAILED; include_authorized_operations fills the bit
field of the group operations the principal may do.
"""

from __future__ import annotations

import uuid

from kbroker.common.error_code import ErrorCode
from kbroker.coordinator.consumer_group_member import Assignment
from kbroker.protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
)
from kbroker.security.acl import ResourceType
from kbroker.server import authorization as authz
from kbroker.server.apis.group_support import (
    UNSET_OPERATIONS,
    coordinator,
    described_assignment,
    described_failure,
)
from kbroker.server.request_context import RequestContext

R = ConsumerGroupDescribeResponse
CLASSIC_MEMBER, CONSUMER_MEMBER = 0, 1  # v1 (KIP-1099) member_type: a member of an online migration is classic


def handle(ctx: RequestContext, request: ConsumerGroupDescribeRequest) -> ConsumerGroupDescribeResponse:
    coord = coordinator(ctx)
    out = []
    for group_id in request.group_ids:
        if not authz.authorize_group(ctx, "DESCRIBE", group_id):
            out.append(_failed(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED))
            continue
        err, group = coord.consumer_describe(group_id)
        if err != ErrorCode.NONE or group is None:
            out.append(_failed(group_id, err, f"Group {group_id} not found."
                               if err == ErrorCode.GROUP_ID_NOT_FOUND else None))
            continue
        names = _names(ctx)
        ops = (authz.authorized_operations(ctx, ResourceType.GROUP, group_id)
               if request.include_authorized_operations else UNSET_OPERATIONS)
        out.append(R.DescribedGroup(
            error_code=ErrorCode.NONE, group_id=group_id, group_state=group.state.value, group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch,
            assignor_name=group.assignor_name(coord.config.consumer.assignors[0]),
            authorized_operations=ops,
            members=[R.Member(
                member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
                member_epoch=m.member_epoch, client_id=m.client_id, client_host=m.client_host,
                subscribed_topic_names=list(m.subscribed_topic_names),
                subscribed_topic_regex=m.subscribed_topic_regex,
                assignment=_assignment(m.assigned, names),
                target_assignment=_assignment(group.target.get(m.member_id, {}), names),
                member_type=CLASSIC_MEMBER if m.classic is not None else CONSUMER_MEMBER)
                for m in group.members.values()]))
    return R(groups=out)


def _names(ctx: RequestContext) -> dict[uuid.UUID, str]:
    return {info.topic_id: info.name for info in ctx.services.topics}


def _assignment(a: Assignment, names: dict[uuid.UUID, str]) -> R.Assignment:
    return described_assignment(R, a, names)


def _failed(group_id: str, code: int, message: str | None = None) -> R.DescribedGroup:
    return described_failure(R, group_id, code, message)


def error_response(request: ConsumerGroupDescribeRequest, version: int, code: int
                   ) -> ConsumerGroupDescribeResponse:
    return R(groups=[_failed(g, code) for g in request.group_ids])
