"""Share groups (KIP-932) with confluent-kafka 2.16's ShareConsumer (librdkafka) against
`kbroker serve` subprocesses: members of one share group get disjoint records, release
and lock expiry deliver again, reject does not, the delivery count limit archives, and a
broker restart loses nothing and delivers nothing accepted again.

The broker's share heartbeat interval is lowered (group.share.heartbeat.interval.ms with
its min) so members join in a second; lock durations are set per group
(`share.record.lock.duration.ms`, IncrementalAlterConfigs on the GROUP resource, above
the lowered group.share.min.record.lock.duration.ms); every group starts at the log
start (`share.auto.offset.reset=earliest`, the same way)."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient

from kbroker.protocol.messages.describe_share_group_offsets import DescribeShareGroupOffsetsRequest

from .groups_support import produce, set_group_configs
from .wire import WireClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

PARTITIONS = 3
BROKER = {
    "group.share.min.heartbeat.interval.ms": "500", "group.share.heartbeat.interval.ms": "500",
    "group.share.min.record.lock.duration.ms": "1000",
}


@pytest.fixture
def broker(broker_factory: Any) -> Any:
    return broker_factory(BROKER).start()


def names() -> tuple[str, str]:
    tag = uuid.uuid4().hex[:8]
    return f"share-{tag}", f"sg-{tag}"


def setup(bootstrap: str, topic: str, group: str, **group_configs: str) -> None:
    """The topic, and the group's configs: earliest, plus `group_configs`."""
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held while its future runs
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    set_group_configs(bootstrap, group, **{"share.auto.offset.reset": "earliest", **group_configs})


Ack = Callable[[Any], "AcknowledgeType | None"]


class ShareMember:
    """One ShareConsumer: what it got, as (value, delivery count). With `ack`, explicit
    acknowledgement (the type `ack(message)` answers; None: not acknowledged, so the
    member stops polling and holds what it got); else implicit."""

    def __init__(self, bootstrap: str, group: str, topic: str, ack: Ack | None = None, **conf: Any) -> None:
        conf = {"bootstrap.servers": bootstrap, "group.id": group, **conf}
        if ack is not None:
            conf["share.acknowledgement.mode"] = "explicit"
        self.consumer = ShareConsumer(conf)
        self.consumer.subscribe([topic])
        self.ack = ack
        self.got: list[tuple[str, int]] = []
        self.holding = False
        self.closed = False

    def poll_once(self, timeout: float = 0.2) -> None:
        if self.closed or self.holding:
            return
        for m in self.consumer.poll(timeout):
            assert m.error() is None, m.error()
            self.got.append((m.value().decode(), m.delivery_count()))
            if self.ack is not None:
                kind = self.ack(m)
                if kind is None:
                    self.holding = True
                else:
                    self.consumer.acknowledge(m, kind)

    def values(self) -> list[str]:
        return [v for v, _ in self.got]

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.consumer.close()


def poll_until(members: list[ShareMember], done: Callable[[], bool], timeout: float = 60.0,
               between: Callable[[], None] = lambda: None) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "timed out: got " + repr([len(m.got) for m in members])
        for m in members:
            m.poll_once()
        between()


def records(tag: str, n: int) -> list[tuple[int, str]]:
    return [(i % PARTITIONS, f"{tag}-{i}") for i in range(n)]


@pytest.mark.parametrize("count", [2, 3])
def test_members_get_disjoint_records(broker: Any, count: int) -> None:
    topic, group = names()
    setup(broker.bootstrap_servers, topic, group)
    members = [ShareMember(broker.bootstrap_servers, group, topic) for _ in range(count)]
    sent: list[str] = []

    def more() -> None:  # until every member got some: each round a few more records
        if not all(m.got for m in members) and len(sent) < 20_000:
            batch = records(f"r{len(sent)}", 60)
            produce(broker.bootstrap_servers, topic, batch)
            sent.extend(v for _, v in batch)

    try:
        more()
        poll_until(members, lambda: all(m.got for m in members), between=more)
        poll_until(members, lambda: sum(len(m.got) for m in members) >= len(sent))
        for m in members:  # nothing more comes: each record once
            m.poll_once(0.5)
        got = [v for m in members for v in m.values()]
        assert Counter(got) == Counter(sent)
        assert all(c == 1 for _, c in (g for m in members for g in m.got))
    finally:
        for m in members:
            m.close()


