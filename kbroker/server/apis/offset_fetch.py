"""OffsetFetch (key 9), v1-10: committed offsets of a group (v8+: of several groups).

A partition without a committed offset answers offset -1, empty metadata and
leader epoch -1. A null topic list (v2+) means every offset the group has. Offsets
committed in a transaction in progress are not visible; with require_stable (v7+) a
partition that has one answers UNSTABLE_OFFSET_COMMIT (offset -1), so a consumer of an
exactly-once pipeline waits until the transaction ends instead of reading an old offset.
v9: a KIP-848 consumer group's member fetches with its member id and epoch
(UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH as Kafka's validateOffsetFetch).
v10 (KIP-848, Kafka 4.0) names topics by id only: an id no topic has answers
UNKNOWN_TOPIC_ID for the partitions asked, and a group's offsets of a topic that no longer
exists (no id to name it by) are left out of an all-topics answer, as KafkaApis does.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kbroker.common.error_code import ErrorCode
from kbroker.coordinator.group_metadata import OffsetAndMetadata
from kbroker.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from kbroker.server import authorization as authz
from kbroker.server.apis.group_support import coordinator
from kbroker.server.apis.offset_commit import topic_names
from kbroker.server.request_context import RequestContext

R = OffsetFetchResponse
Offsets = dict[tuple[str, int], OffsetAndMetadata | None]


def handle(ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    coord = coordinator(ctx)
    stable = ctx.api_version >= 7 and request.require_stable
    if ctx.api_version >= 8:
        groups = []
        for g in request.groups:
            names = [] if g.topics is None else topic_names(ctx, g.topics)
            wanted = None if g.topics is None else _wanted(
                (name, t.partition_indexes) for name, t in zip(names, g.topics, strict=True) if name is not None)
            err, offsets, denied = _fetch(ctx, g.group_id, wanted)
            if err == ErrorCode.NONE and ctx.api_version >= 9:
                err = coord.consumer.check_fetch(g.group_id, g.member_id, g.member_epoch)
                offsets = {} if err != ErrorCode.NONE else offsets
            unstable = coord.unstable_offsets(g.group_id) if stable and err == ErrorCode.NONE else set()
            answered = [R.OffsetFetchResponseTopics(name=name, partitions=[
                R.OffsetFetchResponsePartitions(partition_index=p, **_partition(
                    name, p, om, unstable, _DENIED if (name, p) in denied else ErrorCode.NONE))
                for p, om in parts])
                for name, parts in _by_topic(offsets)]
            if ctx.api_version >= 10:
                unknown = [t for name, t in zip(names, g.topics or (), strict=True) if name is None]
                answered = _by_id(ctx, answered, unknown, err)
            groups.append(R.OffsetFetchResponseGroup(group_id=g.group_id, error_code=err, topics=answered))
        return OffsetFetchResponse(groups=groups)
    topics = request.topics
    wanted = None if topics is None else _wanted((t.name, t.partition_indexes) for t in topics)
    err, offsets, denied = _fetch(ctx, request.group_id, wanted)
    if err != ErrorCode.NONE and ctx.api_version < 2:
        offsets = dict.fromkeys(wanted or (), None)
    unstable = coord.unstable_offsets(request.group_id) if stable and err == ErrorCode.NONE else set()
    return OffsetFetchResponse(error_code=err, topics=[
        R.OffsetFetchResponseTopic(name=name, partitions=[
            R.OffsetFetchResponsePartition(
                partition_index=p, **_partition(
                    name, p, om, unstable, _DENIED if (name, p) in denied
                    else err if ctx.api_version < 2 else ErrorCode.NONE))
            for p, om in parts])
        for name, parts in _by_topic(offsets)])


_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED


def _by_id(ctx: RequestContext, topics: list[R.OffsetFetchResponseTopics], unknown: list[Any],
           err: int) -> list[R.OffsetFetchResponseTopics]:
    """v10: each answered topic with its id (one without: left out), then the ids asked for
    that no topic has, their partitions UNKNOWN_TOPIC_ID (the group's error, if it has one)."""
    out = []
    for t in topics:
        info = ctx.services.topics.get(t.name)
        if info is not None:
            t.topic_id = info.topic_id
            out.append(t)
    if err != ErrorCode.NONE:
        return out
    for t in unknown:
        out.append(R.OffsetFetchResponseTopics(topic_id=t.topic_id, partitions=[
            R.OffsetFetchResponsePartitions(partition_index=p, error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                                            **_fields(None)) for p in t.partition_indexes]))
    return out


def _fetch(ctx: RequestContext, group_id: str, wanted: list[tuple[str, int]] | None
           ) -> tuple[int, dict[tuple[str, int], Any], set[tuple[str, int]]]:
    """The group's offsets as the principal may see them (Kafka's checks: DESCRIBE on the
    group, else GROUP_AUTHORIZATION_FAILED; DESCRIBE on each topic: partitions asked for
    get TOPIC_AUTHORIZATION_FAILED, all partitions leave them out), and the denied ones."""
    if not authz.authorize_group(ctx, "DESCRIBE", group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, {}, set()
    err, offsets = coordinator(ctx).fetch_offsets(group_id, wanted)
    if not authz.enabled(ctx):
        return err, offsets, set()
    visible = authz.authorized_topics(ctx, "DESCRIBE", {name for name, _p in offsets})
    denied = {tp for tp in offsets if tp[0] not in visible}
    if wanted is None:
        return err, {tp: om for tp, om in offsets.items() if tp not in denied}, set()
    return err, {tp: (None if tp in denied else om) for tp, om in offsets.items()}, denied


def _wanted(topics: Iterable[tuple[str, list[int]]]) -> list[tuple[str, int]]:
    return [(name, p) for name, parts in topics for p in parts]


def _by_topic(offsets: Offsets) -> list[tuple[str, list[tuple[int, OffsetAndMetadata | None]]]]:
    out: dict[str, list[tuple[int, OffsetAndMetadata | None]]] = {}
    for (topic, p), om in offsets.items():
        out.setdefault(topic, []).append((p, om))
    return [(t, sorted(parts, key=lambda x: x[0])) for t, parts in out.items()]


def _partition(topic: str, partition: int, om: OffsetAndMetadata | None, unstable: set[tuple[str, int]],
               error: int = ErrorCode.NONE) -> dict[str, Any]:
    if (topic, partition) in unstable:
        return {"error_code": ErrorCode.UNSTABLE_OFFSET_COMMIT, **_fields(None)}
    return {"error_code": error, **_fields(om)}


def _fields(om: OffsetAndMetadata | None) -> dict[str, Any]:
    if om is None:
        return {"committed_offset": -1, "committed_leader_epoch": -1, "metadata": ""}
    return {"committed_offset": om.offset, "committed_leader_epoch": om.leader_epoch,
            "metadata": om.metadata}


def error_response(request: OffsetFetchRequest, version: int, code: int) -> OffsetFetchResponse:
    if version >= 8:
        return OffsetFetchResponse(groups=[R.OffsetFetchResponseGroup(group_id=g.group_id, error_code=code)
                                           for g in request.groups])
    return OffsetFetchResponse(error_code=code)
