"""A KIP-848 consumer group (confluent-kafka, group.protocol=consumer) on a 3-broker cluster
with offsets.topic.replication.factor=3, while the broker that coordinates it (the leader
of its __consumer_offsets partition) dies (SIGKILL, by PID) or shuts down (controlled
shutdown, SIGTERM): the members find the new coordinator (the other brokers answer
NOT_COORDINATOR), which has loaded the group from
the replicated records (members, epochs, assignments), so nobody is fenced or loses a
partition, and consumption goes on from where it was: no record lost, none read twice.

The broker's heartbeat interval is lowered (group.consumer.heartbeat.interval.ms with its
min) so a member notices within a second; the session timeout is 6 s, and the controller
notices a dead broker after zookeeper.session.timeout.ms (6 s). The failover time is
printed, never asserted."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

from kbroker.cluster.local_cluster import Cluster
from kbroker.cluster.zookeeper_server import ZooKeeperServer
from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
)
from kbroker.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from kbroker.utils.java_hash import java_abs, java_string_hash
from tests.integration.groups_support import Member, covers, poll_until, produce

from .support import (
    ask,
    create_topic,
    group_coordinator,
    metadata,
    new_cluster,
    wait_for_isr,
    wait_until,
)

pytestmark = pytest.mark.timeout(300)

PARTITIONS = 6
BROKER = {
    "replica.lag.time.max.ms": "5000",
    "group.consumer.min.heartbeat.interval.ms": "500", "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.session.timeout.ms": "6000", "group.consumer.session.timeout.ms": "6000",
}
TOPIC, GROUP = "work848", "group848"
IDEMPOTENT = {"enable.idempotence": True}


@pytest.fixture
def cluster(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[Cluster]:
    c = new_cluster(zookeeper, tmp_path, 3, BROKER)
    try:
        yield c
    finally:
        c.stop()


def coordinator(cluster: Cluster, group: str = GROUP) -> int | None:
    return group_coordinator(cluster, group)


def describe(cluster: Cluster, node: int, group_id: str = GROUP,
             version: int = 0) -> ConsumerGroupDescribeResponse.DescribedGroup | None:
    """The group as its coordinator `node` describes it (None while it answers an error;
    v1: with each member's type, KIP-1099)."""
    r = ask(cluster, node, ConsumerGroupDescribeRequest(group_ids=[group_id]), version)
    group = None if r is None else r.groups[0]
    return group if group is not None and group.error_code == 0 else None


def member_view(group: ConsumerGroupDescribeResponse.DescribedGroup) -> dict[str, tuple[int, set[int]]]:
    return {m.member_id: (m.member_epoch, {p for tp in m.assignment.topic_partitions for p in tp.partitions})
            for m in group.members}


def values(tag: str, per_partition: int) -> list[tuple[int, str]]:
    return [(p, f"{tag}-{p}-{i}") for p in range(PARTITIONS) for i in range(per_partition)]


def read(members: list[Member], tag: str) -> list[str]:
    return [v for m in members for v in m.values if v.startswith(tag + "-")]


def warm_group(cluster: Cluster, group: str, count: int) -> list[Member]:
    """`count` KIP-848 members of `group` that split the topic and read a record of each partition."""
    bs = cluster.bootstrap_servers
    produce(bs, TOPIC, values("w", 1), acks="all", **IDEMPOTENT)
    members = [Member(bs, group, TOPIC, **{"group.protocol": "consumer", "reconnect.backoff.max.ms": 200})
               for _ in range(count)]
    try:
        poll_until(members, lambda: covers(members, PARTITIONS) and len(set(read(members, "w"))) == PARTITIONS,
                   timeout=60)
    except BaseException:
        for m in members:
            m.close()
        raise
    return members


@pytest.mark.parametrize("how", ["sigkill", "controlled_shutdown"])
def test_a_kip848_group_carries_on_when_its_coordinator_goes(cluster: Cluster, how: str) -> None:
    create_topic(cluster, TOPIC, PARTITIONS, rf=3)
    members = warm_group(cluster, GROUP, 3)
    try:
        every = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]

        def committed_everywhere(offset: int) -> Callable[[], bool]:
            """Each member commits what it read (a commit racing an epoch change is answered
            STALE_MEMBER_EPOCH, which confluent-kafka returns) until the coordinator holds `offset`."""
            def done() -> bool:
                for m in members:
                    m.commit()
                return [tp.offset for tp in members[0].consumer.committed(every, timeout=10)] == [offset] * PARTITIONS
            return done

        poll_until(members, committed_everywhere(1), timeout=60)
        old = int(wait_until(lambda: coordinator(cluster), "the group's coordinator"))  # type: ignore[arg-type]
        stable = wait_until(lambda: (g := describe(cluster, old)) is not None and g.group_state == "Stable" and g,
                            "a Stable group")
        before = member_view(stable)  # type: ignore[arg-type]
        epoch = stable.group_epoch  # type: ignore[attr-defined]
        offsets_partition = java_abs(java_string_hash(GROUP)) % 50
        wait_for_isr(cluster, "__consumer_offsets", offsets_partition, {1, 2, 3})
        assignments = [set(m.assignment) for m in members]
        revoked = [m.revocations for m in members]

        gone_at = time.monotonic()
        if how == "sigkill":
            cluster.kill(old)
        else:
            cluster.stop_broker(old)
        new = int(wait_until(lambda: coordinator(cluster) not in (None, old) and coordinator(cluster),  # type: ignore
                             "a new coordinator", timeout=90))
        live = ",".join(b.bootstrap for i, b in cluster.brokers.items() if i != old)
        second = values("b", 5)
        produce(live, TOPIC, second, acks="all", **IDEMPOTENT)  # leaders move too: retries write once
        poll_until(members, lambda: set(read(members, "b")) >= {v for _, v in second}, timeout=90)
        print(f"coordinator {old} {how}: {new} coordinates, consumption went on after "
              f"{time.monotonic() - gone_at:.1f} s")

        ends = [members[0].consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in every]
        assert ends == [6] * PARTITIONS  # the log has each record once: what follows is the consumers'
        assert sorted(read(members, "b")) == sorted(v for _, v in second)  # none lost, none twice
        assert sorted(read(members, "w")) == sorted(v for _, v in values("w", 1))  # nothing read again
        assert [set(m.assignment) for m in members] == assignments
        assert [m.revocations for m in members] == revoked  # no partition revoked or lost
        loaded = describe(cluster, new)
        assert loaded is not None and loaded.group_epoch >= epoch
        assert member_view(loaded) == before  # the same members, epochs and assignments
        poll_until(members, committed_everywhere(6), timeout=60)  # the new coordinator takes commits
        # a broker that does not lead the group's partition sends its members elsewhere
        other = next(i for i in cluster.brokers if i not in (old, new))
        member_id, (member_epoch, _) = next(iter(before.items()))
        r = ask(cluster, other, ConsumerGroupHeartbeatRequest(
            group_id=GROUP, member_id=member_id, member_epoch=member_epoch, topic_partitions=[]), 1)
        assert r is not None and r.error_code == ErrorCode.NOT_COORDINATOR
    finally:
        for m in members:
            m.close()


