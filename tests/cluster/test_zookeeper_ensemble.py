"""A 3-broker cluster on a 3-member ZooKeeper ensemble loses the ZooKeeper leader: the
ensemble elects another, the brokers' sessions move to the members left, and the
cluster goes on (acks=all produce, consume, create a topic) with no broker losing its
session (its registration keeps its owner and its epoch) or leaving an ISR."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kazoo.client import KazooClient

from kbroker.cluster.local_cluster import Cluster
from kbroker.cluster.zookeeper_ensemble import ZooKeeperEnsemble
from kbroker.cluster.zookeeper_server import four_letter_word

from .support import create_topic, metadata, wait_until
from .workload import ProducerWorkload, check_exactly_once, read_partition

pytestmark = pytest.mark.timeout(240)

TOPIC = "ensemble"
PARTITIONS = 3


@pytest.fixture
def ensemble(tmp_path: Path) -> Iterator[ZooKeeperEnsemble]:
    with ZooKeeperEnsemble(tmp_path / "zookeeper", size=3) as zk:
        yield zk


def test_ensemble_members_rejoin_after_a_kill(ensemble: ZooKeeperEnsemble) -> None:
    modes = ensemble.modes()
    assert sorted(modes.values(), key=str) == ["follower", "follower", "leader"]
    for server_id, member in ensemble.members.items():
        assert (member.directory / "data" / "myid").read_text().strip() == str(server_id)
        assert four_letter_word(member.host, member.port or 0, "ruok") == "imok"
    follower = next(i for i, mode in modes.items() if mode == "follower")
    pid = ensemble.members[follower].pid
    ensemble.kill(follower)
    assert not ensemble.members[follower].is_running()
    assert ensemble.modes()[follower] is None
    ensemble.restart(follower)
    assert ensemble.members[follower].pid != pid
    assert ensemble.modes()[follower] == "follower"


def registrations(connect: str, chroot: str, brokers: list[int]) -> dict[int, tuple[int, int]]:
    """broker id -> (the session owning its ephemeral znode, its czxid: the broker epoch)."""
    zk = KazooClient(hosts=connect, timeout=10)
    zk.start(timeout=15)
    try:
        out = {}
        for b in brokers:
            _data, stat = zk.get(f"{chroot}/brokers/ids/{b}")
            out[b] = (stat.ephemeralOwner, stat.czxid)
        return out
    finally:
        zk.stop()
        zk.close()


def full_isr(cluster: Cluster, topic: str) -> bool:
    md = metadata(cluster, topics=[topic])
    return md is not None and bool(md.topics) and bool(md.topics[0].partitions) and all(
        p.leader_id >= 0 and len(p.isr_nodes) == 3 for p in md.topics[0].partitions)


def test_cluster_survives_the_zookeeper_leader(ensemble: ZooKeeperEnsemble, tmp_path: Path,
                                               record_property: pytest.RecordProperty) -> None:
    with Cluster(brokers=3, directory=tmp_path / "cluster", ensemble=ensemble,
                 overrides={"min.insync.replicas": "2"}) as cluster:
        brokers = sorted(cluster.brokers)
        create_topic(cluster, TOPIC, PARTITIONS, 3)
        wait_until(lambda: full_isr(cluster, TOPIC), "every partition with an ISR of 3")
        before = registrations(ensemble.connect_string, cluster.chroot, brokers)

        workload = ProducerWorkload(cluster.bootstrap_servers, TOPIC, PARTITIONS).start()
        workload.wait_acked(100, 60)
        old_leader = ensemble.leader()
        assert old_leader is not None
        member = ensemble.members[old_leader]
        connections = re.search(r"Connections: (\d+)",
                                four_letter_word(member.host, member.port or 0, "srvr"))
        killed_at = time.monotonic()
        ensemble.kill(old_leader)
        new_leader = wait_until(ensemble.leader, "a new ZooKeeper leader")
        elected_s = time.monotonic() - killed_at
        workload.wait_all_partitions_acked(after=time.monotonic(), timeout=60)
        gap_s = workload.largest_gap(killed_at)

        # ZooKeeper writes go on: a new topic, produced to and read back.
        create_topic(cluster, "after-the-loss", 1, 3)
        wait_until(lambda: full_isr(cluster, "after-the-loss"), "the new topic's ISR of 3")
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        producer.produce("after-the-loss", b"written after the loss")
        assert producer.flush(60) == 0
        assert [v for _o, v in read_partition(cluster.bootstrap_servers, "after-the-loss", 0)] == [
            b"written after the loss"]
        workload.wait_acked(100, 60)
        workload.stop()
        assert workload.errors == []

        after = registrations(ensemble.connect_string, cluster.chroot, brokers)
        assert after == before, "a broker lost its ZooKeeper session"
        assert full_isr(cluster, TOPIC), "a broker left an ISR"
        for b in brokers:
            output = cluster.brokers[b].output()
            assert "ZooKeeper session expired" not in output, f"broker {b} lost its session"
        fenced = [b for b in brokers if "fencing this broker" in cluster.brokers[b].output()]

        read = {p: read_partition(cluster.bootstrap_servers, TOPIC, p) for p in range(PARTITIONS)}
        counts = check_exactly_once(workload.acked, read)
        assert sum(counts.values()) >= workload.acked_count()

    record_property("zookeeper_election_s", round(elected_s, 2))
    record_property("longest_produce_gap_s", round(gap_s, 2))
    record_property("sessions_on_the_killed_leader", connections.group(1) if connections else "?")
    print(f"ZooKeeper leader {old_leader} killed (it served "
          f"{connections.group(1) if connections else '?'} connections, this probe's included): "
          f"member {new_leader} leads after "
          f"{elected_s:.2f} s; longest time without an acknowledgement {gap_s:.2f} s; "
          f"brokers that fenced themselves meanwhile: {fenced or 'none'}")