def test_release_delivers_again_and_reject_does_not(broker: Any) -> None:
    topic, group = names()
    setup(broker.bootstrap_servers, topic, group)
    sent = records("rr", 30)
    produce(broker.bootstrap_servers, topic, sent)

    def ack(m: Any) -> AcknowledgeType:
        index = int(m.value().decode().rsplit("-", 1)[1])
        if m.delivery_count() == 1 and index % 3 == 0:
            return AcknowledgeType.RELEASE
        if index % 3 == 1:
            return AcknowledgeType.REJECT
        return AcknowledgeType.ACCEPT

    member = ShareMember(broker.bootstrap_servers, group, topic, ack)
    try:
        released = {v for _, v in sent if int(v.rsplit("-", 1)[1]) % 3 == 0}
        poll_until([member], lambda: {v for v, c in member.got if c == 2} >= released)
        for _ in range(5):
            member.poll_once(0.3)
        counts = Counter(member.values())
        assert {v for v, n in counts.items() if n == 2} == released
        assert all(counts[v] == 1 for _, v in sent if v not in released)
        assert set(counts) == {v for _, v in sent}
    finally:
        member.close()


def test_delivery_count_limit_archives(broker_factory: Any) -> None:
    broker = broker_factory({**BROKER, "group.share.delivery.count.limit": "3"}).start()
    topic, group = names()
    setup(broker.bootstrap_servers, topic, group)
    sent = records("dl", 9)
    produce(broker.bootstrap_servers, topic, sent)
    member = ShareMember(broker.bootstrap_servers, group, topic, lambda m: AcknowledgeType.RELEASE)
    try:
        poll_until([member], lambda: len(member.got) >= 3 * len(sent))
        for _ in range(5):
            member.poll_once(0.3)  # archived after the third release: no fourth delivery
        assert Counter(member.values()) == {v: 3 for _, v in sent}
        assert sorted({c for _, c in member.got}) == [1, 2, 3]
    finally:
        member.close()


def test_lock_expiry_delivers_again(broker: Any) -> None:
    topic, group = names()
    setup(broker.bootstrap_servers, topic, group, **{"share.record.lock.duration.ms": "1000"})
    sent = records("le", 12)
    produce(broker.bootstrap_servers, topic, sent)
    holder = ShareMember(broker.bootstrap_servers, group, topic, lambda m: None)
    other = ShareMember(broker.bootstrap_servers, group, topic)
    try:
        poll_until([holder], lambda: holder.holding)
        held = set(holder.values())
        poll_until([other], lambda: set(other.values()) == {v for _, v in sent})
        assert {v for v, c in other.got if c == 2} == held  # after the holder's lock ran out
        assert all(c == 1 for v, c in other.got if v not in held)
    finally:
        other.close()
        holder.close()


def test_restart_loses_nothing_and_delivers_nothing_accepted_again(broker_factory: Any) -> None:
    broker = broker_factory(BROKER).start()
    topic, group = names()
    setup(broker.bootstrap_servers, topic, group)
    sent = records("rs", 3000)
    produce(broker.bootstrap_servers, topic, sent)
    phase = ["accept"]
    member = ShareMember(broker.bootstrap_servers, group, topic,
                         lambda m: AcknowledgeType.ACCEPT if phase[0] == "accept" else None,
                         **{"socket.timeout.ms": 3000})
    try:
        poll_until([member], lambda: len(member.got) >= 100)
        results = member.consumer.commit_sync(30)
        assert results and all(e is None for e in results.values()), results
        accepted = set(member.values())
        phase[0] = "hold"
        poll_until([member], lambda: member.holding)  # these are in flight when the broker dies
        held = set(member.values()) - accepted
        assert held
    finally:
        broker.kill()
        member.close()
    broker = broker_factory(BROKER, log_dir=broker.log_dir).start()
    after = ShareMember(broker.bootstrap_servers, group, topic)
    try:
        rest = {v for _, v in sent} - accepted
        poll_until([after], lambda: set(after.values()) >= rest)
        for _ in range(5):
            after.poll_once(0.3)
        assert not set(after.values()) & accepted
        assert Counter(after.values()) == Counter(rest)
        assert {v for v, c in after.got if c == 2} <= held  # nothing else was delivered before
    finally:
        after.close()


def listed(bootstrap: str) -> dict[str, str]:
    """The share groups kafka-python's admin lists (ListGroups v5, type share), with their
    states. (librdkafka's list_consumer_groups leaves out groups of protocol type "share", as
    it does with Kafka.)"""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return {g["group_id"]: g["group_state"] for g in admin.list_groups(types_filter=["share"])}
    finally:
        admin.close()


