"""LeaderAndIsr (key 4), v0-7, cluster mode only: the controller tells this broker which
of its replicas lead and which follow, at which leader epoch (ReplicaManager.
become_leader_or_follower).

Refused as a whole with STALE_CONTROLLER_EPOCH from an older controller and
STALE_BROKER_EPOCH when it was meant for an earlier life of this broker (before its
last ZooKeeper registration); per partition, a state that is not newer than the one
held is STALE_CONTROLLER_EPOCH, a partition not assigned here
UNKNOWN_TOPIC_OR_PARTITION. v5+ names topics by id in the answer.
"""

from __future__ import annotations

from kbroker.cluster.partition import PartitionState
from kbroker.cluster.replica_manager import LeaderAndIsrPartition
from kbroker.common.error_code import ErrorCode
from kbroker.common.topic_partition import TopicPartition
from kbroker.protocol.codec import ZERO_UUID
from kbroker.protocol.messages.leader_and_isr import LeaderAndIsrRequest, LeaderAndIsrResponse
from kbroker.server.metadata_support import ZkRequired
from kbroker.server.request_context import RequestContext

TopicError = LeaderAndIsrResponse.LeaderAndIsrTopicError
PartitionError = LeaderAndIsrResponse.LeaderAndIsrPartitionError


async def handle(ctx: RequestContext, request: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
    rm = ctx.services.replica_manager
    try:
        zk = ctx.services.support.require_zk()
    except ZkRequired:
        return error_response(request, ctx.api_version, ErrorCode.STALE_CONTROLLER_EPOCH)
    if 0 <= request.broker_epoch < rm.broker_epoch:
        return error_response(request, ctx.api_version, ErrorCode.STALE_BROKER_EPOCH)
    for leader in request.live_leaders:
        zk.record_live_leader(leader.broker_id, leader.host_name, leader.port)
    items = []
    topic_ids = {}
    for ts, p in _states(request, ctx.api_version):
        topic_id = ts.topic_id if ts is not None and ts.topic_id != ZERO_UUID else None
        name = ts.topic_name if ts is not None else p.topic_name
        topic_ids[name] = ts.topic_id if ts is not None else ZERO_UUID
        items.append(LeaderAndIsrPartition(
            TopicPartition(name, p.partition_index), topic_id,
            PartitionState(p.leader, p.leader_epoch, tuple(p.isr), tuple(p.replicas),
                           p.partition_epoch, p.controller_epoch, tuple(p.adding_replicas),
                           tuple(p.removing_replicas)), p.is_new))
    result = await rm.become_leader_or_follower(request.controller_id, request.controller_epoch, items)
    if ctx.api_version < 5:
        return LeaderAndIsrResponse(error_code=ErrorCode.NONE, partition_errors=[
            PartitionError(topic_name=tp.topic, partition_index=tp.partition, error_code=code)
            for tp, code in result.errors.items()])
    by_topic: dict[str, list[PartitionError]] = {}
    for tp, code in result.errors.items():
        by_topic.setdefault(tp.topic, []).append(
            PartitionError(partition_index=tp.partition, error_code=code))
    return LeaderAndIsrResponse(error_code=ErrorCode.NONE, topics=[
        TopicError(topic_id=topic_ids.get(t, ZERO_UUID), partition_errors=errs)
        for t, errs in by_topic.items()])


def _states(request: LeaderAndIsrRequest, version: int) -> list[
        tuple[LeaderAndIsrRequest.LeaderAndIsrTopicState | None,
              LeaderAndIsrRequest.LeaderAndIsrPartitionState]]:
    if version < 2:
        return [(None, p) for p in request.ungrouped_partition_states]
    return [(ts, p) for ts in request.topic_states for p in ts.partition_states]


def error_response(request: LeaderAndIsrRequest, version: int, code: int) -> LeaderAndIsrResponse:
    return LeaderAndIsrResponse(error_code=code, partition_errors=[], topics=[])
