"""WriteTxnMarkers (key 27), v0-1, broker to broker (cluster mode): a transaction
coordinator asks this broker, the leader of the partitions named, to write a
transaction's COMMIT or ABORT marker to each (MarkerWriter: acks=all, an error code per
partition: NOT_LEADER_OR_FOLLOWER when it does not lead one, which the coordinator
retries once the metadata changed). Markers of different producers are written
concurrently; the answer lists each producer's partitions.
"""

from __future__ import annotations

import asyncio

from kbroker.common.topic_partition import TopicPartition
from kbroker.protocol.messages.write_txn_markers import (
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from kbroker.server.request_context import RequestContext

R = WriteTxnMarkersResponse


async def handle(ctx: RequestContext, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    writer = ctx.services.marker_writer
    results = await asyncio.gather(*(
        writer.write(m.producer_id, m.producer_epoch, m.coordinator_epoch, m.transaction_result,
                     [TopicPartition(t.name, p) for t in m.topics for p in t.partition_indexes])
        for m in request.markers))
    return R(markers=[_result(m.producer_id, errors) for m, errors in zip(request.markers, results, strict=True)])


def _result(producer_id: int, errors: dict[TopicPartition, int]) -> R.WritableTxnMarkerResult:
    by_topic: dict[str, list[R.WritableTxnMarkerPartitionResult]] = {}
    for tp, code in errors.items():
        by_topic.setdefault(tp.topic, []).append(
            R.WritableTxnMarkerPartitionResult(partition_index=tp.partition, error_code=code))
    return R.WritableTxnMarkerResult(producer_id=producer_id, topics=[
        R.WritableTxnMarkerTopicResult(name=t, partitions=ps) for t, ps in by_topic.items()])


def error_response(request: WriteTxnMarkersRequest, version: int, code: int) -> WriteTxnMarkersResponse:
    return R(markers=[_result(m.producer_id, {TopicPartition(t.name, p): code for t in m.topics
                                              for p in t.partition_indexes}) for m in request.markers])
