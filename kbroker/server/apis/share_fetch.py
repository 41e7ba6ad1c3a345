"""ShareFetch (key 78), v1-2 (KIP-932): a share group member fetches records it then
holds under a lock, and acknowledges what it got before, in its share session.

As Kafka's KafkaApis.handleShareFetchRequest:
- a null or empty group id or member id: INVALID_REQUEST; the share session epoch (see
  server/share_session_cache.py) 0 opens a session (acknowledgements in it:
  INVALID_REQUEST), -1 acknowledges and closes it (nothing fetched), n > 0 continues it;
  the session's errors are top-level (SHARE_SESSION_NOT_FOUND,
  INVALID_SHARE_SESSION_EPOCH, SHARE_SESSION_LIMIT_REACHED);
- acknowledgements are applied first, each partition answering its
  acknowledge_error_code; then every partition of the session is fetched
  (server/share_partition_manager.py), the answer holding the partitions with acquired
  records or an error; with nothing acquired the request waits up to max_wait_ms for
  records to become available;
- AcquisitionLockTimeoutMs is the group's `share.record.lock.duration.ms`, which a
  fetch's new acquisitions take as it is then (a change applies at once);
- v2: IsRenewAck (the acknowledgements may renew locks, type 4; nothing is fetched);
  ShareAcquireMode is answered as batch-optimized (0) whatever it asks, as the records
  acquired never exceed max_records here.

READ on the group (REQUEST_CHECKS) and on each topic (TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable

from kbroker.common.error_code import ErrorCode
from kbroker.common.topic_partition import TopicPartition
from kbroker.protocol.messages.share_fetch import ShareFetchRequest, ShareFetchResponse
from kbroker.server.apis.share_support import (
    AckResult,
    acknowledge,
    acks_done,
    current_leader,
    share_groups,
    topic_readable,
)
from kbroker.server.request_context import RequestContext
from kbroker.server.share_partition_manager import DelayedShareFetch, PartitionFetch
from kbroker.server.share_session_cache import FINAL_EPOCH, INITIAL_EPOCH, ShareSessionError

R = ShareFetchResponse
E = ErrorCode
DEFAULT_MAX_RECORDS = 500


def handle(ctx: RequestContext, request: ShareFetchRequest) -> ShareFetchResponse | Awaitable[ShareFetchResponse]:
    groups = share_groups(ctx)
    lock_ms = (groups.group_config(request.group_id)["share.record.lock.duration.ms"] if request.group_id
               else ctx.services.config.group_share_record_lock_duration_ms)
    if not request.group_id or not request.member_id:
        return _error(E.INVALID_REQUEST, "GroupId and MemberId must be set.", lock_ms)
    group_id, member_id, epoch = request.group_id, request.member_id, request.share_session_epoch
    has_acks = any(p.acknowledgement_batches for t in request.topics for p in t.partitions)
    named = [(t.topic_id, p.partition_index) for t in request.topics for p in t.partitions]
    forgotten = [(t.topic_id, p) for t in request.forgotten_topics_data for p in t.partitions]
    try:
        if epoch == INITIAL_EPOCH:
            if has_acks:
                return _error(E.INVALID_REQUEST, "Acknowledgements in the request opening a share session.",
                              lock_ms)
            session, old = groups.sessions.open(group_id, member_id)
            groups.session_closed(old)
        else:
            session = groups.sessions.get(group_id, member_id, epoch)
    except ShareSessionError as e:
        return _error(e.code, e.message, lock_ms)
    renew = ctx.api_version >= 2 and request.is_renew_ack
    acks = acknowledge(ctx, group_id, member_id, request.topics, renew)
    if epoch == FINAL_EPOCH:
        groups.sessions.close(group_id, member_id)
        groups.session_closed(session)
        return _answer(ctx, acks, [], lock_ms)
    if forgotten:
        groups.partitions.release_member(group_id, member_id, forgotten)
    session.update(named, forgotten)
    if renew or request.max_bytes <= 0:
        return _answer(ctx, acks, [], lock_ms)
    partitions = list(session.partitions)
    max_records = request.max_records if request.max_records > 0 else DEFAULT_MAX_RECORDS

    def fetch() -> list[PartitionFetch]:
        wanted = [tp for tp in partitions if topic_readable(ctx, tp[0]) == E.NONE]
        refused = [PartitionFetch(t, p, topic_readable(ctx, t)) for t, p in partitions if (t, p) not in wanted]
        return refused + groups.partitions.fetch(group_id, member_id, wanted, request.max_bytes, max_records)

    fetched = fetch()
    if _acquired(fetched) or request.max_wait_ms <= 0 or ctx.services.shutting_down():
        return _answer(ctx, acks, fetched, lock_ms)
    return _park(ctx, request, groups, partitions, fetch, acks, lock_ms)


def _acquired(fetched: list[PartitionFetch]) -> bool:
    return any(pf.acquired or pf.error_code != E.NONE for pf in fetched)


def _park(ctx: RequestContext, request: ShareFetchRequest, groups, partitions, fetch,  # type: ignore[no-untyped-def]
          acks: AckResult | Awaitable[AckResult],
          lock_ms: int) -> Awaitable[ShareFetchResponse]:
    """Nothing acquired: wait in the fetch purgatory until a partition has records
    available (an append, a release, a lock timeout) or max_wait_ms ends."""
    replica_manager = ctx.services.replica_manager
    future: asyncio.Future[list[PartitionFetch]] = asyncio.get_running_loop().create_future()

    def complete() -> None:
        if future.done():
            return
        try:
            future.set_result(fetch())
        except Exception as e:  # noqa: BLE001 - answered as the request's failure
            future.set_exception(e)

    deadline = replica_manager.timer.time() + request.max_wait_ms / 1000
    op = DelayedShareFetch(deadline, lambda: groups.partitions.has_available(request.group_id, partitions),
                           complete)
    keys: list[TopicPartition] = groups.partitions.watch_keys(partitions)
    replica_manager.delayed_fetch_purgatory.try_complete_else_watch(op, keys)

    async def wait() -> ShareFetchResponse:
        try:
            fetched = await future
        finally:
            op.force_complete()
        return _response(ctx, await acks_done(acks), fetched, lock_ms)

    return wait()


def _answer(ctx: RequestContext, acks: AckResult | Awaitable[AckResult], fetched: list[PartitionFetch],
            lock_ms: int) -> ShareFetchResponse | Awaitable[ShareFetchResponse]:
    """The answer, once the acknowledgements are persisted."""
    if isinstance(acks, dict):
        return _response(ctx, acks, fetched, lock_ms)

    async def later() -> ShareFetchResponse:
        return _response(ctx, await acks_done(acks), fetched, lock_ms)
    return later()


def _response(ctx: RequestContext, acks: AckResult, fetched: list[PartitionFetch], lock_ms: int) -> ShareFetchResponse:
    parts: dict[tuple[uuid.UUID, int], R.PartitionData] = {}
    for pf in fetched:
        if not pf.acquired and pf.error_code == E.NONE:
            continue
        parts[(pf.topic_id, pf.partition)] = R.PartitionData(
            partition_index=pf.partition, error_code=pf.error_code, error_message=pf.error_message,
            current_leader=_leader(ctx, pf.topic_id, pf.partition),
            records=pf.records if pf.records is not None else b"",
            acquired_records=[R.AcquiredRecords(first_offset=a.first_offset, last_offset=a.last_offset,
                                                delivery_count=a.delivery_count) for a in pf.acquired])
    for (topic_id, partition), (code, message) in acks.items():
        pd = parts.get((topic_id, partition))
        if pd is None:
            pd = parts[(topic_id, partition)] = R.PartitionData(
                partition_index=partition, current_leader=_leader(ctx, topic_id, partition), records=b"")
        pd.acknowledge_error_code, pd.acknowledge_error_message = code, message
    topics: dict[uuid.UUID, list[R.PartitionData]] = {}
    for (topic_id, _p), pd in parts.items():
        topics.setdefault(topic_id, []).append(pd)
    return R(error_code=E.NONE, acquisition_lock_timeout_ms=lock_ms,
             responses=[R.ShareFetchableTopicResponse(topic_id=t, partitions=ps) for t, ps in topics.items()])


def _leader(ctx: RequestContext, topic_id: uuid.UUID, partition: int) -> R.LeaderIdAndEpoch:
    leader_id, epoch = current_leader(ctx, topic_id, partition)
    return R.LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=epoch)


def _error(code: int, message: str | None, lock_ms: int) -> ShareFetchResponse:
    return R(error_code=code, error_message=message, acquisition_lock_timeout_ms=lock_ms)


def error_response(request: ShareFetchRequest, version: int, code: int) -> ShareFetchResponse:
    return R(error_code=code)
