"""Produce (key 0): advertised 0-11, accepted 3-11 (magic-2 record batches).

For each partition the records field (a writable memoryview of the request
frame, never decoded here) goes to the partition's leader (ReplicaManager.append_records
-> Partition.append_records_to_leader -> Log.append_as_leader), which validates the
batches (CRC32C, sizes, max.message.bytes), assigns offsets and the leader epoch
and stores them, or stores nothing and raises a KafkaError: NOT_LEADER_OR_FOLLOWER
when another broker leads it (or this one is fenced), NOT_ENOUGH_REPLICAS for
acks=all when the ISR is smaller than min.insync.replicas. The append happens
synchronously inside `handle`, so pipelined Produce requests on one connection
append in request order. Each partition counts once in the broker's BrokerTopicStats
(records and bytes in from the append's LogAppendInfo; never per record; the
ReplicaManager counts). This handler only translates: authorization and the request's
own checks here, the append and every wait in the ReplicaManager.

The answer may wait (the loop serves everyone else meanwhile and responses still
leave in request order): for the fsync when an append reaches flush.messages (it
runs on the flush thread; a coroutine), and for acks=all until the high watermark
passes the batch (the followers fetched it), at most `timeout_ms`
(REQUEST_TIMED_OUT), then NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below
min.insync.replicas meanwhile (Kafka's DelayedProduce, in the ReplicaManager's produce
purgatory): a PendingResponse that the follower Fetch moving the high watermark
completes, with no task in between. On a single broker the high watermark is the log end, so
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

from typing import Any

from kbroker.cluster.delayed_produce import PartitionAppendResult
from kbroker.common.error_code import ErrorCode
from kbroker.common.topic_partition import TopicPartition
from kbroker.protocol.messages.produce import ProduceRequest, ProduceResponse
from kbroker.records.batch_header import ATTRIBUTES_POS, MAGIC_POS, TRANSACTIONAL_BIT
from kbroker.server import authorization as authz
from kbroker.server.request_context import CLOSE_CONNECTION, PendingResponse, RequestContext
from kbroker.storage.producer_state import AppendOrigin

TopicResponse = ProduceResponse.TopicProduceResponse
PartitionResponse = ProduceResponse.PartitionProduceResponse
RecordError = ProduceResponse.BatchIndexAndErrorMessage

MIN_IMPLEMENTED_VERSION = 3
_NOT_ANSWERED = object()


def handle(ctx: RequestContext, request: ProduceRequest) -> Any:
    version = ctx.api_version
    acks = request.acks
    if request.transactional_id is None and _has_transactional_records(request):
        return error_response(request, version, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if request.transactional_id is not None and not authz.authorize_transactional_id(
            ctx, "WRITE", request.transactional_id):
        return error_response(request, version, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    writable = authz.authorized_topics(ctx, "WRITE", (t.name for t in request.topic_data))
    # Each partition's answer: a response now (refused before the append), or the index
    # of its entry in the append's results.
    answers: list[tuple[str, list[tuple[int, PartitionResponse | int]]]] = []
    entries: list[tuple[TopicPartition, Any]] = []
    for topic in request.topic_data:
        partitions: list[tuple[int, PartitionResponse | int]] = []
        for pd in topic.partition_data:
            if version < MIN_IMPLEMENTED_VERSION:
                partitions.append((pd.index, _error(pd.index, ErrorCode.UNSUPPORTED_VERSION)))
            elif topic.name not in writable:
                partitions.append((pd.index, _error(pd.index, ErrorCode.TOPIC_AUTHORIZATION_FAILED)))
            elif acks not in (0, 1, -1):
                partitions.append((pd.index, _error(pd.index, ErrorCode.INVALID_REQUIRED_ACKS)))
            else:
                partitions.append((pd.index, len(entries)))
                entries.append((TopicPartition(topic.name, pd.index), pd.records))
        answers.append((topic.name, partitions))
    if not entries:
        return _respond(request, answers, [])
    answered: Any = _NOT_ANSWERED
    pending: PendingResponse | None = None

    def respond(results: list[PartitionAppendResult]) -> None:
        nonlocal answered
        if pending is None:
            answered = _respond(request, answers, results)
        else:
            pending.complete(_respond(request, answers, results))
    ctx.services.replica_manager.append_records(request.timeout_ms, acks, AppendOrigin.CLIENT, entries, respond)
    if answered is not _NOT_ANSWERED:
        return answered
    pending = PendingResponse()
    return pending


def _respond(request: ProduceRequest, answers: list[tuple[str, list[tuple[int, PartitionResponse | int]]]],
             results: list[PartitionAppendResult]) -> ProduceResponse | object | None:
    responses = []
    failed = False
    for name, partitions in answers:
        out = []
        for index, answer in partitions:
            response = answer if isinstance(answer, PartitionResponse) else _response(index, results[answer])
            failed = failed or response.error_code != ErrorCode.NONE
            out.append(response)
        responses.append(TopicResponse(name=name, partition_responses=out))
    if request.acks == 0:
        # Kafka closes the connection when an acks=0 request fails, so the producer
        # sees something went wrong and refreshes its metadata.
        return CLOSE_CONNECTION if failed else None
    return ProduceResponse(responses=responses)


def _response(index: int, result: PartitionAppendResult) -> PartitionResponse:
    response = PartitionResponse(
        index=index, error_code=result.error_code, base_offset=result.base_offset,
        log_append_time_ms=result.log_append_time, log_start_offset=result.log_start_offset,
        error_message=result.error_message)
    if result.record_errors:
        response.record_errors = [RecordError(batch_index=i, batch_index_error_message=msg)
                                  for i, msg in result.record_errors]
    return response


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
