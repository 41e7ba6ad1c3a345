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

Long poll: while fewer than `min_bytes` are available, no partition has an
error, no record bound above left records out (waiting would bring no more) and
`max_wait_ms` has not passed, the request parks in the ReplicaManager's fetch purgatory
(a DelayedFetch; a PendingResponse to the connection) and re-reads when one of its
partitions is appended to, inside the request that appended (Kafka's DelayedFetch
completed by the appending thread), or at the deadline.

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
parked request's re-reads count again, as Kafka's DelayedFetch does), and the bytes a
response carries count once, when it is answered.
"""

from __future__ import annotations

import logging
from typing import Any

from kbroker.cluster.broker_topic_stats import BrokerTopicStats
from kbroker.cluster.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    CachedPartition,
    FetchSession,
    next_epoch,
)
from kbroker.cluster.partition import Partition
from kbroker.common.error_code import ErrorCode
from kbroker.common.errors import KafkaError
from kbroker.common.topic_partition import TopicPartition
from kbroker.protocol.codec import ZERO_UUID
from kbroker.protocol.messages.fetch import FetchRequest, FetchResponse
from kbroker.server import authorization as authz
from kbroker.server.request_context import PendingResponse, RequestContext
from kbroker.server.response_writer import INLINE_SLICE_BYTES
from kbroker.storage.log import Log
from kbroker.utils.purgatory import DelayedOperation

log = logging.getLogger(__name__)

TopicResponse = FetchResponse.FetchableTopicResponse
PartitionData = FetchResponse.PartitionData
AbortedTransaction = FetchResponse.AbortedTransaction

READ_COMMITTED = 1
_UNKNOWN_ID = "\0"


def _now_ms(ctx: RequestContext) -> float:
    # Long-poll waits are network time: the purgatory's timer (the loop's monotonic clock),
    # not the injected wall clock.
    return ctx.services.replica_manager.timer.time() * 1000


def handle(ctx: RequestContext, request: FetchRequest) -> FetchResponse | PendingResponse:
    """Answer at once when the data is there; else park the request (a PendingResponse)."""
    deadline = _now_ms(ctx) + max(0, request.max_wait_ms)
    session: _Session | None = None
    if ctx.api_version >= 7 and ctx.services.support.serves_followers and _replica_id(request, ctx.api_version) >= 0:
        found = _session_for(ctx, request)
        if isinstance(found, int):
            return _session_error(found)
        session = found
    purgatory = ctx.services.replica_manager.delayed_fetch_purgatory
    # A follower's read may move the high watermark: the other follower's parked Fetch
    # (and consumers') re-read once this read is over.
    with purgatory.held():
        response, tps = _read_once(ctx, request, deadline, session)
    if tps is None:
        return response
    # Parked now, not on a later loop turn: an append in between must wake it, or a
    # follower's Fetch (and every acks=all Produce waiting on it) would sleep the whole
    # max_wait_ms.
    op = DelayedFetch(deadline / 1000, ctx, request, session)
    purgatory.watch(op, tps)
    return op.pending


class DelayedFetch(DelayedOperation):
    """A Fetch parked for min_bytes (Kafka's DelayedFetch), in the ReplicaManager's fetch
    purgatory on the partitions it read. Tried again inside the request that appended to
    one of them (the answer is queued in the same loop turn); answered when a read finds
    enough, or at the deadline with what there is."""

    __slots__ = ("ctx", "request", "session", "pending", "_response")

    def __init__(self, deadline: float, ctx: RequestContext, request: FetchRequest,
                 session: _Session | None) -> None:
        super().__init__(deadline)
        self.ctx = ctx
        self.request = request
        self.session = session
        self.pending = PendingResponse()
        self._response: FetchResponse | None = None

    def try_complete(self) -> bool:
        if self.pending.cancelled:  # the connection closed: no more reads for it
            return self.force_complete()
        try:
            response, again = _read_once(self.ctx, self.request, self.deadline * 1000, self.session)
        except Exception as e:
            self.pending.fail(e)
            return self.force_complete()
        if again is not None:
            return False
        self._response = response
        return self.force_complete()

    def on_complete(self) -> None:
        if self.pending.done:
            return
        response = self._response
        if response is None:  # the deadline: what there is now
            try:
                response, _again = _read_once(self.ctx, self.request, self.deadline * 1000, self.session,
                                              final=True)
            except Exception as e:
                self.pending.fail(e)
                return
        self.pending.complete(response)


# A follower's fetch in a session: the session, and whether this fetch is a full one
# (it opened the session: every partition is answered).
_Session = tuple[FetchSession, bool]


def _session_for(ctx: RequestContext, request: FetchRequest) -> _Session | int | None:
    """A follower's fetch session (kbroker.cluster.fetch_session), None when the fetch is
    sessionless, or the error code of an unknown session or a wrong epoch."""
    cache = ctx.services.fetch_sessions
    session_id, epoch = request.session_id, request.session_epoch
    if epoch == FINAL_EPOCH or epoch == INITIAL_EPOCH:
        if session_id != INVALID_SESSION_ID:
            cache.remove(session_id)
        if epoch == FINAL_EPOCH:
            return None
        session = cache.create(_replica_id(request, ctx.api_version))
        if session is None:
            return None
        session.update(_requested(ctx, request), [])
        return session, True
    session = cache.get(session_id)
    if session is None:
        return ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    if session.epoch != epoch:
        return ErrorCode.INVALID_FETCH_SESSION_EPOCH
    session.epoch = next_epoch(epoch)
    session.update(_requested(ctx, request), [
        (ft.topic if ctx.api_version < 13 else _name_of(ctx.services, ft.topic_id) or "", ft.partitions)
        for ft in request.forgotten_topics_data])
    return session, False


def _requested(ctx: RequestContext, request: FetchRequest) -> list[tuple[str, Any, list[Any]]]:
    out = []
    for ft in request.topics:
        name = ft.topic if ctx.api_version < 13 else _name_of(ctx.services, ft.topic_id)
        # an unknown topic id stays in the session under a name no topic has (it starts with
        # a NUL): answered UNKNOWN_TOPIC_ID
        out.append((name if name is not None else _UNKNOWN_ID + str(ft.topic_id), ft.topic_id,
                    ft.partitions))
    return out


def _session_error(code: int) -> FetchResponse:
    return FetchResponse(error_code=code, session_id=INVALID_SESSION_ID, responses=[])


def _read_once(
    ctx: RequestContext, request: FetchRequest, deadline: float, session: _Session | None = None,
    final: bool = False,
) -> tuple[FetchResponse, list[Any] | None]:
    """The response, and the partitions to wait on if the request should park (never when
    `final`: its wait is over)."""
    answered: list[tuple[CachedPartition, PartitionData]] = []
    cut = False  # kbroker's own record bounds (consumers only) held records back
    if session is None:
        response, nbytes, error, tps, cut = _read(ctx, request)
    else:
        response, nbytes, error, tps = _read_session(ctx, request, session[0], session[1], answered)
    broker = ctx.services
    if (
        final
        or nbytes >= request.min_bytes
        or cut  # kbroker's own record bounds held data back: more would not come by waiting
        or error
        or not tps
        or broker.shutting_down()
        or deadline - _now_ms(ctx) <= 0
    ):
        if nbytes:
            _count_bytes_out(broker.topic_stats, response, _replica_id(request, ctx.api_version) >= 0)
        for cached, pd in answered:
            cached.answered(pd)
        return response, None
    return response, tps


def _count_bytes_out(stats: BrokerTopicStats, response: FetchResponse, follower: bool) -> None:
    """BytesOutPerSec (ReplicationBytesOutPerSec for a follower), once per answered request."""
    for topic in response.responses:
        sent = sum(_size(pd.records) for pd in topic.partitions)
        if sent:
            topic_stats = stats.topic(topic.topic)
            if follower:
                topic_stats.replication_bytes_out += sent
            else:
                topic_stats.bytes_out += sent


def _read(ctx: RequestContext, request: FetchRequest) -> tuple[FetchResponse, int, bool, list[Any], bool]:
    """The response, its bytes, whether a partition failed, the partitions read, and whether
    a record bound (step or budget) left records out."""
    broker = ctx.services
    version = ctx.api_version
    replica_id = _replica_id(request, version)
    if replica_id >= 0 and not broker.support.serves_followers:
        replica_id = -1  # a single broker has no followers: treat it as a consumer
    committed = request.isolation_level == READ_COMMITTED
    budget = request.max_bytes if request.max_bytes > 0 else 0x7FFFFFFF
    step = 0
    records_left: int | None = None  # fetch.response.max.records still to give; None: no bound
    if replica_id < 0:
        budget = min(budget, broker.config.fetch_max_bytes)
        step = broker.config.fetch_partition_response_max_records
        records_left = broker.config.fetch_response_max_records or None
    total = 0
    error = False
    cut = False
    tps: list[Any] = []
    topics = []
    readable: set[str] | None = None  # None: every topic (no authorizer)
    if authz.enabled(ctx):
        if replica_id >= 0:
            readable = set() if not authz.authorize_cluster(ctx, "CLUSTER_ACTION") else None
        else:
            readable = authz.authorized_topics(ctx, "READ", (
                n for ft in request.topics
                if (n := ft.topic if version < 13 else _name_of(broker, ft.topic_id))))
    for ft in request.topics:
        if version >= 13:
            info = broker.topics.get_by_id(ft.topic_id) if ft.topic_id != ZERO_UUID else None
            name = info.name if info is not None else None
            missing = ErrorCode.UNKNOWN_TOPIC_ID
        else:
            name = ft.topic
            missing = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        partitions = []
        for fp in ft.partitions:
            if name is None:
                partitions.append(_error(fp.partition, missing))
                error = True
                continue
            if readable is not None and name not in readable:
                partitions.append(_error(fp.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                error = True
                continue
            tp = TopicPartition(name, fp.partition)
            try:
                partition = broker.replica_manager.leader_partition(tp, fp.current_leader_epoch)
            except KafkaError as e:
                partitions.append(_error(fp.partition, e.error_code))
                error = True
                continue
            tps.append(tp)
            stats = broker.topic_stats.topic(name)
            stats.total_fetch_requests += 1
            if replica_id >= 0:
                pd = _read_for_follower(partition, replica_id, fp, budget - total, total == 0)
            elif records_left is not None and records_left <= 0:
                # The response's records are given out: this partition answers no records
                # this time (librdkafka starts its next Fetch at the next partition), and
                # its log is not read (a consumer of 64 partitions asks for all of them).
                pd = _unread_partition(partition.local_log(), fp, committed)
                cut = cut or pd.high_watermark > fp.fetch_offset
            else:
                cap = step if records_left is None else min(step or records_left, records_left)
                pd, upper = _read_partition(partition.local_log(), fp, committed, budget - total,
                                            total == 0, cap)
                if _size(pd.records) and cap and pd.high_watermark - fp.fetch_offset > cap:
                    cut = True
                if records_left is not None and _size(pd.records):
                    # The budget's last partition may overshoot it by up to a batch.
                    records_left -= max(1, min(pd.high_watermark, upper) - fp.fetch_offset)
            if pd.error_code:
                if pd.error_code != ErrorCode.OFFSET_OUT_OF_RANGE:  # Kafka: not a failure
                    stats.failed_fetch_requests += 1
                error = True
            else:
                total += _size(pd.records)
            partitions.append(pd)
        topics.append(TopicResponse(topic=name or "", topic_id=ft.topic_id, partitions=partitions))
    response = FetchResponse(error_code=ErrorCode.NONE, session_id=0, responses=topics)
    return response, total, error, tps, cut


def _unread_partition(plog: Log, fp: FetchRequest.FetchPartition, committed: bool) -> PartitionData:
    """A partition's answer without records: its offsets, or OFFSET_OUT_OF_RANGE as a read
    would have answered."""
    out_of_range = not plog.log_start_offset <= fp.fetch_offset <= plog.log_end_offset
    return PartitionData(
        partition_index=fp.partition,
        error_code=ErrorCode.OFFSET_OUT_OF_RANGE if out_of_range else ErrorCode.NONE,
        high_watermark=plog.high_watermark, last_stable_offset=plog.last_stable_offset,
        log_start_offset=plog.log_start_offset, aborted_transactions=[] if committed else None,
        records=b"")


def _read_session(ctx: RequestContext, request: FetchRequest, session: FetchSession, full: bool,
                  answered: list[tuple[CachedPartition, PartitionData]],
                  ) -> tuple[FetchResponse, int, bool, list[Any]]:
    """A follower's fetch in a session: every partition of the session is read (those the
    request left out at their last position), the answer has those with news (all of
    them when `full`); `answered` gets each answered partition with its data."""
    broker = ctx.services
    replica_id = session.replica_id
    budget = request.max_bytes if request.max_bytes > 0 else 0x7FFFFFFF
    authorized = not authz.enabled(ctx) or authz.authorize_cluster(ctx, "CLUSTER_ACTION")
    total = 0
    error = False
    tps: list[Any] = []
    topics: dict[str, TopicResponse] = {}
    replica_manager = broker.replica_manager
    partitions = replica_manager.partitions
    now_ms = -1
    for cached in session.partitions.values():
        quiet = cached.quiet
        if quiet is not None and not full and authorized:
            # Caught up at the last read with nothing to tell: if nothing it depends on
            # moved (the partition's state and log, the follower's position, the log's
            # offsets), this read would find the same, so only the follower's fetch time
            # is new. As the slow path below, without its lookups.
            tp, led, state, plog, follower, stats = quiet
            offset = cached.fetch_offset
            if (led.state is state and not led.fenced and led.log is plog
                    and not plog.closed and partitions.get(tp) is led
                    and follower.log_end_offset == offset and plog.log_end_offset == offset
                    and cached.unchanged(plog.high_watermark, plog.log_start_offset)):
                tps.append(tp)
                stats.total_fetch_requests += 1
                if now_ms < 0:
                    now_ms = replica_manager.now_ms()  # the clock of every Partition's followers
                follower.update(offset, offset, now_ms)
                continue
            cached.quiet = None
        name = cached.topic
        if not authorized:
            pd = _error(cached.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        elif name.startswith(_UNKNOWN_ID):
            pd = _error(cached.partition, ErrorCode.UNKNOWN_TOPIC_ID)
        else:
            tp = TopicPartition(name, cached.partition)
            try:
                partition = broker.replica_manager.leader_partition(tp, cached.current_leader_epoch)
            except KafkaError as e:
                pd = _error(cached.partition, e.error_code)
            else:
                tps.append(tp)
                stats = broker.topic_stats.topic(name)
                stats.total_fetch_requests += 1
                plog = partition.local_log()
                offset = cached.fetch_offset
                if (not full and offset == plog.log_end_offset and offset >= plog.log_start_offset
                        and cached.unchanged(plog.high_watermark, plog.log_start_offset)):
                    # caught up, nothing new to tell: the usual case for most partitions
                    partition.update_follower_fetch_state(replica_id, offset, offset)
                    follower = partition.followers.get(replica_id)
                    if (follower is not None and follower.log_end_offset == offset
                            and replica_id in partition.state.isr):
                        cached.quiet = (tp, partition, partition.state, plog, follower, stats)
                    continue
                pd = _read_for_follower(partition, replica_id, cached, budget - total, total == 0)
                if pd.error_code:
                    if pd.error_code != ErrorCode.OFFSET_OUT_OF_RANGE:
                        stats.failed_fetch_requests += 1
                else:
                    total += _size(pd.records)
        if pd.error_code:
            error = True
        if full or cached.must_respond(pd):
            topic = topics.get(name)
            if topic is None:
                topic = topics[name] = TopicResponse(
                    topic=name if not name.startswith(_UNKNOWN_ID) else "", topic_id=cached.topic_id,
                    partitions=[])
            topic.partitions.append(pd)
            answered.append((cached, pd))
    response = FetchResponse(error_code=ErrorCode.NONE, session_id=session.session_id,
                             responses=list(topics.values()))
    return response, total, error, tps


def _name_of(broker: Any, topic_id: Any) -> str | None:
    info = broker.topics.get_by_id(topic_id) if topic_id != ZERO_UUID else None
    return info.name if info is not None else None


def _replica_id(request: FetchRequest, version: int) -> int:
    if version >= 15:
        state = request.replica_state
        return state.replica_id if state is not None else -1
    return request.replica_id


def _read_for_follower(partition: Partition, replica_id: int,
                       fp: FetchRequest.FetchPartition | CachedPartition, budget: int,
                       first: bool) -> PartitionData:
    """A follower's fetch: everything up to the log end; its offset moves its progress."""
    plog = partition.local_log()
    leo = plog.log_end_offset
    if fp.fetch_offset < plog.log_start_offset or fp.fetch_offset > leo:
        pd = _error(fp.partition, ErrorCode.OFFSET_OUT_OF_RANGE)
        pd.log_start_offset, pd.high_watermark = plog.log_start_offset, plog.high_watermark
        return pd
    partition.update_follower_fetch_state(replica_id, fp.fetch_offset, leo)
    pd = PartitionData(
        partition_index=fp.partition, error_code=ErrorCode.NONE,
        high_watermark=plog.high_watermark, last_stable_offset=plog.last_stable_offset,
        log_start_offset=plog.log_start_offset, records=b"")
    if fp.fetch_offset == leo:  # caught up: nothing to read
        return pd
    max_bytes = max(0, min(fp.partition_max_bytes, budget))
    try:
        data = plog.read(fp.fetch_offset, max_bytes, max_offset=leo, min_one_message=first)
    except KafkaError as e:
        pd.error_code = e.error_code
        return pd
    if data.records is not None and data.records.size > 0:
        pd.records = data.records
    return pd


