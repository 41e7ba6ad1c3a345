"""/metrics and /readyz of a cluster's brokers (Cluster(operations=True), as `kbroker
cluster up` runs them): one active controller, under-replicated partitions while a
broker is down, ISR expansions once it is back; the console's writes sent to a broker
that is not the controller reach the controller and the group's coordinator."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kbroker.cluster.local_cluster import Cluster
from kbroker.cluster.zookeeper_server import ZooKeeperServer
from tests.ops.support import call, get, scrape, value

from .support import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def test_controller_under_replication_and_isr_expansion(zookeeper: ZooKeeperServer,
                                                        tmp_path: Path) -> None:
    cluster = Cluster(2, tmp_path, {"replica.lag.time.max.ms": "3000",
                                    "operations.write.enable": "true"}, zookeeper=zookeeper,
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
        # the console of the broker that is not the controller creates the topic
        other = str(list(urls.values())[active.index(0)])
        status, answer = call(other, "POST", "/api/topics",
                              {"name": "cm", "partitions": 2, "replication_factor": 2})
        assert (status, answer) == (200, {"name": "cm", "partitions": 2, "replication_factor": 2})
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
        # the consoles reset a group's offsets: ListOffsets to the leaders, OffsetCommit to
        # the group's coordinator, from both brokers so that one of them is not it (last: the
        # __consumer_offsets partitions it creates would count in the figures above)
        for url in urls.values():
            status, answer = call(str(url), "POST", "/api/groups/cg/offsets",
                                  {"topic": "cm", "to": "latest"})
            assert status == 200, answer
            assert [o["offset"] for o in answer["offsets"]] == [50, 50]
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "cg"})
        try:
            committed = consumer.committed([TopicPartition("cm", p) for p in (0, 1)], timeout=30)
            assert [tp.offset for tp in committed] == [50, 50]
        finally:
            consumer.close()
    finally:
        cluster.stop()
