"""KIP-848 on the wire against an embedded broker: ConsumerGroupHeartbeat v0/v1 and
ConsumerGroupDescribe v0/v1 as raw requests (the errors Kafka answers, the assignment by
topic id), OffsetCommit/OffsetFetch v9 with member epochs, DescribeGroups of a consumer
group at v5 and v6, ListGroups' type filter."""

from __future__ import annotations

from typing import Any

import pytest

from kbroker.common.error_code import ErrorCode as E
from kbroker.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from kbroker.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from kbroker.protocol.messages.describe_groups import DescribeGroupsRequest
from kbroker.protocol.messages.list_groups import ListGroupsRequest
from kbroker.protocol.messages.metadata import MetadataRequest
from kbroker.protocol.messages.offset_commit import OffsetCommitRequest
from kbroker.protocol.messages.offset_fetch import OffsetFetchRequest

from .test_groups_wire import metadata
from .wire import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def heartbeat(c: WireClient, version: int = 1, **fields: Any) -> Any:
    base: dict[str, Any] = {"group_id": "kg", "member_id": "m-1", "member_epoch": 0, "rebalance_timeout_ms": 30000,
                            "subscribed_topic_names": ["kt"], "topic_partitions": []}
    return c.call(ConsumerGroupHeartbeatRequest(**{**base, **fields}), version)


def commit(c: WireClient, member_id: str, epoch: int) -> int:
    req = OffsetCommitRequest(group_id="kg", generation_id_or_member_epoch=epoch, member_id=member_id, topics=[
        OffsetCommitRequest.OffsetCommitRequestTopic(name="kt", partitions=[
            OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=7)])])
    return int(c.call(req, 9).topics[0].partitions[0].error_code)


def test_heartbeat_describe_and_offsets(kbroker_broker: Any) -> None:
    with WireClient(kbroker_broker.bootstrap_servers) as c:
        metadata(c, "kt")  # auto-created
        topic = c.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="kt")]), 12).topics[0]
        assert heartbeat(c, member_id="").error_code == E.INVALID_REQUEST  # v1: the client's id
        assert heartbeat(c, rebalance_timeout_ms=-1).error_code == E.INVALID_REQUEST
        assert heartbeat(c, server_assignor="sticky").error_code == E.UNSUPPORTED_ASSIGNOR
        assert heartbeat(c, subscribed_topic_regex="(").error_code == E.INVALID_REGULAR_EXPRESSION
        assert heartbeat(c, member_epoch=3).error_code == E.UNKNOWN_MEMBER_ID
        r = heartbeat(c)
        assert (r.error_code, r.member_id, r.member_epoch) == (E.NONE, "m-1", 1)
        assert r.heartbeat_interval_ms == 5000
        assert [(t.topic_id, sorted(t.partitions)) for t in r.assignment.topic_partitions] == [
            (topic.topic_id, list(range(len(topic.partitions))))]
        assert heartbeat(c, member_epoch=2, topic_partitions=None).error_code == E.FENCED_MEMBER_EPOCH
        v0 = heartbeat(c, version=0, member_id="")  # v0: the broker makes the id
        assert v0.error_code == E.NONE and len(v0.member_id) == 22 and v0.member_epoch == 2

        assert commit(c, "m-1", 1) == E.NONE
        assert commit(c, "m-1", 0) == E.STALE_MEMBER_EPOCH
        assert commit(c, "m-1", 5) == E.FENCED_MEMBER_EPOCH
        assert commit(c, "nobody", 1) == E.UNKNOWN_MEMBER_ID
        fetch = c.call(OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
            group_id="kg", member_id="m-1", member_epoch=1, topics=None)]), 9)
        assert fetch.groups[0].error_code == E.NONE
        assert fetch.groups[0].topics[0].partitions[0].committed_offset == 7
        stale = c.call(OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
            group_id="kg", member_id="m-1", member_epoch=0, topics=None)]), 9)
        assert stale.groups[0].error_code == E.STALE_MEMBER_EPOCH

        for version in (0, 1):
            d = c.call(ConsumerGroupDescribeRequest(group_ids=["kg", "nope"]), version).groups
            assert (d[0].error_code, d[0].group_epoch, d[0].assignor_name) == (E.NONE, 2, "uniform")
            assert d[0].group_state in ("Reconciling", "Stable", "Assigning")
            assert sorted(m.member_id for m in d[0].members) == sorted(["m-1", v0.member_id])
            assert {tp.topic_name for m in d[0].members for tp in m.target_assignment.topic_partitions} == {"kt"}
            assert d[1].error_code == E.GROUP_ID_NOT_FOUND
            if version == 1:
                assert {m.member_type for m in d[0].members} == {1}
        old = c.call(DescribeGroupsRequest(groups=["kg"]), 5).groups[0]
        assert (old.error_code, old.group_state) == (E.NONE, "Dead")
        new = c.call(DescribeGroupsRequest(groups=["kg"]), 6).groups[0]
        assert (new.error_code, new.error_message) == (E.GROUP_ID_NOT_FOUND, "Group kg is not a classic group.")
        listed = c.call(ListGroupsRequest(types_filter=["consumer"]), 5).groups
        assert [(g.group_id, g.group_type, g.protocol_type) for g in listed] == [("kg", "consumer", "consumer")]
        assert c.call(ListGroupsRequest(types_filter=["classic"]), 5).groups == []
        left = heartbeat(c, member_epoch=-1, topic_partitions=None)
        assert (left.error_code, left.member_epoch) == (E.NONE, -1)
