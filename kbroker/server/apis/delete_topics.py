"""DeleteTopics (key 20), v0-6: delete topics by name (v0-5 `topic_names`), or by
name or topic id (v6 `topics`).

As Kafka 3.9's KafkaApis.handleDeleteTopicsRequest: an unknown name ->
UNKNOWN_TOPIC_OR_PARTITION, an unknown id -> UNKNOWN_TOPIC_ID, both a name and
an id -> INVALID_REQUEST, a topic listed twice -> INVALID_REQUEST,
`delete.topic.enable=false` -> TOPIC_DELETION_DISABLED. The partition logs are
renamed away at once and removed after `file.delete.delay.ms`.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter

from kbroker.common.error_code import ErrorCode
from kbroker.common.kafka_uuid import uuid_to_base64
from kbroker.metadata.topic_registry import TopicInfo
from kbroker.protocol.codec import ZERO_UUID
from kbroker.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from kbroker.server import authorization as authz
from kbroker.server.request_context import RequestContext
from kbroker.server.topic_admin import AdminError

log = logging.getLogger(__name__)

Result = DeleteTopicsResponse.DeletableTopicResult


async def handle(ctx: RequestContext, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
    wanted = _requested(request, ctx.api_version)
    counts = Counter(wanted)
    results = []
    for name, topic_id in wanted:
        try:
            if counts[(name, topic_id)] > 1:
                raise AdminError(ErrorCode.INVALID_REQUEST, "Duplicate topic in request.")
            ctx.services.topic_admin.check_controller()
            if name is not None and not authz.authorize_topic(ctx, "DELETE", name):
                raise AdminError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
            info = _find(ctx, name, topic_id)
            if not authz.authorize_topic(ctx, "DELETE", info.name):
                raise AdminError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
            await ctx.services.topic_admin.delete_topic(info, request.timeout_ms)
            log.info("deleted topic %s (id %s)", info.name, uuid_to_base64(info.topic_id))
            results.append(Result(name=info.name, topic_id=info.topic_id, error_code=ErrorCode.NONE))
        except AdminError as e:
            results.append(Result(name=name, topic_id=topic_id, error_code=e.error_code,
                                  error_message=e.message))
        except Exception as e:
            log.exception("deleting topic %s failed", name or uuid_to_base64(topic_id))
            results.append(Result(name=name, topic_id=topic_id,
                                  error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=str(e)))
    return DeleteTopicsResponse(responses=results)


def _requested(request: DeleteTopicsRequest, version: int) -> list[tuple[str | None, uuid.UUID]]:
    if version >= 6:
        return [(t.name, t.topic_id) for t in request.topics]
    return [(name, ZERO_UUID) for name in request.topic_names]


def _find(ctx: RequestContext, name: str | None, topic_id: uuid.UUID) -> TopicInfo:
    if name is not None and topic_id != ZERO_UUID:
        raise AdminError(ErrorCode.INVALID_REQUEST, "You may not specify both topic name and topic id.")
    if name is not None:
        return ctx.services.topic_admin.find_topic(name)
    info = ctx.services.topics.get_by_id(topic_id)
    if info is None:
        raise AdminError(ErrorCode.UNKNOWN_TOPIC_ID, "This server does not host this topic ID.")
    return info


def error_response(request: DeleteTopicsRequest, version: int, code: int) -> DeleteTopicsResponse:
    return DeleteTopicsResponse(
        responses=[
            Result(name=name, topic_id=topic_id, error_code=code)
            for name, topic_id in _requested(request, version)
        ]
    )
