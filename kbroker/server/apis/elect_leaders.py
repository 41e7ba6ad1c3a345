"""ElectLeaders (key 43), v0-2, answered by the controller (another broker forwards it
there, kbroker.server.forwarding; a single broker leads everything already:
ELECTION_NOT_NEEDED). election_type 0 moves leadership back to the preferred replica
(the first of the assignment, if alive and in the ISR: else PREFERRED_LEADER_NOT_AVAILABLE); 1 (unclean) elects the first live
replica for a partition without a live leader (ELIGIBLE_LEADERS_NOT_AVAILABLE when
there is none). A partition already led as asked: ELECTION_NOT_NEEDED. Null
topic_partitions: every partition.
"""

from __future__ import annotations

from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.common.topic_partition import TopicPartition
from kbroker.protocol.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse
from kbroker.server.metadata_support import ZkRequired
from kbroker.server.request_context import RequestContext

Result = ElectLeadersResponse.ReplicaElectionResult
PartitionResult = ElectLeadersResponse.PartitionResult


async def handle(ctx: RequestContext, request: ElectLeadersRequest) -> ElectLeadersResponse:
    services = ctx.services
    election_type = request.election_type if ctx.api_version >= 1 else 0
    tps = None if request.topic_partitions is None else [
        TopicPartition(t.topic, p) for t in request.topic_partitions for p in t.partitions]
    results: dict[TopicPartition, tuple[int, str | None]]
    try:
        zk = services.support.require_zk()
    except ZkRequired:
        results = {tp: (ErrorCode.ELECTION_NOT_NEEDED if services.topics.get(tp.topic) is not None
                        else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None) for tp in tps or []}
    else:
        try:
            raw = await zk.controller.elect_leaders(election_type, tps)
        except KafkaError as e:
            return error_response(request, ctx.api_version, e.error_code)
        results = {tp: (r.error_code, r.message) for tp, r in raw.items()}
    by_topic: dict[str, list[PartitionResult]] = {}
    for tp, (code, message) in results.items():
        by_topic.setdefault(tp.topic, []).append(
            PartitionResult(partition_id=tp.partition, error_code=code, error_message=message))
    return ElectLeadersResponse(error_code=ErrorCode.NONE, replica_election_results=[
        Result(topic=t, partition_result=parts) for t, parts in by_topic.items()])


def error_response(request: ElectLeadersRequest, version: int, code: int) -> ElectLeadersResponse:
    return ElectLeadersResponse(error_code=code, replica_election_results=[
        Result(topic=t.topic, partition_result=[
            PartitionResult(partition_id=p, error_code=code, error_message=None) for p in t.partitions])
        for t in request.topic_partitions or []])
