"""ControlledShutdown (key 7), v0-3, cluster mode, answered by the controller: a broker
about to stop asks for its leaderships to move to other ISR members first; the answer
lists the partitions it still leads (it retries while there are some). NOT_CONTROLLER
on any other broker; STALE_BROKER_EPOCH for an earlier life of the asking broker.
"""

from __future__ import annotations

from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.protocol.messages.controlled_shutdown import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
)
from kbroker.server.metadata_support import ZkRequired
from kbroker.server.request_context import RequestContext

Remaining = ControlledShutdownResponse.RemainingPartition


async def handle(ctx: RequestContext, request: ControlledShutdownRequest) -> ControlledShutdownResponse:
    try:
        zk = ctx.services.support.require_zk()
    except ZkRequired:
        return error_response(request, ctx.api_version, ErrorCode.NOT_CONTROLLER)
    epoch = request.broker_epoch if ctx.api_version >= 2 else -1
    try:
        remaining = await zk.controller.controlled_shutdown(request.broker_id, epoch)
    except KafkaError as e:
        return error_response(request, ctx.api_version, e.error_code)
    return ControlledShutdownResponse(error_code=ErrorCode.NONE, remaining_partitions=[
        Remaining(topic_name=tp.topic, partition_index=tp.partition) for tp in remaining])


def error_response(request: ControlledShutdownRequest, version: int, code: int) -> ControlledShutdownResponse:
    return ControlledShutdownResponse(error_code=code, remaining_partitions=[])
