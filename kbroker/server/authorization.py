"""The authorization checks of every API, as Kafka's KafkaApis/AuthHelper make them.

With no authorizer (authorizer.class.name empty) every check passes and the connection
makes none. Otherwise the broker's AclAuthorizer decides for the connection's principal
and host: checks that fail a request as a whole are made by the connection before the
handler (REQUEST_CHECKS: the answer is the API's error_response with the code, e.g.
GROUP_AUTHORIZATION_FAILED for a JoinGroup); per-item checks (a topic of a Produce, a
group of DescribeGroups) by the handlers (HANDLER_CHECKED), which call the helpers
here; an API in neither needs ALTER on the cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from kbroker.common.error_code import ErrorCode
from kbroker.protocol.api_key import ApiKey
from kbroker.security.acl import CLUSTER_NAME, SUPPORTED_OPERATIONS, AclOperation, ResourceType
from kbroker.server.config_describe import ResourceType as ConfigResourceType
from kbroker.server.request_context import RequestContext

Op = AclOperation | str


def _op(op: Op) -> AclOperation:
    return AclOperation[op] if isinstance(op, str) else op


def enabled(ctx: RequestContext) -> bool:
    return ctx.services.authorizer is not None


def authorize(ctx: RequestContext, op: Op, resource_type: ResourceType, name: str) -> bool:
    az = ctx.services.authorizer
    if az is None:
        return True
    return az.authorize(ctx.principal, ctx.host, _op(op), resource_type, name)


def authorize_cluster(ctx: RequestContext, op: Op) -> bool:
    return authorize(ctx, op, ResourceType.CLUSTER, CLUSTER_NAME)


def authorize_topic(ctx: RequestContext, op: Op, topic: str) -> bool:
    return authorize(ctx, op, ResourceType.TOPIC, topic)


def authorize_group(ctx: RequestContext, op: Op, group: str) -> bool:
    return authorize(ctx, op, ResourceType.GROUP, group)


def authorize_transactional_id(ctx: RequestContext, op: Op, tid: str) -> bool:
    return authorize(ctx, op, ResourceType.TRANSACTIONAL_ID, tid)


def authorized_topics(ctx: RequestContext, op: Op, topics: Iterable[str]) -> set[str]:
    az = ctx.services.authorizer
    names = set(topics)
    if az is None:
        return names
    o = _op(op)
    return {t for t in names if az.authorize(ctx.principal, ctx.host, o, ResourceType.TOPIC, t)}


def authorize_any(ctx: RequestContext, op: Op, resource_type: ResourceType) -> bool:
    az = ctx.services.authorizer
    if az is None:
        return True
    return az.authorize_any(ctx.principal, ctx.host, _op(op), resource_type)


def authorized_operations(ctx: RequestContext, resource_type: ResourceType, name: str) -> int:
    """A resource's authorized operations as the responses carry them (bit i = AclOperation
    i), as Kafka's AuthHelper.authorizedOperations: of the operations its type supports
    (AclEntry.supportedOperations), those the principal may do; with no authorizer, all."""
    if ctx.services.authorizer is None:
        return _SUPPORTED_BITS[resource_type]
    bits = 0
    for op in SUPPORTED_OPERATIONS[resource_type]:
        if authorize(ctx, op, resource_type, name):
            bits |= 1 << int(op)
    return bits


_SUPPORTED_BITS = {t: sum(1 << int(op) for op in ops) for t, ops in SUPPORTED_OPERATIONS.items()}


# -- whole-request checks, made by the connection before the handler runs (the answer is
# the API's error_response with the code): Kafka's checks that fail a request as a whole

Check = Callable[[RequestContext, Any], "int | None"]
_G, _T, _C = ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, \
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def _group(op: str, code: int = _G) -> Check:
    return lambda ctx, r: None if authorize_group(ctx, op, r.group_id) else code


def _txn(ctx: RequestContext, tid: str | None) -> int | None:
    return None if tid is None or authorize_transactional_id(ctx, "WRITE", tid) else _T


def _cluster(op: str) -> Check:
    return lambda ctx, r: None if authorize_cluster(ctx, op) else _C


def _init_producer_id(ctx: RequestContext, r: Any) -> int | None:
    if r.transactional_id is not None:
        return _txn(ctx, r.transactional_id)
    # KIP-679: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic
    if authorize_cluster(ctx, "IDEMPOTENT_WRITE") or authorize_any(ctx, "WRITE", ResourceType.TOPIC):
        return None
    return _C


def _add_offsets_to_txn(ctx: RequestContext, r: Any) -> int | None:
    return _txn(ctx, r.transactional_id) or (
        None if authorize_group(ctx, "READ", r.group_id) else _G)


def _add_partitions_to_txn(ctx: RequestContext, r: Any) -> int | None:
    if ctx.api_version >= 4:  # batched: sent by brokers (verification)
        return None if authorize_cluster(ctx, "CLUSTER_ACTION") else _C
    return _txn(ctx, r.v3_and_below_transactional_id)


REQUEST_CHECKS: dict[int, Check] = {
    ApiKey.JOIN_GROUP: _group("READ"),
    ApiKey.SYNC_GROUP: _group("READ"),
    ApiKey.HEARTBEAT: _group("READ"),
    ApiKey.LEAVE_GROUP: _group("READ"),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: _group("READ"),
    ApiKey.SHARE_GROUP_HEARTBEAT: _group("READ"),
    # READ on each topic: the handlers; a null group id is the handler's INVALID_REQUEST
    ApiKey.SHARE_FETCH: lambda ctx, r: None if r.group_id is None else _group("READ")(ctx, r),
    ApiKey.SHARE_ACKNOWLEDGE: lambda ctx, r: None if r.group_id is None else _group("READ")(ctx, r),
    ApiKey.OFFSET_COMMIT: _group("READ"),
    ApiKey.OFFSET_DELETE: _group("DELETE"),
    # share-group offsets (KIP-932): the topics (READ) are the handlers'
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: _group("READ"),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: _group("DELETE"),
    ApiKey.TXN_OFFSET_COMMIT: lambda ctx, r: _txn(ctx, r.transactional_id) or (
        None if authorize_group(ctx, "READ", r.group_id) else _G),
    ApiKey.INIT_PRODUCER_ID: _init_producer_id,
    ApiKey.ADD_OFFSETS_TO_TXN: _add_offsets_to_txn,
    ApiKey.ADD_PARTITIONS_TO_TXN: _add_partitions_to_txn,
    ApiKey.END_TXN: lambda ctx, r: _txn(ctx, r.transactional_id),
    ApiKey.DESCRIBE_LOG_DIRS: _cluster("DESCRIBE"),
    ApiKey.ALTER_REPLICA_LOG_DIRS: _cluster("ALTER"),
    ApiKey.ELECT_LEADERS: _cluster("ALTER"),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: _cluster("ALTER"),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: _cluster("DESCRIBE"),
    ApiKey.WRITE_TXN_MARKERS: _cluster("CLUSTER_ACTION"),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: _cluster("DESCRIBE_CONFIGS"),
    ApiKey.ALTER_CLIENT_QUOTAS: _cluster("ALTER_CONFIGS"),
    ApiKey.LIST_CONFIG_RESOURCES: _cluster("DESCRIBE_CONFIGS"),
    ApiKey.LEADER_AND_ISR: _cluster("CLUSTER_ACTION"),
    ApiKey.STOP_REPLICA: _cluster("CLUSTER_ACTION"),
    ApiKey.UPDATE_METADATA: _cluster("CLUSTER_ACTION"),
    ApiKey.CONTROLLED_SHUTDOWN: _cluster("CLUSTER_ACTION"),
    ApiKey.ALTER_PARTITION: _cluster("CLUSTER_ACTION"),
    ApiKey.READ_SHARE_GROUP_STATE: _cluster("CLUSTER_ACTION"),  # a share-partition leader
    ApiKey.WRITE_SHARE_GROUP_STATE: _cluster("CLUSTER_ACTION"),
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: _cluster("CLUSTER_ACTION"),  # a group coordinator
    ApiKey.DELETE_SHARE_GROUP_STATE: _cluster("CLUSTER_ACTION"),
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: _cluster("CLUSTER_ACTION"),
    ApiKey.ENVELOPE: _cluster("CLUSTER_ACTION"),  # a forwarding broker (KIP-590)
}

# APIs whose handlers make Kafka's checks themselves (per topic, group or id), and those
# Kafka does not check. Any API in neither table needs ALTER on the cluster: a new API
# is never open to every principal by omission.
HANDLER_CHECKED = frozenset({
    ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.METADATA, ApiKey.OFFSET_FETCH,
    ApiKey.FIND_COORDINATOR, ApiKey.DESCRIBE_GROUPS, ApiKey.LIST_GROUPS, ApiKey.DELETE_GROUPS,
    ApiKey.CONSUMER_GROUP_DESCRIBE, ApiKey.SHARE_GROUP_DESCRIBE, ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
    ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.DELETE_RECORDS, ApiKey.CREATE_PARTITIONS,
    ApiKey.DESCRIBE_CONFIGS, ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS,
    ApiKey.OFFSET_FOR_LEADER_EPOCH, ApiKey.DESCRIBE_PRODUCERS, ApiKey.DESCRIBE_TRANSACTIONS,
    ApiKey.LIST_TRANSACTIONS, ApiKey.DESCRIBE_TOPIC_PARTITIONS, ApiKey.DESCRIBE_CLUSTER,
    ApiKey.DESCRIBE_ACLS, ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
    ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE,
    # client metrics (KIP-714): any client asks for its subscription and pushes (Kafka's
    # handleGetTelemetrySubscriptionsRequest and handlePushTelemetryRequest authorize nothing)
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY,
})


def request_refusal(ctx: RequestContext, request: Any) -> int | None:
    """The error the whole request gets before its handler runs, or None (ACLs on only)."""
    check = REQUEST_CHECKS.get(ctx.api_key)
    if check is not None:
        return check(ctx, request)
    if ctx.api_key in HANDLER_CHECKED or authorize_cluster(ctx, "ALTER"):
        return None
    return _C


def config_refusal(ctx: RequestContext, resource_type: int, name: str, op: Op) -> int | None:
    """DescribeConfigs (DESCRIBE_CONFIGS), AlterConfigs and IncrementalAlterConfigs
    (ALTER_CONFIGS): a topic's on the topic, a group's on the group, a broker's or broker logger's on the cluster."""
    if resource_type == ResourceType.TOPIC:
        return None if authorize_topic(ctx, op, name) else ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if resource_type == ConfigResourceType.GROUP:
        return None if authorize_group(ctx, op, name) else ErrorCode.GROUP_AUTHORIZATION_FAILED
    return None if authorize_cluster(ctx, op) else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