def test_a_topic_that_grew_while_the_coordinator_was_dead_is_assigned_after_the_failover(cluster: Cluster) -> None:
    """The coordinator is SIGKILLed and the topic gets two more partitions before another
    broker takes the group over (the controller, alive, adds them while the dead broker's
    ZooKeeper session lasts). The new coordinator loads the group with the metadata hash
    of 6 partitions, sees 8 at the members' first heartbeat, and gives the new partitions
    out (a new group epoch): their records are read too."""
    create_topic(cluster, TOPIC, PARTITIONS, rf=3)
    md = metadata(cluster)
    assert md is not None
    controller = md.controller_id
    # a group whose coordinator is not the controller, so the partitions can be added at once
    group = str(wait_until(lambda: next((g for g in (f"grow-{i}" for i in range(40))
                                         if coordinator(cluster, g) not in (None, controller)), None),
                           "a group coordinated by a broker other than the controller"))
    old = int(coordinator(cluster, group))  # type: ignore[arg-type]
    members = warm_group(cluster, group, 2)
    try:
        wait_for_isr(cluster, "__consumer_offsets", java_abs(java_string_hash(group)) % 50, {1, 2, 3})
        cluster.kill(old)
        live = ",".join(b.bootstrap for i, b in cluster.brokers.items() if i != old)
        admin = AdminClient({"bootstrap.servers": live})
        for f in admin.create_partitions([NewPartitions(TOPIC, PARTITIONS + 2)], operation_timeout=30,
                                         request_timeout=40).values():
            f.result(timeout=60)
        grown = wait_until(lambda: (v := metadata(cluster, topics=[TOPIC])) is not None and len(
            v.topics[0].partitions) == PARTITIONS + 2, "8 partitions in the metadata")
        assert grown and coordinator(cluster, group) == old  # grown before the group moved
        new = int(wait_until(lambda: coordinator(cluster, group) not in (None, old) and coordinator(  # type: ignore
            cluster, group), "a new coordinator", timeout=90))
        later = [(p, f"n-{p}-0") for p in range(PARTITIONS + 2)]
        produce(live, TOPIC, later, acks="all", **IDEMPOTENT)
        poll_until(members, lambda: covers(members, PARTITIONS + 2) and set(read(members, "n")) == {
            v for _, v in later}, timeout=90)
        assert sorted(read(members, "n")) == sorted(v for _, v in later)
        loaded = describe(cluster, new, group)
        assert loaded is not None and {p for _, ps in member_view(loaded).values() for p in ps} == set(
            range(PARTITIONS + 2))
    finally:
        for m in members:
            m.close()


