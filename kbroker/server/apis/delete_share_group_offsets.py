"""DeleteShareGroupOffsets (key 92), v0 (KIP-932): forget the share partition states of
topics of an empty share group (kafka-share-groups.sh --delete-offsets,
Admin.deleteShareGroupOffsets); the group's next fetch of them starts at its
`share.auto.offset.reset`.

As Kafka's (server/share_group_offsets.py): DELETE on the group (REQUEST_CHECKS, the
whole request GROUP_AUTHORIZATION_FAILED); top-level INVALID_GROUP_ID,
GROUP_ID_NOT_FOUND (no such share group), NON_EMPTY_GROUP (it has members). Per topic:
READ on it, else TOPIC_AUTHORIZATION_FAILED; UNKNOWN_TOPIC_OR_PARTITION for a topic that
does not exist; a topic the group holds no state of answers NONE (nothing left to
delete); a state not deleted answers the write's error. In a cluster NOT_COORDINATOR
when the group coordinator is another broker; the states go at each key's share
coordinator (DeleteShareGroupState).
"""

from __future__ import annotations

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.delete_share_group_offsets import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
)
from kbroker.server import authorization as authz
from kbroker.server.apis.group_support import coordinator as group_coordinator
from kbroker.server.request_context import RequestContext
from kbroker.server.share_group_offsets import ZERO_UUID, GroupError

R = DeleteShareGroupOffsetsResponse
Topic = R.DeleteShareGroupOffsetsResponseTopic
E = ErrorCode


async def handle(ctx: RequestContext, request: DeleteShareGroupOffsetsRequest) -> DeleteShareGroupOffsetsResponse:
    offsets = ctx.services.share_groups.offsets
    not_here = group_coordinator(ctx).coordinator_error(request.group_id)
    if not_here != E.NONE:  # in a cluster: the group coordinator is another broker
        return R(error_code=not_here, error_message=E(not_here).message)
    try:
        offsets.check_group(request.group_id, alterable=True)
    except GroupError as e:
        return R(error_code=e.code, error_message=e.message)
    out = []
    for t in request.topics:
        info = ctx.services.topics.get(t.topic_name)
        code: int
        if not authz.authorize_topic(ctx, "READ", t.topic_name):
            code = E.TOPIC_AUTHORIZATION_FAILED
        elif info is None:
            code = E.UNKNOWN_TOPIC_OR_PARTITION
        else:
            code = await offsets.delete(request.group_id, info.topic_id)
        out.append(Topic(topic_name=t.topic_name, topic_id=info.topic_id if info is not None else ZERO_UUID,
                         error_code=code, error_message=None if code == E.NONE else E(code).message))
    return R(error_code=E.NONE, responses=out)


def error_response(request: DeleteShareGroupOffsetsRequest, version: int, code: int
                   ) -> DeleteShareGroupOffsetsResponse:
    return R(error_code=code)
