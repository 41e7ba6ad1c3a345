"""Metadata (key 3), v0-13: the brokers, the controller, the cluster id, and topics
with each partition's leader, leader epoch, replicas, ISR and offline replicas.

All of it comes from the ClusterView (server/../cluster/metadata_cache.py): on a single
broker this broker leads everything at epoch 0; in a cluster it is what the
controller last told this broker (UpdateMetadata), so every broker answers alike and
clients follow leadership changes by themselves. Brokers are listed with their
endpoint for the listener the request came in on. A partition without a leader
answers LEADER_NOT_AVAILABLE (leader -1).

Requested topics that do not exist are created when `auto.create.topics.enable` is
on and the request allows it (v4+ flag; always for v0-3), with `num.partitions`
partitions (and `default.replication.factor` replicas in a cluster, where the answer
is LEADER_NOT_AVAILABLE until the controller has elected leaders, as Kafka's);
otherwise UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID for an unknown id, v10+). A
null topic list (v1+) or an empty one (v0) means all topics. A cluster broker answers
only once the controller has described the cluster to it (its first UpdateMetadata,
waited for at most 10 s after a start).

v13 (KIP-1102) adds a top-level error code, through which a broker may tell a client
REBOOTSTRAP_REQUIRED (forget its brokers, start again from bootstrap.servers). Kafka's
brokers answer it NONE; so does kbroker, which never needs a client to rebootstrap.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import cast

from kbroker.common.error_code import ErrorCode
from kbroker.metadata.topic_registry import (
    INTERNAL_TOPICS,
    InvalidTopicError,
    TopicInfo,
    validate_topic_name,
)
from kbroker.protocol.codec import ZERO_UUID, Writer
from kbroker.protocol.messages.metadata import MetadataRequest, MetadataResponse
from kbroker.security.acl import CLUSTER_NAME, ResourceType
from kbroker.server import authorization as authz
from kbroker.server.request_context import RequestContext

log = logging.getLogger(__name__)

Topic = MetadataResponse.MetadataResponseTopic
Partition = MetadataResponse.MetadataResponsePartition

UNSET_OPERATIONS = -(2**31)
READY_WAIT_S = 10.0


def handle(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse | Awaitable[MetadataResponse]:
    if not ctx.services.support.metadata_ready():
        return _when_ready(ctx, request)
    return _answer(ctx, request)


async def _when_ready(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
    """A cluster broker that has not heard from the controller yet knows no brokers, no
    controller and no topics: the answer waits (at most READY_WAIT_S) for the controller's
    first UpdateMetadata instead of sending a client away with an empty cluster."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + READY_WAIT_S
    support = ctx.services.support
    while not support.metadata_ready() and loop.time() < deadline:
        await support.metadata_changed(deadline - loop.time())
    return _answer(ctx, request)


def _answer(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
    services = ctx.services
    version = ctx.api_version
    brokers = [
        MetadataResponse.MetadataResponseBroker(node_id=node.broker_id, host=endpoint[0],
                                                port=endpoint[1], rack=node.rack)
        for node in services.cluster.listed_brokers()
        if (endpoint := node.endpoints.get(ctx.listener_name)) is not None
    ]
    want_ops = version >= 8 and request.include_topic_authorized_operations
    if request.topics is None or (version == 0 and not request.topics):
        every = sorted(services.topics, key=_name)
        if authz.enabled(ctx):  # all topics: those the principal may describe
            visible = authz.authorized_topics(ctx, "DESCRIBE", (i.name for i in every))
            every = [i for i in every if i.name in visible]
        topics = [_describe(ctx, info, want_ops) for info in every]
    else:
        allow_create = request.allow_auto_topic_creation if version >= 4 else True
        topics = [_requested(ctx, t, allow_create, want_ops) for t in request.topics]
    cluster_ops = UNSET_OPERATIONS
    if 8 <= version <= 10 and request.include_cluster_authorized_operations:
        cluster_ops = authz.authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)
    return MetadataResponse(
        brokers=brokers,
        cluster_id=services.cluster_id,
        controller_id=services.cluster.controller_id,
        topics=topics,
        cluster_authorized_operations=cluster_ops,
    )


