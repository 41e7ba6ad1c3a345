"""AddOffsetsToTxn (key 25), v0-4: the producer will commit offsets of a group in its
transaction, so the group's __consumer_offsets partition joins the transaction (its marker
then makes the offsets committed, or drops them). Answered as AddPartitionsToTxn is;
PRODUCER_FENCED reads INVALID_PRODUCER_EPOCH before v2.
"""

from __future__ import annotations

from kbroker.common.topic_partition import TopicPartition
from kbroker.coordinator.offsets_topic import GROUP_METADATA_TOPIC_NAME
from kbroker.protocol.messages.add_offsets_to_txn import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
)
from kbroker.server.apis.txn_support import for_version, txn_coordinator
from kbroker.server.request_context import RequestContext


async def handle(ctx: RequestContext, request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    tp = TopicPartition(GROUP_METADATA_TOPIC_NAME, ctx.services.offsets_topic.partition_for(request.group_id))
    code = await txn_coordinator(ctx).add_partitions(
        request.transactional_id, request.producer_id, request.producer_epoch, [tp])
    return AddOffsetsToTxnResponse(error_code=for_version(code, ctx.api_version, 2))


def error_response(request: AddOffsetsToTxnRequest, version: int, code: int) -> AddOffsetsToTxnResponse:
    return AddOffsetsToTxnResponse(error_code=code)
