"""Produce (key 0): advertised 0-11, accepted 3-11 (magic-2 record batches).

For each partition the records field (a writable memoryview of the request
frame, never decoded here) goes to the partition's leader (ReplicaManager ->
Partition.append_records_to_leader -> Log.append_as_leader), which validates the
batches (CRC32C, sizes, max.message.bytes), assigns offsets and the leader epoch
and stores them, or stores nothing and raises a KafkaError: NOT_LEADER_OR_FOLLOWER
when another broker leads it (or this one is fenced), NOT_ENOUGH_REPLICAS for
acks=all when the ISR is smaller than min.insync.replicas. The append happens
synchronously inside `handle`, so pipelined Produce requests on one connection
append in request order. Each partition counts once in the broker's BrokerTopicStats
(records and bytes in from the append's LogAppendInfo; never per record).

The answer may wait (the loop serves everyone else meanwhile and responses still
leave in request order): for the fsync when an append reaches flush.messages (it
runs on the flush thread; a coroutine), and for acks=all until the high watermark
passes the batch (the followers fetched it), at most `timeout_ms`
(REQUEST_TIMED_OUT), then NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below
min.insync.replicas meanwhile, as Kafka's DelayedProduce: without fsyncs to wait for,
a PendingResponse that the follower Fetch moving the high watermark completes, with
no task in between. On a single broker the high watermark is the log end, so
acks=all answers at once. acks=0 gets no response (and a closed connection if any
partition failed, as Kafka does). Parked Fetch requests on the partitions are woken
once all of the request's partitions are appended.

Versions 0-2 (magic 0/1 message sets) are advertised only so that librdkafka
2.0.2 keeps compression enabled (librdkafka #4956); such requests get
UNSUPPORTED_VERSION per partition.

Transactional batches (KIP-98) need the request's transactional_id: without one the
whole request is refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka does.
The producer state refuses a transactional producer's batch from a fenced epoch
(INVALID_PRODUCER_EPOCH) and a non-transactional batch in the middle of its transaction
(INVALID_TXN_STATE); clients may not write control batches (INVALID_RECORD).
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Future
from typing import Any

from kbroker.cluster.partition import Partition
from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.common.topic_partition import TopicPartition
from kbroker.protocol.messages.produce import ProduceRequest, ProduceResponse
from kbroker.records.batch_header import ATTRIBUTES_POS, MAGIC_POS, TRANSACTIONAL_BIT
from kbroker.server import authorization as authz
from kbroker.server.request_context import CLOSE_CONNECTION, PendingResponse, RequestContext

log = logging.getLogger(__name__)

TopicResponse = ProduceResponse.TopicProduceResponse
PartitionResponse = ProduceResponse.PartitionProduceResponse
RecordError = ProduceResponse.BatchIndexAndErrorMessage

MIN_IMPLEMENTED_VERSION = 3
# BytesRejectedPerSec: Kafka counts batches refused for their size
_REJECTED_FOR_SIZE = (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE)


def handle(ctx: RequestContext, request: ProduceRequest) -> Any:
    version = ctx.api_version
    acks = request.acks
    if request.transactional_id is None and _has_transactional_records(request):
        return error_response(request, version, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if request.transactional_id is not None and not authz.authorize_transactional_id(
            ctx, "WRITE", request.transactional_id):
        return error_response(request, version, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    writable = authz.authorized_topics(ctx, "WRITE", (t.name for t in request.topic_data))
    responses = []
    flushes: list[tuple[PartitionResponse, Future[None]]] = []
    waits: list[_Wait] = []
    timeout_s = max(request.timeout_ms, 0) / 1000
    # Parked Fetches (followers, consumers) are woken once every partition is appended.
    with ctx.services.append_notifier.held():
        for topic in request.topic_data:
            partitions = []
            for pd in topic.partition_data:
                if version < MIN_IMPLEMENTED_VERSION:
                    partitions.append(_error(pd.index, ErrorCode.UNSUPPORTED_VERSION))
                elif topic.name not in writable:
                    partitions.append(_error(pd.index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                elif acks not in (0, 1, -1):
                    partitions.append(_error(pd.index, ErrorCode.INVALID_REQUIRED_ACKS))
                else:
                    response, flushed, wait = _append(ctx, topic.name, pd, acks)
                    partitions.append(response)
                    if flushed is not None:
                        flushes.append((response, flushed))
                    if wait is not None:
                        waits.append(wait)
            responses.append(TopicResponse(name=topic.name, partition_responses=partitions))
    if flushes:
        replicated = []
        for response, partition, required, min_isr in waits:
            result = partition.wait_for_high_watermark(required, min_isr, timeout_s)
            if isinstance(result, int):
                _fail_unless_none(response, result)
            else:
                replicated.append((response, result))
        return _after_waits(request, responses, flushes, replicated)
    if waits:
        return _replicated(request, responses, waits, timeout_s)
    return _respond(request, responses)


# acks=all, appended: the partition's response, the partition, the offset the high
# watermark must reach, min.insync.replicas
_Wait = tuple[PartitionResponse, Partition, int, int]


def _replicated(request: ProduceRequest, responses: list[TopicResponse], waits: list[_Wait],
                timeout_s: float) -> ProduceResponse | object | None | PendingResponse:
    """acks=all without fsyncs to wait for: answered by the last partition's callback,
    inside the request that moved its high watermark (a follower's Fetch), as Kafka's
    DelayedProduce; or at once when every high watermark is already there."""
    pending = PendingResponse()
    left = 1  # the waits still open, and this registration

    def replicated(response: PartitionResponse, code: int) -> None:
        nonlocal left
        _fail_unless_none(response, code)
        left -= 1
        if not left:
            pending.complete(_respond(request, responses))
    for response, partition, required, min_isr in waits:
        left += 1
        code = partition.on_high_watermark(
            required, min_isr, timeout_s,
            lambda code, response=response: replicated(response, code))  # type: ignore[misc]
        if code is not None:
            left -= 1
            _fail_unless_none(response, code)
    left -= 1
    if not left:
        return _respond(request, responses)
    return pending


async def _after_waits(request: ProduceRequest, responses: list[TopicResponse],
                       flushes: list[tuple[PartitionResponse, Future[None]]],
                       replicated: list[tuple[PartitionResponse, asyncio.Future[int]]]) -> Any:
    """Answer once the fsyncs (flush.messages, on the flush thread; a failed fsync fails
    the partition) and the acks=all replication waits are over."""
    for response, flushed in flushes:
        try:
            await asyncio.wrap_future(flushed)
        except Exception as e:  # the flush thread raises KafkaStorageError
            _fail(response, e.error_code if isinstance(e, KafkaError) else ErrorCode.KAFKA_STORAGE_ERROR,
                  str(e))
    for response, waited in replicated:
        _fail_unless_none(response, await waited)
    return _respond(request, responses)


def _fail_unless_none(response: PartitionResponse, code: int) -> None:
    """A replication wait's code: anything but NONE fails a partition not failed yet."""
    if code != ErrorCode.NONE and response.error_code == ErrorCode.NONE:
        _fail(response, code, None)


def _fail(response: PartitionResponse, code: int, message: str | None) -> None:
    response.error_code, response.error_message = code, message
    response.base_offset = response.log_start_offset = -1


def _respond(request: ProduceRequest, responses: list[TopicResponse]) -> ProduceResponse | object | None:
    if request.acks == 0:
        # Kafka closes the connection when an acks=0 request fails, so the producer
        # sees something went wrong and refreshes its metadata.
        failed = any(p.error_code for t in responses for p in t.partition_responses)
        return CLOSE_CONNECTION if failed else None
    return ProduceResponse(responses=responses)


def _append(
    ctx: RequestContext, topic: str, pd: ProduceRequest.PartitionProduceData, acks: int,
) -> tuple[PartitionResponse, Future[None] | None, _Wait | None]:
    try:
        partition = ctx.services.replica_manager.leader_partition(TopicPartition(topic, pd.index))
    except KafkaError as e:
        return _error(pd.index, e.error_code), None, None
    stats = ctx.services.topic_stats.topic(topic)
    stats.total_produce_requests += 1
    if not isinstance(pd.records, memoryview | bytes | bytearray) or len(pd.records) == 0:
        stats.failed_produce_requests += 1
        return _error(pd.index, ErrorCode.CORRUPT_MESSAGE, "no records"), None, None
    min_isr = partition.local_log().config.min_insync_replicas
    try:
        info = partition.append_records_to_leader(pd.records, acks, min_isr)
    except KafkaError as e:
        stats.failed_produce_requests += 1
        if e.error_code in _REJECTED_FOR_SIZE:
            stats.bytes_rejected += len(pd.records)
        record_errors = [
            RecordError(batch_index=i, batch_index_error_message=msg)
            for i, msg in getattr(e, "record_errors", None) or ()
        ]
        resp = _error(pd.index, e.error_code, str(e) or None)
        resp.record_errors = record_errors
        return resp, None, None
    except Exception as e:
        stats.failed_produce_requests += 1
        log.exception("append to %s-%d failed", topic, pd.index)
        return _error(pd.index, ErrorCode.UNKNOWN_SERVER_ERROR, str(e) or None), None, None
    stats.messages_in += info.record_count
    stats.bytes_in += len(pd.records)
    response = PartitionResponse(
        index=pd.index,
        error_code=ErrorCode.NONE,
        base_offset=info.first_offset,
        log_append_time_ms=info.log_append_time,
        log_start_offset=info.log_start_offset,
    )
    wait = None
    if acks == -1 and info.last_offset >= 0:
        wait = (response, partition, info.last_offset + 1, min_isr)
    return response, info.flushed, wait


def _has_transactional_records(request: ProduceRequest) -> bool:
    """Whether any partition's first batch is transactional (a producer writes its
    transactional batches with nothing else, as Kafka's ProduceRequest checks).

    Only a magic-2 record batch has the transactional attribute: a magic 0/1 message
    set (Produce v0-v2) keeps a message's key length or timestamp at that position,
    and Kafka's LegacyRecordBatch.isTransactional is always false."""
    for topic in request.topic_data:
        for pd in topic.partition_data:
            records = pd.records
            if (isinstance(records, memoryview | bytes | bytearray)
                    and len(records) > ATTRIBUTES_POS + 1
                    and records[MAGIC_POS] == 2
                    and records[ATTRIBUTES_POS + 1] & TRANSACTIONAL_BIT):
                return True
    return False


def _error(index: int, code: int, message: str | None = None) -> PartitionResponse:
    return PartitionResponse(
        index=index, error_code=code, base_offset=-1, log_start_offset=-1, error_message=message
    )


def error_response(request: ProduceRequest, version: int, code: int) -> ProduceResponse | object:
    if request.acks == 0:
        return CLOSE_CONNECTION
    return ProduceResponse(
        responses=[
            TopicResponse(
                name=t.name, partition_responses=[_error(p.index, code) for p in t.partition_data]
            )
            for t in request.topic_data
        ]
    )
