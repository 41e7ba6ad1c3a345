"""What ShareFetch and ShareAcknowledge share: the share session a request runs in, and
its acknowledgements applied partition by partition.

A request's acknowledgement batches are checked before any is applied: a type outside
0-3 (4, renew, only with IsRenewAck in v2), overlapping or unordered batches answer
INVALID_REQUEST for that partition; the share partition checks the records themselves
(share_partition.py). Each partition's answer is its own error code, given once its
new state is persisted (in a cluster, by the share coordinator, maybe on another broker:
the answers are then awaited, the state in memory having changed at once).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Iterable
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
    """(leader id, leader epoch) of the partition as the metadata says (in a cluster, a
    client told NOT_LEADER_OR_FOLLOWER goes there), else (-1, -1)."""
    info = ctx.services.topics.get_by_id(topic_id)
    pm = ctx.services.cluster.partition(TopicPartition(info.name, partition)) if info else None
    if pm is None or pm.leader < 0:
        return -1, -1
    return pm.leader, pm.leader_epoch


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
                renew: bool) -> AckResult | Awaitable[AckResult]:
    """Apply every partition's acknowledgement batches; the answer per partition, at once
    or once every partition's state is persisted."""
    manager = share_groups(ctx).partitions
    results: AckResult = {}
    pending: dict[tuple[uuid.UUID, int], Awaitable[tuple[int, str | None]]] = {}
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
            answer = manager.acknowledge(group_id, member_id, topic.topic_id, p.partition_index, batches)
            if isinstance(answer, tuple):
                results[key] = answer
            else:
                pending[key] = answer
    return results if not pending else _persisted(results, pending)


async def _persisted(results: AckResult, pending: dict[tuple[uuid.UUID, int], Awaitable[tuple[int, str | None]]]
                     ) -> AckResult:
    for key, answer in pending.items():
        results[key] = await answer
    return results


async def acks_done(acks: AckResult | Awaitable[AckResult]) -> AckResult:
    return acks if isinstance(acks, dict) else await acks
