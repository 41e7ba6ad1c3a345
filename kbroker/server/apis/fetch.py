"""Fetch (key 1), v4-17: full fetches, and incremental ones in followers' fetch sessions.

For each partition, Log.read returns a FileSlice of whole stored batches, from
the batch containing `fetch_offset` up to the high watermark (read_uncommitted)
or the last stable offset (read_committed); the slice goes into the records
field untouched and is sent with sendfile. Sizes: each partition reads at most
`partition_max_bytes`, the response at most `max_bytes` (and the broker's
`fetch.max.bytes`, KIP-541), except that the first partition with data returns at
least one whole batch (KIP-74). A consumer's partition also stops at the batch
boundary after about `fetch.partition.response.max.records` records (kbroker's own,
50000; 0: as Kafka): librdkafka stops fetching a partition for a second
(fetch.queue.backoff.ms) whenever a response leaves more than queued.min.messages
(100000) records in its queue, which a 16 MiB answer of 100-byte records (160000
records) did at every response. A whole consumer response also carries about
`fetch.response.max.records` records when set (kbroker's own; 0, the default: no bound), the partitions
in request order sharing it: a consumer slower than the broker reaches that queue limit
sooner the more each response carries, and then idles for the rest of the second (a
partition left without budget answers no records; librdkafka names another partition
first in its next Fetch).

This module only translates (Kafka's KafkaApis.handleFetchRequest): the request becomes
FetchParams and the partitions to read (topic names or ids, authorization), the fetch
session is found or made, and the response is built from what the read found. The
reading (the rules below: sizes, record bounds, isolation, leadership, follower state)
is the ReplicaManager's `fetch_messages` (cluster/replica_manager.py, its parameters and
result in cluster/fetch_params.py), and so is the long poll: while fewer than
`min_bytes` are available, no partition has an error, no record bound above left records
out (waiting would bring no more) and `max_wait_ms` has not passed, the request parks in
the ReplicaManager's fetch purgatory (cluster/delayed_fetch.py; a PendingResponse to the
connection) and re-reads when one of its partitions is appended to, inside the request
that appended (Kafka's DelayedFetch completed by the appending thread), or at the
deadline. The topics' names and the authorization are settled once per request.

Topics are named (v4-12) or identified by topic_id (v13+; UNKNOWN_TOPIC_ID when
the id is unknown). A follower's fetch (v7+) may open an incremental fetch session
(KIP-227, kbroker.cluster.fetch_session): its later fetches name only the partitions
whose position changed, and the answer has only the partitions with news (records, a
moved high watermark or log start offset, an error), while every partition of the
session is still read, at its last position. A consumer that asks for a session gets
session_id 0 and goes on with full fetches (forgotten topics and epochs ignored).
read_committed (isolation_level 1) reads up to the last stable offset and lists the
aborted transactions overlapping what it returns (producer id and first offset, from
the segments' transaction indexes), so that the client drops their records;
read_uncommitted reads up to the high watermark and returns null, as Kafka does.

Only the leader answers (NOT_LEADER_OR_FOLLOWER elsewhere; `current_leader_epoch`
older than the leader's is FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH). A
follower's Fetch (`replica_id` >= 0, cluster mode) reads up to the log end offset,
not the high watermark, and its fetch offset tells the leader how far that follower
has copied (Partition.update_follower_fetch_state: ISR expansion, high watermark);
an out-of-range answer to a follower carries the leader's log start offset and high
watermark so that it can start over.

BrokerTopicStats: each read of a partition counts one fetch request of its topic (a
parked request's re-reads count again, as Kafka's DelayedFetch does; the ReplicaManager
counts them), and the bytes a response carries count once, when it is answered (here,
as KafkaApis does).
"""

from __future__ import annotations

import logging
from typing import Any

from kbroker.cluster.broker_topic_stats import BrokerTopicStats
from kbroker.cluster.fetch_params import (
    FetchParams,
    FetchResult,
    PartitionFetchInfo,
    error_data,
    records_size,
)
from kbroker.cluster.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    UNKNOWN_TOPIC_PREFIX,
    FetchSession,
    next_epoch,
)
from kbroker.common.error_code import ErrorCode
from kbroker.common.topic_partition import TopicPartition
from kbroker.protocol.codec import ZERO_UUID
from kbroker.protocol.messages.fetch import FetchRequest, FetchResponse
from kbroker.server import authorization as authz
from kbroker.server.request_context import PendingResponse, RequestContext
from kbroker.server.response_writer import INLINE_SLICE_BYTES

log = logging.getLogger(__name__)

