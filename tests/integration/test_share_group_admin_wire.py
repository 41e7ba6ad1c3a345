"""The share-group admin APIs on the wire (KIP-932), with kbroker's generated codecs over
a real socket against the embedded broker (neither confluent-kafka 2.16 nor kafka-python
3.0 has a client for them): DescribeShareGroupOffsets v0-1 (start offsets and lag),
AlterShareGroupOffsets, DeleteShareGroupOffsets, and DeleteGroups of a share group, with
the errors Kafka gives."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kbroker.common.error_code import ErrorCode as E
from kbroker.protocol.messages.alter_share_group_offsets import AlterShareGroupOffsetsRequest
from kbroker.protocol.messages.delete_groups import DeleteGroupsRequest
from kbroker.protocol.messages.delete_share_group_offsets import DeleteShareGroupOffsetsRequest
from kbroker.protocol.messages.describe_share_group_offsets import DescribeShareGroupOffsetsRequest
from kbroker.protocol.messages.list_groups import ListGroupsRequest
from kbroker.protocol.messages.share_group_describe import ShareGroupDescribeRequest

from .groups_support import produce
from .test_share_groups_wire import ACCEPT, REJECT, acquired, heartbeat, share_fetch, topic_info
from .wire import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

D = DescribeShareGroupOffsetsRequest
A = AlterShareGroupOffsetsRequest
ZERO = uuid.UUID(int=0)


def describe(c: WireClient, group: str, topics: list[tuple[str, list[int]]] | None, version: int = 1) -> Any:
    t = None if topics is None else [D.DescribeShareGroupOffsetsRequestTopic(topic_name=n, partitions=ps)
                                     for n, ps in topics]
    r = c.call(D(groups=[D.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=t)]), version)
    return r.groups[0]


def offsets(g: Any) -> list[tuple[str, int, int, int, int]]:
    """(topic, partition, start offset, lag, error) of a described group."""
    return [(t.topic_name, p.partition_index, p.start_offset, p.lag, p.error_code)
            for t in g.topics for p in t.partitions]


def alter(c: WireClient, group: str, topic: str, *starts: tuple[int, int]) -> Any:
    return c.call(A(group_id=group, topics=[A.AlterShareGroupOffsetsRequestTopic(
        topic_name=topic, partitions=[A.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=s)
                                      for p, s in starts])]), 0)


def delete_offsets(c: WireClient, group: str, *topics: str) -> Any:
    return c.call(DeleteShareGroupOffsetsRequest(group_id=group, topics=[
        DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics]), 0)


def delete_groups(c: WireClient, *groups: str) -> list[tuple[str, int]]:
    r = c.call(DeleteGroupsRequest(groups_names=list(groups)), 2)
    return [(g.group_id, g.error_code) for g in r.results]


def leave(c: WireClient, group: str, topic: str) -> None:
    assert heartbeat(c, group, topic, member_epoch=-1, subscribed_topic_names=None).error_code == E.NONE


def test_describe_start_offsets_and_lag(kbroker_broker: Any) -> None:
    group, topic = f"sg-{uuid.uuid4().hex[:6]}", f"st-{uuid.uuid4().hex[:6]}"
    bootstrap = kbroker_broker.bootstrap_servers
    with WireClient(bootstrap) as c:
        tid = topic_info(c, topic).topic_id
        assert describe(c, group, None).error_code == E.GROUP_ID_NOT_FOUND  # no such share group
        assert offsets(describe(c, group, [(topic, [0])])) == [(topic, 0, -1, -1, E.NONE)]  # no data, no error
        assert heartbeat(c, group, topic).error_code == E.NONE
        share_fetch(c, group, 0, tid)  # the share partition starts at the end: 0
        produce(bootstrap, topic, [(0, f"v{i}") for i in range(10)])
        assert acquired(share_fetch(c, group, 1, max_records=4)) == [(0, 3, 1)]
        share_fetch(c, group, 2, tid, [(0, 0, [ACCEPT]), (2, 2, [REJECT])], max_bytes=0)
        # start offset 1 (1 and 3 still acquired); 2 archived above it: lag 10 - 1 - 1
        g = describe(c, group, [(topic, [0]), ("no-such-topic", [0, 1])])
        assert g.error_code == E.NONE
        assert offsets(g) == [(topic, 0, 1, 8, E.NONE), ("no-such-topic", 0, -1, -1, E.NONE),
                              ("no-such-topic", 1, -1, -1, E.NONE)]
        assert [t.topic_id for t in g.topics] == [tid, ZERO]
        assert offsets(describe(c, group, None)) == [(topic, 0, 1, 8, E.NONE)]  # every share partition
        assert offsets(describe(c, group, [(topic, [0])], version=0)) == [(topic, 0, 1, -1, E.NONE)]  # no lag in v0
        assert describe(c, "", None).error_code == E.INVALID_GROUP_ID


def test_alter_and_delete_offsets_of_an_empty_share_group(kbroker_broker: Any) -> None:
    group, topic = f"sg-{uuid.uuid4().hex[:6]}", f"st-{uuid.uuid4().hex[:6]}"
    bootstrap = kbroker_broker.bootstrap_servers
    with WireClient(bootstrap) as c:
        tid = topic_info(c, topic).topic_id
        assert alter(c, group, topic, (0, 0)).error_code == E.GROUP_ID_NOT_FOUND
        assert heartbeat(c, group, topic).error_code == E.NONE
        share_fetch(c, group, 0, tid)
        produce(bootstrap, topic, [(0, f"v{i}") for i in range(10)])
        assert acquired(share_fetch(c, group, 1)) == [(0, 9, 1)]
        r = alter(c, group, topic, (0, 7))
        assert r.error_code == E.NON_EMPTY_GROUP and r.responses == []
        assert delete_offsets(c, group, topic).error_code == E.NON_EMPTY_GROUP
        leave(c, group, topic)  # the member's records are released

        r = alter(c, group, topic, (0, 7), (5, 0), (0, -3))
        assert r.error_code == E.NONE and r.responses[0].topic_id == tid
        assert [(p.partition_index, p.error_code) for p in r.responses[0].partitions] == [
            (0, E.NONE), (5, E.UNKNOWN_TOPIC_OR_PARTITION), (0, E.INVALID_REQUEST)]
        missing = alter(c, group, "no-such-topic", (0, 1)).responses[0]
        assert (missing.topic_id, missing.partitions[0].error_code) == (ZERO, E.UNKNOWN_TOPIC_OR_PARTITION)
        assert offsets(describe(c, group, [(topic, [0])])) == [(topic, 0, 7, 3, E.NONE)]
        assert heartbeat(c, group, topic).error_code == E.NONE  # the next fetch starts at 7, nothing in flight
        assert acquired(share_fetch(c, group, 0, tid)) == [(7, 9, 1)]
        leave(c, group, topic)

        r = delete_offsets(c, group, topic, "no-such-topic")
        assert [(t.topic_name, t.topic_id, t.error_code) for t in r.responses] == [
            (topic, tid, E.NONE), ("no-such-topic", ZERO, E.UNKNOWN_TOPIC_OR_PARTITION)]
        assert offsets(describe(c, group, [(topic, [0])])) == [(topic, 0, -1, -1, E.NONE)]
        assert offsets(describe(c, group, None)) == []
        assert heartbeat(c, group, topic).error_code == E.NONE  # starts again at latest (10): nothing to get
        assert acquired(share_fetch(c, group, 0, tid)) == []
        assert offsets(describe(c, group, [(topic, [0])])) == [(topic, 0, 10, 0, E.NONE)]
        assert delete_offsets(c, "", topic).error_code == E.INVALID_GROUP_ID


def test_delete_groups_deletes_a_share_group_and_its_state(kbroker_broker: Any) -> None:
    group, topic = f"sg-{uuid.uuid4().hex[:6]}", f"st-{uuid.uuid4().hex[:6]}"
    bootstrap = kbroker_broker.bootstrap_servers
    with WireClient(bootstrap) as c:
        tid = topic_info(c, topic).topic_id
        assert heartbeat(c, group, topic).error_code == E.NONE
        share_fetch(c, group, 0, tid)
        produce(bootstrap, topic, [(0, "a"), (0, "b")])
        assert acquired(share_fetch(c, group, 1)) == [(0, 1, 1)]
        assert delete_groups(c, group) == [(group, E.NON_EMPTY_GROUP)]
        leave(c, group, topic)
        assert delete_groups(c, group, "no-such-group") == [(group, E.NONE), ("no-such-group", E.GROUP_ID_NOT_FOUND)]
        assert c.call(ShareGroupDescribeRequest(group_ids=[group]), 1).groups[0].error_code == E.GROUP_ID_NOT_FOUND
        assert group not in {g.group_id for g in c.call(ListGroupsRequest(types_filter=["share"]), 5).groups}
        assert describe(c, group, None).error_code == E.GROUP_ID_NOT_FOUND
        assert offsets(describe(c, group, [(topic, [0])])) == [(topic, 0, -1, -1, E.NONE)]
        assert delete_groups(c, group) == [(group, E.GROUP_ID_NOT_FOUND)]
