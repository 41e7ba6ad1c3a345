"""AlterPartition (key 56), v0-3, cluster mode, answered by the controller: a partition
leader's ISR change (KIP-497). Checked against the leader, the leader epoch (older:
FENCED_LEADER_EPOCH) and the partition epoch (INVALID_UPDATE_VERSION), new members must
be alive (INELIGIBLE_REPLICA); the answer carries the state written. NOT_CONTROLLER on
any other broker.
"""

from __future__ import annotations

import uuid

from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.common.topic_partition import TopicPartition
from kbroker.protocol.codec import ZERO_UUID
from kbroker.protocol.messages.alter_partition import AlterPartitionRequest, AlterPartitionResponse
from kbroker.server.metadata_support import ZkRequired
from kbroker.server.request_context import RequestContext

TopicData = AlterPartitionResponse.TopicData
PartitionData = AlterPartitionResponse.PartitionData


async def handle(ctx: RequestContext, request: AlterPartitionRequest) -> AlterPartitionResponse:
    services = ctx.services
    try:
        zk = services.support.require_zk()
    except ZkRequired:
        return error_response(request, ctx.api_version, ErrorCode.NOT_CONTROLLER)
    version = ctx.api_version
    items = []
    names: dict[str, uuid.UUID] = {}
    for t in request.topics:
        name = t.topic_name
        if version >= 2:
            info = services.topics.get_by_id(t.topic_id)
            name = info.name if info is not None else ""
        names[name] = t.topic_id if version >= 2 else ZERO_UUID
        for p in t.partitions:
            isr = (tuple(b.broker_id for b in p.new_isr_with_epochs) if version >= 3
                   else tuple(p.new_isr))
            items.append((TopicPartition(name, p.partition_index), p.leader_epoch,
                          p.partition_epoch, isr))
    try:
        results = await zk.controller.alter_partition(request.broker_id,
                                                     request.broker_epoch, items)
    except KafkaError as e:
        return error_response(request, version, e.error_code)
    by_topic: dict[str, list[PartitionData]] = {}
    for tp, (code, state) in results.items():
        pd = PartitionData(partition_index=tp.partition, error_code=code, leader_id=-1,
                           leader_epoch=-1, isr=[], partition_epoch=-1)
        if code == ErrorCode.NONE and state is not None:
            pd.leader_id, pd.leader_epoch = state.leader, state.leader_epoch
            pd.isr, pd.partition_epoch = list(state.isr), state.zk_version
        by_topic.setdefault(tp.topic, []).append(pd)
    return AlterPartitionResponse(error_code=ErrorCode.NONE, topics=[
        TopicData(topic_name=name, topic_id=names.get(name, ZERO_UUID), partitions=parts)
        for name, parts in by_topic.items()])


def error_response(request: AlterPartitionRequest, version: int, code: int) -> AlterPartitionResponse:
    return AlterPartitionResponse(error_code=code, topics=[])
