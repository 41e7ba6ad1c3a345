"""The authorization checks request handlers make, as Kafka's KafkaApis/AuthHelper.

With no authorizer (authorizer.class.name empty) every check passes. Otherwise the
broker's AclAuthorizer decides for the connection's principal and host.
"""

from __future__ import annotations

from collections.abc import Iterable

from kbroker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from kbroker.server.request_context import RequestContext

Op = AclOperation | str


def _op(op: Op) -> AclOperation:
    return AclOperation[op] if isinstance(op, str) else op


def enabled(ctx: RequestContext) -> bool:
    return ctx.broker.authorizer is not None


def authorize(ctx: RequestContext, op: Op, resource_type: ResourceType, name: str) -> bool:
    az = ctx.broker.authorizer
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
    az = ctx.broker.authorizer
    names = set(topics)
    if az is None:
        return names
    o = _op(op)
    return {t for t in names if az.authorize(ctx.principal, ctx.host, o, ResourceType.TOPIC, t)}


def authorize_any(ctx: RequestContext, op: Op, resource_type: ResourceType) -> bool:
    az = ctx.broker.authorizer
    if az is None:
        return True
    return az.authorize_any(ctx.principal, ctx.host, _op(op), resource_type)


# the operations Kafka reports as a resource type's authorized operations (bit i = op i)
def authorized_operations(ctx: RequestContext, resource_type: ResourceType, name: str) -> int:
    from kbroker.security.acl import SUPPORTED_OPERATIONS

    bits = 0
    for op in SUPPORTED_OPERATIONS[resource_type]:
        if authorize(ctx, op, resource_type, name):
            bits |= 1 << int(op)
    return bits