def test_a_mixed_group_carries_on_when_its_coordinator_is_killed(cluster: Cluster) -> None:
    """A consumer group with a classic member (kafka-python, KIP-848 online migration) beside
    two group.protocol=consumer members: the coordinator is SIGKILLed; the new one loads
    the classic member too (its ClassicMemberMetadata), which finds it by FindCoordinator
    and goes on heartbeating at its generation (its member epoch), so the group keeps its
    members and nothing is lost or read twice."""
    from tests.integration.migration_support import KafkaPythonMember

    create_topic(cluster, TOPIC, PARTITIONS, rf=3)
    members: list[Any] = warm_group(cluster, GROUP, 2)
    try:
        bs = cluster.bootstrap_servers
        members.append(KafkaPythonMember(bs, GROUP, TOPIC))
        poll_until(members, lambda: covers(members, PARTITIONS) and all(m.assignment for m in members), timeout=90)
        old = int(wait_until(lambda: coordinator(cluster), "the group's coordinator"))  # type: ignore[arg-type]
        stable = wait_until(lambda: (g := describe(cluster, old, GROUP, 1)) is not None
                            and g.group_state == "Stable" and g, "a Stable group")
        types = {m.member_id: m.member_type for m in stable.members}  # type: ignore[attr-defined]
        assert sorted(types.values()) == [0, 1, 1]  # KIP-1099: one classic, two consumer
        wait_for_isr(cluster, "__consumer_offsets", java_abs(java_string_hash(GROUP)) % 50, {1, 2, 3})
        assignments = [set(m.assignment) for m in members]

        cluster.kill(old)
        new = int(wait_until(lambda: coordinator(cluster) not in (None, old) and coordinator(cluster),  # type: ignore
                             "a new coordinator", timeout=90))
        live = ",".join(b.bootstrap for i, b in cluster.brokers.items() if i != old)
        second = values("b", 5)
        produce(live, TOPIC, second, acks="all", **IDEMPOTENT)
        poll_until(members, lambda: set(read(members, "b")) >= {v for _, v in second}, timeout=90)
        assert sorted(read(members, "b")) == sorted(v for _, v in second)  # none lost, none twice
        assert [set(m.assignment) for m in members] == assignments
        loaded = wait_until(lambda: describe(cluster, new, GROUP, 1), "the group on its new coordinator")
        assert {m.member_id: m.member_type for m in loaded.members} == types  # type: ignore[attr-defined]
    finally:
        for m in members:
            m.close()
