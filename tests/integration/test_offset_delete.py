"""OffsetDelete (key 47) on a Stable classic group, with the members' subscriptions as exact
bytes: Kafka reads each as its version-0 prefix (ClassicGroup.computeSubscribedTopics), so a
v1 subscription that stops after user_data (what @platformatic/kafka 2.11 sends) still names
its topics; a subscription that does not read at all counts as subscribed to every topic
(GROUP_SUBSCRIBED_TO_TOPIC per partition); a non-`consumer` group with members is
NON_EMPTY_GROUP."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from kbroker.common.error_code import ErrorCode as E
from kbroker.protocol.messages.create_topics import CreateTopicsRequest
from kbroker.protocol.messages.describe_groups import DescribeGroupsRequest
from kbroker.protocol.messages.join_group import JoinGroupRequest
from kbroker.protocol.messages.offset_commit import OffsetCommitRequest
from kbroker.protocol.messages.offset_delete import OffsetDeleteRequest
from kbroker.protocol.messages.offset_fetch import OffsetFetchRequest
from kbroker.protocol.messages.sync_group import SyncGroupRequest

from .wire import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def _string(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def platformatic_v1_subscription(*topics: str) -> bytes:
    """A subscription as @platformatic/kafka 2.11 encodes it (consumer.js,
    #encodeProtocolSubscriptionMetadata): version 1 declared, then only version 0's fields,
    user_data null; no owned_partitions."""
    return (struct.pack(">hi", 1, len(topics)) + b"".join(_string(t) for t in topics)
            + struct.pack(">i", -1))


def stable_group(c: WireClient, group: str, protocol_type: str, metadata: bytes) -> None:
    """One member joined and synced (JoinGroup v3, SyncGroup v1): the group is Stable."""
    j = c.call(JoinGroupRequest(group_id=group, session_timeout_ms=30000, rebalance_timeout_ms=30000,
                                member_id="", protocol_type=protocol_type, protocols=[
                                    JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=metadata)]), 3)
    assert j.error_code == E.NONE
    s = c.call(SyncGroupRequest(group_id=group, generation_id=j.generation_id, member_id=j.member_id,
                                assignments=[SyncGroupRequest.SyncGroupRequestAssignment(
                                    member_id=j.member_id, assignment=b"")]), 1)
    assert s.error_code == E.NONE
    d = c.call(DescribeGroupsRequest(groups=[group]), 0)
    assert d.groups[0].group_state == "Stable"


def commit(c: WireClient, group: str, *topics: str) -> None:
    P = OffsetCommitRequest.OffsetCommitRequestPartition
    r = c.call(OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
        OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=[P(partition_index=0, committed_offset=5)])
        for t in topics]), 8)
    assert [p.error_code for t in r.topics for p in t.partitions] == [E.NONE] * len(topics)


def delete(c: WireClient, group: str, *topics: str) -> Any:
    T, P = OffsetDeleteRequest.OffsetDeleteRequestTopic, OffsetDeleteRequest.OffsetDeleteRequestPartition
    return c.call(OffsetDeleteRequest(group_id=group, topics=[
        T(name=t, partitions=[P(partition_index=0)]) for t in topics]), 0)


def committed_topics(c: WireClient, group: str) -> list[str]:
    return sorted(t.name for t in c.call(OffsetFetchRequest(group_id=group, topics=None), 7).topics)


def codes(response: Any) -> dict[str, int]:
    return {t.name: t.partitions[0].error_code for t in response.topics}


@pytest.mark.parametrize("subscription", [
    platformatic_v1_subscription("od-in"),
    # the same topics declared as a version no broker knows: its version-0 prefix still reads
    struct.pack(">hi", 9, 1) + _string("od-in") + struct.pack(">i", 2) + b"ud" + b"future fields",
], ids=["v1-without-owned-partitions", "future-version"])
def test_a_subscription_read_as_its_version_0_prefix(kbroker_broker: Any, subscription: bytes) -> None:
    with WireClient(kbroker_broker.bootstrap_servers) as c:
        for t in ("od-in", "od-out"):
            c.call(_create(t), 4)
        commit(c, "od-g", "od-in", "od-out")
        stable_group(c, "od-g", "consumer", subscription)
        r = delete(c, "od-g", "od-in", "od-out")
        assert r.error_code == E.NONE
        assert codes(r) == {"od-in": E.GROUP_SUBSCRIBED_TO_TOPIC, "od-out": E.NONE}
        assert committed_topics(c, "od-g") == ["od-in"]


def test_an_unreadable_subscription_counts_as_subscribed_to_every_topic(kbroker_broker: Any) -> None:
    with WireClient(kbroker_broker.bootstrap_servers) as c:
        for t in ("ou-a", "ou-b"):
            c.call(_create(t), 4)
        commit(c, "ou-g", "ou-a", "ou-b")
        stable_group(c, "ou-g", "consumer", b"\x00\x00\x00\x00\x00\x07ou")  # 7 topics promised, none there
        r = delete(c, "ou-g", "ou-a", "ou-b")
        assert r.error_code == E.NONE
        assert codes(r) == {"ou-a": E.GROUP_SUBSCRIBED_TO_TOPIC, "ou-b": E.GROUP_SUBSCRIBED_TO_TOPIC}
        assert committed_topics(c, "ou-g") == ["ou-a", "ou-b"]


def test_a_group_of_another_protocol_type_with_members_is_not_empty(kbroker_broker: Any) -> None:
    with WireClient(kbroker_broker.bootstrap_servers) as c:
        c.call(_create("oc-a"), 4)
        commit(c, "oc-g", "oc-a")
        stable_group(c, "oc-g", "connect", platformatic_v1_subscription("other"))
        r = delete(c, "oc-g", "oc-a")
        assert (r.error_code, r.topics) == (E.NON_EMPTY_GROUP, [])
        assert committed_topics(c, "oc-g") == ["oc-a"]


def _create(topic: str) -> Any:
    return CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=topic, num_partitions=1, replication_factor=1)], timeout_ms=5000)