def _read_partition(
    plog: Log, fp: FetchRequest.FetchPartition, committed: bool, budget: int, first: bool,
    max_records: int = 0,
) -> tuple[PartitionData, int]:
    """The partition's answer, and an offset above every record in it (for the response's
    record budget: a slice cut short by bytes holds fewer records than its cap)."""
    high_watermark = plog.high_watermark
    last_stable = plog.last_stable_offset
    max_offset = last_stable if committed else high_watermark
    max_bytes = max(0, min(fp.partition_max_bytes, budget))
    pd = PartitionData(
        partition_index=fp.partition,
        error_code=ErrorCode.NONE,
        high_watermark=high_watermark,
        last_stable_offset=last_stable,
        log_start_offset=plog.log_start_offset,
        aborted_transactions=[] if committed else None,
        records=b"",
    )
    try:
        data = plog.read(fp.fetch_offset, max_bytes, max_offset=max_offset, min_one_message=first,
                         max_records=max_records)
    except KafkaError as e:
        pd.error_code = e.error_code
        return pd, fp.fetch_offset
    records = data.records
    if committed and records is not None:
        pd.aborted_transactions = [
            AbortedTransaction(producer_id=t.producer_id, first_offset=t.first_offset)
            for t in plog.collect_aborted_transactions(fp.fetch_offset, data)]
    if records is not None and records.size > 0:
        # A small slice is read now (the writer would copy it anyway, to send it with the
        # bytes around it): a Fetch over thousands of partitions then holds no descriptor
        # per partition while its response is built.
        pd.records = records.read_bytes() if records.size <= INLINE_SLICE_BYTES else records
    bounded = max_records and records is not None and records.size > 0
    return pd, plog.read_upper_bound_offset(data) if bounded else high_watermark


def _size(records: Any) -> int:
    if records is None:
        return 0
    return len(records) if isinstance(records, bytes | bytearray | memoryview) else int(records.size)


def _error(partition: int, code: int) -> PartitionData:
    return PartitionData(
        partition_index=partition,
        error_code=code,
        high_watermark=-1,
        last_stable_offset=-1,
        log_start_offset=-1,
        records=b"",
    )


def error_response(request: FetchRequest, version: int, code: int) -> FetchResponse:
    return FetchResponse(
        error_code=code,
        session_id=0,
        responses=[
            TopicResponse(
                topic=t.topic, topic_id=t.topic_id, partitions=[_error(p.partition, code) for p in t.partitions]
            )
            for t in request.topics
        ],
    )
