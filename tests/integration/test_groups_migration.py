"""Classic and consumer-protocol members in one group (KIP-848 online migration,
group.consumer.migration.policy) against `kbroker serve` subprocesses: classic members
(kafka-python, aiokafka) beside confluent-kafka members with group.protocol=consumer,
a classic group upgraded in place member by member, the downgrade back, the policy
`disabled`, and a restart of the broker under a mixed group.

Each stage waits until the members split the topic, commits, then writes a batch and
checks every record of it was read exactly once: no record is lost or read twice past
the committed offsets while members come and go and the group changes type.

The broker's KIP-848 heartbeat interval and session timeout are lowered as in
test_groups_kip848.py, and group.initial.rebalance.delay.ms is 0 so the classic group
forms at once; the migration policy is Kafka's default (bidirectional) unless named."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupState, ConsumerGroupType, KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaTopicPartition
from kafka import errors as kafka_errors

from .groups_support import Member, covers, poll_until, produce
from .migration_support import AiokafkaMember, KafkaPythonMember, committed_offsets
from .test_groups_cli import groups

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

PARTITIONS = 6
BROKER = {
    "num.partitions": str(PARTITIONS), "group.initial.rebalance.delay.ms": "0",
    "group.consumer.min.heartbeat.interval.ms": "500", "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.session.timeout.ms": "6000", "group.consumer.session.timeout.ms": "6000",
}
KIP848 = {"group.protocol": "consumer", "client.id": "kip848-member"}


@pytest.fixture
def broker(broker_factory: Any) -> Any:
    return broker_factory(BROKER).start()


def names() -> tuple[str, str]:
    tag = uuid.uuid4().hex[:8]
    return f"mig-{tag}", f"gmig-{tag}"


def records(tag: str, per_partition: int) -> list[tuple[int, str]]:
    return [(p, f"{tag}-{p}-{i}") for p in range(PARTITIONS) for i in range(per_partition)]


def read(members: list[Any], prefix: str = "") -> list[str]:
    return [v for m in members for v in m.values if v.startswith(prefix)]


def group_type(bs: str, group: str) -> Any:
    admin = AdminClient({"bootstrap.servers": bs})  # held until the result is in
    listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER, ConsumerGroupType.CLASSIC}).result(timeout=30)
    assert not listed.errors, listed.errors
    return {g.group_id: g.type for g in listed.valid}.get(group)


def close_all(members: list[Any]) -> None:
    """Close every member (LeaveGroup), each even if another's close fails."""
    failures = []
    for m in members:
        try:
            m.close()
        except Exception as e:  # noqa: BLE001 - re-raised below, after the others are closed
            failures.append(e)
    assert not failures, failures


def describe(bs: str, group: str) -> Any:
    admin = AdminClient({"bootstrap.servers": bs})  # held until the result is in
    return admin.describe_consumer_groups([group])[group].result(timeout=30)


def settle(bs: str, group: str, topic: str, members: list[Any], upto: int, timeout: float = 90) -> None:
    """Until the live members split the topic, the group is Stable, and the members have
    read and committed every record written so far (`upto` a partition)."""
    last = [0.0]

    def done() -> bool:
        if not covers(members, PARTITIONS) or time.monotonic() - last[0] < 0.5:
            return False
        last[0] = time.monotonic()
        for m in members:
            if m.closed:
                continue
            try:
                m.commit()
            except KafkaException:
                pass  # nothing read yet on a partition it was just given, or an epoch moving
        return (committed_offsets(bs, group, topic, PARTITIONS) == [upto] * PARTITIONS
                and describe(bs, group).state == ConsumerGroupState.STABLE)

    poll_until(members, done, timeout=timeout)


def batch_read_once(bs: str, group: str, topic: str, members: list[Any], tag: str, upto: int,
                    timeout: float = 90) -> None:
    """A batch written now (5 records a partition, `upto` a partition after it) is read by
    the live members, each record exactly once, and committed."""
    sent = records(tag, 5)
    produce(bs, topic, sent)
    want = sorted(v for _, v in sent)
    poll_until(members, lambda: set(read(members, tag + "-")) >= set(want), timeout=timeout)
    settle(bs, group, topic, members, upto, timeout)
    assert sorted(read(members, tag + "-")) == want  # none lost, none read twice


