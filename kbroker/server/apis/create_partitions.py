"""CreatePartitions (key 37), v0-3: grow topics to a new partition count.

Every requested topic gets a result (another broker omitted it; clients then
wait for a reply that never comes). As Kafka 3.9's ZkAdminManager.createPartitions:
a topic listed twice -> INVALID_REQUEST; an unknown topic ->
UNKNOWN_TOPIC_OR_PARTITION; a count not above the current one ->
INVALID_PARTITIONS; an assignment whose length is not the number of new
partitions, or that names another broker -> INVALID_REPLICA_ASSIGNMENT.
`validate_only` checks and changes nothing.
"""

from __future__ import annotations

import logging
from collections import Counter

from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.protocol.messages.create_partitions import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
)
from kbroker.server import authorization as authz
from kbroker.server.request_context import RequestContext
from kbroker.server.topic_admin import AdminError

log = logging.getLogger(__name__)

Result = CreatePartitionsResponse.CreatePartitionsTopicResult


async def handle(ctx: RequestContext, request: CreatePartitionsRequest) -> CreatePartitionsResponse:
    counts = Counter(t.name for t in request.topics)
    results = []
    for topic in request.topics:
        try:
            if counts[topic.name] > 1:
                raise AdminError(ErrorCode.INVALID_REQUEST, "Duplicate topic in request.")
            if not authz.authorize_topic(ctx, "ALTER", topic.name):
                raise AdminError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
            await ctx.services.topic_admin.create_partitions(topic, request.validate_only,
                                                             request.timeout_ms)
            if not request.validate_only:
                log.info("topic %s now has %d partitions", topic.name, topic.count)
            results.append(Result(name=topic.name, error_code=ErrorCode.NONE, error_message=None))
        except AdminError as e:
            results.append(Result(name=topic.name, error_code=e.error_code, error_message=e.message))
        except Exception as e:
            code = e.error_code if isinstance(e, KafkaError) else None  # e.g. KAFKA_STORAGE_ERROR
            if code is None:
                log.exception("adding partitions to %s failed", topic.name)
            else:
                log.error("adding partitions to %s failed: %s", topic.name, e)
            results.append(Result(name=topic.name, error_code=code or ErrorCode.UNKNOWN_SERVER_ERROR,
                                  error_message=str(e) or None))
    return CreatePartitionsResponse(results=results)


def error_response(request: CreatePartitionsRequest, version: int, code: int) -> CreatePartitionsResponse:
    return CreatePartitionsResponse(
        results=[Result(name=t.name, error_code=code, error_message=None) for t in request.topics]
    )
