"""AlterShareGroupOffsets (key 91), v0 (KIP-932): set the start offset of share
partitions of an empty share group (kafka-share-groups.sh --reset-offsets,
Admin.alterShareGroupOffsets).

As Kafka's (server/share_group_offsets.py): READ on the group (REQUEST_CHECKS, the whole
request GROUP_AUTHORIZATION_FAILED); top-level INVALID_GROUP_ID, GROUP_ID_NOT_FOUND (no
such share group), NON_EMPTY_GROUP (it has members). Per partition: READ on the topic,
else TOPIC_AUTHORIZATION_FAILED; UNKNOWN_TOPIC_OR_PARTITION for a topic or partition that
does not exist; INVALID_REQUEST for a negative start offset. A partition altered has
nothing in flight: the group's next fetch starts at the new start offset. In a cluster
NOT_COORDINATOR when the group coordinator is another broker; the new state goes to
each key's share coordinator (InitializeShareGroupState, the state epoch bumped).
"""

from __future__ import annotations

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.alter_share_group_offsets import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
)
from kbroker.server import authorization as authz
from kbroker.server.apis.group_support import coordinator as group_coordinator
from kbroker.server.request_context import RequestContext
from kbroker.server.share_group_offsets import ZERO_UUID, GroupError

R = AlterShareGroupOffsetsResponse
Topic = R.AlterShareGroupOffsetsResponseTopic
Partition = R.AlterShareGroupOffsetsResponsePartition
E = ErrorCode


async def handle(ctx: RequestContext, request: AlterShareGroupOffsetsRequest) -> AlterShareGroupOffsetsResponse:
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
        refused: int = (E.TOPIC_AUTHORIZATION_FAILED if not authz.authorize_topic(ctx, "READ", t.topic_name)
                   else E.UNKNOWN_TOPIC_OR_PARTITION if info is None else E.NONE)
        parts = []
        for p in t.partitions:
            code: int = refused
            if code == E.NONE and info is not None:
                code = (E.UNKNOWN_TOPIC_OR_PARTITION if not 0 <= p.partition_index < info.partitions
                        else await offsets.alter(request.group_id, info.topic_id, p.partition_index, p.start_offset))
            parts.append(Partition(partition_index=p.partition_index, error_code=code,
                                   error_message=None if code == E.NONE else E(code).message))
        out.append(Topic(topic_name=t.topic_name, topic_id=info.topic_id if info is not None else ZERO_UUID,
                         partitions=parts))
    return R(error_code=E.NONE, responses=out)


def error_response(request: AlterShareGroupOffsetsRequest, version: int, code: int
                   ) -> AlterShareGroupOffsetsResponse:
    return R(error_code=code)
