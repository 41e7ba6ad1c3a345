"""KIP-848 consumer groups (group.protocol=consumer) with confluent-kafka (librdkafka)
against `kbroker serve` subprocesses: members splitting a topic, leaving, joining,
crashing, static members, both server assignors, the admin client's view, a restart.

The broker's heartbeat interval is lowered (group.consumer.heartbeat.interval.ms with
its min) so reconciliation takes a second, and the session timeout to 6 s so a killed
member is fenced soon; everything else is Kafka's defaults."""

from __future__ import annotations

import subprocess
import sys
import threading
import uuid
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupType, TopicPartition
from confluent_kafka.admin import AdminClient

from .groups_support import Member, covers, poll_until, produce
from .test_groups_cli import groups

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

PARTITIONS = 6
BROKER = {
    "num.partitions": str(PARTITIONS),
    "group.consumer.min.heartbeat.interval.ms": "500", "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.session.timeout.ms": "6000", "group.consumer.session.timeout.ms": "6000",
}
KIP848 = {"group.protocol": "consumer"}


@pytest.fixture
def broker(broker_factory: Any) -> Any:
    return broker_factory(BROKER).start()


def names() -> tuple[str, str]:
    tag = uuid.uuid4().hex[:8]
    return f"k848-{tag}", f"g848-{tag}"


def records(tag: str, per_partition: int) -> list[tuple[int, str]]:
    return [(p, f"{tag}-{p}-{i}") for p in range(PARTITIONS) for i in range(per_partition)]


def read(members: list[Member]) -> list[str]:
    return [v for m in members for v in m.values]


def test_one_member_consumes_a_topic(broker: Any) -> None:
    topic, group = names()
    sent = records("one", 10)
    produce(broker.bootstrap_servers, topic, sent)
    m = Member(broker.bootstrap_servers, group, topic, **KIP848)
    try:
        poll_until([m], lambda: len(m.values) >= len(sent))
        assert sorted(m.values) == sorted(v for _, v in sent)
        assert m.assignment == set(range(PARTITIONS))
    finally:
        m.close()


def test_three_members_split_then_one_leaves_and_one_joins(broker: Any) -> None:
    bs = broker.bootstrap_servers
    topic, group = names()
    produce(bs, topic, records("w", 1))
    members = [Member(bs, group, topic, **KIP848) for _ in range(2)]
    try:
        poll_until(members, lambda: covers(members, PARTITIONS))
        assert [len(m.assignment) for m in members] == [3, 3]
        members.append(Member(bs, group, topic, **KIP848))
        # covered at each step of the reconciliation (a share revoked, then given), 2 each at its end
        poll_until(members, lambda: covers(members, PARTITIONS) and [len(m.assignment) for m in members] == [2, 2, 2])
        warm = {v for _, v in records("w", 1)}  # read at least once while the group formed
        poll_until(members, lambda: set(read(members)) >= warm)
        for m in members:
            m.commit()
        first = records("a", 30)
        produce(bs, topic, first)
        poll_until(members, lambda: set(read(members)) >= {v for _, v in first})
        for m in members:
            m.commit()
        assert sorted(v for v in read(members) if v.startswith("a-")) == sorted(v for _, v in first)

        members[0].close()  # leaves (epoch -1): the two others take its partitions
        poll_until(members, lambda: covers(members, PARTITIONS))
        members.append(Member(bs, group, topic, **KIP848))  # and one joins
        poll_until(members, lambda: covers(members, PARTITIONS))
        second = records("b", 20)
        produce(bs, topic, second)
        poll_until(members, lambda: set(read(members)) >= {v for _, v in second})
        later = [v for m in members for v in m.values if v.startswith("b-")]
        assert sorted(later) == sorted(v for _, v in second)  # each read once, none lost
    finally:
        for m in members:
            m.close()


