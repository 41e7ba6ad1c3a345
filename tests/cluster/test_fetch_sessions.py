"""Followers' incremental fetch sessions (KIP-227) on the wire, against a one-broker
cluster (cluster mode: a Fetch with replica_id set is a follower's). The replica id is
one the partitions do not have, so that no real follower's progress is touched.

A session opens with a full fetch (session_id 0, epoch 0); later fetches name only the
partitions whose position changed and get only the partitions with news. Unknown ids and
wrong epochs are refused with Kafka's error codes; consumers get no session.

A fetch is known to be parked once the broker has read it: the topic's partition reads
went up in its /metrics (tests.ops.support.partition_reads)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kbroker.client.connection import BrokerConnection
from kbroker.cluster.local_cluster import BrokerProcess, Cluster
from kbroker.cluster.zookeeper_server import ZooKeeperServer
from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.fetch import FetchRequest, FetchResponse
from kbroker.protocol.messages.produce import ProduceRequest, ProduceResponse
from tests.batches import decode_batches, make_batch, values_batch
from tests.ops.support import partition_reads

from .support import (
    create_topic,
    metadata,
    new_cluster,
    partition_view,
    read_partition,
    wait_for_isr,
    wait_for_leader,
    wait_until,
)

FETCH_VERSION = 12
REPLICA = 99  # no partition has it: the leader answers as to a follower, tracks nothing
# a parked fetch's max wait, longer than its connection waits for an answer (30 s): an
# answer at all is one that an append woke, not the deadline
PARKED_MS = 120_000


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = new_cluster(zookeeper, tmp_path_factory.mktemp("sessions"), brokers=1, operations=True)
    try:
        yield c
    finally:
        c.stop()


def produce(cluster: Cluster, topic: str, partition: int, count: int) -> None:
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(count):
        p.produce(topic, str(i).encode(), partition=partition)
    assert p.flush(30) == 0


def fetch(conn: BrokerConnection, topic: str, positions: dict[int, int], session_id: int,
          epoch: int, forget: list[int] | None = None, replica_id: int = REPLICA,
          max_wait_ms: int = 0) -> FetchResponse:
    request = FetchRequest(
        replica_id=replica_id, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
        isolation_level=0, session_id=session_id, session_epoch=epoch,
        topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
            FetchRequest.FetchPartition(partition=p, current_leader_epoch=-1, fetch_offset=offset,
                                        last_fetched_epoch=-1, log_start_offset=-1,
                                        partition_max_bytes=1 << 20)
            for p, offset in positions.items()])] if positions else [],
        forgotten_topics_data=[FetchRequest.ForgottenTopic(topic=topic, partitions=forget)]
        if forget else [],
        rack_id="")
    response: FetchResponse = conn.request(request, FETCH_VERSION)
    return response


def send_and_park(conn: BrokerConnection, broker: BrokerProcess, topic: str, request: FetchRequest) -> None:
    """Send a Fetch that finds nothing to read and return once the broker parked it."""
    url = broker.operations_url
    assert url is not None, "the cluster runs without operations listeners"
    before = partition_reads(url, topic)
    conn.send(request, FETCH_VERSION)
    wait_until(lambda: partition_reads(url, topic) > before,
               f"the broker to read (and park) the fetch of {topic}", interval=0.02)


def parked_fetch(conn: BrokerConnection, broker: BrokerProcess, topic: str, session: int,
                 meanwhile: Callable[[], object]) -> FetchResponse:
    """An incremental fetch (epoch 1) with a max wait of PARKED_MS, `meanwhile` run once
    the broker has parked it; its answer (the connection's timeout if nothing woke it)."""
    send_and_park(conn, broker, topic, FetchRequest(
        replica_id=REPLICA, max_wait_ms=PARKED_MS, min_bytes=1, max_bytes=1 << 20,
        isolation_level=0, session_id=session, session_epoch=1, topics=[],
        forgotten_topics_data=[], rack_id=""))
    meanwhile()
    woken: FetchResponse = conn.receive()
    return woken


def answered(response: FetchResponse) -> dict[int, tuple[int, int]]:
    """partition -> (high watermark, record bytes) of each partition in the answer."""
    return {pd.partition_index: (pd.high_watermark, len(bytes(pd.records or b"")))  # type: ignore[arg-type]
            for t in response.responses for pd in t.partitions}


def test_a_session_answers_only_the_partitions_with_news(cluster: Cluster) -> None:
    topic = "sessions-news"
    create_topic(cluster, topic, partitions=3, rf=1)
    for p in range(3):
        wait_for_leader(cluster, topic, p)
    produce(cluster, topic, 0, 5)
    broker = cluster.brokers[1]
    with BrokerConnection(broker.host, broker.port, timeout_s=30) as conn:
        opened = fetch(conn, topic, {0: 0, 1: 0, 2: 0}, 0, 0)
        assert opened.error_code == ErrorCode.NONE
        session = opened.session_id
        assert session != 0
        first = answered(opened)
        assert set(first) == {0, 1, 2}  # the opening fetch is a full one
        assert first[0][0] == 5 and first[0][1] > 0 and first[1] == (0, 0)

        # partition 0 moves to its end: nothing new anywhere, so nothing is answered
        quiet = fetch(conn, topic, {0: 5}, session, 1)
        assert quiet.error_code == ErrorCode.NONE and quiet.session_id == session
        assert answered(quiet) == {}

        # records on partition 2 only: the answer has partition 2 only, though the
        # fetch named no partition (the session holds the positions)
        produce(cluster, topic, 2, 3)
        news = answered(fetch(conn, topic, {}, session, 2))
        assert set(news) == {2} and news[2][0] == 3 and news[2][1] > 0

        # a forgotten partition is no longer read
        produce(cluster, topic, 1, 2)
        assert answered(fetch(conn, topic, {2: 3}, session, 3, forget=[1])) == {}

        # wrong epoch, unknown session
        wrong = fetch(conn, topic, {}, session, 7)
        assert wrong.error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
        assert wrong.session_id == 0 and wrong.responses == []
        unknown = fetch(conn, topic, {}, session ^ 0x5A5A5, 1)
        assert unknown.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND

        # epoch -1 closes it: a sessionless full answer, and the id is gone
        closed = fetch(conn, topic, {0: 5, 1: 0, 2: 3}, session, -1)
        assert closed.error_code == ErrorCode.NONE and closed.session_id == 0
        assert set(answered(closed)) == {0, 1, 2}
        assert fetch(conn, topic, {}, session, 4).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND

        # a consumer that asks for a session gets none (and a full answer)
        consumer = fetch(conn, topic, {0: 0}, 0, 0, replica_id=-1)
        assert consumer.error_code == ErrorCode.NONE and consumer.session_id == 0
        assert set(answered(consumer)) == {0}


def test_a_parked_session_fetch_is_answered_when_records_arrive(cluster: Cluster) -> None:
    """An incremental fetch with nothing to read parks for up to its max wait (two minutes
    here, longer than the connection waits); an append to any partition of the session
    answers it."""
    topic = "sessions-park"
    create_topic(cluster, topic, partitions=2, rf=1)
    for p in range(2):
        wait_for_leader(cluster, topic, p)
    broker = cluster.brokers[1]
    with BrokerConnection(broker.host, broker.port, timeout_s=30) as conn:
        session = fetch(conn, topic, {0: 0, 1: 0}, 0, 0).session_id
        assert session != 0
        woken = parked_fetch(conn, broker, topic, session, lambda: produce(cluster, topic, 1, 1))
        assert woken.error_code == ErrorCode.NONE and woken.session_id == session
        assert set(answered(woken)) == {1} and answered(woken)[1][1] > 0


def test_a_parked_follower_fetch_woken_by_a_produce_answers_every_partition_it_appended(
        cluster: Cluster) -> None:
    """A parked follower fetch is answered from inside the Produce that appended (no task
    in between), once all of that request's partitions are appended: one answer with both
    partitions' records, each with the high watermark after the append (as the answer of
    a task that ran after the whole Produce was)."""
    topic = "sessions-woken"
    create_topic(cluster, topic, partitions=2, rf=1)
    for p in range(2):
        wait_for_leader(cluster, topic, p)
    produce(cluster, topic, 0, 3)  # partition 0 holds offsets 0-2 before the request
    broker = cluster.brokers[1]
    with BrokerConnection(broker.host, broker.port, timeout_s=30) as conn, \
            BrokerConnection(broker.host, broker.port, timeout_s=30) as producer:
        session = fetch(conn, topic, {0: 3, 1: 0}, 0, 0).session_id
        assert session != 0
        request = ProduceRequest(acks=-1, timeout_ms=10_000, topic_data=[
            ProduceRequest.TopicProduceData(name=topic, partition_data=[
                ProduceRequest.PartitionProduceData(index=0, records=values_batch(4, prefix=b"p0-")),
                ProduceRequest.PartitionProduceData(index=1, records=values_batch(2, prefix=b"p1-")),
            ])])
        produced: list[ProduceResponse] = []
        woken = parked_fetch(conn, broker, topic, session,
                             lambda: produced.append(producer.request(request, 9)))
    assert [(p.index, p.error_code, p.base_offset) for r in produced[0].responses
            for p in r.partition_responses] == [(0, ErrorCode.NONE, 3), (1, ErrorCode.NONE, 0)]
    parts = {pd.partition_index: pd for t in woken.responses for pd in t.partitions}
    assert set(parts) == {0, 1}
    assert (parts[0].high_watermark, parts[1].high_watermark) == (7, 2)
    values = {p: [v for _, _, recs in decode_batches(bytes(pd.records)) for _, _, _, v in recs]  # type: ignore[arg-type]
              for p, pd in parts.items()}
    assert values[0] == [f"p0-{i}".encode().ljust(10, b".") for i in range(4)]
    assert values[1] == [f"p1-{i}".encode().ljust(10, b".") for i in range(2)]


def test_a_parked_fetch_of_a_closed_connection_is_dropped(cluster: Cluster) -> None:
    """A follower's connection closes while its fetch is parked: the appends that would
    have woken it answer nothing there (its PendingResponse is cancelled), and the broker
    goes on serving: the produce is acknowledged, a new session's fetch reads it."""
    topic = "sessions-closed"
    create_topic(cluster, topic, partitions=1, rf=1)
    wait_for_leader(cluster, topic, 0)
    broker = cluster.brokers[1]
    logged = broker.log_path.stat().st_size
    gone = BrokerConnection(broker.host, broker.port, timeout_s=30)
    session = fetch(gone, topic, {0: 0}, 0, 0).session_id
    send_and_park(gone, broker, topic, FetchRequest(
        replica_id=REPLICA, max_wait_ms=10_000, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
        session_id=session, session_epoch=1, topics=[], forgotten_topics_data=[], rack_id=""))
    gone.close()
    produce(cluster, topic, 0, 3)
    with BrokerConnection(broker.host, broker.port, timeout_s=30) as conn:
        opened = fetch(conn, topic, {0: 0}, 0, 0)
    assert opened.error_code == ErrorCode.NONE and opened.session_id != 0
    high_watermark, record_bytes = answered(opened)[0]
    assert high_watermark == 3 and record_bytes > 0
    with open(broker.log_path, "rb") as f:
        f.seek(logged)
        assert b"Traceback" not in f.read()


def test_followers_replicate_through_sessions(zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    """Three brokers: followers open sessions and copy every record; a leader restart
    (sessions lost) makes them open new ones and go on."""
    c = new_cluster(zookeeper, tmp_path, brokers=3)
    try:
        topic = "sessions-replicated"
        create_topic(c, topic, partitions=2, rf=3)
        view = wait_for_leader(c, topic, 0)
        produce(c, topic, 0, 50)
        produce(c, topic, 1, 50)
        wait_for_isr(c, topic, 0, {1, 2, 3})
        c.brokers[view.leader].kill()
        c.brokers[view.leader].start()
        wait_for_isr(c, topic, 0, {1, 2, 3})
        produce(c, topic, 0, 50)
        assert len(read_partition(c, topic, 0, expect=100)) == 100
        assert len(read_partition(c, topic, 1, expect=50)) == 50
    finally:
        c.stop()


def test_a_quiet_partition_keeps_its_follower_caught_up(zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    """A partition with nothing new is read quietly in its follower's session (only the
    fetch time moves); that time must stay current. The follower is SIGSTOPped after
    replica.lag.time.max.ms x3 of quiet fetches and a record is appended: it stays in the
    ISR until the lag time passes from its last fetch (a leader that kept its caught-up
    time from before the quiet reads would drop it at its next ISR check, within half the
    lag time); once it runs again it copies the record and stays in the ISR."""
    lag_ms = 3000
    c = new_cluster(zookeeper, tmp_path, brokers=2, overrides={"replica.lag.time.max.ms": str(lag_ms)})
    try:
        topic = "quiet"
        # Led by the controller: the follower stopped below must not be the one that
        # commits an ISR change.
        md = metadata(c)
        assert md is not None
        controller = md.controller_id
        other = next(b for b in c.brokers if b != controller)
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        admin.create_topics([NewTopic(topic, 1, replica_assignment=[[controller, other]])])[topic].result(30)
        view = wait_for_leader(c, topic, 0)
        assert view.leader == controller
        produce(c, topic, 0, 10)
        wait_for_isr(c, topic, 0, {1, 2})
        time.sleep(3 * lag_ms / 1000)  # the follower's fetches read the partition quietly
        follower = next(b for b in view.replicas if b != view.leader)
        pid = c.brokers[follower].pid
        assert pid is not None
        leader = c.brokers[view.leader]
        os.kill(pid, signal.SIGSTOP)
        stopped = time.monotonic()
        try:
            with BrokerConnection(leader.host, leader.port, timeout_s=10) as conn:
                written: ProduceResponse = conn.request(ProduceRequest(
                    acks=1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
                        name=topic, partition_data=[ProduceRequest.PartitionProduceData(
                            index=0, records=make_batch([b"10"]))])]), 9)
            assert [p.error_code for r in written.responses for p in r.partition_responses] == [0]
            # Its last fetch was at most replica.fetch.wait.max.ms (500 ms) before the stop.
            while time.monotonic() - stopped < (lag_ms - 800) / 1000:
                seen = partition_view(c, topic, 0, broker_id=view.leader)
                assert seen is not None and set(seen.isr) == {1, 2}, seen
                time.sleep(0.1)
        finally:
            os.kill(pid, signal.SIGCONT)
        assert len(read_partition(c, topic, 0, expect=11)) == 11
        wait_until(lambda: (v := partition_view(c, topic, 0, broker_id=follower)) is not None
                   and set(v.isr) == {1, 2}, "the ISR after the follower ran again")
    finally:
        c.stop()
