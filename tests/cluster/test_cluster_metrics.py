"""/metrics and /readyz of a cluster's brokers (Cluster(operations=True), as `kbroker
cluster up` runs them): one active controller, under-replicated partitions while a
broker is down, ISR expansions once it is back."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kbroker.cluster.local_cluster import Cluster
from kbroker.cluster.zookeeper_server import ZooKeeperServer
from tests.ops.support import get, scrape, value

from .support import create_topic, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def test_controller_under_replication_and_isr_expansion(zookeeper: ZooKeeperServer,
                                                        tmp_path: Path) -> None:
    cluster = Cluster(2, tmp_path, {"replica.lag.time.max.ms": "3000"}, zookeeper=zookeeper,
                      chroot=f"/kbroker-{uuid.uuid4().hex[:8]}", operations=True)
    cluster.start()
    try:
        urls = {b: p.operations_url for b, p in cluster.brokers.items()}
        assert None not in urls.values() and len(set(urls.values())) == 2
        for url in urls.values():
            assert get(f"{url}/readyz")[0] == 200
        active = [value(scrape(str(u)), "kafka_controller_kafkacontroller_activecontrollercount")
                  for u in urls.values()]
        assert sorted(active) == [0, 1]
        create_topic(cluster, "cm", 2, rf=2)
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        for i in range(100):
            producer.produce("cm", value=b"%d" % i, partition=i % 2)
        assert producer.flush(30) == 0
        one = str(urls[1])

        def figure(name: str) -> float | None:
            return value(scrape(one), name)

        cluster.stop_broker(2)  # broker 1 leads both partitions, alone in their ISR
        wait_until(lambda: figure("kafka_server_replicamanager_underreplicatedpartitions") == 2,
                   "broker 1 to report both partitions under-replicated")
        assert figure("kafka_server_replicamanager_leadercount") == 2
        cluster.restart(2)
        wait_until(lambda: figure("kafka_server_replicamanager_underreplicatedpartitions") == 0,
                   "broker 2 back in the ISRs")
        assert (figure("kafka_server_replicamanager_isrexpands_total") or 0) >= 2
        assert get(f"{urls[2]}/readyz")[0] == 200
    finally:
        cluster.stop()
