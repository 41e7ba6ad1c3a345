"""Consumer groups with confluent-kafka (librdkafka) against `kbroker serve` subprocesses:
sharing partitions, rebalancing, commits, resuming after a restart and after SIGKILL."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from .groups_support import Member, covers, end_offsets, poll_until, produce, read_to

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

PARTITIONS = 6


def values(tag: str, per_partition: int) -> list[tuple[int, str]]:
    return [(p, f"{tag}-{p}-{i}") for p in range(PARTITIONS) for i in range(per_partition)]


@pytest.fixture
def broker(broker_factory: Any) -> Any:
    return broker_factory({"num.partitions": str(PARTITIONS)}).start()


def consumed(members: list[Member]) -> list[str]:
    """What the members read, without the warm-up records (read at least once while the
    group forms: a partition that moves before a commit is read again, as it should be)."""
    return [v for m in members for v in m.values if not v.startswith("w-")]


def test_three_consumers_share_rebalance_commit_and_resume(broker: Any, record_property: Any) -> None:
    bs, topic, group = broker.bootstrap_servers, f"grp-{uuid.uuid4().hex[:8]}", "g-share"
    produce(bs, topic, values("w", 1))
    members = [Member(bs, group, topic) for _ in range(3)]
    try:
        stable_s = poll_until(members, lambda: covers(members, PARTITIONS))
        record_property("three_consumers_stable_seconds", round(stable_s, 3))
        print(f"\n3 confluent-kafka consumers stable after {stable_s:.2f} s")
        assert all(len(m.assignment) == 2 for m in members)
        first = values("a", 50)
        produce(bs, topic, first)
        poll_until(members, lambda: len(consumed(members)) >= len(first))
        for m in members:
            m.commit()
        assert sorted(consumed(members)) == sorted(v for _, v in first)

        members[0].close()  # the others take over its partitions
        poll_until(members, lambda: covers(members, PARTITIONS))
        second = values("b", 20)
        produce(bs, topic, second)
        poll_until(members, lambda: len(consumed(members)) >= len(first) + len(second))
        for m in members[1:]:
            m.commit()
        assert sorted(consumed(members)) == sorted(v for _, v in first + second)
    finally:
        for m in members:
            m.close()

    third = values("c", 5)
    produce(bs, topic, third)
    newcomer = Member(bs, group, topic)
    try:
        ends = end_offsets(newcomer, topic, PARTITIONS)
        poll_until([newcomer], lambda: read_to([newcomer], topic, ends))
        assert sorted(newcomer.values) == sorted(v for _, v in third), "resumed from committed offsets"
    finally:
        newcomer.close()


def _consume_and_commit(bs: str, group: str, topic: str, expected: list[tuple[int, str]]) -> None:
    m = Member(bs, group, topic)
    try:
        poll_until([m], lambda: len(m.values) >= len(expected))
        m.commit()
        assert sorted(m.values) == sorted(v for _, v in expected)
    finally:
        m.close()


def _resume(bs: str, group: str, topic: str, expected: list[tuple[int, str]]) -> None:
    m = Member(bs, group, topic)
    try:
        committed = m.consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
        assert [tp.offset for tp in committed] == [10] * PARTITIONS
        poll_until([m], lambda: len(m.values) >= len(expected))
        assert sorted(m.values) == sorted(v for _, v in expected)
    finally:
        m.close()


@pytest.mark.parametrize("how", ["restart", "sigkill"])
def test_committed_offsets_survive_broker_restart(broker_factory: Any, how: str) -> None:
    bp = broker_factory({"num.partitions": str(PARTITIONS)}).start()
    topic, group = f"dur-{how}-{uuid.uuid4().hex[:8]}", f"g-{how}"
    before = values("old", 10)
    produce(bp.bootstrap_servers, topic, before)
    _consume_and_commit(bp.bootstrap_servers, group, topic, before)
    if how == "sigkill":
        bp.kill()
    else:
        assert bp.stop() == 0
    bp2 = broker_factory({"num.partitions": str(PARTITIONS)}, log_dir=bp.log_dir).start()
    after = values("new", 3)
    produce(bp2.bootstrap_servers, topic, after)
    _resume(bp2.bootstrap_servers, group, topic, after)


def test_admin_list_describe_offsets_delete(broker: Any) -> None:
    bs, topic, group = broker.bootstrap_servers, f"adm-{uuid.uuid4().hex[:8]}", "g-admin"
    data = values("x", 4)
    produce(bs, topic, data)
    admin = AdminClient({"bootstrap.servers": bs})
    m = Member(bs, group, topic, **{"client.id": "adm-client"})
    try:
        poll_until([m], lambda: len(m.values) >= len(data))
        m.commit()
        listed = admin.list_consumer_groups(request_timeout=10).result()
        by_id = {g.group_id: g for g in listed.valid}
        assert group in by_id and by_id[group].state.name == "STABLE"
        desc = admin.describe_consumer_groups([group], request_timeout=10)[group].result()
        assert desc.state.name == "STABLE" and desc.partition_assignor == "range"
        assert len(desc.members) == 1 and desc.members[0].client_id == "adm-client"
        assigned = {tp.partition for tp in desc.members[0].assignment.topic_partitions}
        assert assigned == set(range(PARTITIONS))
        fut = admin.delete_consumer_groups([group], request_timeout=10)[group]
        with pytest.raises(Exception, match="NON_EMPTY_GROUP|not empty"):
            fut.result()
    finally:
        m.close()
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result()
    got = {(tp.topic, tp.partition): tp.offset for tp in offsets.topic_partitions}
    assert got == {(topic, p): 4 for p in range(PARTITIONS)}
    listed = admin.list_consumer_groups(request_timeout=10).result()
    assert {g.group_id: g.state.name for g in listed.valid}[group] == "EMPTY"
    admin.delete_consumer_groups([group], request_timeout=10)[group].result()
    listed = admin.list_consumer_groups(request_timeout=10).result()
    assert group not in {g.group_id for g in listed.valid}


def test_live_group_survives_broker_sigkill(broker_factory: Any) -> None:
    """Consumers stay up while the broker is SIGKILLed and restarted on the same port: the
    group (members, generation, assignment) and its offsets come back from the log."""
    bp = broker_factory({"num.partitions": str(PARTITIONS)}).start()
    bs, topic, group = bp.bootstrap_servers, f"live-{uuid.uuid4().hex[:8]}", "g-live"
    produce(bs, topic, values("w", 1))
    members = [Member(bs, group, topic, **{"reconnect.backoff.max.ms": 200}) for _ in range(2)]
    try:
        poll_until(members, lambda: covers(members, PARTITIONS))
        first = values("a", 10)
        produce(bs, topic, first)
        poll_until(members, lambda: len(consumed(members)) >= len(first))
        for m in members:
            m.commit()
        bp.kill()
        port = bs.rsplit(":", 1)[1]
        bp2 = broker_factory({"num.partitions": str(PARTITIONS), "listeners": f"PLAINTEXT://127.0.0.1:{port}"},
                             log_dir=bp.log_dir).start()
        second = values("b", 5)
        produce(bp2.bootstrap_servers, topic, second)
        poll_until(members, lambda: len(consumed(members)) >= len(first) + len(second), timeout=60)
        for m in members:
            m.commit()
        ends = end_offsets(members[0], topic, PARTITIONS)
        poll_until(members, lambda: read_to(members, topic, ends))
        assert sorted(consumed(members)) == sorted(v for _, v in first + second)
    finally:
        for m in members:
            m.close()
