"""UpdateMetadata (key 6), v0-8, cluster mode only: the controller's view of the cluster
(live brokers with their endpoints and racks, every partition's leader, epoch, replicas,
ISR and offline replicas) for this broker's ZkMetadataCache, from which Metadata,
FindCoordinator and DescribeCluster answer. Partitions whose leader is -2 are deleted.
The first one after a start also names every partition that exists: local logs of
topics the cluster no longer has (deleted while this broker was down) are removed then.

STALE_CONTROLLER_EPOCH from an older controller, STALE_BROKER_EPOCH for an earlier life
of this broker.
"""

from __future__ import annotations

import logging

from kbroker.cluster.metadata_cache import BrokerNode, PartitionMetadata
from kbroker.common.error_code import ErrorCode
from kbroker.protocol.codec import ZERO_UUID
from kbroker.protocol.messages.update_metadata import UpdateMetadataRequest, UpdateMetadataResponse
from kbroker.server.metadata_support import ZkRequired
from kbroker.server.request_context import RequestContext

log = logging.getLogger(__name__)


def handle(ctx: RequestContext, request: UpdateMetadataRequest) -> UpdateMetadataResponse:
    services = ctx.services
    try:
        zk = services.support.require_zk()
    except ZkRequired:
        return UpdateMetadataResponse(error_code=ErrorCode.STALE_CONTROLLER_EPOCH)
    cache = zk.metadata_cache
    if request.controller_epoch < cache.controller_epoch:
        return UpdateMetadataResponse(error_code=ErrorCode.STALE_CONTROLLER_EPOCH)
    if 0 <= request.broker_epoch < services.replica_manager.broker_epoch:
        return UpdateMetadataResponse(error_code=ErrorCode.STALE_BROKER_EPOCH)
    version = ctx.api_version
    brokers = [BrokerNode(b.id, _endpoints(b, version), b.rack) for b in request.live_brokers]
    topics: dict[str, tuple[object, list[PartitionMetadata]]] = {}
    states = ([(None, p) for p in request.ungrouped_partition_states] if version < 5 else
              [(ts, p) for ts in request.topic_states for p in ts.partition_states])
    for ts, p in states:
        name = ts.topic_name if ts is not None else p.topic_name
        topic_id = ts.topic_id if ts is not None and version >= 7 and ts.topic_id != ZERO_UUID else None
        entry = topics.setdefault(name, (topic_id, []))
        entry[1].append(PartitionMetadata(
            p.partition_index, p.leader, p.leader_epoch, tuple(p.replicas), tuple(p.isr),
            tuple(p.offline_replicas) if version >= 4 else (), p.zk_version))
    deleted = cache.update(request.controller_id, request.controller_epoch, brokers,
                           [(name, tid, parts) for name, (tid, parts) in topics.items()])  # type: ignore[misc]
    for topic in deleted:
        services.group_coordinator.on_topic_deleted(topic)
        services.topic_stats.remove_topic(topic)
    zk.on_metadata_update()
    return UpdateMetadataResponse(error_code=ErrorCode.NONE)


def _endpoints(b: UpdateMetadataRequest.UpdateMetadataBroker, version: int) -> dict[str, tuple[str, int]]:
    if version == 0:
        return {"PLAINTEXT": (b.v0_host, b.v0_port)}
    return {(e.listener if version >= 3 else "PLAINTEXT").upper(): (e.host, e.port) for e in b.endpoints}


def error_response(request: UpdateMetadataRequest, version: int, code: int) -> UpdateMetadataResponse:
    return UpdateMetadataResponse(error_code=code)
