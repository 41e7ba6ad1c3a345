"""What ShareFetch and ShareAcknowledge share: the share session a request runs in, and
its acknowledgements applied partition by partition.

A request's acknowledgement batches are checked before any is applied: a type outside
0-3 (4, renew, only with IsRenewAck in v2), overlapping or unordered batches answer
INVALID_REQUEST for that partition; the share partition checks the records themselves
(share_partition.py). Each partition's answer is its own error code.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from kbroker.common.error_code import ErrorCode
from kbroker.common.topic_partition import TopicPartition
from kbroker.coordinator.share_partition import AckBatch, AcknowledgeType
from kbroker.server import authorization as authz
from kbroker.server.request_context import RequestContext
from kbroker.server.share_groups import ShareGroups

E = ErrorCode
AckResult = dict[tuple[uuid.UUID, int], tuple[int, str | None]]


def share_groups(ctx: RequestContext) -> ShareGroups:
    groups: ShareGroups = ctx.services.share_groups
    return groups


def topic_readable(ctx: RequestContext, topic_id: uuid.UUID) -> int:
    """NONE, UNKNOWN_TOPIC_ID, or TOPIC_AUTHORIZATION_FAILED (READ on the topic)."""
    info = ctx.services.topics.get_by_id(topic_id)
    if info is None:
        return E.UNKNOWN_TOPIC_ID
    return E.NONE if authz.authorize_topic(ctx, "READ", info.name) else E.TOPIC_AUTHORIZATION_FAILED


def current_leader(ctx: RequestContext, topic_id: uuid.UUID, partition: int) -> tuple[int, int]:
    """(leader id, leader epoch) of a partition led here, else (-1, -1)."""
    info = ctx.services.topics.get_by_id(topic_id)
    p = ctx.services.replica_manager.get_partition(TopicPartition(info.name, partition)) if info else None
    if p is None:
        return -1, -1
    return ctx.services.node_id, p.leader_epoch


def _batches(raw: Iterable[Any], renew: bool) -> list[AckBatch] | None:
    out: list[AckBatch] = []
    top = AcknowledgeType.RENEW if renew else AcknowledgeType.REJECT
    last = -1
    for b in raw:
        if b.first_offset <= last or b.last_offset < b.first_offset:
            return None
        if any(not 0 <= t <= top for t in b.acknowledge_types):
            return None
        out.append(AckBatch(b.first_offset, b.last_offset, list(b.acknowledge_types)))
        last = b.last_offset
    return out


def acknowledge(ctx: RequestContext, group_id: str, member_id: str, topics: Iterable[Any],
                renew: bool) -> AckResult:
    """Apply every partition's acknowledgement batches; the answer per partition."""
    manager = share_groups(ctx).partitions
    results: AckResult = {}
    for topic in topics:
        readable = topic_readable(ctx, topic.topic_id)
        for p in topic.partitions:
            if not p.acknowledgement_batches:
                continue
            key = (topic.topic_id, p.partition_index)
            if readable != E.NONE:
                results[key] = (readable, None)
                continue
            batches = _batches(p.acknowledgement_batches, renew)
            if batches is None:
                results[key] = (E.INVALID_REQUEST, "Invalid acknowledgement batches.")
                continue
            results[key] = manager.acknowledge(group_id, member_id, topic.topic_id, p.partition_index, batches)
    return results
