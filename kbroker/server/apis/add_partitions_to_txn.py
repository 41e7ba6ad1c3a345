"""AddPartitionsToTxn (key 24), v0-5: partitions join the producer's transaction before it
writes to them (the coordinator records them in __transaction_state; each gets a marker
when the transaction ends).

v0-3 (clients): one transaction. A partition of a topic that does not exist is
UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED: nothing is added,
as Kafka answers; otherwise every partition gets the coordinator's answer
(PRODUCER_FENCED reads INVALID_PRODUCER_EPOCH before v2). v4+ (KIP-890, partition leaders
asking coordinators): transactions batched, each either added or, with verify_only,
only checked (TRANSACTION_ABORTABLE for a partition not in the transaction, read as
INVALID_TXN_STATE before v5).
"""

from __future__ import annotations

import asyncio

from kbroker.common.error_code import ErrorCode
from kbroker.common.topic_partition import TopicPartition
from kbroker.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
)
from kbroker.server import authorization as authz
from kbroker.server.apis.txn_support import for_version, txn_coordinator
from kbroker.server.request_context import RequestContext

R = AddPartitionsToTxnResponse
Topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic


async def handle(ctx: RequestContext, request: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
    version = ctx.api_version
    if version < 4:
        errors = await _add(ctx, request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
                            request.v3_and_below_producer_epoch, request.v3_and_below_topics, False)
        return R(error_code=ErrorCode.NONE, results_by_topic_v3_and_below=_topic_results(errors))
    results = await asyncio.gather(*(
        _add(ctx, t.transactional_id, t.producer_id, t.producer_epoch, t.topics, t.verify_only)
        for t in request.transactions))
    return R(error_code=ErrorCode.NONE, results_by_transaction=[
        R.AddPartitionsToTxnResult(transactional_id=t.transactional_id, topic_results=_topic_results(errors))
        for t, errors in zip(request.transactions, results, strict=True)])


async def _add(ctx: RequestContext, transactional_id: str, producer_id: int, producer_epoch: int,
               topics: list[Topic], verify_only: bool) -> dict[TopicPartition, int]:
    version = ctx.api_version
    partitions = [TopicPartition(t.name, p) for t in topics for p in t.partitions]
    coordinator = txn_coordinator(ctx)
    if verify_only:
        verified = coordinator.verify_partitions(transactional_id, producer_id, producer_epoch, partitions)
        return {tp: _final(code, version) for tp, code in verified.items()}
    writable = authz.authorized_topics(ctx, "WRITE", (tp.topic for tp in partitions))
    if len(writable) < len({tp.topic for tp in partitions}):  # Kafka's: nothing is added
        return {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED if tp.topic not in writable
                else ErrorCode.OPERATION_NOT_ATTEMPTED for tp in partitions}
    unknown = {tp for tp in partitions if not _exists(ctx, tp)}
    if unknown:
        return {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
                for tp in partitions}
    code = await coordinator.add_partitions(transactional_id, producer_id, producer_epoch, partitions)
    return dict.fromkeys(partitions, _final(code, version))


def _final(code: int, version: int) -> int:
    if code == ErrorCode.TRANSACTION_ABORTABLE and version < 5:
        return ErrorCode.INVALID_TXN_STATE
    return for_version(code, version, 2)


def _exists(ctx: RequestContext, tp: TopicPartition) -> bool:
    info = ctx.services.topics.get(tp.topic)
    return info is not None and 0 <= tp.partition < info.partitions


def _topic_results(errors: dict[TopicPartition, int]) -> list[R.AddPartitionsToTxnTopicResult]:
    by_topic: dict[str, list[R.AddPartitionsToTxnPartitionResult]] = {}
    for tp, code in errors.items():
        by_topic.setdefault(tp.topic, []).append(
            R.AddPartitionsToTxnPartitionResult(partition_index=tp.partition, partition_error_code=code))
    return [R.AddPartitionsToTxnTopicResult(name=t, results_by_partition=ps) for t, ps in by_topic.items()]


def error_response(request: AddPartitionsToTxnRequest, version: int, code: int) -> AddPartitionsToTxnResponse:
    if version < 4:
        return R(error_code=code, results_by_topic_v3_and_below=_topic_results(
            {TopicPartition(t.name, p): code for t in request.v3_and_below_topics for p in t.partitions}))
    return R(error_code=code, results_by_transaction=[
        R.AddPartitionsToTxnResult(transactional_id=t.transactional_id, topic_results=_topic_results(
            {TopicPartition(x.name, p): code for x in t.topics for p in x.partitions}))
        for t in request.transactions])
