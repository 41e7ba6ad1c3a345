"""Replication on a real cluster: ZooKeeper (Debian's, one per module) and three kbroker
processes, driven by confluent-kafka (librdkafka) and kcat as users drive Kafka.

Each test starts its own cluster (in a chroot of the shared ZooKeeper), since most of
them kill or stop brokers. Figures (failover time, controlled shutdown time) are
printed and recorded as test properties, never asserted.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from kbroker.client.connection import BrokerConnection
from kbroker.cluster.local_cluster import Cluster
from kbroker.cluster.metadata_cache import DEPARTED_LISTED_S
from kbroker.cluster.zookeeper_server import ZooKeeperServer
from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.metadata import MetadataResponse
from kbroker.protocol.messages.produce import ProduceRequest
from tests.batches import values_batch

from .cli_support import run_cli
from .support import (
    ProducerRun,
    create_topic,
    metadata,
    new_cluster,
    partition_view,
    read_partition,
    wait_for_isr,
    wait_for_leader,
    wait_until,
)

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def cluster(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[Cluster]:
    c = new_cluster(zookeeper, tmp_path, 3, {"replica.lag.time.max.ms": "5000"})
    try:
        yield c
    finally:
        c.stop()


def test_every_broker_answers_the_same_metadata(cluster: Cluster) -> None:
    create_topic(cluster, "orders", partitions=6, rf=3)
    views = {}
    for broker_id in cluster.brokers:
        wait_until(lambda b=broker_id: all(
            p.leader_id >= 0 for t in (metadata(cluster, b, ["orders"]) or metadata(cluster)).topics
            for p in t.partitions), "leaders everywhere")
        md = metadata(cluster, broker_id, ["orders"])
        assert md is not None
        assert sorted(b.node_id for b in md.brokers) == [1, 2, 3]
        views[broker_id] = (md.controller_id, sorted(
            (p.partition_index, p.leader_id, tuple(p.replica_nodes), tuple(sorted(p.isr_nodes)))
            for p in md.topics[0].partitions))
    assert len(set(map(str, views.values()))) == 1, views
    partitions = next(iter(views.values()))[1]
    assert {p[1] for p in partitions} == {1, 2, 3}  # leaders spread over the brokers
    assert all(len(replicas) == 3 for _p, _l, replicas, _i in partitions)
    # kcat (librdkafka) sees the same
    out = subprocess.run(["kcat", "-b", cluster.bootstrap_servers, "-L", "-J", "-t", "orders"],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    doc = json.loads(out)
    assert len(doc["brokers"]) == 3
    assert all(len(p["isrs"]) == 3 for p in doc["topics"][0]["partitions"])


def test_sigkill_of_the_leader_loses_no_acknowledged_record(
        cluster: Cluster, record_property: pytest.RecordProperty) -> None:
    create_topic(cluster, "t", partitions=1, rf=3, config={"min.insync.replicas": "2"})
    leader = wait_for_leader(cluster, "t").leader
    run = ProducerRun(cluster, "t").start()
    try:
        run.wait_acked(2000)
        killed_at = time.monotonic()
        cluster.kill(leader)
        new_leader = wait_for_leader(cluster, "t", not_on=leader)
        run.wait_acked(500)
        failover = time.monotonic() - killed_at
        record_property("failover_seconds", round(failover, 2))
        print(f"leader {leader} SIGKILLed: {new_leader.leader} leads (epoch "
              f"{new_leader.leader_epoch}); produce resumed after {failover:.2f} s")
        cluster.restart(leader)
        wait_for_isr(cluster, "t", 0, {1, 2, 3})  # the old leader truncated and caught up
        run.wait_acked(500)
    finally:
        run.stop()
    assert run.errors == []
    values = read_partition(cluster, "t", expect=len(run.acked))
    assert sorted(set(run.acked)) == sorted(run.acked), "a record was acknowledged twice"
    assert set(run.acked) <= set(values), f"lost {len(set(run.acked) - set(values))} records"
    assert len(values) == len(set(values)), "a record was written twice"
    assert values == sorted(values), "records out of order"


def test_a_dead_leader_is_listed_until_clients_learned_its_successor(cluster: Cluster) -> None:
    create_topic(cluster, "moved", partitions=1, rf=3)
    leader = wait_for_leader(cluster, "moved").leader
    cluster.kill(leader)

    def first_answer_with_another_leader() -> MetadataResponse | None:
        md = metadata(cluster, topics=["moved"])
        if md is None or not md.topics or not md.topics[0].partitions:
            return None
        p = md.topics[0].partitions[0]
        return md if p.leader_id not in (-1, leader) else None

    md = wait_until(first_answer_with_another_leader, "another leader", interval=0.01)
    assert isinstance(md, MetadataResponse)
    moved = md.topics[0].partitions[0]
    assert leader not in moved.isr_nodes, moved
    # librdkafka drops a broker that leaves the Metadata and parks that broker's
    # partitions until its next leader query, a second later, even when the same answer
    # names their new leader: the dead broker stays listed for DEPARTED_LISTED_S.
    assert leader in {b.node_id for b in md.brokers}, md.brokers
    status = run_cli("cluster", "status", bootstrap=cluster.bootstrap_servers)
    assert f"\tBroker: {leader}\tHost: none\tRack: none\t(not alive; holds replicas)" in (
        status.stdout.splitlines()), status.stdout + status.stderr  # DescribeCluster's brokers
    wait_until(lambda: (m := metadata(cluster)) is not None
               and leader not in {b.node_id for b in m.brokers}, f"broker {leader} unlisted",
               timeout=DEPARTED_LISTED_S + 30)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    described = admin.describe_cluster(request_timeout=15).result(timeout=30)
    assert leader not in {n.id for n in described.nodes}, "DescribeCluster lists live brokers only"


def test_min_insync_replicas_refuses_acks_all_before_the_append(cluster: Cluster) -> None:
    create_topic(cluster, "safe", partitions=1, rf=3, config={"min.insync.replicas": "2"})
    view = wait_for_leader(cluster, "safe")
    followers = [b for b in view.replicas if b != view.leader]
    for b in followers:
        cluster.stop_broker(b)
    wait_for_isr(cluster, "safe", 0, {view.leader})
    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": cluster.brokers[view.leader].bootstrap, "acks": "all",
                         "message.timeout.ms": 3000, "retries": 0})
    producer.produce("safe", b"x", partition=0,
                     on_delivery=lambda err, _m: errors.append(err) if err else None)
    producer.flush(30)
    assert [e.code() for e in errors] == [KafkaError.NOT_ENOUGH_REPLICAS]
    ok: list[object] = []
    lenient = Producer({"bootstrap.servers": cluster.brokers[view.leader].bootstrap, "acks": "1"})
    lenient.produce("safe", b"y", partition=0, on_delivery=lambda err, m: ok.append(err or m.offset()))
    lenient.flush(30)
    assert ok == [0]
    for b in followers:
        cluster.restart(b, wait=False)
    wait_for_isr(cluster, "safe", 0, set(view.replicas))


def test_a_restarted_broker_keeps_the_topics_min_insync_replicas(cluster: Cluster) -> None:
    """A broker loads its logs from disk before it reads the topics' configs from
    ZooKeeper: those logs must get their topic's overrides too, or a restarted leader
    alone in the ISR takes acks=all writes that min.insync.replicas=2 refuses (found by
    test_random_faults: records acknowledged with an ISR of one)."""
    create_topic(cluster, "kept", partitions=1, rf=3, config={"min.insync.replicas": "2"})
    view = wait_for_leader(cluster, "kept")
    restarted = view.leader
    cluster.stop_broker(restarted)
    cluster.restart(restarted)
    wait_for_isr(cluster, "kept", 0, set(view.replicas))
    others = [b for b in view.replicas if b != restarted]
    for b in others:
        cluster.stop_broker(b)
    wait_for_isr(cluster, "kept", 0, {restarted})
    assert wait_for_leader(cluster, "kept").leader == restarted
    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": cluster.brokers[restarted].bootstrap, "acks": "all",
                         "message.timeout.ms": 3000, "retries": 0})
    producer.produce("kept", b"x", partition=0,
                     on_delivery=lambda err, _m: errors.append(err) if err else None)
    producer.flush(30)
    assert [e.code() for e in errors] == [KafkaError.NOT_ENOUGH_REPLICAS]
    for b in others:
        cluster.restart(b, wait=False)
    wait_for_isr(cluster, "kept", 0, set(view.replicas))


def test_unclean_election_is_off_and_the_data_comes_back_with_the_old_leader(cluster: Cluster) -> None:
    create_topic(cluster, "keep", partitions=1, rf=2)
    view = wait_for_leader(cluster, "keep")
    leader, follower = view.leader, next(b for b in view.replicas if b != view.leader)
    cluster.stop_broker(follower)  # the follower goes stale
    wait_for_isr(cluster, "keep", 0, {leader})
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(100):
        producer.produce("keep", str(i).encode(), partition=0)
    assert producer.flush(30) == 0
    cluster.kill(leader)
    cluster.restart(follower, wait=False)
    cluster.wait_formed(brokers=[b for b in cluster.brokers if b != leader])

    def leader_gone() -> bool:  # its ZooKeeper session expired; the controller acted
        md = metadata(cluster)
        return md is not None and leader not in {b.node_id for b in md.brokers}

    wait_until(leader_gone, f"broker {leader} to leave the cluster")
    # The stale replica is alive but not in the ISR: the partition stays without a leader.
    time.sleep(2)  # the negative can only be shown by waiting; the controller acts in ms
    stale = partition_view(cluster, "keep")
    assert stale is not None and stale.leader == -1 and stale.isr == (leader,), stale
    cluster.restart(leader)
    back = wait_for_leader(cluster, "keep")
    assert back.leader == leader
    assert read_partition(cluster, "keep", expect=100) == list(range(100))


def test_controller_sigkill_a_new_controller_creates_topics(cluster: Cluster) -> None:
    md = metadata(cluster)
    assert md is not None
    old = md.controller_id
    cluster.kill(old)

    def new_controller() -> int | None:
        m = metadata(cluster)
        return m.controller_id if m is not None and m.controller_id not in (-1, old) else None

    wait_until(new_controller, "a new controller")
    create_topic(cluster, "after", partitions=2, rf=2)
    view = wait_for_leader(cluster, "after")
    assert old not in view.replicas
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    producer.produce("after", b"hello", partition=0)
    assert producer.flush(30) == 0


def test_controlled_shutdown_moves_leaders_without_producer_errors(
        cluster: Cluster, record_property: pytest.RecordProperty) -> None:
    create_topic(cluster, "cs", partitions=1, rf=3, config={"min.insync.replicas": "2"})
    leader = wait_for_leader(cluster, "cs").leader
    run = ProducerRun(cluster, "cs").start()
    try:
        run.wait_acked(2000)
        started = time.monotonic()
        code = cluster.stop_broker(leader)
        stopped = time.monotonic() - started
        assert code == 0
        moved = wait_for_leader(cluster, "cs", not_on=leader)
        run.wait_acked(1000)
    finally:
        run.stop()
    record_property("controlled_shutdown_seconds", round(stopped, 2))
    print(f"SIGTERM of leader {leader}: {moved.leader} leads; the broker exited after {stopped:.2f} s")
    assert "controlled shutdown of broker" in cluster.brokers[leader].output()
    assert run.errors == []
    values = read_partition(cluster, "cs", expect=len(run.acked))
    assert set(run.acked) <= set(values) and len(values) == len(set(values))


def test_acks_all_waits_for_the_followers(cluster: Cluster) -> None:
    """A record acknowledged with acks=all is on every ISR member: read from each replica's
    log dir after the cluster stops."""
    create_topic(cluster, "replicated", partitions=1, rf=3)
    wait_for_leader(cluster, "replicated")
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                         "linger.ms": 0})
    offsets: list[int] = []
    for i in range(50):
        producer.produce("replicated", str(i).encode(), partition=0,
                         on_delivery=lambda err, m: offsets.append(-1 if err else m.offset()))
        producer.flush(30)  # one at a time: each acknowledged before the next
    assert offsets == list(range(50))
    sizes = {b: _log_bytes(cluster, b, "replicated-0") for b in cluster.brokers}
    assert len(set(sizes.values())) == 1 and next(iter(sizes.values())) > 0, sizes


def _log_bytes(cluster: Cluster, broker_id: int, partition_dir: str) -> int:
    directory = cluster.brokers[broker_id].log_dir / partition_dir
    return sum(p.stat().st_size for p in directory.glob("*.log"))


def test_producer_error_for_an_unknown_replication_factor(cluster: Cluster) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    future = admin.create_topics([NewTopic("too-many", 1, 4)], operation_timeout=10)["too-many"]
    with pytest.raises(KafkaException) as e:
        future.result(timeout=30)
    assert e.value.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR


def test_group_coordinator_sigkill_consumers_carry_on_from_committed_offsets(cluster: Cluster) -> None:
    from confluent_kafka import Consumer

    from kbroker.client.connection import BrokerConnection
    from kbroker.protocol.messages.find_coordinator import FindCoordinatorRequest

    create_topic(cluster, "work", partitions=3, rf=3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    for i in range(3000):
        producer.produce("work", str(i).encode(), partition=i % 3)
    assert producer.flush(30) == 0

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "workers",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 10000})
    consumer.subscribe(["work"])
    seen: list[int] = []
    try:
        while len(seen) < 1500:
            for m in consumer.consume(100, 1.0):
                if m.error() is None:
                    seen.append(int(m.value()))
            if seen:
                consumer.commit(asynchronous=False)
        committed_before = {tp.partition: tp.offset for tp in consumer.committed(
            [__import__("confluent_kafka").TopicPartition("work", p) for p in range(3)], timeout=30)}

        def coordinator() -> int | None:
            b = next(b for b in cluster.brokers.values() if b.is_running())
            with BrokerConnection(b.host, b.port) as conn:
                r = conn.request(FindCoordinatorRequest(key="workers", key_type=0), 3)
            return r.node_id if r.error_code == 0 else None

        old = wait_until(coordinator, "the group's coordinator")
        cluster.kill(int(old))  # type: ignore[arg-type]
        wait_until(lambda: coordinator() not in (None, old), "a new coordinator")
        deadline = time.monotonic() + 90
        while len(set(seen)) < 3000 and time.monotonic() < deadline:
            for m in consumer.consume(100, 1.0):
                if m.error() is None:
                    seen.append(int(m.value()))
            try:
                consumer.commit(asynchronous=False)
            except KafkaException:
                pass  # a commit racing the coordinator's move: retried by the next one
    finally:
        consumer.close()
    assert set(seen) == set(range(3000))
    # Nothing before what was committed came again: the new coordinator had the commits.
    before = set(seen[:1500])
    again = [v for v in seen[1500:] if v in before]
    assert not again or all(
        v % 3 in committed_before and v >= 0 for v in again), again
    reread = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "workers"})
    try:
        now = reread.committed([__import__("confluent_kafka").TopicPartition("work", p)
                                for p in range(3)], timeout=30)
    finally:
        reread.close()
    assert [tp.offset for tp in now] == [1000, 1000, 1000]


def test_reassignment_while_producing(cluster: Cluster) -> None:
    from kbroker.client.connection import BrokerConnection
    from kbroker.protocol.messages.alter_partition_reassignments import (
        AlterPartitionReassignmentsRequest as Alter,
    )
    from kbroker.protocol.messages.list_partition_reassignments import (
        ListPartitionReassignmentsRequest as ListReq,
    )

    admin_request = Alter(timeout_ms=30000, topics=[Alter.ReassignableTopic(name="moving", partitions=[
        Alter.ReassignablePartition(partition_index=0, replicas=[2, 3])])])
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic("moving", 1, replica_assignment=[[1, 2]])])["moving"].result(30)
    wait_for_isr(cluster, "moving", 0, {1, 2})
    run = ProducerRun(cluster, "moving").start()
    try:
        run.wait_acked(2000)
        md = metadata(cluster)
        assert md is not None
        controller = cluster.brokers[md.controller_id]
        with BrokerConnection(controller.host, controller.port) as conn:
            answer = conn.request(admin_request, 0)
            assert answer.error_code == 0
            assert [p.error_code for t in answer.responses for p in t.partitions] == [0]

            def done() -> bool:
                ongoing = conn.request(ListReq(timeout_ms=30000, topics=None), 0)
                return ongoing.error_code == 0 and not ongoing.topics

            wait_until(done, "the reassignment to finish")
        view = wait_for_isr(cluster, "moving", 0, {2, 3})
        assert set(view.replicas) == {2, 3} and view.leader in (2, 3)
        run.wait_acked(1000)
    finally:
        run.stop()
    assert run.errors == []
    values = read_partition(cluster, "moving", expect=len(run.acked))
    assert set(run.acked) <= set(values) and values == sorted(set(values))
    wait_until(lambda: not (cluster.brokers[1].log_dir / "moving-0").exists(),
               "broker 1 to delete its replica")


def test_unclean_election_by_request_brings_a_stale_replica_up(cluster: Cluster) -> None:
    from confluent_kafka import ElectionType
    from confluent_kafka import TopicPartition as CkTopicPartition
    from confluent_kafka.admin import AdminClient

    create_topic(cluster, "rescue", partitions=1, rf=2)
    view = wait_for_leader(cluster, "rescue")
    leader, follower = view.leader, next(b for b in view.replicas if b != view.leader)
    cluster.stop_broker(follower)
    wait_for_isr(cluster, "rescue", 0, {leader})
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "1"})
    for i in range(10):
        producer.produce("rescue", str(i).encode(), partition=0)
    assert producer.flush(30) == 0
    cluster.stop_broker(leader)
    cluster.restart(follower, wait=False)
    wait_until(lambda: (v := partition_view(cluster, "rescue")) is not None and v.leader == -1,
               "the partition to go offline")
    admin = AdminClient({"bootstrap.servers": cluster.brokers[follower].bootstrap})
    futures = admin.elect_leaders(ElectionType.UNCLEAN, [CkTopicPartition("rescue", 0)])
    futures.result(timeout=30)
    now = wait_for_leader(cluster, "rescue")
    assert now.leader == follower and now.isr == (follower,)
    # the records only the old leader had are gone: that is what unclean means
    assert read_partition(cluster, "rescue", timeout=10) == []


def test_auto_rebalance_gives_the_preferred_replica_its_leadership_back(
        zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    c = new_cluster(zookeeper, tmp_path, 3, {"leader.imbalance.check.interval.seconds": "1",
                                             "leader.imbalance.per.broker.percentage": "0"})
    try:
        create_topic(c, "balanced", partitions=1, rf=3)
        preferred = wait_for_leader(c, "balanced").replicas[0]
        assert wait_for_leader(c, "balanced").leader == preferred
        c.stop_broker(preferred)
        wait_for_leader(c, "balanced", not_on=preferred)
        c.restart(preferred)
        wait_until(lambda: (v := partition_view(c, "balanced")) is not None and v.leader == preferred,
                   "the preferred replica to lead again")
    finally:
        c.stop()


@pytest.fixture
def patient_cluster(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[Cluster]:
    """A cluster whose leaders never shrink an ISR on their own (the lag check would hide
    what the controller does or fails to do)."""
    c = new_cluster(zookeeper, tmp_path, 3, {"replica.lag.time.max.ms": "120000"})
    try:
        yield c
    finally:
        c.stop()


def test_a_new_controller_removes_dead_brokers_from_every_isr(patient_cluster: Cluster) -> None:
    cluster = patient_cluster
    create_topic(cluster, "spread", partitions=3, rf=3)
    md = metadata(cluster)
    assert md is not None
    controller = md.controller_id
    cluster.kill(controller)

    def isrs_clean() -> bool:
        m = metadata(cluster, topics=["spread"])
        return (m is not None and m.controller_id not in (-1, controller)
                and all(controller not in p.isr_nodes and p.leader_id >= 0
                        for p in m.topics[0].partitions))

    wait_until(isrs_clean, f"broker {controller} to leave every ISR", timeout=60)


def test_acks_all_does_not_wait_for_a_follower_that_shut_down(patient_cluster: Cluster) -> None:
    cluster = patient_cluster
    create_topic(cluster, "pair", partitions=1, rf=2)
    view = wait_for_leader(cluster, "pair")
    follower = next(b for b in view.replicas if b != view.leader)
    cluster.stop_broker(follower)
    wait_for_isr(cluster, "pair", 0, {view.leader})
    delivered: list[object] = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                         "message.timeout.ms": 30000})
    producer.produce("pair", b"x", partition=0,
                     on_delivery=lambda err, m: delivered.append(err or m.offset()))
    producer.flush(60)
    # Waiting for the stopped follower (caught up at its last fetch) would take
    # replica.lag.time.max.ms (120 s), beyond the producer's 30 s.
    assert delivered == [0]


def test_acks_all_times_out_while_the_followers_are_stopped(patient_cluster: Cluster) -> None:
    """Both followers SIGSTOPped (still in the ISR: they lose no ZooKeeper session in the
    few seconds this takes): two pipelined acks=all Produces, the later one with the
    shorter timeout, are both answered REQUEST_TIMED_OUT; once the followers run again an
    acks=all Produce is answered NONE."""
    cluster = patient_cluster
    create_topic(cluster, "stalled", partitions=1, rf=3)
    view = wait_for_leader(cluster, "stalled")
    wait_for_isr(cluster, "stalled", 0, {1, 2, 3})
    leader = cluster.brokers[view.leader]
    followers = [cluster.brokers[b].pid for b in view.replicas if b != view.leader]
    assert all(pid is not None for pid in followers)

    def produce(timeout_ms: int) -> ProduceRequest:
        return ProduceRequest(acks=-1, timeout_ms=timeout_ms, topic_data=[
            ProduceRequest.TopicProduceData(name="stalled", partition_data=[
                ProduceRequest.PartitionProduceData(index=0, records=values_batch(3))])])
    with BrokerConnection(leader.host, leader.port, timeout_s=30) as conn:
        for pid in followers:
            os.kill(pid, signal.SIGSTOP)  # type: ignore[arg-type]
        try:
            conn.send(produce(1500), 9)
            conn.send(produce(300), 9)
            answers = [conn.receive(), conn.receive()]
        finally:
            for pid in followers:
                os.kill(pid, signal.SIGCONT)  # type: ignore[arg-type]
        codes = [p.error_code for a in answers for r in a.responses for p in r.partition_responses]
        assert codes == [ErrorCode.REQUEST_TIMED_OUT] * 2
        wait_for_isr(cluster, "stalled", 0, {1, 2, 3})
        after = conn.request(produce(30_000), 9)
    assert [(p.error_code, p.base_offset) for r in after.responses
            for p in r.partition_responses] == [(ErrorCode.NONE, 6)]


def test_an_offset_commit_waits_offsets_commit_timeout_ms_for_its_replicas(
        zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    """offsets.commit.timeout.ms (Kafka's: how long a commit waits for every in-sync replica
    of its __consumer_offsets partition): with both followers SIGSTOPped (still in the ISR),
    a commit is answered COORDINATOR_NOT_AVAILABLE after the configured 1 s, within the
    client's 4 s timeout that Kafka's default 5 s would outlast; once the followers run
    again a commit is answered NONE."""
    from kbroker.protocol.messages.find_coordinator import FindCoordinatorRequest
    from kbroker.protocol.messages.offset_commit import OffsetCommitRequest

    c = new_cluster(zookeeper, tmp_path, 3, {"replica.lag.time.max.ms": "120000",
                                             "offsets.topic.num.partitions": "1",
                                             "offsets.commit.timeout.ms": "1000"})
    try:
        create_topic(c, "committed", rf=3)

        def coordinator() -> int | None:
            b = next(iter(c.brokers.values()))
            with BrokerConnection(b.host, b.port, timeout_s=5.0) as conn:
                r = conn.request(FindCoordinatorRequest(key="committers", key_type=0), 3)
            return r.node_id if r.error_code == ErrorCode.NONE else None

        node = wait_until(coordinator, "the group's coordinator")
        wait_for_isr(c, "__consumer_offsets", 0, {1, 2, 3})
        followers = [b.pid for i, b in c.brokers.items() if i != node]
        assert all(pid is not None for pid in followers)
        commit = OffsetCommitRequest(group_id="committers", topics=[
            OffsetCommitRequest.OffsetCommitRequestTopic(name="committed", partitions=[
                OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0,
                                                                 committed_offset=7)])])
        leader = c.brokers[node]  # type: ignore[index]
        with BrokerConnection(leader.host, leader.port, timeout_s=4.0) as conn:
            for pid in followers:
                os.kill(pid, signal.SIGSTOP)  # type: ignore[arg-type]
            try:
                stalled = conn.request(commit, 8)
            finally:
                for pid in followers:
                    os.kill(pid, signal.SIGCONT)  # type: ignore[arg-type]
            assert [p.error_code for t in stalled.topics for p in t.partitions] == [
                ErrorCode.COORDINATOR_NOT_AVAILABLE]
            wait_for_isr(c, "__consumer_offsets", 0, {1, 2, 3})
            after = conn.request(commit, 8)
        assert [p.error_code for t in after.topics for p in t.partitions] == [ErrorCode.NONE]
    finally:
        c.stop()
