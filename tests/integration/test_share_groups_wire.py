"""Share groups on the wire (KIP-932): ShareGroupHeartbeat's checks, ShareGroupDescribe,
ListGroups and DescribeGroups of a share group, and ShareFetch / ShareAcknowledge in
share sessions (epochs, acknowledgement checks, acquired ranges, long polling),
against the embedded broker."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from kbroker.common.error_code import ErrorCode as E
from kbroker.protocol.messages.describe_groups import DescribeGroupsRequest
from kbroker.protocol.messages.list_groups import ListGroupsRequest
from kbroker.protocol.messages.metadata import MetadataRequest
from kbroker.protocol.messages.share_acknowledge import ShareAcknowledgeRequest
from kbroker.protocol.messages.share_fetch import ShareFetchRequest
from kbroker.protocol.messages.share_group_describe import ShareGroupDescribeRequest
from kbroker.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest

from .groups_support import produce
from .test_groups_wire import metadata
from .wire import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

F = ShareFetchRequest
A = ShareAcknowledgeRequest
ACCEPT, RELEASE, REJECT = 1, 2, 3


def heartbeat(c: WireClient, group: str, topic: str, **fields: Any) -> Any:
    base: dict[str, Any] = {"group_id": group, "member_id": "m-1", "member_epoch": 0,
                            "subscribed_topic_names": [topic]}
    return c.call(ShareGroupHeartbeatRequest(**{**base, **fields}), 1)


def share_fetch(c: WireClient, group: str, epoch: int, topic_id: uuid.UUID | None = None,
                acks: list[tuple[int, int, list[int]]] | None = None, version: int = 2, **fields: Any) -> Any:
    topics = []
    if topic_id is not None:
        topics = [F.FetchTopic(topic_id=topic_id, partitions=[F.FetchPartition(
            partition_index=0, acknowledgement_batches=[
                F.AcknowledgementBatch(first_offset=a, last_offset=b, acknowledge_types=t)
                for a, b, t in acks or []])])]
    base: dict[str, Any] = {"group_id": group, "member_id": "m-1", "share_session_epoch": epoch,
                            "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 100,
                            "batch_size": 100, "topics": topics}
    return c.call(F(**{**base, **fields}), version)


def acknowledge(c: WireClient, group: str, epoch: int, topic_id: uuid.UUID,
                acks: list[tuple[int, int, list[int]]]) -> Any:
    return c.call(A(group_id=group, member_id="m-1", share_session_epoch=epoch, topics=[
        A.AcknowledgeTopic(topic_id=topic_id, partitions=[A.AcknowledgePartition(
            partition_index=0, acknowledgement_batches=[
                A.AcknowledgementBatch(first_offset=a, last_offset=b, acknowledge_types=t)
                for a, b, t in acks])])]), 2)


def topic_info(c: WireClient, topic: str) -> Any:
    """Auto-created, then described with its topic id (Metadata v12)."""
    metadata(c, topic)
    return c.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)]), 12).topics[0]


def acquired(r: Any) -> list[tuple[int, int, int]]:
    return [(a.first_offset, a.last_offset, a.delivery_count)
            for t in r.responses for p in t.partitions for a in p.acquired_records]


def test_heartbeat_describe_and_listing(kbroker_broker: Any) -> None:
    group, topic = f"sg-{uuid.uuid4().hex[:6]}", f"st-{uuid.uuid4().hex[:6]}"
    with WireClient(kbroker_broker.bootstrap_servers) as c:
        info = topic_info(c, topic)
        assert heartbeat(c, group, topic, member_id="").error_code == E.INVALID_REQUEST
        assert heartbeat(c, group, topic, subscribed_topic_names=None).error_code == E.INVALID_REQUEST
        assert heartbeat(c, group, topic, member_epoch=3).error_code == E.UNKNOWN_MEMBER_ID
        r = heartbeat(c, group, topic)
        assert (r.error_code, r.member_id, r.member_epoch) == (E.NONE, "m-1", 1)
        assert [(t.topic_id, sorted(t.partitions)) for t in r.assignment.topic_partitions] == [
            (info.topic_id, list(range(len(info.partitions))))]
        two = heartbeat(c, group, topic, member_id="m-2")  # both get every partition
        assert two.member_epoch == 2 and len(two.assignment.topic_partitions[0].partitions) == len(info.partitions)
        assert heartbeat(c, group, topic, member_epoch=7, subscribed_topic_names=None).error_code == \
            E.FENCED_MEMBER_EPOCH
        again = heartbeat(c, group, topic, member_epoch=1, subscribed_topic_names=None)
        assert (again.error_code, again.member_epoch) == (E.NONE, 2)  # epoch moved to the group's

        d = c.call(ShareGroupDescribeRequest(group_ids=[group, "nope"]), 1).groups
        assert (d[0].error_code, d[0].group_state, d[0].group_epoch, d[0].assignor_name) == (
            E.NONE, "Stable", 2, "simple")
        assert sorted(m.member_id for m in d[0].members) == ["m-1", "m-2"]
        assert {tp.topic_name for m in d[0].members for tp in m.assignment.topic_partitions} == {topic}
        assert d[1].error_code == E.GROUP_ID_NOT_FOUND

        listed = c.call(ListGroupsRequest(types_filter=["share"]), 5).groups
        assert [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed
                if g.group_id == group] == [(group, "share", "Stable", "share")]
        assert group not in {g.group_id for g in c.call(ListGroupsRequest(types_filter=["classic"]), 5).groups}
        dg = c.call(DescribeGroupsRequest(groups=[group]), 6).groups[0]
        assert (dg.error_code, dg.error_message) == (E.GROUP_ID_NOT_FOUND, f"Group {group} is not a classic group.")

        left = heartbeat(c, group, topic, member_epoch=-1, subscribed_topic_names=None)
        assert (left.error_code, left.member_epoch) == (E.NONE, -1)
        d = c.call(ShareGroupDescribeRequest(group_ids=[group]), 1).groups[0]
        assert [m.member_id for m in d.members] == ["m-2"] and d.group_epoch == 3


def test_share_sessions_acquire_and_acknowledge(kbroker_broker: Any) -> None:
    group, topic = f"sg-{uuid.uuid4().hex[:6]}", f"st-{uuid.uuid4().hex[:6]}"
    bootstrap = kbroker_broker.bootstrap_servers
    with WireClient(bootstrap) as c:
        tid = topic_info(c, topic).topic_id
        assert heartbeat(c, group, topic).error_code == E.NONE
        assert share_fetch(c, group, 1).error_code == E.SHARE_SESSION_NOT_FOUND
        assert share_fetch(c, group, 0, tid, [(0, 0, [ACCEPT])]).error_code == E.INVALID_REQUEST
        first = share_fetch(c, group, 0, tid)  # opens the session; the partition starts at its end (latest)
        assert (first.error_code, acquired(first)) == (E.NONE, [])
        assert first.acquisition_lock_timeout_ms == 30000
        produce(bootstrap, topic, [(0, f"v{i}") for i in range(10)])
        assert share_fetch(c, group, 5).error_code == E.INVALID_SHARE_SESSION_EPOCH
        r = share_fetch(c, group, 1, max_records=4)  # the session remembers the partition
        assert acquired(r) == [(0, 3, 1)]
        assert len(r.responses[0].partitions[0].records) > 0
        bad = share_fetch(c, group, 2, tid, [(0, 1, [9])], max_bytes=0)
        assert bad.responses[0].partitions[0].acknowledge_error_code == E.INVALID_REQUEST
        wrong = share_fetch(c, group, 3, tid, [(5, 6, [ACCEPT])], max_bytes=0)  # never acquired
        assert wrong.responses[0].partitions[0].acknowledge_error_code == E.INVALID_RECORD_STATE
        ok = share_fetch(c, group, 4, tid, [(0, 1, [ACCEPT]), (2, 3, [RELEASE, REJECT])])
        assert ok.responses[0].partitions[0].acknowledge_error_code == E.NONE
        assert acquired(ok) == [(2, 2, 2), (4, 9, 1)]  # 2 released: delivered again first
        assert acknowledge(c, group, 0, tid, [(2, 2, [ACCEPT])]).error_code == E.INVALID_SHARE_SESSION_EPOCH
        ack = acknowledge(c, group, 5, tid, [(2, 2, [ACCEPT]), (4, 9, [ACCEPT])])
        assert [p.error_code for t in ack.responses for p in t.partitions] == [E.NONE]
        assert acknowledge(c, group, 6, tid, [(2, 2, [ACCEPT])]).responses[0].partitions[0].error_code == \
            E.INVALID_RECORD_STATE
        empty = share_fetch(c, group, 7, max_wait_ms=50)  # nothing left: waits, then answers empty
        assert (empty.error_code, acquired(empty)) == (E.NONE, [])
        closed = share_fetch(c, group, -1, max_bytes=0)
        assert closed.error_code == E.NONE
        assert share_fetch(c, group, 8).error_code == E.SHARE_SESSION_NOT_FOUND


def test_a_closed_session_releases_and_a_waiting_fetch_wakes_on_produce(kbroker_broker: Any) -> None:
    group, topic = f"sg-{uuid.uuid4().hex[:6]}", f"st-{uuid.uuid4().hex[:6]}"
    bootstrap = kbroker_broker.bootstrap_servers
    with WireClient(bootstrap) as c, WireClient(bootstrap) as other:
        tid = topic_info(c, topic).topic_id
        share_fetch(c, group, 0, tid)
        produce(bootstrap, topic, [(0, f"v{i}") for i in range(3)])
        assert acquired(share_fetch(c, group, 1)) == [(0, 2, 1)]
        share_fetch(c, group, -1, max_bytes=0)  # closing the session releases 0-2
        r = c.call(F(group_id=group, member_id="m-2", share_session_epoch=0, max_wait_ms=0, min_bytes=1,
                     max_bytes=1 << 20, max_records=100, batch_size=100, topics=[F.FetchTopic(
                         topic_id=tid, partitions=[F.FetchPartition(partition_index=0)])]), 2)
        assert acquired(r) == [(0, 2, 2)]
        # a fetch with nothing to acquire waits for the next append
        cid = other.send(F(group_id=group, member_id="m-3", share_session_epoch=0, max_wait_ms=20000, min_bytes=1,
                           max_bytes=1 << 20, max_records=100, batch_size=100, topics=[F.FetchTopic(
                               topic_id=tid, partitions=[F.FetchPartition(partition_index=0)])]), 2)
        produce(bootstrap, topic, [(0, "late")])
        got, woke = other.recv(F.API_KEY, 2)
        assert got == cid and acquired(woke) == [(3, 3, 1)]


def test_a_changed_group_lock_duration_applies_to_the_next_fetch(kbroker_broker: Any) -> None:
    """share.record.lock.duration.ms set on the GROUP resource while the group fetches:
    the next ShareFetch answers it as its acquisition lock timeout (Kafka reads the group
    config at each acquisition)."""
    group, topic = f"sg-{uuid.uuid4().hex[:6]}", f"st-{uuid.uuid4().hex[:6]}"
    bootstrap = kbroker_broker.bootstrap_servers
    with WireClient(bootstrap) as c:
        tid = topic_info(c, topic).topic_id
        assert heartbeat(c, group, topic).error_code == E.NONE
        assert share_fetch(c, group, 0, tid).acquisition_lock_timeout_ms == 30000
        admin = AdminClient({"bootstrap.servers": bootstrap})
        entry = ConfigEntry("share.record.lock.duration.ms", "20000", incremental_operation=AlterConfigOpType.SET)
        for f in admin.incremental_alter_configs([ConfigResource(ResourceType.GROUP, group,
                                                                 incremental_configs=[entry])]).values():
            f.result(30)
        produce(bootstrap, topic, [(0, "a")])
        r = share_fetch(c, group, 1)
        assert (r.acquisition_lock_timeout_ms, acquired(r)) == (20000, [(0, 0, 1)])


def test_a_share_fetch_takes_max_records_across_small_batches(kbroker_broker: Any) -> None:
    """A batch of one record, then one of nine: a ShareFetch of max_records 4 acquires
    offsets 0-3 across both (the log read used to stop at the first batch whenever the
    sparse offset index had no entry between, handing small batches out one at a time)."""
    group, topic = f"sg-{uuid.uuid4().hex[:6]}", f"st-{uuid.uuid4().hex[:6]}"
    bootstrap = kbroker_broker.bootstrap_servers
    with WireClient(bootstrap) as c:
        tid = topic_info(c, topic).topic_id
        assert heartbeat(c, group, topic).error_code == E.NONE
        first = share_fetch(c, group, 0, tid)  # the session; the partition starts at its end
        assert (first.error_code, acquired(first)) == (E.NONE, [])
        produce(bootstrap, topic, [(0, "v0")])
        produce(bootstrap, topic, [(0, f"v{i}") for i in range(1, 10)])
        r = share_fetch(c, group, 1, max_records=4)
        assert acquired(r) == [(0, 3, 1)]
        rest = share_fetch(c, group, 2)
        assert acquired(rest) == [(4, 9, 1)]
