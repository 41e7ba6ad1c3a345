"""The share-group admin APIs on a 3-broker cluster (KIP-932): DescribeShareGroupOffsets,
AlterShareGroupOffsets and DeleteShareGroupOffsets sent with kbroker's own codecs over a
socket to the group's group coordinator (no Python client speaks them yet), and
DeleteGroups of a share group through confluent-kafka's AdminClient, for a group whose
three roles are on three brokers: the group coordinator reads and writes the states at
the share coordinator of each key, another broker (ReadShareGroupStateSummary,
InitializeShareGroupState, DeleteShareGroupState), and the share-partition leader, a
third, sees what changed at the next fetch. Real ShareConsumers (confluent-kafka 2.16)
read between the steps."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from kbroker.cluster.local_cluster import Cluster
from kbroker.common.error_code import ErrorCode as E
from kbroker.protocol.messages.alter_share_group_offsets import AlterShareGroupOffsetsRequest
from kbroker.protocol.messages.delete_share_group_offsets import DeleteShareGroupOffsetsRequest
from kbroker.protocol.messages.describe_share_group_offsets import DescribeShareGroupOffsetsRequest
from kbroker.protocol.messages.share_group_describe import ShareGroupDescribeRequest
from tests.integration.groups_support import produce

from .support import ask, create_topic, group_coordinator, start_at_earliest, wait_until
from .test_share_groups_cluster import Member, cluster, roles_apart

__all__ = ["cluster"]  # the 3-broker fixture of the share group tests

pytestmark = pytest.mark.timeout(300)

D = DescribeShareGroupOffsetsRequest
A = AlterShareGroupOffsetsRequest


def describe(cluster: Cluster, broker: int, group: str, topic: str | None) -> Any:
    topics = None if topic is None else [D.DescribeShareGroupOffsetsRequestTopic(topic_name=topic, partitions=[0])]
    r = ask(cluster, broker, D(groups=[D.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=topics)]), 1)
    assert r is not None
    return r.groups[0]


def offsets(g: Any) -> list[tuple[str, int, int, int, int]]:
    """(topic, partition, start offset, lag, error) of a described group."""
    return [(t.topic_name, p.partition_index, p.start_offset, p.lag, p.error_code)
            for t in g.topics for p in t.partitions]


def alter(cluster: Cluster, broker: int, group: str, topic: str, start: int) -> Any:
    return ask(cluster, broker, A(group_id=group, topics=[A.AlterShareGroupOffsetsRequestTopic(
        topic_name=topic, partitions=[A.AlterShareGroupOffsetsRequestPartition(partition_index=0,
                                                                               start_offset=start)])]), 0)


def delete_offsets(cluster: Cluster, broker: int, group: str, topic: str) -> Any:
    return ask(cluster, broker, DeleteShareGroupOffsetsRequest(group_id=group, topics=[
        DeleteShareGroupOffsetsRequest.DeleteShareGroupOffsetsRequestTopic(topic_name=topic)]), 0)


def empty(cluster: Cluster, broker: int, group: str) -> bool:
    r = ask(cluster, broker, ShareGroupDescribeRequest(group_ids=[group]), 1)
    return r is not None and r.groups[0].error_code == E.NONE and not r.groups[0].members


def read(cluster: Cluster, group: str, topic: str, count: int) -> list[str]:
    """One member's deliveries until `count` were delivered and accepted, in order; then
    it leaves the group (close)."""
    member = Member(cluster.bootstrap_servers, group, topic)
    try:
        deadline = time.monotonic() + 90
        while len(member.accepted) < count:
            assert time.monotonic() < deadline, f"{len(member.accepted)} of {count} accepted"
            member.poll_once(set(), [])
        for _ in range(3):  # nothing more comes
            member.poll_once(set(), [], 0.3)
        return [v for v, _count in member.delivered]
    finally:
        member.close()


def values(first: int, end: int) -> list[str]:
    return [f"v-{i}" for i in range(first, end)]


def share_group_apart(cluster: Cluster, topic: str, records: int) -> tuple[str, int]:
    """A one-partition topic of `records` records and a share group (at earliest) whose
    three roles are on three brokers; the group id and its group coordinator."""
    create_topic(cluster, topic, 1, rf=3)
    group, roles = roles_apart(cluster, topic)
    start_at_earliest(cluster, group)
    produce(cluster.bootstrap_servers, topic, [(0, v) for v in values(0, records)], acks="all")
    return group, roles["group_coordinator"]


def test_offsets_admin_apis_through_the_group_coordinator(cluster: Cluster) -> None:
    topic = "share-offsets"
    group, gc = share_group_apart(cluster, topic, 100)

    assert read(cluster, group, topic, 100) == values(0, 100)
    produce(cluster.bootstrap_servers, topic, [(0, v) for v in values(100, 150)], acks="all")
    wait_until(lambda: empty(cluster, gc, group), "the group to be empty")
    # the start offset is past what was accepted; the 50 records produced since are the lag
    assert offsets(describe(cluster, gc, group, topic)) == [(topic, 0, 100, 50, E.NONE)]
    assert offsets(describe(cluster, gc, group, None)) == [(topic, 0, 100, 50, E.NONE)]
    other = next(b for b in cluster.brokers if b != gc)
    assert describe(cluster, other, group, topic).error_code == E.NOT_COORDINATOR

    # AlterShareGroupOffsets: the next member starts at the new start offset
    r = alter(cluster, gc, group, topic, 40)
    assert (r.error_code, [p.error_code for t in r.responses for p in t.partitions]) == (E.NONE, [E.NONE])
    assert offsets(describe(cluster, gc, group, topic)) == [(topic, 0, 40, 110, E.NONE)]
    assert read(cluster, group, topic, 110) == values(40, 150)
    wait_until(lambda: empty(cluster, gc, group), "the group to be empty")
    assert offsets(describe(cluster, gc, group, topic)) == [(topic, 0, 150, 0, E.NONE)]

    # DeleteShareGroupOffsets: the next member starts at share.auto.offset.reset (earliest)
    r = delete_offsets(cluster, gc, group, topic)
    assert (r.error_code, [t.error_code for t in r.responses]) == (E.NONE, [E.NONE])
    assert offsets(describe(cluster, gc, group, topic)) == [(topic, 0, -1, -1, E.NONE)]
    assert read(cluster, group, topic, 150) == values(0, 150)


def test_delete_groups_deletes_the_share_states_on_other_brokers_after_the_group_coordinator_moved(
        cluster: Cluster) -> None:
    """The group coordinator dies (SIGKILL) once the group is empty: the new one knows the
    group and its share partitions from __consumer_offsets (ShareGroupStatePartitionMetadata),
    describes them and deletes the group with their states."""
    topic = "share-delete-group"
    group, gc = share_group_apart(cluster, topic, 60)
    member = Member(cluster.bootstrap_servers, group, topic)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    try:
        wait_until(lambda: member.poll_once(set(), [], 0.3) or len(member.accepted) == 60, "60 accepted")
        with pytest.raises(Exception, match="NON_EMPTY_GROUP"):  # a member is in it
            admin.delete_consumer_groups([group])[group].result(30)
    finally:
        member.close()
    wait_until(lambda: empty(cluster, gc, group), "the group to be empty")
    assert offsets(describe(cluster, gc, group, topic)) == [(topic, 0, 60, 0, E.NONE)]
    cluster.kill(gc)
    dead = gc

    def loaded() -> int | None:
        """The new group coordinator once it has loaded the group (asked again each time:
        the metadata may name a broker that is not the coordinator yet)."""
        c = group_coordinator(cluster, group)
        return c if c is not None and c != dead and describe(cluster, c, group, None).error_code == E.NONE else None
    gc = int(wait_until(loaded, "a new group coordinator with the group loaded", timeout=120))  # type: ignore[call-overload]
    assert offsets(describe(cluster, gc, group, None)) == [(topic, 0, 60, 0, E.NONE)]

    assert admin.delete_consumer_groups([group])[group].result(30) is None
    assert describe(cluster, gc, group, None).error_code == E.GROUP_ID_NOT_FOUND
    # its state is gone at the share coordinator: nothing to describe, a new group of the
    # same id starts fresh (at earliest, its group config kept)
    assert offsets(describe(cluster, gc, group, topic)) == [(topic, 0, -1, -1, E.NONE)]
    assert read(cluster, group, topic, 60) == values(0, 60)
