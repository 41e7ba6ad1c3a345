"""Group APIs on the wire, with exact requests: FindCoordinator batching, the internal
topic in Metadata, JoinGroup versions, OffsetCommit/OffsetFetch shapes, OffsetDelete,
DescribeGroups' unknown group before and from v6."""

from __future__ import annotations

from typing import Any

import pytest

from kbroker.common.error_code import ErrorCode as E
from kbroker.protocol.messages.describe_groups import DescribeGroupsRequest
from kbroker.protocol.messages.find_coordinator import FindCoordinatorRequest
from kbroker.protocol.messages.heartbeat import HeartbeatRequest
from kbroker.protocol.messages.join_group import JoinGroupRequest
from kbroker.protocol.messages.leave_group import LeaveGroupRequest
from kbroker.protocol.messages.metadata import MetadataRequest
from kbroker.protocol.messages.offset_commit import OffsetCommitRequest
from kbroker.protocol.messages.offset_delete import OffsetDeleteRequest
from kbroker.protocol.messages.offset_fetch import OffsetFetchRequest
from kbroker.protocol.messages.sync_group import SyncGroupRequest

from .wire import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

OFFSETS_TOPIC = "__consumer_offsets"


def metadata(c: WireClient, topic: str) -> Any:
    r = c.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                               allow_auto_topic_creation=True), 9)
    return r.topics[0]


def test_find_coordinator_creates_the_internal_topic(kbroker_broker: Any) -> None:
    with WireClient(kbroker_broker.bootstrap_servers) as c:
        assert metadata(c, OFFSETS_TOPIC).error_code == E.UNKNOWN_TOPIC_OR_PARTITION  # never auto-created
        r = c.call(FindCoordinatorRequest(key_type=0, coordinator_keys=["g1", "g2"]), 4)
        assert [(x.key, x.error_code, x.node_id) for x in r.coordinators] == [("g1", 0, 0), ("g2", 0, 0)]
        assert r.coordinators[0].port == kbroker_broker.port
        old = c.call(FindCoordinatorRequest(key="g1"), 0)
        assert (old.error_code, old.node_id, old.port) == (0, 0, kbroker_broker.port)
        assert metadata(c, "__transaction_state").error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        txn = c.call(FindCoordinatorRequest(key_type=1, coordinator_keys=["t"]), 4)
        assert (txn.coordinators[0].error_code, txn.coordinators[0].node_id) == (E.NONE, 0)
        for name in (OFFSETS_TOPIC, "__transaction_state"):
            t = metadata(c, name)
            assert t.error_code == E.NONE and t.is_internal and len(t.partitions) == 50


def join(c: WireClient, version: int, member_id: str = "", instance: str | None = None) -> Any:
    req = JoinGroupRequest(group_id="wg", session_timeout_ms=10000, rebalance_timeout_ms=10000,
                           member_id=member_id, group_instance_id=instance, protocol_type="consumer",
                           protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"md")])
    return c.call(req, version)


@pytest.mark.parametrize("version", [0, 3, 4, 7, 9])
def test_join_sync_heartbeat_leave_versions(kbroker_broker: Any, version: int) -> None:
    with WireClient(kbroker_broker.bootstrap_servers) as c:
        r = join(c, version)
        if version >= 4:
            assert r.error_code == E.MEMBER_ID_REQUIRED and r.member_id
            r = join(c, version, r.member_id)
        assert r.error_code == E.NONE and r.leader == r.member_id
        assert [(m.member_id, m.metadata) for m in r.members] == [(r.member_id, b"md")]
        assert r.protocol_name == "range"
        if version >= 7:
            assert r.protocol_type == "consumer"
        sync_v = min(version, 5)
        s = c.call(SyncGroupRequest(group_id="wg", generation_id=r.generation_id, member_id=r.member_id,
                                    protocol_type="consumer", protocol_name="range",
                                    assignments=[SyncGroupRequest.SyncGroupRequestAssignment(
                                        member_id=r.member_id, assignment=b"asg")]), sync_v)
        assert (s.error_code, s.assignment) == (E.NONE, b"asg")
        hb_v = min(version, 4)
        h = c.call(HeartbeatRequest(group_id="wg", generation_id=r.generation_id, member_id=r.member_id), hb_v)
        assert h.error_code == E.NONE
        bad = c.call(HeartbeatRequest(group_id="wg", generation_id=r.generation_id + 5,
                                      member_id=r.member_id), hb_v)
        assert bad.error_code == E.ILLEGAL_GENERATION
        leave_v = min(version, 5)
        if leave_v >= 3:
            req = LeaveGroupRequest(group_id="wg", members=[
                LeaveGroupRequest.MemberIdentity(member_id=r.member_id),
                LeaveGroupRequest.MemberIdentity(member_id="ghost")])
            lr = c.call(req, leave_v)
            assert [m.error_code for m in lr.members] == [E.NONE, E.UNKNOWN_MEMBER_ID]
        else:
            assert c.call(LeaveGroupRequest(group_id="wg", member_id=r.member_id), leave_v).error_code == 0


