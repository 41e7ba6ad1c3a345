"""FindCoordinator (key 10), v0-6: which broker coordinates a group.

key_type 0 (group): the leader of the group's __consumer_offsets partition; key_type 1
(transaction): the leader of the transactional id's __transaction_state partition. On a
single broker both are this one. The topic is created if needed (as Kafka does on first
lookup; in a cluster that takes a moment: COORDINATOR_NOT_AVAILABLE meanwhile, and
while the partition has no leader). v4+ batches keys in `coordinator_keys` (KIP-699).
key_type 2 (share, KIP-932; v6): the share coordinator of a share partition, key
"<group>:<topic id>:<partition>", the leader of its __share_group_state partition
(CLUSTER_ACTION on the cluster, as Kafka: only brokers ask).
"""

from __future__ import annotations

import logging

from kbroker.common.error_code import ErrorCode
from kbroker.common.topic_partition import TopicPartition
from kbroker.coordinator.internal_topic import InternalTopic
from kbroker.protocol.messages.find_coordinator import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from kbroker.server import authorization as authz
from kbroker.server.apis.group_support import coordinator
from kbroker.server.request_context import RequestContext

log = logging.getLogger(__name__)

GROUP, TRANSACTION, SHARE = 0, 1, 2
Coordinator = FindCoordinatorResponse.Coordinator


def handle(ctx: RequestContext, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    key_type = request.key_type if ctx.api_version >= 1 else GROUP
    if ctx.api_version >= 4:
        return FindCoordinatorResponse(
            coordinators=[_find(ctx, key, key_type) for key in request.coordinator_keys])
    c = _find(ctx, request.key, key_type)
    return FindCoordinatorResponse(error_code=c.error_code, error_message=c.error_message,
                                   node_id=c.node_id, host=c.host, port=c.port)


def _find(ctx: RequestContext, key: str, key_type: int) -> Coordinator:
    services = ctx.services
    if key_type == GROUP and not authz.authorize_group(ctx, "DESCRIBE", key):
        return _error(key, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if key_type == TRANSACTION and not authz.authorize_transactional_id(ctx, "DESCRIBE", key):
        return _error(key, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if key_type == SHARE and not authz.authorize_cluster(ctx, "CLUSTER_ACTION"):
        return _error(key, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if key_type == GROUP:
        if coordinator(ctx).loading:
            return _error(key, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        topic: InternalTopic = services.offsets_topic
        ensure_created = topic.ensure_created
    elif key_type == TRANSACTION:
        topic = services.transaction_topic
        ensure_created = services.support.ensure_transaction_topic
    elif key_type == SHARE and ctx.api_version >= 6:
        topic = services.share_groups.state.topic
        ensure_created = topic.ensure_created
    else:
        return _error(key, ErrorCode.INVALID_REQUEST, f"unknown key type {key_type}")
    try:
        created = ensure_created()
    except Exception:
        log.exception("creating %s failed", topic.name)
        return _error(key, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if not created:
        return _error(key, ErrorCode.COORDINATOR_NOT_AVAILABLE, f"the coordinator's topic {topic.name} is being created")
    tp = TopicPartition(topic.name, topic.partition_for(key))
    # The coordinator is the leader of the key's partition (this broker, on a single one).
    pm = services.cluster.partition(tp)
    node = services.cluster.broker(pm.leader) if pm is not None and pm.leader >= 0 else None
    endpoint = node.endpoints.get(ctx.listener_name) if node is not None else None
    if node is None or endpoint is None:
        return _error(key, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                      f"{tp} has no leader at the moment")
    return Coordinator(key=key, node_id=node.broker_id, host=endpoint[0], port=endpoint[1],
                       error_code=ErrorCode.NONE, error_message=None)


def _error(key: str, code: int, message: str | None = None) -> Coordinator:
    return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=code, error_message=message)
