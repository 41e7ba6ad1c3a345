"""Brokers that talk to each other over SASL_PLAINTEXT with SCRAM-SHA-512, ACLs on, and
super.users naming their principal (User:broker) and not User:ANONYMOUS: replication,
the controller's requests and a controlled shutdown pass; an anonymous client on the
PLAINTEXT listener sends none of the brokers' requests. The broker's SCRAM credential
is written to ZooKeeper before the brokers start, as Kafka's docs have it done
(kafka-configs.sh --zookeeper)."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from kbroker.cluster import zk_data
from kbroker.cluster.zookeeper_server import ZooKeeperServer
from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.fetch import FetchRequest
from kbroker.protocol.messages.leader_and_isr import LeaderAndIsrRequest
from kbroker.protocol.messages.metadata import MetadataRequest
from kbroker.protocol.messages.update_metadata import UpdateMetadataRequest
from kbroker.security.scram import new_credential
from tests.ops.support import call as http_call

from .sasl_support import SaslCluster, call, client_conf
from .support import wait_until

pytestmark = pytest.mark.timeout(300)

PLAIN = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
         'user_admin="admin-secret" user_alice="alice-secret";')
SCRAM = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
         'username="broker" password="broker-secret";')


class InterBrokerSaslCluster(SaslCluster):
    jaas = PLAIN
    more_jaas = {"SCRAM-SHA-512": SCRAM}  # noqa: RUF012 - read only
    inter_broker = "SASL_PLAINTEXT"


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[InterBrokerSaslCluster]:
    chroot = f"/kbroker-{uuid.uuid4().hex[:8]}"
    zk = KazooClient(hosts=zookeeper.connect_string)
    zk.start(timeout=15)
    try:
        zk.create(f"{chroot}/config/users/broker", zk_data.encode_config({
            "SCRAM-SHA-512": new_credential("SCRAM-SHA-512", "broker-secret").to_string()}),
            makepath=True)
    finally:
        zk.stop()
        zk.close()
    c = InterBrokerSaslCluster(3, Path(tmp_path_factory.mktemp("sasl-inter")), {
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:broker;User:admin",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "operations.write.enable": "true"},
        zookeeper=zookeeper, chroot=chroot, operations=True)
    c.start()
    try:
        yield c
    finally:
        c.stop()


def _create_topic(cluster: InterBrokerSaslCluster, name: str) -> None:
    admin = AdminClient(client_conf(cluster, 1, "admin"))
    for f in admin.create_topics([NewTopic(name, 1, 3, config={"min.insync.replicas": "3"})],
                                 operation_timeout=30).values():
        f.result(timeout=60)


def _partition(cluster: InterBrokerSaslCluster, topic: str, not_on: int | None = None
               ) -> tuple[int, set[int]]:
    """(leader, ISR) of the topic's partition 0 as admin sees it (ANONYMOUS may not
    describe the topic: Metadata on the PLAINTEXT listener leaves it out)."""
    def found() -> tuple[int, set[int]] | None:
        for b, proc in cluster.brokers.items():
            if not proc.is_running():
                continue
            try:
                md = call(cluster, b, MetadataRequest(topics=[
                    MetadataRequest.MetadataRequestTopic(name=topic)],
                    allow_auto_topic_creation=False), 12, user="admin")
            except (OSError, AssertionError):
                continue
            for t in md.topics:
                for p in t.partitions:
                    if t.name == topic and p.partition_index == 0 and p.leader_id >= 0 \
                            and p.leader_id != not_on:
                        return p.leader_id, set(p.isr_nodes)
        return None
    got = wait_until(found, f"a leader of {topic}", timeout=60)
    assert isinstance(got, tuple)
    return got


def _produce_all(cluster: InterBrokerSaslCluster, broker_id: int, topic: str, n: int) -> None:
    producer = confluent_kafka.Producer({**client_conf(cluster, broker_id, "admin"), "acks": "all"})
    errors: list[Any] = []
    for i in range(n):
        producer.produce(topic, f"{i}".encode(), partition=0, on_delivery=lambda e, m: errors.append(e))
    assert producer.flush(60) == 0 and errors == [None] * n


def test_brokers_replicate_as_their_sasl_principal(cluster: InterBrokerSaslCluster) -> None:
    topic = "sasl-replicated"
    _create_topic(cluster, topic)
    leader, _isr = _partition(cluster, topic)
    _produce_all(cluster, leader, topic, 50)  # min.insync.replicas=3: every replica has them
    wait_until(lambda: _partition(cluster, topic)[1] == {1, 2, 3}, "all three in the ISR")
    for broker_id in (1, 2, 3):
        log = cluster.brokers[broker_id].output()
        assert "broker-secret" not in log


def test_anonymous_clients_send_none_of_the_brokers_requests(cluster: InterBrokerSaslCluster) -> None:
    topic = "sasl-guarded"
    _create_topic(cluster, topic)
    leader, _isr = _partition(cluster, topic)
    for request, version in ((LeaderAndIsrRequest(controller_id=1, controller_epoch=99), 5),
                             (UpdateMetadataRequest(controller_id=1, controller_epoch=99), 7)):
        assert call(cluster, leader, request, version).error_code == \
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    fetch = FetchRequest(replica_id=(leader % 3) + 1, max_wait_ms=0, min_bytes=1,
                         max_bytes=1 << 20, topics=[FetchRequest.FetchTopic(
                             topic=topic, partitions=[FetchRequest.FetchPartition(
                                 partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
    response = call(cluster, leader, fetch, 11)
    assert [p.error_code for t in response.responses for p in t.partitions] == [
        ErrorCode.TOPIC_AUTHORIZATION_FAILED]


def test_a_controlled_shutdown_and_a_new_leader_over_sasl(cluster: InterBrokerSaslCluster) -> None:
    topic = "sasl-moved"
    _create_topic(cluster, topic)
    leader, _isr = _partition(cluster, topic)
    _produce_all(cluster, leader, topic, 10)
    assert cluster.stop_broker(leader) == 0
    assert f"controlled shutdown of broker {leader} done" in cluster.brokers[leader].output()
    new, _isr = _partition(cluster, topic, not_on=leader)
    cluster.restart(leader)
    wait_until(lambda: _partition(cluster, topic)[1] == {1, 2, 3},
               "the restarted broker back in the ISR", timeout=60)
    _produce_all(cluster, new, topic, 10)


def test_the_console_reaches_the_controller_over_sasl(cluster: InterBrokerSaslCluster) -> None:
    """A topic made in the console of a broker that is not the controller: the console
    sends CreateTopics to the controller on the inter-broker listener, logged in as the
    brokers are."""
    controller = call(cluster, 1, MetadataRequest(topics=[]), 12, user="admin").controller_id
    other = next(b for b in (1, 2, 3) if b != controller)
    url = cluster.brokers[other].operations_url
    assert url is not None
    basic = base64.b64encode(b"admin:admin-secret").decode()
    status, body = http_call(url, "POST", "/api/topics", {"name": "console-made", "partitions": 1},
                             headers={"Authorization": f"Basic {basic}"})
    assert status == 200, body
    _partition(cluster, "console-made")
