"""/metrics and /readyz of a cluster's brokers (Cluster(operations=True), as `kbroker
cluster up` runs them): one active controller, under-replicated partitions while a
broker is down, ISR expansions once it is back; the console's writes sent to a broker
that is not the controller reach the controller and the group's coordinator."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

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


def _asked_for_epochs(url: str) -> float:
    """OffsetForLeaderEpoch requests this broker has answered (every version)."""
    return sum(v for (name, labels), v in scrape(url).items()
               if name == "kafka_network_requestmetrics_requests_total"
               and dict(labels).get("request") == "OffsetForLeaderEpoch")


def test_new_replicas_fetch_without_asking_for_epochs(zookeeper: ZooKeeperServer,
                                                      tmp_path: Path) -> None:
    """A new topic's followers have no leader epoch to compare with the leader's: as Kafka's
    fetcher does with partitions without epochs (truncateToHighWatermark), they fetch at
    once, with no OffsetForLeaderEpoch. A restarted follower, whose logs have epochs,
    still asks before it fetches."""
    cluster = Cluster(3, tmp_path, {}, zookeeper=zookeeper,
                      chroot=f"/kbroker-{uuid.uuid4().hex[:8]}", operations=True)
    cluster.start()
    try:
        urls = {b: str(p.operations_url) for b, p in cluster.brokers.items()}
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        for f in admin.create_topics([NewTopic("ne", 3, 3)]).values():
            f.result(30)
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        for i in range(30):
            producer.produce("ne", value=b"%d" % i, partition=i % 3)
        assert producer.flush(30) == 0  # every follower of every partition fetched
        assert [_asked_for_epochs(u) for u in urls.values()] == [0, 0, 0]
        cluster.stop_broker(3)
        cluster.restart(3)
        wait_until(lambda: _asked_for_epochs(urls[1]) + _asked_for_epochs(urls[2]) > 0,
                   "the restarted broker to ask its leaders for their epochs' end offsets")
        wait_until(lambda: all(value(scrape(u), "kafka_server_replicamanager_underreplicatedpartitions")
                               == 0 for u in (urls[1], urls[2])), "broker 3 back in the ISRs")
    finally:
        cluster.stop()
