"""TxnOffsetCommit (key 28), v0-4: a transactional producer commits a group's offsets in
its transaction (sendOffsetsToTransaction); the group coordinator writes them to
__consumer_offsets in a transactional batch of the producer and holds them as pending
until the transaction's marker: committed offsets after a COMMIT, gone after an ABORT
(OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT meanwhile).

v3+ (KIP-447) carries the consumer's member id, generation and group instance id, checked
as an OffsetCommit's are (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID), so a
zombie whose consumer was fenced by a rebalance cannot commit; older versions send none
and are not checked. A partition of a topic that does not exist is
UNKNOWN_TOPIC_OR_PARTITION. A fenced producer gets INVALID_PRODUCER_EPOCH (its batch is
refused by the partition's producer state). In a cluster the answer waits until the write
is replicated, as OffsetCommit's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from kbroker.common.error_code import ErrorCode
from kbroker.coordinator.group_metadata import OffsetAndMetadata
from kbroker.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from kbroker.server.apis.group_support import coordinator
from kbroker.server.apis.offset_commit import (
    commit_timeout_s,
    replication_errors,
    requested_offsets,
)
from kbroker.server.request_context import RequestContext

R = TxnOffsetCommitResponse


def handle(ctx: RequestContext, request: TxnOffsetCommitRequest
           ) -> TxnOffsetCommitResponse | Awaitable[TxnOffsetCommitResponse]:
    version = ctx.api_version
    services = ctx.services
    now = services.time.milliseconds()
    errors, offsets = requested_offsets(ctx, [(t.name, t.partitions) for t in request.topics], lambda p: (
        OffsetAndMetadata(p.committed_offset, p.committed_leader_epoch if version >= 2 else -1,
                          p.committed_metadata or "", now)))
    if offsets:
        generation, member, instance = ((request.generation_id_or_member_epoch, request.member_id, request.group_instance_id)
                                        if version >= 3 else (-1, "", None))
        errors.update(coordinator(ctx).commit_txn_offsets(
            request.group_id, request.producer_id, request.producer_epoch, member, instance, generation,
            offsets))
        if any(errors.get(tp, ErrorCode.NONE) == ErrorCode.NONE for tp in offsets):
            waited = services.offsets_topic.wait_group_replicated(request.group_id, commit_timeout_s(services))
            if waited is not None:
                return _after_replication(request, errors, waited)
    return _response(request, lambda tp: errors.get(tp, ErrorCode.NONE))


async def _after_replication(request: TxnOffsetCommitRequest, errors: dict[tuple[str, int], int],
                             waited: Awaitable[int]) -> TxnOffsetCommitResponse:
    code = await waited
    all_tps = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    errors = replication_errors(code, errors, all_tps)
    return _response(request, lambda tp: errors.get(tp, ErrorCode.NONE))


def _response(request: TxnOffsetCommitRequest, error_of: Callable[[tuple[str, int]], int]) -> R:
    return R(topics=[
        R.TxnOffsetCommitResponseTopic(name=t.name, partitions=[
            R.TxnOffsetCommitResponsePartition(partition_index=p.partition_index,
                                               error_code=error_of((t.name, p.partition_index)))
            for p in t.partitions])
        for t in request.topics])


def error_response(request: TxnOffsetCommitRequest, version: int, code: int) -> TxnOffsetCommitResponse:
    return _response(request, lambda tp: code)
