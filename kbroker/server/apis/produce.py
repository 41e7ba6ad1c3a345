"""Produce (key 0): advertised 0-11, accepted 3-11 (magic-2 record batches).

For each partition the records field (a writable memoryview of the request
frame, never decoded here) goes to Log.append_as_leader, which validates the
batches (CRC32C, sizes, max.message.bytes), assigns offsets and stores them,
or stores nothing and raises an error carrying `.error_code`. The append
happens synchronously inside `handle`, so pipelined Produce requests on one
connection append in request order. When an append reaches flush.messages, the
fsync runs on the flush thread and the response waits for it (a coroutine), so
the loop serves everyone else meanwhile; responses still leave in request order. acks=0 gets no response (and a closed
connection if any partition failed, as Kafka does); acks=1 and
acks=-1 (all) are the same on a single broker (the ISR is this broker), except
that acks=all with min.insync.replicas above 1 gets NOT_ENOUGH_REPLICAS, as Kafka.
Parked Fetch requests on the partition are woken after each append.

Versions 0-2 (magic 0/1 message sets) are advertised only so that librdkafka
2.0.2 keeps compression enabled (librdkafka #4956); such requests get
UNSUPPORTED_VERSION per partition.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Future
from typing import Any

from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.protocol.messages.produce import ProduceRequest, ProduceResponse
from kbroker.server.request_context import CLOSE_CONNECTION, RequestContext

log = logging.getLogger(__name__)

TopicResponse = ProduceResponse.TopicProduceResponse
PartitionResponse = ProduceResponse.PartitionProduceResponse
RecordError = ProduceResponse.BatchIndexAndErrorMessage

MIN_IMPLEMENTED_VERSION = 3
IN_SYNC_REPLICAS = 1  # a single broker: the leader is the whole ISR


def handle(ctx: RequestContext, request: ProduceRequest) -> Any:
    version = ctx.api_version
    acks = request.acks
    responses = []
    flushes: list[tuple[PartitionResponse, Future[None]]] = []
    for topic in request.topic_data:
        partitions = []
        for pd in topic.partition_data:
            if version < MIN_IMPLEMENTED_VERSION:
                partitions.append(_error(pd.index, ErrorCode.UNSUPPORTED_VERSION))
            elif acks not in (0, 1, -1):
                partitions.append(_error(pd.index, ErrorCode.INVALID_REQUIRED_ACKS))
            else:
                response, flushed = _append(ctx, topic.name, pd, acks)
                partitions.append(response)
                if flushed is not None:
                    flushes.append((response, flushed))
        responses.append(TopicResponse(name=topic.name, partition_responses=partitions))
    if flushes:
        return _after_flushes(request, responses, flushes)
    return _respond(request, responses)


async def _after_flushes(request: ProduceRequest, responses: list[TopicResponse],
                         flushes: list[tuple[PartitionResponse, Future[None]]]) -> Any:
    """flush.messages reached: answer once the fsyncs (on the flush thread) are done, as
    Kafka answers after its append thread's flush; a failed fsync fails the partition."""
    for response, flushed in flushes:
        try:
            await asyncio.wrap_future(flushed)
        except Exception as e:  # the flush thread raises KafkaStorageError
            code = e.error_code if isinstance(e, KafkaError) else ErrorCode.KAFKA_STORAGE_ERROR
            response.error_code, response.error_message = code, str(e)
            response.base_offset = response.log_start_offset = -1
    return _respond(request, responses)


def _respond(request: ProduceRequest, responses: list[TopicResponse]) -> ProduceResponse | object | None:
    if request.acks == 0:
        # Kafka closes the connection when an acks=0 request fails, so the producer
        # sees something went wrong and refreshes its metadata.
        failed = any(p.error_code for t in responses for p in t.partition_responses)
        return CLOSE_CONNECTION if failed else None
    return ProduceResponse(responses=responses)


def _append(
    ctx: RequestContext, topic: str, pd: ProduceRequest.PartitionProduceData, acks: int
) -> tuple[PartitionResponse, Future[None] | None]:
    broker = ctx.broker
    plog = broker.get_log(topic, pd.index)
    if plog is None:
        return _error(pd.index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), None
    if not isinstance(pd.records, memoryview | bytes | bytearray) or len(pd.records) == 0:
        return _error(pd.index, ErrorCode.CORRUPT_MESSAGE, "no records"), None
    if acks == -1 and plog.config.min_insync_replicas > IN_SYNC_REPLICAS:
        # Kafka checks before appending (Partition.appendRecordsToLeader).
        return _error(pd.index, ErrorCode.NOT_ENOUGH_REPLICAS,
                      f"the in-sync replicas ({IN_SYNC_REPLICAS}) are fewer than "
                      f"min.insync.replicas ({plog.config.min_insync_replicas})"), None
    try:
        info = plog.append_as_leader(pd.records, leader_epoch=0)
    except KafkaError as e:
        record_errors = [
            RecordError(batch_index=i, batch_index_error_message=msg)
            for i, msg in getattr(e, "record_errors", None) or ()
        ]
        resp = _error(pd.index, e.error_code, str(e) or None)
        resp.record_errors = record_errors
        return resp, None
    except Exception as e:
        log.exception("append to %s-%d failed", topic, pd.index)
        return _error(pd.index, ErrorCode.UNKNOWN_SERVER_ERROR, str(e) or None), None
    broker.append_notifier.notify(plog.topic_partition)
    return PartitionResponse(
        index=pd.index,
        error_code=ErrorCode.NONE,
        base_offset=info.first_offset,
        log_append_time_ms=info.log_append_time,
        log_start_offset=info.log_start_offset,
    ), info.flushed


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
