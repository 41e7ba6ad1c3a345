"""Network partitions (network.py: each broker in a namespace of its own, cuts made by the
router namespace): a 3-broker cluster, RF=3, min.insync.replicas=2, under an idempotent
acks=all producer.

  * the leader of a partition is cut off entirely: it fences itself (stops taking
    writes) before the controller elects another leader, the new leader takes over, and
    after the heal the old leader truncates what it alone had and rejoins the ISR;
    nothing acknowledged is lost or duplicated and every replica holds the new leader's
    log byte for byte below the high watermark.
  * only the leader<->follower link is cut: the follower leaves the ISR after
    replica.lag.time.max.ms, acks=all goes on with the other two, and the follower
    comes back into the ISR after the heal.

Figures (fence time against election time, produce gaps) are printed and recorded as
test properties, never asserted. The tests skip when the network cannot be made (not
root, no `ip netns`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import pytest

from kbroker.cluster.local_cluster import Cluster
from kbroker.cluster.zookeeper_server import ZooKeeperServer
from kbroker.common.topic_partition import TopicPartition

from .network import Network, made_network, unavailable
from .replica_logs import divergence, replica_batches
from .support import create_topic, metadata, partition_view, wait_until
from .workload import ProducerWorkload, check_exactly_once, high_watermark, read_partition

pytestmark = pytest.mark.timeout(300)

TOPIC = "cut"
PARTITIONS = 3
BROKERS = (1, 2, 3)
# Shorter than Kafka's defaults, so that the tests take seconds, not minutes.
FAST = {"replica.socket.timeout.ms": "5000", "replica.fetch.backoff.ms": "200",
        "controlled.shutdown.enable": "false"}


@pytest.fixture
def network() -> Iterator[Network]:
    reason = unavailable()
    if reason is not None:
        pytest.skip(reason)
    with made_network(BROKERS) as net:
        yield net


@pytest.fixture
def zookeeper_on_the_network(network: Network, tmp_path: Path) -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer(tmp_path / "zookeeper", host=network.host_address) as zk:
        yield zk


@contextmanager
def cluster_on(network: Network, zookeeper: ZooKeeperServer, directory: Path,
               overrides: dict[str, str]) -> Iterator[Cluster]:
    cluster = Cluster(len(BROKERS), directory, {**FAST, **overrides}, zookeeper=zookeeper,
                      namespaces=network.placements())
    with cluster:
        yield cluster


def logged_at(output: str, needle: str, after: float) -> float | None:
    """The wall-clock time of the first log line containing `needle` logged after `after`."""
    for line in output.splitlines():
        if needle in line:
            try:
                at = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            except ValueError:
                continue
            if at >= after:
                return at
    return None


def leader_not_controlling(cluster: Cluster) -> tuple[int, int]:
    """(partition, its leader) for a partition led by a broker that is not the controller."""
    md = metadata(cluster, topics=[TOPIC])
    assert md is not None
    for p in sorted(md.topics[0].partitions, key=lambda p: p.partition_index):
        if p.leader_id != md.controller_id:
            return p.partition_index, p.leader_id
    raise AssertionError("the controller leads every partition")


def wait_full_isr(cluster: Cluster, partitions: int = PARTITIONS, timeout: float = 90) -> None:
    """Until every broker says that every partition has one leader and an ISR of all
    (a broker the controller could not reach may show a stale ISR: all must agree)."""
    def agreed(p: int) -> bool:
        views = {partition_view(cluster, TOPIC, p, broker_id=b) for b in BROKERS}
        return len(views) == 1 and all(
            v is not None and v.leader >= 0 and len(v.isr) == len(BROKERS) for v in views)
    for p in range(partitions):
        wait_until(lambda p=p: agreed(p), f"an ISR of {len(BROKERS)} for {TOPIC}-{p} on every broker",
                   timeout)


def check_replicas_agree(cluster: Cluster, partitions: int = PARTITIONS) -> None:
    """Every replica holds the final leader's log below the high watermark (followers
    reach it on their own: wait a little for their files to show it)."""
    for p in range(partitions):
        tp = TopicPartition(TOPIC, p)
        hw = high_watermark(cluster.bootstrap_servers, TOPIC, p)
        deadline = time.monotonic() + 30
        while (differs := divergence({b: replica_batches(cluster.brokers[b].log_dir, tp)
                                      for b in BROKERS}, hw)) is not None:
            assert time.monotonic() < deadline, f"{tp}: {differs}"
            time.sleep(0.2)


def test_isolated_leader_fences_itself_and_the_new_leader_wins(
        network: Network, zookeeper_on_the_network: ZooKeeperServer, tmp_path: Path,
        record_property: pytest.RecordProperty) -> None:
    with cluster_on(network, zookeeper_on_the_network, tmp_path / "cluster",
                    {"replica.lag.time.max.ms": "10000"}) as cluster:
        create_topic(cluster, TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
        wait_full_isr(cluster)
        partition, leader = leader_not_controlling(cluster)
        followers = [b for b in BROKERS if b != leader]
        workload = ProducerWorkload(cluster.bootstrap_servers, TOPIC, PARTITIONS).start()
        workload.wait_acked(300, 60)
        epoch_before = partition_view(cluster, TOPIC, partition)
        assert epoch_before is not None

        # First the followers lose the leader, so that it appends records nobody copies
        # (unacknowledged: acks=all waits); then it loses everyone, ZooKeeper included.
        for f in followers:
            network.cut(leader, f)
        sent = workload.sent
        wait_until(lambda: workload.sent >= sent + 30, "records sent to the cut-off leader")
        cut_at, cut_mono = time.time(), time.monotonic()
        network.isolate(leader)

        new_view = wait_until(
            lambda: (v := partition_view(cluster, TOPIC, partition, broker_id=followers[0]))
            is not None and v.leader in followers and v, "a new leader", 60)
        elected_s = time.monotonic() - cut_mono
        workload.wait_all_partitions_acked(after=time.monotonic(), timeout=90)
        resumed_s = workload.largest_gap(cut_mono)
        old = cluster.brokers[leader]
        fenced_at = wait_until(lambda: logged_at(old.output(), "fencing this broker", cut_at),
                               "the isolated leader to fence itself", 30)
        assert isinstance(fenced_at, float)

        network.heal()
        healed_mono = time.monotonic()
        wait_full_isr(cluster)
        rejoined_s = time.monotonic() - healed_mono
        workload.wait_acked(300, 60)
        workload.stop()
        assert workload.errors == []

        read = {p: read_partition(cluster.bootstrap_servers, TOPIC, p) for p in range(PARTITIONS)}
        check_exactly_once(workload.acked, read)
        check_replicas_agree(cluster)
        truncated = "truncating from" in old.output()
        controller_noticed = None
        for b in followers:
            at = logged_at(cluster.brokers[b].output(), f"dead [{leader}]", cut_at)
            controller_noticed = at if at is not None else controller_noticed

    fence_s = fenced_at - cut_at
    record_property("fence_s", round(fence_s, 2))
    record_property("election_s", round(elected_s, 2))
    record_property("produce_gap_s", round(resumed_s, 2))
    record_property("rejoin_after_heal_s", round(rejoined_s, 2))
    print(f"leader {leader} of {TOPIC}-{partition} isolated: fenced after {fence_s:.2f} s; "
          f"controller saw it gone after "
          f"{(controller_noticed - cut_at) if controller_noticed else float('nan'):.2f} s; "
          f"new leader {new_view.leader} (epoch {epoch_before.leader_epoch} -> "
          f"{new_view.leader_epoch}) seen after {elected_s:.2f} s; longest produce gap "
          f"{resumed_s:.2f} s; after the heal the old leader "
          f"{'truncated and ' if truncated else ''}rejoined the ISR in {rejoined_s:.2f} s")


def test_cut_between_leader_and_one_follower(
        network: Network, zookeeper_on_the_network: ZooKeeperServer, tmp_path: Path,
        record_property: pytest.RecordProperty) -> None:
    with cluster_on(network, zookeeper_on_the_network, tmp_path / "cluster",
                    {"replica.lag.time.max.ms": "3000"}) as cluster:
        create_topic(cluster, TOPIC, 1, 3, {"min.insync.replicas": "2"})
        wait_full_isr(cluster, 1)
        md = metadata(cluster, topics=[TOPIC])
        assert md is not None
        leader = md.topics[0].partitions[0].leader_id
        # Not the controller: a leader cut off from the controller cannot shrink its ISR
        # at all (AlterPartition goes to the controller, as in Kafka).
        follower = next(b for b in BROKERS if b not in (leader, md.controller_id))
        workload = ProducerWorkload(cluster.bootstrap_servers, TOPIC, 1).start()
        workload.wait_acked(200, 60)

        cut_mono = time.monotonic()
        network.cut(leader, follower)
        # asked of the leader: the cut-off follower's metadata may be stale (the
        # controller's UpdateMetadata cannot reach it when the leader is the controller)
        wait_until(lambda: (v := partition_view(cluster, TOPIC, 0, broker_id=leader)) is not None
                   and follower not in v.isr and len(v.isr) == 2,
                   f"broker {follower} to leave the ISR", 60)
        shrunk_s = time.monotonic() - cut_mono
        workload.wait_acked(200, 60, "acks=all records with the follower out of the ISR")
        view_cut = partition_view(cluster, TOPIC, 0, broker_id=leader)
        assert view_cut is not None and view_cut.leader == leader

        network.heal()
        healed_mono = time.monotonic()
        wait_full_isr(cluster, 1)
        rejoined_s = time.monotonic() - healed_mono
        workload.wait_acked(200, 60)
        workload.stop()
        assert workload.errors == []
        gap_s = workload.largest_gap(cut_mono)

        read = {0: read_partition(cluster.bootstrap_servers, TOPIC, 0)}
        check_exactly_once(workload.acked, read)
        check_replicas_agree(cluster, 1)

    record_property("isr_shrink_s", round(shrunk_s, 2))
    record_property("rejoin_after_heal_s", round(rejoined_s, 2))
    record_property("produce_gap_s", round(gap_s, 2))
    print(f"link {leader}<->{follower} cut: {follower} left the ISR after {shrunk_s:.2f} s "
          f"(replica.lag.time.max.ms 3000); longest produce gap {gap_s:.2f} s; after the heal "
          f"it rejoined the ISR in {rejoined_s:.2f} s")
