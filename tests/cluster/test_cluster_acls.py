"""ACLs and client quotas in a cluster (ZooKeeper mode), with a real ZooKeeper, three
broker processes and real clients (confluent-kafka, `kbroker acls`).

Every broker: AclAuthorizer, super.users=User:admin;User:ANONYMOUS (the brokers'
principal on their PLAINTEXT inter-broker listener), a SASL_PLAINTEXT listener with
PLAIN users admin, alice and bob, quota.window.num=2 (quotas settle fast). ACL and quota changes are sent to one chosen broker
(on its PLAINTEXT listener, as the super user ANONYMOUS, with kbroker's wire client)
and checked on the others: in ZooKeeper as Kafka lays them out, and as alice's
produce requests are answered."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kazoo.client import KazooClient

from kbroker.cluster.zookeeper_server import ZooKeeperServer
from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.alter_client_quotas import AlterClientQuotasRequest as ACQ
from kbroker.protocol.messages.create_acls import CreateAclsRequest
from kbroker.protocol.messages.create_topics import CreateTopicsRequest
from kbroker.protocol.messages.delete_acls import DeleteAclsRequest
from kbroker.protocol.messages.describe_acls import DescribeAclsRequest
from kbroker.protocol.messages.describe_client_quotas import DescribeClientQuotasRequest as DCQ
from kbroker.protocol.messages.fetch import FetchRequest
from kbroker.protocol.messages.leader_and_isr import LeaderAndIsrRequest
from kbroker.protocol.messages.stop_replica import StopReplicaRequest
from kbroker.protocol.messages.update_metadata import UpdateMetadataRequest
from kbroker.security.acl import AclOperation, PatternType, PermissionType, ResourceType

from .sasl_support import SaslCluster, call, client_conf, produce_one
from .support import create_topic, metadata, wait_for_isr, wait_for_leader, wait_until

pytestmark = pytest.mark.timeout(420)

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";')
AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
PROPAGATION_S = 20  # a change made through one broker reaches the others within this
T, LIT, PRE = ResourceType.TOPIC, PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = PermissionType.ALLOW, PermissionType.DENY
READ, WRITE, DESCRIBE = AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE


class AclCluster(SaslCluster):
    jaas = JAAS


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclCluster]:
    c = AclCluster(3, Path(tmp_path_factory.mktemp("acls")), {
        "authorizer.class.name": AUTHORIZER, "super.users": "User:admin;User:ANONYMOUS",
        "quota.window.num": "2"},
        zookeeper=zookeeper, chroot=f"/kbroker-{uuid.uuid4().hex[:8]}")
    c.start()
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def zk(cluster: AclCluster) -> Iterator[KazooClient]:
    client = KazooClient(hosts=cluster.zookeeper_connect)
    client.start(timeout=15)
    try:
        yield client
    finally:
        client.stop()
        client.close()


# -- requests to one chosen broker


def _create_acls(cluster: AclCluster, broker_id: int, *acls: tuple[Any, ...]) -> None:
    """acls: (resource type, name, pattern type, principal, operation, permission)."""
    creations = [CreateAclsRequest.AclCreation(
        resource_type=rt, resource_name=name, resource_pattern_type=pt, principal=principal,
        host="*", operation=op, permission_type=perm) for rt, name, pt, principal, op, perm in acls]
    response = call(cluster, broker_id, CreateAclsRequest(creations=creations), 3)
    assert [(r.error_code, r.error_message) for r in response.results] == [(0, None)] * len(acls)


def _delete_acls(cluster: AclCluster, broker_id: int, name: str, principal: str,
                 op: int) -> list[Any]:
    response = call(cluster, broker_id, DeleteAclsRequest(filters=[DeleteAclsRequest.DeleteAclsFilter(
        resource_type_filter=ResourceType.ANY, resource_name_filter=name,
        pattern_type_filter=PatternType.ANY, principal_filter=principal, host_filter=None,
        operation=op, permission_type=PermissionType.ANY)]), 3)
    (result,) = response.filter_results
    assert result.error_code == 0, result.error_message
    return list(result.matching_acls)


def _described(cluster: AclCluster, broker_id: int, name: str) -> set[tuple[Any, ...]]:
    response = call(cluster, broker_id, DescribeAclsRequest(
        resource_type_filter=ResourceType.ANY, resource_name_filter=name,
        pattern_type_filter=PatternType.ANY, principal_filter=None, host_filter=None,
        operation=AclOperation.ANY, permission_type=PermissionType.ANY), 3)
    assert response.error_code == 0
    return {(r.resource_type, r.pattern_type, a.principal, a.operation, a.permission_type)
            for r in response.resources for a in r.acls}


def _led_by(cluster: AclCluster, topic: str, partitions: int, broker_id: int) -> int:
    for p in range(partitions):
        if wait_for_leader(cluster, topic, p).leader == broker_id:
            return p
    raise AssertionError(f"broker {broker_id} leads no partition of {topic}")


def _zk_json(zk: KazooClient, path: str) -> Any:
    data, _stat = zk.get(path)
    return json.loads(data)


def _changes(zk: KazooClient, path: str) -> list[bytes]:
    return [zk.get(f"{path}/{c}")[0] for c in sorted(zk.get_children(path))]


# -- ACLs


def test_an_acl_created_through_one_broker_is_enforced_by_the_others(
        cluster: AclCluster, zk: KazooClient) -> None:
    topic = "acl-orders"
    create_topic(cluster, topic, partitions=3)
    p2, p3 = _led_by(cluster, topic, 3, 2), _led_by(cluster, topic, 3, 3)
    # alice may describe (so her producer finds the partitions) but not write
    _create_acls(cluster, 1, (T, topic, LIT, "User:alice", DESCRIBE, ALLOW))
    for broker_id, p in ((2, p2), (3, p3)):
        wait_until(lambda b=broker_id, p=p: produce_one(cluster, b, "alice", topic, p)
                   == KafkaError.TOPIC_AUTHORIZATION_FAILED,
                   f"alice's produce refused by broker {broker_id}", timeout=PROPAGATION_S)
    # WRITE through broker 1: brokers 2 and 3, the partitions' leaders, let her in
    started = time.monotonic()
    _create_acls(cluster, 1, (T, topic, LIT, "User:alice", WRITE, ALLOW))
    for broker_id, p in ((2, p2), (3, p3)):
        wait_until(lambda b=broker_id, p=p: produce_one(cluster, b, "alice", topic, p) is None,
                   f"alice's produce accepted by broker {broker_id}", timeout=PROPAGATION_S)
    assert time.monotonic() - started < PROPAGATION_S
    # stored as Kafka's AclAuthorizer stores it, with a change notification
    node = _zk_json(zk, f"/kafka-acl/Topic/{topic}")
    assert node["version"] == 1
    assert sorted(node["acls"], key=lambda a: a["operation"]) == [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Describe", "host": "*"},
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Write", "host": "*"}]
    assert f"TOPIC:{topic}".encode() in _changes(zk, "/kafka-acl-changes")
    # a DENY through broker 3 wins on broker 2
    _create_acls(cluster, 3, (T, topic, LIT, "User:alice", WRITE, DENY))
    wait_until(lambda: produce_one(cluster, 2, "alice", topic, p2)
               == KafkaError.TOPIC_AUTHORIZATION_FAILED, "the DENY on broker 2",
               timeout=PROPAGATION_S)
    assert len(_delete_acls(cluster, 3, topic, "User:alice", AclOperation.ANY)) == 3
    assert not zk.exists(f"/kafka-acl/Topic/{topic}")  # no entry left: no node, as Kafka


def test_creates_forwarded_by_a_non_controller_are_authorized_as_the_client(
        cluster: AclCluster) -> None:
    """KIP-590: the broker alice and bob reach is not the controller; it forwards their
    CreateTopics unauthorized, the controller authorizes each as its sender."""
    md = metadata(cluster)
    assert md is not None and md.controller_id >= 0
    controller = md.controller_id
    other = next(b for b in sorted(cluster.brokers) if b != controller)
    tag = uuid.uuid4().hex[:8]
    allowed, unlisted = f"fwd-alice-{tag}", f"fwd-other-{tag}"
    _create_acls(cluster, other, (T, allowed, LIT, "User:alice", AclOperation.CREATE, ALLOW))
    wait_until(lambda: _described(cluster, controller, allowed), "the ACL on the controller",
               timeout=PROPAGATION_S)

    def create(name: str, user: str) -> tuple[int, str | None]:
        response = call(cluster, other, CreateTopicsRequest(topics=[
            CreateTopicsRequest.CreatableTopic(name=name, num_partitions=1, replication_factor=3)],
            timeout_ms=30000), 7, user=user)
        (result,) = response.topics
        return result.error_code, result.name

    assert create(allowed, "alice") == (ErrorCode.NONE, allowed)
    wait_for_leader(cluster, allowed, 0)
    assert create(unlisted, "alice") == (ErrorCode.TOPIC_AUTHORIZATION_FAILED, unlisted)
    assert create(allowed + "-bob", "bob") == (ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                               allowed + "-bob")
    md = metadata(cluster, controller, [unlisted])
    assert md is not None and md.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_prefixed_acls(cluster: AclCluster, zk: KazooClient) -> None:
    topic = "pre-payments"
    create_topic(cluster, topic, partitions=3)
    p1, p3 = _led_by(cluster, topic, 3, 1), _led_by(cluster, topic, 3, 3)
    _create_acls(cluster, 2, (T, "pre-", PRE, "User:alice", WRITE, ALLOW))
    for broker_id, p in ((1, p1), (3, p3)):
        wait_until(lambda b=broker_id, p=p: produce_one(cluster, b, "alice", topic, p) is None,
                   f"the prefixed ACL on broker {broker_id}", timeout=PROPAGATION_S)
    node = _zk_json(zk, "/kafka-acl-extended/prefixed/Topic/pre-")
    assert node == {"version": 1, "acls": [{"principal": "User:alice", "permissionType": "Allow",
                                            "operation": "Write", "host": "*"}]}
    events = [json.loads(c) for c in _changes(zk, "/kafka-acl-extended-changes")]
    assert {"version": 1, "resourceType": "TOPIC", "name": "pre-", "patternType": "PREFIXED"} in events
    for broker_id in (1, 2, 3):
        assert _described(cluster, broker_id, "pre-") == {
            (T, PRE, "User:alice", WRITE, ALLOW)}
    # a name ZooKeeper cannot hold as one znode is refused, not half-written
    response = call(cluster, 1, CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(
        resource_type=ResourceType.GROUP, resource_name="a/b", resource_pattern_type=LIT,
        principal="User:alice", host="*", operation=READ, permission_type=ALLOW)]), 3)
    assert response.results[0].error_code == ErrorCode.INVALID_REQUEST
    _delete_acls(cluster, 1, "pre-", "User:alice", AclOperation.ANY)


def test_delete_acls_through_broker_3_takes_effect_on_broker_1(
        cluster: AclCluster, zk: KazooClient) -> None:
    topic = "acl-deleted"
    create_topic(cluster, topic, partitions=3)
    p1 = _led_by(cluster, topic, 3, 1)
    _create_acls(cluster, 1, (T, topic, LIT, "User:alice", DESCRIBE, ALLOW),
                 (T, topic, LIT, "User:alice", WRITE, ALLOW))
    wait_until(lambda: produce_one(cluster, 1, "alice", topic, p1) is None, "alice allowed",
               timeout=PROPAGATION_S)
    removed = _delete_acls(cluster, 3, topic, "User:alice", AclOperation.WRITE)
    assert [(a.resource_name, a.operation) for a in removed] == [(topic, AclOperation.WRITE)]
    wait_until(lambda: produce_one(cluster, 1, "alice", topic, p1)
               == KafkaError.TOPIC_AUTHORIZATION_FAILED, "the deletion on broker 1",
               timeout=PROPAGATION_S)
    assert [a["operation"] for a in _zk_json(zk, f"/kafka-acl/Topic/{topic}")["acls"]] == ["Describe"]
    for broker_id in (1, 2, 3):
        wait_until(lambda b=broker_id: _described(cluster, b, topic) == {
            (T, LIT, "User:alice", DESCRIBE, ALLOW)}, f"broker {broker_id}'s ACLs",
            timeout=PROPAGATION_S)


def test_concurrent_creations_through_every_broker_lose_none(
        cluster: AclCluster, zk: KazooClient) -> None:
    """Twelve creations on one resource at once, through the three brokers: each write is
    conditional on the node's version, so none overwrites another."""
    topic = "acl-race"
    errors: list[BaseException] = []

    def create(i: int) -> None:
        try:
            _create_acls(cluster, 1 + i % 3, (T, topic, LIT, f"User:u{i}", READ, ALLOW))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=create, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    node = _zk_json(zk, f"/kafka-acl/Topic/{topic}")
    assert sorted(a["principal"] for a in node["acls"]) == sorted(f"User:u{i}" for i in range(12))
    want = {(T, LIT, f"User:u{i}", READ, ALLOW) for i in range(12)}
    for broker_id in (1, 2, 3):
        wait_until(lambda b=broker_id: _described(cluster, b, topic) == want,
                   f"the twelve ACLs on broker {broker_id}", timeout=PROPAGATION_S)


