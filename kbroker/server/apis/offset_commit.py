"""OffsetCommit (key 8), v2-10: committed offsets go to __consumer_offsets, then memory.

Group members commit with their generation (v9: generation_id_or_member_epoch, the
generation for classic groups, the member epoch for KIP-848 consumer groups:
STALE_MEMBER_EPOCH / FENCED_MEMBER_EPOCH); generation -1 with an empty member id is a
"simple" commit, allowed while the group has no members. v2-4 retention_time_ms
gives the offset an explicit expire timestamp; v6+ keeps committed_leader_epoch;
the metadata string is stored as sent (OFFSET_METADATA_TOO_LARGE above
offset.metadata.max.bytes). In a cluster the answer waits until the commit is
replicated to the ISR of the group's __consumer_offsets partition, so a coordinator
failover never loses an acknowledged commit. v10 (KIP-848, Kafka 4.0) names topics by
id only: an id no topic has answers UNKNOWN_TOPIC_ID for its partitions, as
KafkaApis.handleOffsetCommitRequest; the answer names them by id too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

from kbroker.common.error_code import ErrorCode
from kbroker.coordinator.group_metadata import OffsetAndMetadata
from kbroker.protocol.codec import ZERO_UUID
from kbroker.protocol.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from kbroker.server import authorization as authz
from kbroker.server.apis.group_support import commit_timeout_s, coordinator
from kbroker.server.request_context import RequestContext

P = TypeVar("P")
Topic = OffsetCommitResponse.OffsetCommitResponseTopic
Partition = OffsetCommitResponse.OffsetCommitResponsePartition


def handle(ctx: RequestContext, request: OffsetCommitRequest
           ) -> OffsetCommitResponse | Awaitable[OffsetCommitResponse]:
    version = ctx.api_version
    services = ctx.services
    now = services.time.milliseconds()
    retention = request.retention_time_ms if 2 <= version <= 4 else -1
    expire = now + retention if retention >= 0 else -1
    names = topic_names(ctx, request.topics)
    known = [(name, t.partitions) for name, t in zip(names, request.topics, strict=True) if name is not None]
    errors, offsets = requested_offsets(ctx, known, lambda p: (
        OffsetAndMetadata(p.committed_offset, p.committed_leader_epoch if version >= 6 else -1,
                          p.committed_metadata or "", now, expire)))
    if offsets:
        instance_id = request.group_instance_id if version >= 7 else None
        errors.update(coordinator(ctx).commit_offsets(
            request.group_id, request.member_id, instance_id,
            request.generation_id_or_member_epoch, offsets, version))
        if any(errors.get(tp, ErrorCode.NONE) == ErrorCode.NONE for tp in offsets):
            waited = services.offsets_topic.wait_group_replicated(request.group_id, commit_timeout_s(services))
            if waited is not None:
                return _after_replication(request, names, errors, waited)
    return _response(request, names, lambda tp: errors.get(tp, ErrorCode.NONE))


def topic_names(ctx: RequestContext, topics: Iterable[Any]) -> list[str | None]:
    """The name of each topic of a request; from v10 requests name topics by id (None: an
    id no topic has, or the zero id)."""
    if ctx.api_version < 10:
        return [t.name for t in topics]
    by_id = ctx.services.topics.get_by_id
    return [None if (info := by_id(t.topic_id) if t.topic_id != ZERO_UUID else None) is None
            else info.name for t in topics]


def requested_offsets(ctx: RequestContext, topics: list[tuple[str, list[P]]],
                      offset_of: Callable[[P], OffsetAndMetadata]
                      ) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], OffsetAndMetadata]]:
    """The offsets of a commit request by partition, and UNKNOWN_TOPIC_OR_PARTITION for the
    partitions that do not exist."""
    errors: dict[tuple[str, int], int] = {}
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    readable = authz.authorized_topics(ctx, "READ", (name for name, _p in topics))
    for name, partitions in topics:
        info = ctx.services.topics.get(name)
        for p in partitions:
            index = p.partition_index  # type: ignore[attr-defined]
            if name not in readable:
                errors[(name, index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif info is None or not 0 <= index < info.partitions:
                errors[(name, index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                offsets[(name, index)] = offset_of(p)
    return errors, offsets


async def _after_replication(request: OffsetCommitRequest, names: list[str | None],
                             errors: dict[tuple[str, int], int], waited: Awaitable[int]
                             ) -> OffsetCommitResponse:
    """Cluster mode: the commit is acknowledged once replicated (acks=all, as Kafka's);
    a failed wait maps as Kafka maps its append errors for offset commits."""
    code = await waited
    all_tps = [(name, p.partition_index) for name, t in zip(names, request.topics, strict=True)
               if name is not None for p in t.partitions]
    errors = replication_errors(code, errors, all_tps)
    return _response(request, names, lambda tp: errors.get(tp, ErrorCode.NONE))


def replication_errors(code: int, errors: dict[tuple[str, int], int],
                       partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """The partitions' errors once the replication wait ended with `code`: a failure fails
    the partitions that had none, mapped as Kafka maps its append errors for commits."""
    if code == ErrorCode.NONE:
        return errors
    mapped = (ErrorCode.NOT_COORDINATOR if code == ErrorCode.NOT_LEADER_OR_FOLLOWER
              else ErrorCode.COORDINATOR_NOT_AVAILABLE)
    out = {tp: (mapped if e == ErrorCode.NONE else e) for tp, e in errors.items()}
    for tp in partitions:
        out.setdefault(tp, mapped)
    return out


def _response(request: OffsetCommitRequest, names: list[str | None],
              error_of: Callable[[tuple[str, int]], int]) -> OffsetCommitResponse:
    return OffsetCommitResponse(topics=[
        Topic(name=t.name, topic_id=t.topic_id, partitions=[
            Partition(partition_index=p.partition_index,
                      error_code=ErrorCode.UNKNOWN_TOPIC_ID if name is None
                      else error_of((name, p.partition_index)))
            for p in t.partitions])
        for name, t in zip(names, request.topics, strict=True)])


def error_response(request: OffsetCommitRequest, version: int, code: int) -> OffsetCommitResponse:
    return _response(request, [t.name or "" for t in request.topics], lambda tp: code)