CHILD = """
import sys
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "group.protocol": "consumer",
              "auto.offset.reset": "earliest", "enable.auto.commit": False})
owned = set()
def on_assign(consumer, parts):
    owned.update(p.partition for p in parts)
    print("owned", len(owned), flush=True)
def on_revoke(consumer, parts):
    owned.difference_update(p.partition for p in parts)
    print("owned", len(owned), flush=True)
c.subscribe([sys.argv[3]], on_assign=on_assign, on_revoke=on_revoke)
while True:
    c.poll(0.2)
"""


def test_a_killed_member_is_fenced_and_its_partitions_move(broker: Any) -> None:
    bs = broker.bootstrap_servers
    topic, group = names()
    produce(bs, topic, records("w", 1))
    child = subprocess.Popen([sys.executable, "-c", CHILD, bs, group, topic], stdout=subprocess.PIPE,
                             text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(child.stdout or ()), daemon=True)
    reader.start()
    m = Member(bs, group, topic, **KIP848)
    try:  # the child owns its share once the group is split
        poll_until([m], lambda: len(m.assignment) == 3 and bool(lines) and lines[-1].split() == ["owned", "3"],
                   timeout=60)
        child.kill()  # no leave heartbeat: only the session timeout can free its partitions
        child.wait(10)
        poll_until([m], lambda: m.assignment == set(range(PARTITIONS)), timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
        m.close()


def test_a_static_member_rejoining_keeps_its_assignment(broker: Any) -> None:
    bs = broker.bootstrap_servers
    topic, group = names()
    produce(bs, topic, records("w", 1))
    a = Member(bs, group, topic, **KIP848, **{"group.instance.id": "static-a"})
    b = Member(bs, group, topic, **KIP848, **{"group.instance.id": "static-b"})
    members = [a, b]
    try:
        poll_until(members, lambda: covers(members, PARTITIONS))
        before = set(a.assignment)
        a.close()  # a static member leaves with epoch -2: its partitions wait for it
        back = Member(bs, group, topic, **KIP848, **{"group.instance.id": "static-a"})
        members = [back, b]
        poll_until(members, lambda: covers(members, PARTITIONS))
        assert back.assignment == before
    finally:
        for m in members:
            m.close()


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_both_server_assignors(broker: Any, assignor: str) -> None:
    bs = broker.bootstrap_servers
    topic, group = names()
    produce(bs, topic, records("w", 1))
    conf = {**KIP848, "group.remote.assignor": assignor}
    members = [Member(bs, group, topic, **conf) for _ in range(2)]
    try:
        poll_until(members, lambda: covers(members, PARTITIONS))
        admin = AdminClient({"bootstrap.servers": bs})
        described = admin.describe_consumer_groups([group])[group].result(timeout=30)
        assert described.type == ConsumerGroupType.CONSUMER
        assert described.partition_assignor == assignor
        if assignor == "range":  # contiguous ranges, the lower to the lower member id
            ranges = sorted(sorted(m.assignment) for m in members)
            assert ranges == [[0, 1, 2], [3, 4, 5]]
    finally:
        for m in members:
            m.close()


def test_admin_client_lists_and_describes_consumer_groups(broker: Any) -> None:
    bs = broker.bootstrap_servers
    topic, group = names()
    produce(bs, topic, records("w", 1))
    members = [Member(bs, group, topic, **KIP848) for _ in range(2)]
    classic = Member(bs, group + "-classic", topic)
    try:
        poll_until(members + [classic], lambda: covers(members, PARTITIONS) and bool(classic.assignment))
        admin = AdminClient({"bootstrap.servers": bs})
        listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(timeout=30)
        assert [g.group_id for g in listed.valid] == [group]
        assert listed.valid[0].type == ConsumerGroupType.CONSUMER
        listed = admin.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result(timeout=30)
        assert [g.group_id for g in listed.valid] == [group + "-classic"]
        d = admin.describe_consumer_groups([group])[group].result(timeout=30)
        assert d.type == ConsumerGroupType.CONSUMER
        assert sorted(len(mem.assignment.topic_partitions) for mem in d.members) == [3, 3]
        assert {tp.topic for mem in d.members for tp in mem.assignment.topic_partitions} == {topic}
        listed_cli = groups(bs, "list").stdout.splitlines()  # `kbroker groups` shows the type
        assert f"{group}\tStable\tConsumer" in listed_cli and f"{group}-classic\tStable\tClassic" in listed_cli
        assert f"Group {group} (Consumer, Stable, 2 members)" in groups(bs, "describe", group).stdout
        joiner = Member(bs, group, topic)  # a classic librdkafka member joins as a classic member
        members.append(joiner)  # (test_groups_migration.py has the mixed groups)
        poll_until(members, lambda: covers(members, PARTITIONS), timeout=60)
        assert len(admin.describe_consumer_groups([group])[group].result(timeout=30).members) == 3
    finally:
        classic.close()
        for m in members:
            m.close()


def test_a_regex_subscription_picks_up_a_new_topic(broker: Any) -> None:
    bs = broker.bootstrap_servers
    tag = uuid.uuid4().hex[:8]
    first, second = f"rx{tag}-a", f"rx{tag}-b"
    produce(bs, first, [(0, "a0")])
    m = Member(bs, f"grx-{tag}", f"^rx{tag}-.*", **KIP848)
    try:
        def topics() -> set[str]:
            return {tp.topic for tp in m.consumer.assignment()}

        poll_until([m], lambda: topics() == {first} and "a0" in m.values)
        produce(bs, second, [(1, "b1")])  # created by the produce (auto.create.topics.enable)
        poll_until([m], lambda: topics() == {first, second} and "b1" in m.values, timeout=60)
    finally:
        m.close()


def test_the_group_survives_a_broker_restart(broker_factory: Any) -> None:
    """Members stay up while the broker is killed and started again on its log: the group's
    records bring back its epochs and assignments, so nobody loses a partition, and the
    committed offsets are where they were."""
    bp = broker_factory(BROKER).start()
    bs = bp.bootstrap_servers
    topic, group = names()
    produce(bs, topic, records("w", 1))
    members = [Member(bs, group, topic, **KIP848, **{"reconnect.backoff.max.ms": 200}) for _ in range(2)]
    try:
        poll_until(members, lambda: covers(members, PARTITIONS) and len(set(read(members))) == PARTITIONS)
        every = [TopicPartition(topic, p) for p in range(PARTITIONS)]

        def committed_everywhere() -> bool:
            """Each member commits what it read (a commit sent while its member epoch is
            being moved is answered STALE_MEMBER_EPOCH per partition, which confluent-kafka
            returns rather than raises) until the broker holds the warm-up offsets."""
            for m in members:
                m.commit()
            return [tp.offset for tp in members[0].consumer.committed(every, timeout=10)] == [1] * PARTITIONS

        poll_until(members, committed_everywhere)
        assignments = [set(m.assignment) for m in members]
        revoked = [m.revocations for m in members]
        bp.kill()
        port = bs.rsplit(":", 1)[1]
        bp2 = broker_factory({**BROKER, "listeners": f"PLAINTEXT://127.0.0.1:{port}"}, log_dir=bp.log_dir).start()
        second = records("b", 5)
        produce(bp2.bootstrap_servers, topic, second)
        poll_until(members, lambda: set(read(members)) >= {v for _, v in second}, timeout=60)
        assert sorted(v for v in read(members) if v.startswith("b-")) == sorted(v for _, v in second)
        assert [set(m.assignment) for m in members] == assignments
        assert [m.revocations for m in members] == revoked  # no partition revoked or lost
        committed = members[0].consumer.committed(every, timeout=10)
        assert [tp.offset for tp in committed] == [1] * PARTITIONS  # the warm-up record each
    finally:
        for m in members:
            m.close()
