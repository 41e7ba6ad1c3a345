"""DescribeGroups (key 15), v0-6: state, protocol and members of each group.

As Kafka: member metadata and assignments, and the protocol name, only in
Stable; an unknown group is described as Dead, with no error up to v5 and, from v6
(KIP-1043), with GROUP_ID_NOT_FOUND and the message "Group <id> not found." (Kafka's
GroupMetadataManager.describeGroups; KafkaApis maps it back to no error for v0-5). A
KIP-848 consumer group is not a classic group: Dead with no error up to v5, from v6
GROUP_ID_NOT_FOUND "Group <id> is not a classic group." (ConsumerGroupDescribe describes
it). v3+ with include_authorized_operations: a group described without error carries the group
operations the principal may do (kbroker.server.authorization); one with an error
carries none (the field's default, as KafkaApis leaves it).
"""

from __future__ import annotations

from kbroker.common.error_code import ErrorCode
from kbroker.coordinator.group_metadata import GroupState, MemberMetadata
from kbroker.protocol.messages.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from kbroker.security.acl import ResourceType
from kbroker.server import authorization as authz
from kbroker.server.apis.group_support import coordinator
from kbroker.server.request_context import RequestContext

Group = DescribeGroupsResponse.DescribedGroup
Member = DescribeGroupsResponse.DescribedGroupMember
UNSET_OPERATIONS = -(2**31)


def handle(ctx: RequestContext, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
    want_ops = ctx.api_version >= 3 and request.include_authorized_operations
    coord = coordinator(ctx)
    out = []
    for group_id in request.groups:
        if not authz.authorize_group(ctx, "DESCRIBE", group_id):
            out.append(Group(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=group_id,
                             group_state="", protocol_type="", protocol_data="", members=[],
                             authorized_operations=UNSET_OPERATIONS))
            continue
        err, group = coord.describe_group(group_id)
        message = f"Group {group_id} not found."
        if err == ErrorCode.NONE and (coord.consumer.state_of(group_id) is not None
                                      or ctx.services.share_groups.coordinator.describe(group_id) is not None):
            group, message = None, f"Group {group_id} is not a classic group."
        if err == ErrorCode.NONE and ctx.api_version >= 6 and (group is None or group.is_(GroupState.DEAD)):
            out.append(Group(error_code=ErrorCode.GROUP_ID_NOT_FOUND, error_message=message,
                             group_id=group_id, group_state=GroupState.DEAD.value, protocol_type="",
                             protocol_data="", members=[], authorized_operations=UNSET_OPERATIONS))
            continue
        ops = UNSET_OPERATIONS
        if want_ops and err == ErrorCode.NONE:
            ops = authz.authorized_operations(ctx, ResourceType.GROUP, group_id)
        if err != ErrorCode.NONE or group is None:
            out.append(Group(error_code=err, group_id=group_id, group_state=GroupState.DEAD.value,
                             protocol_type="", protocol_data="", members=[], authorized_operations=ops))
            continue
        stable = group.is_(GroupState.STABLE)
        members = [
            Member(member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                   client_host=m.client_host,
                   member_metadata=_metadata(m, group.protocol_name) if stable else b"",
                   member_assignment=m.assignment if stable else b"")
            for m in group.members.values()]
        out.append(Group(error_code=ErrorCode.NONE, group_id=group_id, group_state=group.state.value,
                         protocol_type=group.protocol_type or "",
                         protocol_data=(group.protocol_name or "") if stable else "",
                         members=members, authorized_operations=ops))
    return DescribeGroupsResponse(groups=out)


def _metadata(member: MemberMetadata, protocol: str | None) -> bytes:
    try:
        return member.metadata(protocol or "")
    except KeyError:
        return b""


def error_response(request: DescribeGroupsRequest, version: int, code: int) -> DescribeGroupsResponse:
    return DescribeGroupsResponse(groups=[
        Group(error_code=code, group_id=g, group_state="", protocol_type="", protocol_data="", members=[])
        for g in request.groups])