def test_offset_commit_fetch_shapes_and_delete(kbroker_broker: Any) -> None:
    with WireClient(kbroker_broker.bootstrap_servers) as c:
        assert metadata(c, "ot").error_code == E.NONE  # auto-created with 1 partition
        P = OffsetCommitRequest.OffsetCommitRequestPartition
        commit = OffsetCommitRequest(group_id="og", generation_id_or_member_epoch=-1, member_id="",
                                     topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name="ot", partitions=[
                                         P(partition_index=0, committed_offset=17, committed_leader_epoch=4,
                                           committed_metadata="meta-data"),
                                         P(partition_index=9, committed_offset=1)])])
        r = c.call(commit, 8)
        assert [p.error_code for p in r.topics[0].partitions] == [E.NONE, E.UNKNOWN_TOPIC_OR_PARTITION]
        f7 = c.call(OffsetFetchRequest(group_id="og", topics=None), 7)
        p = f7.topics[0].partitions[0]
        assert (f7.topics[0].name, p.committed_offset, p.committed_leader_epoch, p.metadata) == (
            "ot", 17, 4, "meta-data")
        req8 = OffsetFetchRequest(groups=[
            OffsetFetchRequest.OffsetFetchRequestGroup(group_id="og", topics=[
                OffsetFetchRequest.OffsetFetchRequestTopics(name="ot", partition_indexes=[0, 1])]),
            OffsetFetchRequest.OffsetFetchRequestGroup(group_id="none", topics=None)], require_stable=True)
        f8 = c.call(req8, 8)
        g = {x.group_id: x for x in f8.groups}
        assert [(q.partition_index, q.committed_offset) for q in g["og"].topics[0].partitions] == [(0, 17), (1, -1)]
        assert g["none"].topics == [] and g["none"].error_code == 0
        f1 = c.call(OffsetFetchRequest(group_id="og", topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(name="ot", partition_indexes=[0])]), 1)
        assert f1.topics[0].partitions[0].committed_offset == 17
        d = c.call(OffsetDeleteRequest(group_id="og", topics=[OffsetDeleteRequest.OffsetDeleteRequestTopic(
            name="ot", partitions=[OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)])]), 0)
        assert d.error_code == 0 and d.topics[0].partitions[0].error_code == 0
        assert c.call(OffsetFetchRequest(group_id="og", topics=None), 7).topics == []
        missing = c.call(OffsetDeleteRequest(group_id="nope", topics=[]), 0)
        assert missing.error_code == E.GROUP_ID_NOT_FOUND


def test_shutdown_does_not_wait_for_parked_joins(tmp_path: Any, caplog: pytest.LogCaptureFixture) -> None:
    import logging
    import time

    from kbroker.broker import Broker

    broker = Broker({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "logs"),
                     "group.initial.rebalance.delay.ms": "0"}).start()
    try:
        with WireClient(broker.bootstrap_servers) as a, WireClient(broker.bootstrap_servers) as b:
            first = join(a, 3)
            assert first.error_code == E.NONE
            b.send(JoinGroupRequest(group_id="wg", session_timeout_ms=10000, rebalance_timeout_ms=60000,
                                    member_id="", protocol_type="consumer", protocols=[
                                        JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")]), 3)
            deadline = time.monotonic() + 10
            while broker.server.request_queue.requests < 1:  # b's join is held (parked)
                assert time.monotonic() < deadline, "b's JoinGroup was never read"
                time.sleep(0.01)
            with caplog.at_level(logging.WARNING, logger="kbroker.server.listener"):
                broker.stop()
            # answered at shutdown, not left to the drain's timeout
            assert not [r for r in caplog.records if "still busy" in r.getMessage()]
            _, parked = b.recv(JoinGroupRequest.API_KEY, 3)
            assert parked.error_code == E.NOT_COORDINATOR
    finally:
        broker.stop()


def test_deleting_a_topic_deletes_its_committed_offsets(kbroker_broker: Any) -> None:
    from kbroker.protocol.messages.delete_topics import DeleteTopicsRequest

    with WireClient(kbroker_broker.bootstrap_servers) as c:
        assert metadata(c, "doomed").error_code == E.NONE
        P = OffsetCommitRequest.OffsetCommitRequestPartition
        c.call(OffsetCommitRequest(group_id="dg", generation_id_or_member_epoch=-1, member_id="", topics=[
            OffsetCommitRequest.OffsetCommitRequestTopic(name="doomed", partitions=[
                P(partition_index=0, committed_offset=5)])]), 8)
        assert c.call(OffsetFetchRequest(group_id="dg", topics=None), 7).topics[0].name == "doomed"
        r = c.call(DeleteTopicsRequest(topic_names=["doomed"], timeout_ms=5000), 5)
        assert r.responses[0].error_code == E.NONE
        assert c.call(OffsetFetchRequest(group_id="dg", topics=None), 7).topics == []


def test_describe_groups_unknown_group_by_version(kbroker_broker: Any) -> None:
    """KIP-1043: v0-5 describe an unknown group as Dead without error; v6 adds
    GROUP_ID_NOT_FOUND and a message (kafka-python's admin, at v6, is in
    test_admin_python_clients)."""
    with WireClient(kbroker_broker.bootstrap_servers) as c:
        assert c.call(FindCoordinatorRequest(key="ghost"), 0).error_code == 0
        for version in range(7):
            g = c.call(DescribeGroupsRequest(groups=["ghost"]), version).groups[0]
            assert (g.group_id, g.group_state, g.members) == ("ghost", "Dead", [])
            if version < 6:
                assert g.error_code == E.NONE
            else:
                assert (g.error_code, g.error_message) == (E.GROUP_ID_NOT_FOUND, "Group ghost not found.")