# -- between brokers


def test_replication_and_the_inter_broker_principal_with_acls_on(cluster: AclCluster) -> None:
    """Brokers (User:ANONYMOUS, a super user) replicate and run the controller's requests;
    a client without CLUSTER_ACTION sends none of them, nor a follower's Fetch."""
    topic = "acl-replicated"
    create_topic(cluster, topic, partitions=1, config={"min.insync.replicas": "3"})
    leader = wait_for_leader(cluster, topic).leader
    producer = confluent_kafka.Producer({**client_conf(cluster, leader, "admin"), "acks": "all"})
    errors: list[Any] = []
    for i in range(50):
        producer.produce(topic, f"{i}".encode(), partition=0, on_delivery=lambda e, m: errors.append(e))
    assert producer.flush(60) == 0 and errors == [None] * 50  # min.insync.replicas=3: all three
    wait_for_isr(cluster, topic, 0, {1, 2, 3})
    failed = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    for request, version in ((LeaderAndIsrRequest(controller_id=1, controller_epoch=99), 5),
                             (StopReplicaRequest(controller_id=1, controller_epoch=99), 3),
                             (UpdateMetadataRequest(controller_id=1, controller_epoch=99), 7)):
        assert call(cluster, leader, request, version, user="alice").error_code == failed
    fetch = FetchRequest(replica_id=(leader % 3) + 1, max_wait_ms=0, min_bytes=1,
                         max_bytes=1 << 20, topics=[FetchRequest.FetchTopic(
                             topic=topic, partitions=[FetchRequest.FetchPartition(
                                 partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
    response = call(cluster, leader, fetch, 11, user="alice")
    codes = [p.error_code for t in response.responses for p in t.partitions]
    assert codes == [ErrorCode.TOPIC_AUTHORIZATION_FAILED]
    # the partition is untouched: still replicated by all three
    assert set(wait_for_leader(cluster, topic).isr) == {1, 2, 3}


# -- client quotas


def _alter_quota(cluster: AclCluster, broker_id: int, entity: list[tuple[str, str | None]],
                 key: str, value: float | None) -> None:
    response = call(cluster, broker_id, ACQ(entries=[ACQ.EntryData(
        entity=[ACQ.EntityData(entity_type=t, entity_name=n) for t, n in entity],
        ops=[ACQ.OpData(key=key, value=value or 0.0, remove=value is None)])]), 1)
    assert [(e.error_code, e.error_message) for e in response.entries] == [(0, None)]


def _quotas(cluster: AclCluster, broker_id: int) -> dict[tuple[tuple[str, str | None], ...], dict]:
    response = call(cluster, broker_id, DCQ(components=[], strict=False), 1)
    assert response.error_code == 0, response.error_message
    return {tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)):
            {v.key: v.value for v in entry.values} for entry in response.entries}


def test_a_producer_quota_set_through_one_broker_throttles_on_another(
        cluster: AclCluster, zk: KazooClient) -> None:
    topic = "quota-orders"
    create_topic(cluster, topic, partitions=3)
    p2 = _led_by(cluster, topic, 3, 2)
    _create_acls(cluster, 1, (T, topic, LIT, "User:alice", WRITE, ALLOW))
    quota = 256 * 1024
    _alter_quota(cluster, 1, [("user", "alice")], "producer_byte_rate", quota)
    assert _zk_json(zk, "/config/users/alice") == {
        "version": 1, "config": {"producer_byte_rate": str(quota)}}
    assert {"version": 2, "entity_path": "users/alice"} in [
        json.loads(c) for c in _changes(zk, "/config/changes")]
    for broker_id in (2, 3):
        wait_until(lambda b=broker_id: _quotas(cluster, b).get((("user", "alice"),)) == {
            "producer_byte_rate": float(quota)}, f"the quota on broker {broker_id}",
            timeout=PROPAGATION_S)
    # alice writes to broker 2 as fast as she may for 7 s: broker 2 holds her to the quota
    # (quota.window.num=2: the rate settles within a second; test_quotas.py)
    stats: list[str] = []
    producer = confluent_kafka.Producer({
        **client_conf(cluster, 2, "alice"), "acks": "1", "linger.ms": 5,
        "statistics.interval.ms": 500, "stats_cb": stats.append,
        "queue.buffering.max.kbytes": 64})
    value = b"x" * 1000
    start = time.monotonic()
    delivered: list[float] = []
    while time.monotonic() < start + 7:
        try:
            producer.produce(topic, value, partition=p2,
                             on_delivery=lambda e, m: delivered.append(time.monotonic()))
        except BufferError:
            producer.poll(0.01)
    assert producer.flush(60) == 0
    steady = [t for t in delivered if start + 1 <= t < start + 7]
    measured = len(steady) * len(value) / 6
    assert quota * 0.85 <= measured <= quota * 1.15, (measured, quota)
    throttled = [b.get("throttle", {}).get("max", 0) for raw in stats
                 for b in json.loads(raw)["brokers"].values() if b.get("nodeid") == 2]
    assert any(t > 0 for t in throttled), "no throttle_time_ms from broker 2"
    _alter_quota(cluster, 3, [("user", "alice")], "producer_byte_rate", None)
    for broker_id in (1, 2):
        wait_until(lambda b=broker_id: (("user", "alice"),) not in _quotas(cluster, b),
                   f"the removal on broker {broker_id}", timeout=PROPAGATION_S)


def test_quota_entities_and_scram_credentials_share_the_user_node(
        cluster: AclCluster, zk: KazooClient) -> None:
    _alter_quota(cluster, 2, [("user", "bob"), ("client-id", "c 1")], "consumer_byte_rate", 4096)
    _alter_quota(cluster, 3, [("user", None)], "request_percentage", 50)
    _alter_quota(cluster, 1, [("client-id", None)], "producer_byte_rate", 1 << 20)
    # user+client, default user, default client-id, as Kafka's ZooKeeper mode writes them
    # (names sanitized: ' ' as %20)
    assert _zk_json(zk, "/config/users/bob/clients/c%201")["config"] == {
        "consumer_byte_rate": "4096"}
    assert _zk_json(zk, "/config/users/<default>")["config"] == {"request_percentage": "50.0"}
    assert _zk_json(zk, "/config/clients/<default>")["config"] == {"producer_byte_rate": "1048576"}
    want = {(("client-id", "c 1"), ("user", "bob")): {"consumer_byte_rate": 4096.0},
            (("user", None),): {"request_percentage": 50.0},
            (("client-id", None),): {"producer_byte_rate": 1048576.0}}
    for broker_id in (1, 2, 3):
        wait_until(lambda b=broker_id: all(_quotas(cluster, b).get(k) == v for k, v in want.items()),
                   f"the quotas on broker {broker_id}", timeout=PROPAGATION_S)
    # a SCRAM credential of bob goes to the same node as his quota, and both stay
    _alter_quota(cluster, 1, [("user", "bob")], "producer_byte_rate", 8192)
    admin = AdminClient(client_conf(cluster, 3, "admin"))
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"bob-scram")]
    )["bob"].result(timeout=30)
    config = _zk_json(zk, "/config/users/bob")["config"]
    assert config["producer_byte_rate"] == "8192" and config["SCRAM-SHA-256"].startswith("salt=")
    for entity, key in (([("user", "bob"), ("client-id", "c 1")], "consumer_byte_rate"),
                        ([("user", None)], "request_percentage"),
                        ([("client-id", None)], "producer_byte_rate"),
                        ([("user", "bob")], "producer_byte_rate")):
        _alter_quota(cluster, 2, entity, key, None)
    assert "producer_byte_rate" not in _zk_json(zk, "/config/users/bob")["config"]
    assert "SCRAM-SHA-256" in _zk_json(zk, "/config/users/bob")["config"]


