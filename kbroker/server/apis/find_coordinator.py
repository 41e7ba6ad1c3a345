"""FindCoordinator (key 10), v0-6: which broker coordinates a group.

key_type 0 (group): the leader of the group's __consumer_offsets partition (on a
single broker, this one), after creating the topic if needed (as Kafka does on first
lookup; in a cluster that takes a moment: COORDINATOR_NOT_AVAILABLE meanwhile, and
while the partition has no leader). key_type 1 (transaction):
COORDINATOR_NOT_AVAILABLE until transactions exist. v4+ batches keys in
`coordinator_keys` (KIP-699).
"""

from __future__ import annotations

import logging

from kbroker.common.error_code import ErrorCode
from kbroker.common.topic_partition import TopicPartition
from kbroker.coordinator.offsets_topic import GROUP_METADATA_TOPIC_NAME
from kbroker.protocol.messages.find_coordinator import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from kbroker.server.apis.group_support import coordinator
from kbroker.server.request_context import RequestContext

log = logging.getLogger(__name__)

GROUP, TRANSACTION = 0, 1
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
    broker = ctx.broker
    if key_type == GROUP:
        coord = coordinator(ctx)
        if coord.loading:
            return _error(key, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        try:
            created = broker.offsets_topic.ensure_created()
        except Exception:
            log.exception("creating __consumer_offsets failed")
            return _error(key, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not created:
            return _error(key, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                          "the group coordinator's topic __consumer_offsets is being created")
        tp = TopicPartition(GROUP_METADATA_TOPIC_NAME, broker.offsets_topic.partition_for(key))
    elif key_type == TRANSACTION:
        return _error(key, ErrorCode.COORDINATOR_NOT_AVAILABLE, "transactions are not supported yet")
    else:
        return _error(key, ErrorCode.INVALID_REQUEST, f"unknown key type {key_type}")
    # The coordinator is the leader of the key's partition (this broker, on a single one).
    pm = broker.cluster.partition(tp)
    node = broker.cluster.broker(pm.leader) if pm is not None and pm.leader >= 0 else None
    endpoint = node.endpoints.get(ctx.listener_name) if node is not None else None
    if node is None or endpoint is None:
        return _error(key, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                      f"{tp} has no leader at the moment")
    return Coordinator(key=key, node_id=node.broker_id, host=endpoint[0], port=endpoint[1],
                       error_code=ErrorCode.NONE, error_message=None)


def _error(key: str, code: int, message: str | None = None) -> Coordinator:
    return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=code, error_message=message)