TopicResponse = FetchResponse.FetchableTopicResponse
PartitionData = FetchResponse.PartitionData


def handle(ctx: RequestContext, request: FetchRequest) -> FetchResponse | PendingResponse:
    """Answer at once when the data is there; else park the request (a PendingResponse)."""
    services = ctx.services
    version = ctx.api_version
    replica_id = _replica_id(request, version)
    # A single broker has no followers: a replica's fetch is read as a consumer's.
    from_follower = replica_id >= 0 and services.support.serves_followers
    session: FetchSession | None = None
    if version >= 7 and from_follower:
        found = _session_for(ctx, request, replica_id)
        if isinstance(found, int):
            return _session_error(found)
        session = found
    answer = _FetchAnswer(ctx, session, replica_id >= 0)
    fetch_infos: Any
    if session is not None:
        if authz.enabled(ctx) and not authz.authorize_cluster(ctx, "CLUSTER_ACTION"):
            answer.respond(FetchResult([(cached, error_data(cached.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                                        for cached in session.partitions.values()], 0, True, []))
            assert answer.response is not None  # answered at once
            return answer.response
        fetch_infos = session.partitions.values()  # all of them, each at its last position
    else:
        fetch_infos = _fetch_infos(ctx, request, from_follower, answer)
    services.replica_manager.fetch_messages(_fetch_params(ctx, request, replica_id, from_follower),
                                            fetch_infos, answer)
    return answer.response if answer.response is not None else answer.park()


def _fetch_params(ctx: RequestContext, request: FetchRequest, replica_id: int, from_follower: bool,
                  ) -> FetchParams:
    max_bytes = request.max_bytes if request.max_bytes > 0 else 0x7FFFFFFF
    if from_follower:
        return FetchParams(replica_id, request.max_wait_ms, request.min_bytes, max_bytes)
    config = ctx.services.config
    return FetchParams(-1, request.max_wait_ms, request.min_bytes, min(max_bytes, config.fetch_max_bytes),
                       request.isolation_level, config.fetch_partition_response_max_records,
                       config.fetch_response_max_records or None, INLINE_SLICE_BYTES)


def _fetch_infos(ctx: RequestContext, request: FetchRequest, from_follower: bool,
                 answer: _FetchAnswer) -> list[PartitionFetchInfo]:
    """A sessionless fetch's partitions, in request order; those of an unknown topic (id)
    or a topic it may not read carry their error. The answer learns the topics' names."""
    services = ctx.services
    version = ctx.api_version
    readable: set[str] | None = None  # None: every topic (no authorizer)
    if authz.enabled(ctx):
        if from_follower:
            readable = set() if not authz.authorize_cluster(ctx, "CLUSTER_ACTION") else None
        else:
            readable = authz.authorized_topics(ctx, "READ", (
                n for ft in request.topics
                if (n := ft.topic if version < 13 else _name_of(services, ft.topic_id))))
    infos = []
    names = answer.topics = []
    for ft in request.topics:
        if version >= 13:
            name = _name_of(services, ft.topic_id)
            topic_id = ft.topic_id
        else:
            name, topic_id = ft.topic, None
        names.append((name or "", ft))
        for fp in ft.partitions:
            if name is None:
                infos.append(PartitionFetchInfo(None, fp, error_code=ErrorCode.UNKNOWN_TOPIC_ID))
            elif readable is not None and name not in readable:
                infos.append(PartitionFetchInfo(None, fp, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            else:
                infos.append(PartitionFetchInfo(TopicPartition(name, fp.partition), fp, topic_id))
    return infos


class _FetchAnswer:
    """The Fetch's FetchResponder: builds the response from what the read found (Kafka's
    FetchContext.updateAndGenerateResponseData and the handler's response callback), at
    once (`response`) or later into the PendingResponse the connection waits on."""

    __slots__ = ("ctx", "session", "from_replica", "topics", "response", "pending")

    def __init__(self, ctx: RequestContext, session: FetchSession | None, from_replica: bool) -> None:
        self.ctx = ctx
        self.session = session
        self.from_replica = from_replica  # its bytes count as replication bytes
        self.topics: list[tuple[str, Any]] = []  # sessionless: each topic's name and request
        self.response: FetchResponse | None = None
        self.pending: PendingResponse | None = None

    @property
    def done(self) -> bool:
        return self.pending is not None and self.pending.done

    def shutting_down(self) -> bool:
        return self.ctx.services.shutting_down()

    def park(self) -> PendingResponse:
        if self.pending is None:
            self.pending = PendingResponse()
        return self.pending

    def fail(self, error: BaseException) -> None:
        self.park().fail(error)

    def respond(self, result: FetchResult) -> None:
        response = self._session_response(result) if self.session is not None else self._full_response(result)
        if result.bytes_readable:
            _count_bytes_out(self.ctx.services.topic_stats, response, self.from_replica)
        if self.pending is None:
            self.response = response
        else:
            self.pending.complete(response)

    def _full_response(self, result: FetchResult) -> FetchResponse:
        answers = result.partitions  # one per partition of the request, in its order
        at = 0
        topics = []
        for name, ft in self.topics:
            end = at + len(ft.partitions)
            topics.append(TopicResponse(topic=name, topic_id=ft.topic_id,
                                        partitions=[pd for _info, pd in answers[at:end]]))
            at = end
        return FetchResponse(error_code=ErrorCode.NONE, session_id=0, responses=topics)

    def _session_response(self, result: FetchResult) -> FetchResponse:
        """The partitions with news (all of them in the fetch that opened the session: it
        told nothing yet); what each tells is remembered for the next."""
        session = self.session
        assert session is not None
        topics: dict[str, TopicResponse] = {}
        for cached, pd in result.partitions:
            if not cached.must_respond(pd):
                continue
            name = cached.topic
            topic = topics.get(name)
            if topic is None:
                topic = topics[name] = TopicResponse(
                    topic=name if not name.startswith(UNKNOWN_TOPIC_PREFIX) else "", topic_id=cached.topic_id,
                    partitions=[])
            topic.partitions.append(pd)
            cached.answered(pd)
        return FetchResponse(error_code=ErrorCode.NONE, session_id=session.session_id,
                             responses=list(topics.values()))


def _session_for(ctx: RequestContext, request: FetchRequest, replica_id: int) -> FetchSession | int | None:
    """A follower's fetch session (kbroker.cluster.fetch_session), None when the fetch is
    sessionless, or the error code of an unknown session or a wrong epoch."""
    cache = ctx.services.fetch_sessions
    session_id, epoch = request.session_id, request.session_epoch
    if epoch == FINAL_EPOCH or epoch == INITIAL_EPOCH:
        if session_id != INVALID_SESSION_ID:
            cache.remove(session_id)
        if epoch == FINAL_EPOCH:
            return None
        session = cache.create(replica_id)
        if session is None:
            return None
        session.update(_requested(ctx, request), [])
        return session
    session = cache.get(session_id)
    if session is None:
        return ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    if session.epoch != epoch:
        return ErrorCode.INVALID_FETCH_SESSION_EPOCH
    session.epoch = next_epoch(epoch)
    session.update(_requested(ctx, request), [
        (ft.topic if ctx.api_version < 13 else _name_of(ctx.services, ft.topic_id) or "", ft.partitions)
        for ft in request.forgotten_topics_data])
    return session


def _requested(ctx: RequestContext, request: FetchRequest) -> list[tuple[str, Any, list[Any]]]:
    out = []
    for ft in request.topics:
        name = ft.topic if ctx.api_version < 13 else _name_of(ctx.services, ft.topic_id)
        # an unknown topic id stays in the session under a name no topic has: answered
        # UNKNOWN_TOPIC_ID
        out.append((name if name is not None else UNKNOWN_TOPIC_PREFIX + str(ft.topic_id), ft.topic_id,
                    ft.partitions))
    return out


def _session_error(code: int) -> FetchResponse:
    return FetchResponse(error_code=code, session_id=INVALID_SESSION_ID, responses=[])


def _count_bytes_out(stats: BrokerTopicStats, response: FetchResponse, follower: bool) -> None:
    """BytesOutPerSec (ReplicationBytesOutPerSec for a follower), once per answered request."""
    for topic in response.responses:
        sent = sum(records_size(pd.records) for pd in topic.partitions)
        if sent:
            topic_stats = stats.topic(topic.topic)
            if follower:
                topic_stats.replication_bytes_out += sent
            else:
                topic_stats.bytes_out += sent


def _name_of(broker: Any, topic_id: Any) -> str | None:
    info = broker.topics.get_by_id(topic_id) if topic_id != ZERO_UUID else None
    return info.name if info is not None else None


def _replica_id(request: FetchRequest, version: int) -> int:
    if version >= 15:
        state = request.replica_state
        return state.replica_id if state is not None else -1
    return request.replica_id


def error_response(request: FetchRequest, version: int, code: int) -> FetchResponse:
    return FetchResponse(
        error_code=code,
        session_id=0,
        responses=[
            TopicResponse(
                topic=t.topic, topic_id=t.topic_id, partitions=[error_data(p.partition, code) for p in t.partitions]
            )
            for t in request.topics
        ],
    )