def test_admin_lists_and_deletes_a_share_group_which_a_restart_keeps(broker_factory: Any) -> None:
    """confluent-kafka's AdminClient: ListGroups shows the share group, before and after a
    restart (its share partition state brings it back, empty); DeleteGroups refuses it
    while a ShareConsumer is in it (NON_EMPTY_GROUP), then deletes it and its state, so
    the next member reads everything again from `share.auto.offset.reset`."""
    broker = broker_factory(BROKER).start()
    topic, group = names()
    setup(broker.bootstrap_servers, topic, group)
    sent = records("dg", 30)
    produce(broker.bootstrap_servers, topic, sent)
    member = ShareMember(broker.bootstrap_servers, group, topic, lambda m: AcknowledgeType.ACCEPT)
    try:
        poll_until([member], lambda: len(member.got) >= len(sent))
        assert member.consumer.commit_sync(30)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        assert listed(broker.bootstrap_servers).get(group) == "Stable"
        with pytest.raises(Exception) as refused:
            admin.delete_consumer_groups([group])[group].result(30)
        assert "NON_EMPTY_GROUP" in repr(refused.value) or "not empty" in str(refused.value).lower()
    finally:
        member.close()
    broker.stop(timeout=20)
    broker = broker_factory(BROKER, log_dir=broker.log_dir).start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    assert listed(broker.bootstrap_servers).get(group) == "Empty"  # known again from its state
    with WireClient(broker.bootstrap_servers) as c:  # DescribeShareGroupOffsets from the persisted state
        d = c.call(DescribeShareGroupOffsetsRequest(groups=[
            DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)]), 1)
    assert sorted((p.partition_index, p.start_offset, p.lag) for t in d.groups[0].topics for p in t.partitions) == [
        (i, len(sent) // PARTITIONS, 0) for i in range(PARTITIONS)]  # everything accepted before the restart
    after = ShareMember(broker.bootstrap_servers, group, topic)
    try:  # nothing left to deliver: every record was accepted before the restart
        for _ in range(5):
            after.poll_once(0.3)
        assert after.got == []
    finally:
        after.close()
    admin.delete_consumer_groups([group])[group].result(30)
    assert group not in listed(broker.bootstrap_servers)
    again = ShareMember(broker.bootstrap_servers, group, topic)
    try:  # the state went with the group: the group config's `earliest` starts it over
        poll_until([again], lambda: len(again.got) >= len(sent))
        assert Counter(again.values()) == Counter(v for _, v in sent)
    finally:
        again.close()


def test_read_committed_share_group_gets_committed_transactions_only(broker: Any) -> None:
    """share.isolation.level=read_committed: an aborted transaction's records are never
    delivered, an open one's only once it commits (the fetch stops at the last stable
    offset); a read_uncommitted group on the same topic gets them all."""
    topic, group = names()
    setup(broker.bootstrap_servers, topic, group, **{"share.isolation.level": "read_committed"})
    uncommitted = f"{group}-ru"
    set_group_configs(broker.bootstrap_servers, uncommitted, **{"share.auto.offset.reset": "earliest"})
    p = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": f"tx-{group}"})
    p.init_transactions(30)

    def transaction(tag: str, end: Callable[[float], None] | None) -> list[str]:
        p.begin_transaction()
        batch = records(tag, 12)
        for partition, value in batch:
            p.produce(topic, value.encode(), partition=partition)
        assert p.flush(30) == 0
        if end is not None:
            end(30)
        return [v for _, v in batch]

    committed = transaction("tc", p.commit_transaction)
    aborted = transaction("ta", p.abort_transaction)
    pending = transaction("to", None)  # open: above every partition's last stable offset
    member = ShareMember(broker.bootstrap_servers, group, topic)
    everything = ShareMember(broker.bootstrap_servers, uncommitted, topic)
    try:
        poll_until([member], lambda: len(member.got) >= len(committed))
        for _ in range(5):
            member.poll_once(0.3)
        assert Counter(member.values()) == Counter(committed)
        p.commit_transaction(30)
        poll_until([member], lambda: len(member.got) >= len(committed) + len(pending))
        for _ in range(5):
            member.poll_once(0.3)
        assert Counter(member.values()) == Counter(committed + pending)  # nothing aborted, ever
        poll_until([everything], lambda: len(everything.got) >= 36)
        assert Counter(everything.values()) == Counter(committed + aborted + pending)
    finally:
        member.close()
        everything.close()
