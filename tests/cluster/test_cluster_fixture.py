"""The pytest plugin's `kbroker_cluster` (a kbroker.Cluster of its own, stopped after the
test), used as a user's test would: stop and restart brokers, then ask the CLI. A
preferred-leader election moves leadership back; `cluster status` shows a stopped
broker, the under-replicated and the offline partitions, and exits 3 for the latter."""

from __future__ import annotations

import re

import pytest

import kbroker
from kbroker.cluster.local_cluster import Cluster

from .cli_support import fresh, partition_lines, run_cli
from .support import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


@pytest.fixture
def kbroker_cluster_config() -> dict[str, str]:
    return {"auto.leader.rebalance.enable": "false"}  # the test elects the preferred leader


def describe(cluster: Cluster, topic: str) -> dict[int, dict[str, str]]:
    done = run_cli("topics", "describe", topic, bootstrap=cluster.bootstrap_servers)
    assert done.returncode == 0, done.stderr
    return partition_lines(done.stdout)


def test_elect_preferred_leader_and_status_of_a_stopped_broker(kbroker_cluster: Cluster) -> None:
    cluster = kbroker_cluster
    assert isinstance(cluster, kbroker.Cluster) and sorted(cluster.brokers) == [1, 2, 3]
    bootstrap = cluster.bootstrap_servers
    topic, lonely = fresh("preferred"), fresh("lonely")
    for name, assignment in ((topic, "1:2:3"), (lonely, "3")):
        created = run_cli("topics", "create", name, "--replica-assignment", assignment,
                              bootstrap=bootstrap)
        assert created.returncode == 0, created.stderr

    assert cluster.stop_broker(1) == 0  # a controlled shutdown hands leadership over
    cluster.restart(1)
    wait_until(lambda: (p := describe(cluster, topic)[0])["Leader"] != "1" and "1" in p["Isr"].split(","),
             "broker 1 back in the ISR, not leading")

    elected = run_cli("cluster", "elect-leaders", "--preferred", "--topic", topic,
                          "--partition", "0", bootstrap=bootstrap)
    assert elected.returncode == 0, elected.stderr
    assert elected.stdout == f"Topic: {topic}\tPartition: 0\tElection: PREFERRED\tResult: elected\n"
    wait_until(lambda: describe(cluster, topic)[0]["Leader"] == "1", "broker 1 leading again")

    cluster.stop_broker(3)
    live = ",".join(cluster.brokers[b].bootstrap for b in (1, 2))

    def status_shows_broker_3_gone() -> bool:
        done = run_cli("cluster", "status", bootstrap=live)
        return "\tBroker: 3\tHost: none" in done.stdout and done.returncode == 3

    wait_until(status_shows_broker_3_gone, "cluster status to show broker 3 stopped")
    status = run_cli("cluster", "status", bootstrap=live).stdout
    assert re.search(r"\tBrokers: 2\t", status)
    under = status[status.index("UnderReplicatedPartitions:"):status.index("OfflinePartitions:")]
    offline = status[status.index("OfflinePartitions:"):]
    assert partition_lines(under, lonely) == {} and partition_lines(offline, topic) == {}
    p = partition_lines(under, topic)[0]
    assert (p["Leader"], sorted(p["Isr"].split(",")), p["Offline"]) == ("1", ["1", "2"], "3")
    p = partition_lines(offline, lonely)[0]
    assert (p["Leader"], p["Isr"], p["Offline"]) == ("none", "3", "3")