def test_a_mixed_group_splits_a_topic(broker: Any) -> None:
    """A consumer group of confluent-kafka members takes kafka-python and aiokafka members
    in as classic members: the broker assigns them their share, without overlap."""
    bs = broker.bootstrap_servers
    topic, group = names()
    produce(bs, topic, records("w", 1))
    members: list[Any] = [Member(bs, group, topic, **KIP848)]
    try:
        poll_until(members, lambda: covers(members, PARTITIONS))
        members += [KafkaPythonMember(bs, group, topic), AiokafkaMember(bs, group, topic),
                    Member(bs, group, topic, **KIP848)]
        poll_until(members, lambda: covers(members, PARTITIONS)
                   and sorted(len(m.assignment) for m in members) == [1, 1, 2, 2], timeout=90)
        assert group_type(bs, group) == ConsumerGroupType.CONSUMER
        batch_read_once(bs, group, topic, members, "a", 6)
        d = describe(bs, group)
        assert d.type == ConsumerGroupType.CONSUMER and len(d.members) == 4
        by_client = {m.client_id: {tp.partition for tp in m.assignment.topic_partitions} for m in d.members}
        assert by_client["kafka-python-member"] == members[1].assignment
        assert by_client["aiokafka-member"] == members[2].assignment
        out = groups(bs, "describe", group).stdout
        assert f"Group {group} (Consumer, " in out
        rows = {line.split()[2]: line.split() for line in out.splitlines()  # the members table, by client id
                if len(line.split()) >= 6 and line.split()[3] in ("classic", "consumer")}
        assert rows["kafka-python-member"][3] == "classic" and rows["aiokafka-member"][3] == "classic"
        assert rows["kip848-member"][3] == "consumer"
        assert rows["kafka-python-member"][5] == f"{topic}({','.join(map(str, sorted(members[1].assignment)))})"
        # OffsetDelete (kafka-python's admin): refused for the topic the members subscribe to
        admin = KafkaAdminClient(bootstrap_servers=bs, client_id="offset-delete")
        try:
            deleted = admin.delete_group_offsets(group, [KafkaTopicPartition(topic, 0),
                                                         KafkaTopicPartition(f"{topic}-other", 0)])
        finally:
            admin.close()
        assert deleted == {KafkaTopicPartition(topic, 0): kafka_errors.GroupSubscribedToTopicError,
                           KafkaTopicPartition(f"{topic}-other", 0): kafka_errors.NoError}
        assert committed_offsets(bs, group, topic, PARTITIONS) == [6] * PARTITIONS
    finally:
        close_all(members)


def test_a_classic_group_is_upgraded_in_place(broker: Any) -> None:
    """kafka-python consumers with committed offsets are replaced one by one by
    group.protocol=consumer members: the group becomes a consumer group at the first
    one's heartbeat and keeps its offsets; nothing is lost or read twice."""
    bs = broker.bootstrap_servers
    topic, group = names()
    produce(bs, topic, records("w", 1))
    classic = [KafkaPythonMember(bs, group, topic) for _ in range(2)]
    members: list[Any] = list(classic)
    try:
        settle(bs, group, topic, members, 1)
        assert group_type(bs, group) == ConsumerGroupType.CLASSIC
        batch_read_once(bs, group, topic, members, "a", 6)
        members.append(Member(bs, group, topic, **KIP848))  # the upgrade
        poll_until(members, lambda: covers(members, PARTITIONS), timeout=90)
        assert group_type(bs, group) == ConsumerGroupType.CONSUMER
        batch_read_once(bs, group, topic, members, "b", 11)
        classic[0].close()
        members.append(Member(bs, group, topic, **KIP848))
        poll_until(members, lambda: covers(members, PARTITIONS), timeout=90)
        batch_read_once(bs, group, topic, members, "c", 16)
        classic[1].close()  # the last classic member
        poll_until(members, lambda: covers(members, PARTITIONS), timeout=90)
        batch_read_once(bs, group, topic, members, "d", 21)
        assert group_type(bs, group) == ConsumerGroupType.CONSUMER
        assert sorted(set(read(members, "w-"))) == sorted(v for _, v in records("w", 1))
    finally:
        close_all(members)


