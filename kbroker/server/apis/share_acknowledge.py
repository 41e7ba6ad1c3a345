"""ShareAcknowledge (key 79), v1-2 (KIP-932): a share group member acknowledges records
(accept, release, reject; v2 with IsRenewAck also renew) in its share session, without
fetching: epoch 0 answers INVALID_SHARE_SESSION_EPOCH (a session opens only with a
ShareFetch), -1 acknowledges and closes the session (what the member still holds is
released), n > 0 continues it. Each partition answers its own error code (see
share_support.py); v2 also answers the acquisition lock timeout.

READ on the group (REQUEST_CHECKS) and on each topic (TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.share_acknowledge import (
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
)
from kbroker.server.apis.share_support import (
    AckResult,
    acknowledge,
    acks_done,
    current_leader,
    share_groups,
)
from kbroker.server.request_context import RequestContext
from kbroker.server.share_session_cache import FINAL_EPOCH, INITIAL_EPOCH, ShareSessionError

R = ShareAcknowledgeResponse
E = ErrorCode


def handle(ctx: RequestContext, request: ShareAcknowledgeRequest
           ) -> ShareAcknowledgeResponse | Awaitable[ShareAcknowledgeResponse]:
    groups = share_groups(ctx)
    lock_ms = ctx.services.config.group_share_record_lock_duration_ms
    if not request.group_id or not request.member_id:
        return R(error_code=E.INVALID_REQUEST, error_message="GroupId and MemberId must be set.",
                 acquisition_lock_timeout_ms=lock_ms)
    group_id, member_id, epoch = request.group_id, request.member_id, request.share_session_epoch
    try:
        if epoch == INITIAL_EPOCH:
            raise ShareSessionError(E.INVALID_SHARE_SESSION_EPOCH, "ShareAcknowledge cannot open a share session.")
        session = groups.sessions.get(group_id, member_id, epoch)
    except ShareSessionError as e:
        return R(error_code=e.code, error_message=e.message, acquisition_lock_timeout_ms=lock_ms)
    acks = acknowledge(ctx, group_id, member_id, request.topics, ctx.api_version >= 2 and request.is_renew_ack)
    if epoch == FINAL_EPOCH:
        groups.sessions.close(group_id, member_id)
        groups.session_closed(session)
    if isinstance(acks, dict):
        return _response(ctx, acks, lock_ms)

    async def persisted() -> ShareAcknowledgeResponse:
        return _response(ctx, await acks_done(acks), lock_ms)
    return persisted()


def _response(ctx: RequestContext, acks: AckResult, lock_ms: int) -> ShareAcknowledgeResponse:
    topics: dict[uuid.UUID, list[R.PartitionData]] = {}
    for (topic_id, partition), (code, message) in acks.items():
        topics.setdefault(topic_id, []).append(R.PartitionData(
            partition_index=partition, error_code=code, error_message=message,
            current_leader=_leader(ctx, topic_id, partition)))
    return R(error_code=E.NONE, acquisition_lock_timeout_ms=lock_ms,
             responses=[R.ShareAcknowledgeTopicResponse(topic_id=t, partitions=ps) for t, ps in topics.items()])


def _leader(ctx: RequestContext, topic_id: uuid.UUID, partition: int) -> R.LeaderIdAndEpoch:
    leader_id, epoch = current_leader(ctx, topic_id, partition)
    return R.LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=epoch)


def error_response(request: ShareAcknowledgeRequest, version: int, code: int) -> ShareAcknowledgeResponse:
    return R(error_code=code)