def _name(info: TopicInfo) -> str:
    return info.name


def _requested(
    ctx: RequestContext, t: MetadataRequest.MetadataRequestTopic, allow_create: bool, want_ops: bool
) -> Topic:
    services = ctx.services
    if t.name is None:
        info = services.topics.get_by_id(t.topic_id) if t.topic_id != ZERO_UUID else None
        if info is None or not authz.authorize_topic(ctx, "DESCRIBE", info.name):
            return Topic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=t.topic_id)
        return _describe(ctx, info, want_ops)
    info = services.topics.get(t.name)
    if not authz.authorize_topic(ctx, "DESCRIBE", t.name):
        return Topic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=t.name)
    if info is not None:
        return _describe(ctx, info, want_ops)
    try:
        validate_topic_name(t.name)
    except InvalidTopicError:
        return Topic(error_code=ErrorCode.INVALID_TOPIC_EXCEPTION, name=t.name)
    creatable = allow_create and t.name not in INTERNAL_TOPICS  # internal topics: by their coordinator
    if creatable and services.config.auto_create_topics_enable and not services.shutting_down():
        if not (authz.authorize_cluster(ctx, "CREATE") or authz.authorize_topic(ctx, "CREATE", t.name)):
            return Topic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=t.name)
        try:
            created = services.topic_admin.auto_create_topic(t.name)
        except Exception:
            log.exception("auto-creating topic %s failed", t.name)
            return Topic(error_code=ErrorCode.UNKNOWN_SERVER_ERROR, name=t.name)
        if created is None:  # a cluster creates it in the background
            return Topic(error_code=ErrorCode.LEADER_NOT_AVAILABLE, name=t.name)
        return _describe(ctx, created, want_ops)
    return Topic(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=t.name)


def _describe(ctx: RequestContext, info: TopicInfo, want_ops: bool) -> Topic:
    """The topic's entry; encoded once per (topic state, version) and reused while all its
    partitions are online: a full Metadata of 100,000 partitions then costs one copy per
    topic instead of building and encoding 100,000 entries."""
    if want_ops and authz.enabled(ctx):  # the operations depend on who asks: not cached
        return _build(ctx, info, want_ops)
    state = (info.topic_id, info.partitions, bool(info.is_internal), ctx.services.cluster.version)
    cache = ctx.services.metadata_topic_cache
    slot = (info.name, ctx.api_version, want_ops)
    cached = cache.get(slot)
    if cached is None or cached.state != state:
        w = Writer()
        _build(ctx, info, want_ops).encode(w, ctx.api_version)
        cached = cache[slot] = EncodedTopic(state, w.to_bytes())
        if len(cache) > 8 * len(ctx.services.topics) + 64:  # drop deleted topics' entries
            for stale in [k for k in cache if ctx.services.topics.get(k[0]) is None]:
                del cache[stale]
    return cast(Topic, cached)


class EncodedTopic:
    """A topic entry of the Metadata response, already encoded; written as it is."""

    __slots__ = ("state", "data")

    def __init__(self, state: tuple[object, ...], data: bytes | bytearray) -> None:
        self.state = state  # what the entry was encoded from: any change re-encodes it
        self.data = data

    def encode(self, w: Writer, version: int) -> None:
        w.raw(self.data)


def _build(ctx: RequestContext, info: TopicInfo, want_ops: bool) -> Topic:
    partitions = [
        Partition(
            error_code=ErrorCode.NONE if pm.leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
            partition_index=pm.partition,
            leader_id=pm.leader,
            leader_epoch=pm.leader_epoch,
            replica_nodes=list(pm.replicas),
            isr_nodes=list(pm.isr),
            offline_replicas=list(pm.offline_replicas),
        )
        for pm in ctx.services.cluster.partitions(info)
    ]
    return Topic(
        error_code=ErrorCode.NONE,
        name=info.name,
        topic_id=info.topic_id,
        is_internal=info.is_internal,
        partitions=partitions,
        topic_authorized_operations=authz.authorized_operations(ctx, ResourceType.TOPIC, info.name)
        if want_ops else UNSET_OPERATIONS,
    )