def test_a_consumer_group_is_downgraded_when_its_last_consumer_member_leaves(broker: Any) -> None:
    bs = broker.bootstrap_servers
    topic, group = names()
    produce(bs, topic, records("w", 1))
    kip848 = Member(bs, group, topic, **KIP848)
    members: list[Any] = [kip848]
    try:
        poll_until(members, lambda: covers(members, PARTITIONS))
        members += [KafkaPythonMember(bs, group, topic), KafkaPythonMember(bs, group, topic)]
        settle(bs, group, topic, members, 1)
        batch_read_once(bs, group, topic, members, "a", 6)
        kip848.close()  # leaves by heartbeat: the two classic members make a classic group
        poll_until(members, lambda: covers(members, PARTITIONS), timeout=90)
        assert group_type(bs, group) == ConsumerGroupType.CLASSIC
        batch_read_once(bs, group, topic, members, "b", 11)
        d = describe(bs, group)
        assert d.type == ConsumerGroupType.CLASSIC and d.state == ConsumerGroupState.STABLE and len(d.members) == 2
    finally:
        close_all(members)


def test_policy_disabled_keeps_a_classic_group_classic(broker_factory: Any) -> None:
    """With group.consumer.migration.policy=disabled a consumer-protocol member cannot join a
    classic group with members (GROUP_ID_NOT_FOUND, as Kafka); the classic members go on."""
    bs = broker_factory({**BROKER, "group.consumer.migration.policy": "disabled"}).start().bootstrap_servers
    topic, group = names()
    produce(bs, topic, records("w", 1))
    classic = KafkaPythonMember(bs, group, topic)
    members: list[Any] = [classic]
    try:
        poll_until(members, lambda: classic.assignment == set(range(PARTITIONS)))
        kip848 = Member(bs, group, topic, **KIP848)
        members.append(kip848)
        deadline = time.monotonic() + 30
        while True:  # librdkafka takes GROUP_ID_NOT_FOUND from ConsumerGroupHeartbeat as fatal
            assert time.monotonic() < deadline, "no GROUP_ID_NOT_FOUND"
            classic.poll_once()
            msg = kip848.consumer.poll(0.2)
            err = None if msg is None else msg.error()
            if err is not None and err.code() in (KafkaError.GROUP_ID_NOT_FOUND, KafkaError._FATAL) \
                    and "group id does not exist" in err.str():
                break
        assert kip848.consumer.assignment() == []
        assert group_type(bs, group) == ConsumerGroupType.CLASSIC
        kip848.close()
        batch_read_once(bs, group, topic, [classic], "a", 6)
    finally:
        close_all(members)


def test_a_mixed_group_survives_a_broker_restart(broker_factory: Any) -> None:
    """The broker is killed under a mixed group and started on its log: the converted
    group's records (classic members and all) bring it back, and the members go on."""
    bp = broker_factory(BROKER).start()
    bs = bp.bootstrap_servers
    topic, group = names()
    produce(bs, topic, records("w", 1))
    classic = KafkaPythonMember(bs, group, topic)
    members: list[Any] = [classic]
    try:
        settle(bs, group, topic, members, 1)
        members.append(Member(bs, group, topic, **KIP848, **{"reconnect.backoff.max.ms": 200}))
        settle(bs, group, topic, members, 1)
        batch_read_once(bs, group, topic, members, "a", 6)
        before = committed_offsets(bs, group, topic, PARTITIONS)
        bp.kill()
        port = bs.rsplit(":", 1)[1]
        bp2 = broker_factory({**BROKER, "listeners": f"PLAINTEXT://127.0.0.1:{port}"}, log_dir=bp.log_dir).start()
        assert committed_offsets(bs, group, topic, PARTITIONS) == before
        assert group_type(bp2.bootstrap_servers, group) == ConsumerGroupType.CONSUMER
        poll_until(members, lambda: covers(members, PARTITIONS), timeout=90)
        batch_read_once(bs, group, topic, members, "b", 11)
        d = describe(bs, group)
        assert len(d.members) == 2
    finally:
        close_all(members)
