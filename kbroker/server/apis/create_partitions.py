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
from kbroker.server import cluster_admin, topic_admin
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
            if ctx.broker.clustered:
                await _grow_in_cluster(ctx, topic, request.validate_only, request.timeout_ms)
            else:
                _grow(ctx, topic, request.validate_only)
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


async def _grow_in_cluster(ctx: RequestContext, topic: CreatePartitionsRequest.CreatePartitionsTopic,
                           validate_only: bool, timeout_ms: int) -> None:
    broker = ctx.broker
    cluster_admin.check_controller(broker)
    info = topic_admin.find_topic(broker, topic.name)
    topic_admin.check_new_partition_count(info, topic.count)
    existing = broker.cluster.partitions(info)
    rf = len(existing[0].replicas) if existing else 1
    added = topic.count - info.partitions
    if topic.assignments:
        if len(topic.assignments) != added:
            raise AdminError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Increasing the number of partitions by {added} but {len(topic.assignments)} "
                "assignments provided.")
        new = {info.partitions + i: list(a.broker_ids) for i, a in enumerate(topic.assignments)}
        if cluster_admin.check_assignment(broker, new) != rf:
            raise AdminError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Inconsistent replication factor between partitions, partition 0 has {rf}.")
    else:
        topic_admin.resolve_replication_factor(broker, rf)
        new = cluster_admin.plan_assignment(broker, added, rf, first_partition=info.partitions)
    if validate_only:
        return
    await cluster_admin.add_partitions(broker, info, new, timeout_ms)
    log.info("topic %s now has %d partitions", topic.name, topic.count)


def _grow(ctx: RequestContext, topic: CreatePartitionsRequest.CreatePartitionsTopic,
          validate_only: bool) -> None:
    broker = ctx.broker
    info = topic_admin.find_topic(broker, topic.name)
    topic_admin.check_new_partition_count(info, topic.count)
    topic_admin.check_broker_partitions(broker, topic.count - info.partitions)
    if topic.assignments is not None and topic.assignments:
        added = topic.count - info.partitions
        if len(topic.assignments) != added:
            raise AdminError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Increasing the number of partitions by {added} but {len(topic.assignments)} "
                "assignments provided.",
            )
        for i, a in enumerate(topic.assignments):
            topic_admin.check_assignment(broker, a.broker_ids, info.partitions + i)
    if validate_only:
        return
    topic_admin.add_partitions(broker, info, topic.count)
    log.info("topic %s now has %d partitions", topic.name, topic.count)


def error_response(request: CreatePartitionsRequest, version: int, code: int) -> CreatePartitionsResponse:
    return CreatePartitionsResponse(
        results=[Result(name=t.name, error_code=code, error_message=None) for t in request.topics]
    )
