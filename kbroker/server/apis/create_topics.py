"""CreateTopics (key 19), v0-7: create topics, or only check them (validate_only, v1+).

Per topic, as Kafka 3.9's ZkAdminManager.createTopics checks: a name listed
twice -> INVALID_REQUEST; an illegal or colliding name -> INVALID_TOPIC_EXCEPTION;
an existing one -> TOPIC_ALREADY_EXISTS; num_partitions -1 means `num.partitions`,
other values below 1 -> INVALID_PARTITIONS; replication_factor -1 means
`default.replication.factor`, and anything but 1 -> INVALID_REPLICATION_FACTOR
(one broker); an explicit assignment together with a count -> INVALID_REQUEST,
one naming another broker -> INVALID_REPLICA_ASSIGNMENT; an unknown, null or
ill-typed config -> INVALID_CONFIG.

In a cluster only the controller answers (another broker forwards the request to it:
kbroker.server.forwarding; see server/zk_topic_admin.py); the
replication factor may be up to the number of live brokers, an explicit assignment
must name live brokers, and the answer waits (timeout_ms) until the topic's
partitions have leaders.

v5+ answers with the partition count, replication factor and every config of
the topic (as DescribeConfigs would, without synonyms), also for validate_only;
v7 with the new topic id.
"""

from __future__ import annotations

import logging
from collections import Counter

from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.protocol.codec import ZERO_UUID
from kbroker.protocol.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from kbroker.server import authorization as authz
from kbroker.server import topic_admin
from kbroker.server.config_describe import describe_topic
from kbroker.server.request_context import RequestContext
from kbroker.server.topic_admin import AdminError

log = logging.getLogger(__name__)

Result = CreateTopicsResponse.CreatableTopicResult
ConfigResult = CreateTopicsResponse.CreatableTopicConfigs


async def handle(ctx: RequestContext, request: CreateTopicsRequest) -> CreateTopicsResponse:
    counts = Counter(t.name for t in request.topics)
    validate_only = ctx.api_version >= 1 and request.validate_only
    results = []
    for topic in request.topics:
        if counts[topic.name] > 1:
            results.append(_error(topic.name, ErrorCode.INVALID_REQUEST,
                                  "Create topics request contains multiple entries for the topic."))
            continue
        if not (authz.authorize_cluster(ctx, "CREATE")
                or authz.authorize_topic(ctx, "CREATE", topic.name)):
            results.append(_error(topic.name, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                  "Authorization failed."))
            continue
        try:
            results.append(await _create(ctx, topic, validate_only, request.timeout_ms))
        except AdminError as e:
            results.append(_error(topic.name, e.error_code, e.message))
        except Exception as e:
            code = e.error_code if isinstance(e, KafkaError) else None  # e.g. KAFKA_STORAGE_ERROR
            if code is None:
                log.exception("creating topic %s failed", topic.name)
            else:
                log.error("creating topic %s failed: %s", topic.name, e)
            results.append(_error(topic.name, code or ErrorCode.UNKNOWN_SERVER_ERROR, str(e) or None))
    return CreateTopicsResponse(topics=results)


async def _create(ctx: RequestContext, topic: CreateTopicsRequest.CreatableTopic,
                  validate_only: bool, timeout_ms: int) -> Result:
    services = ctx.services
    admin = services.topic_admin
    admin.check_controller()
    admin.check_new_topic_name(topic.name)
    if topic.assignments:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            raise AdminError(
                ErrorCode.INVALID_REQUEST,
                "Both numPartitions or replicationFactor and replicasAssignments were set. "
                "Both cannot be used at the same time.",
            )
        assignment = _from_assignments(ctx, topic.assignments)
        partitions, rf = len(assignment), len(assignment[0])
    else:
        partitions = admin.resolve_partitions(topic.num_partitions)
        rf = admin.resolve_replication_factor(topic.replication_factor)
        assignment = admin.plan_assignment(partitions, rf)
    admin.check_partition_budget(partitions)
    config = admin.topic_config({c.name: c.value for c in topic.configs})
    overrides = {c.name: c.value or "" for c in topic.configs}
    topic_id = ZERO_UUID
    if not validate_only:
        if services.shutting_down():
            raise AdminError(ErrorCode.NOT_CONTROLLER, "The broker is shutting down.")
        info = await admin.create_topic(topic.name, assignment, overrides, timeout_ms)
        if info is not None:
            topic_id = info.topic_id
    configs = [
        ConfigResult(
            name=d.name,
            value=d.value,
            read_only=d.read_only,
            config_source=d.source,
            is_sensitive=d.is_sensitive,
        )
        for d in describe_topic(overrides, config, services.config)
    ]
    return Result(
        name=topic.name,
        topic_id=topic_id,
        error_code=ErrorCode.NONE,
        error_message=None,
        num_partitions=partitions,
        replication_factor=rf,
        configs=configs,
    )


def _from_assignments(
    ctx: RequestContext, assignments: list[CreateTopicsRequest.CreatableReplicaAssignment]
) -> dict[int, list[int]]:
    topic_admin.check_partition_limit(len(assignments))
    indexes = sorted(a.partition_index for a in assignments)
    if indexes != list(range(len(assignments))):
        raise AdminError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "Partitions should be a consecutive 0-based integer sequence.",
        )
    assignment = {a.partition_index: list(a.broker_ids) for a in assignments}
    ctx.services.topic_admin.check_replica_assignment(assignment)
    return assignment


def _error(name: str, code: int, message: str | None) -> Result:
    return Result(name=name, error_code=code, error_message=message, configs=None)


def error_response(request: CreateTopicsRequest, version: int, code: int) -> CreateTopicsResponse:
    return CreateTopicsResponse(topics=[_error(t.name, code, None) for t in request.topics])