# -- the CLI, and a restart of the whole cluster (last: it restarts every broker)


def test_kbroker_acls_against_a_cluster(cluster: AclCluster, tmp_path: Path) -> None:
    config = tmp_path / "admin.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                      'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule '
                      'required username="admin" password="admin-secret";\n')

    def kbroker_acls(broker_id: int, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "kbroker", "acls", args[0],
                               "--bootstrap-server", cluster.sasl_bootstrap(broker_id),
                               "--command-config", str(config), *args[1:]],
                              capture_output=True, text=True, timeout=60)

    added = kbroker_acls(3, "add", "--allow-principal", "User:bob", "--producer", "--topic", "cli-t")
    assert added.returncode == 0, added.stderr
    wait_until(lambda: "principal=User:bob, host=*, operation=WRITE" in kbroker_acls(
        1, "list", "--topic", "cli-t").stdout, "bob's ACL listed through broker 1",
        timeout=PROPAGATION_S)
    removed = kbroker_acls(2, "remove", "--allow-principal", "User:bob", "--producer",
                           "--topic", "cli-t", "--force")
    assert removed.returncode == 0, removed.stderr
    wait_until(lambda: "User:bob" not in kbroker_acls(1, "list", "--topic", "cli-t").stdout,
               "bob's ACL gone through broker 1", timeout=PROPAGATION_S)


def test_acls_and_quotas_survive_a_restart_of_every_broker(cluster: AclCluster) -> None:
    topic = "acl-restart"
    create_topic(cluster, topic, partitions=3)
    _create_acls(cluster, 2, (T, topic, LIT, "User:alice", WRITE, ALLOW),
                 (T, "acl-re", PRE, "User:bob", DESCRIBE, DENY))
    _alter_quota(cluster, 2, [("user", "alice")], "consumer_byte_rate", 777)
    for broker_id in (1, 2, 3):
        cluster.stop_broker(broker_id)
    for broker_id in (1, 2, 3):
        cluster.brokers[broker_id].start()
    cluster.wait_formed()
    want = {(T, LIT, "User:alice", WRITE, ALLOW)}
    for broker_id in (1, 2, 3):
        assert _described(cluster, broker_id, topic) == want
        assert _described(cluster, broker_id, "acl-re") == {(T, PRE, "User:bob", DESCRIBE, DENY)}
        assert _quotas(cluster, broker_id)[(("user", "alice"),)] == {"consumer_byte_rate": 777.0}
    # leaderships moved with the restarts: each partition through its leader now
    for p in range(3):
        leader = wait_for_leader(cluster, topic, p).leader
        wait_until(lambda p=p, b=leader: produce_one(cluster, b, "alice", topic, p) is None,
                   f"alice's produce to partition {p} after the restart", timeout=60)
        assert produce_one(cluster, leader, "bob", topic, p) == KafkaError.TOPIC_AUTHORIZATION_FAILED
