"""ACLs with real clients: each API's authorization check with a principal that has no
ACL (denied, with Kafka's error) and one granted what Kafka's KafkaApis checks (allowed),
table-driven; prefixed patterns, DENY over ALLOW, implied operations, hidden topics in
Metadata, super.users, allow.everyone.if.no.acl.found, the TLS principal with
ssl.principal.mapping.rules, persistence across a restart, and `kbroker acls`.

The broker: AclAuthorizer, super.users=User:admin, a SASL_PLAINTEXT listener (PLAIN:
admin, alice, bob) and a PLAINTEXT one (User:ANONYMOUS)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from kbroker.broker import Broker

from .security_support import endpoint
from .tls_support import Pki

pytestmark = pytest.mark.integration

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";')
AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
TOPIC, GROUP = "acl-topic", "acl-group"


def acl_props(log_dir: Path, **extra: str) -> dict[str, str]:
    return {"listeners": "SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(log_dir), "group.initial.rebalance.delay.ms": "0",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "authorizer.class.name": AUTHORIZER, "super.users": "User:admin", **extra}


def conf(broker: Broker, user: str) -> dict[str, Any]:
    return {"bootstrap.servers": endpoint(broker, "SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": f"{user}-secret", "log_level": 0}


def grant(broker: Broker, *entries: tuple[Any, str, Any], principal: str = "User:alice",
          pattern: Any = ResourcePatternType.LITERAL, permission: Any = AclPermissionType.ALLOW,
          ) -> None:
    admin = AdminClient(conf(broker, "admin"))
    bindings = [AclBinding(rtype, name, pattern, principal, "*", op, permission)
                for rtype, name, op in entries]
    for f in admin.create_acls(bindings).values():
        f.result(timeout=15)


def revoke_all(broker: Broker) -> None:
    admin = AdminClient(conf(broker, "admin"))
    flt = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                           AclOperation.ANY, AclPermissionType.ANY)
    for f in admin.delete_acls([flt]).values():
        f.result(timeout=15)


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    broker = Broker(acl_props(tmp_path_factory.mktemp("acl-logs"))).start()
    try:
        admin = AdminClient(conf(broker, "admin"))
        for f in admin.create_topics([NewTopic(TOPIC, 2, 1)]).values():
            f.result(timeout=15)
        producer = confluent_kafka.Producer(conf(broker, "admin"))
        for i in range(10):
            producer.produce(TOPIC, f"r{i}".encode(), partition=i % 2)
        assert producer.flush(15) == 0
        consumer = confluent_kafka.Consumer({**conf(broker, "admin"), "group.id": GROUP})
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, 3)], asynchronous=False)
        consumer.close()
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def alice_admin(acl_broker: Broker) -> Iterator[None]:
    """alice's AdminClient, kept for the module (a destroyed client fails its futures
    with _DESTROY) and dropped before its broker stops."""
    _ADMINS[id(acl_broker)] = AdminClient(conf(acl_broker, "alice"))
    yield
    del _ADMINS[id(acl_broker)]


@pytest.fixture
def clean(acl_broker: Broker, alice_admin: None) -> Iterator[Broker]:
    revoke_all(acl_broker)
    yield acl_broker
    revoke_all(acl_broker)


def _code(action: Callable[[], Any]) -> int | None:
    """The Kafka error code an action fails with; None when it succeeds."""
    try:
        action()
    except KafkaException as e:
        return e.args[0].code()
    return None


def _produce(broker: Broker) -> None:
    producer = confluent_kafka.Producer({**conf(broker, "alice"), "message.timeout.ms": 5000})
    errors: list[Any] = []
    producer.produce(TOPIC, b"x", partition=0, on_delivery=lambda e, m: errors.append(e))
    producer.flush(10)
    if errors and errors[0] is not None:
        raise KafkaException(errors[0])


def _consume(broker: Broker) -> None:
    grant(broker, (ResourceType.GROUP, GROUP, AclOperation.READ))  # the topic is what is tested
    consumer = confluent_kafka.Consumer({**conf(broker, "alice"), "group.id": GROUP,
                                         "enable.auto.commit": False,
                                         "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is None:
                continue
            if m.error():
                raise KafkaException(m.error())
            return
        raise AssertionError("nothing consumed")
    finally:
        consumer.close()


def _wire_call(broker: Broker, request: Any, version: int) -> Any:
    """One request on the wire as alice (SASL PLAIN v1)."""
    from kbroker.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
    from kbroker.protocol.messages.sasl_handshake import SaslHandshakeRequest

    from .wire import WireClient

    with WireClient(endpoint(broker, "SASL_PLAINTEXT")) as c:
        assert c.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        assert c.call(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), 2).error_code == 0
        return c.call(request, version)


def _raise(code: int) -> None:
    if code:
        raise KafkaException(KafkaError(code))


def _list_offsets(broker: Broker) -> None:
    """ListOffsets on the wire (librdkafka's admin retries a topic it may not describe)."""
    from kbroker.protocol.messages.list_offsets import ListOffsetsRequest as L

    r = _wire_call(broker, L(replica_id=-1, topics=[L.ListOffsetsTopic(name=TOPIC, partitions=[
        L.ListOffsetsPartition(partition_index=0, timestamp=-1)])]), 7)
    _raise(r.topics[0].partitions[0].error_code)


def _describe_acls(broker: Broker) -> None:
    """On the wire: librdkafka's describe_acls drops the response's error code."""
    from kbroker.protocol.messages.describe_acls import DescribeAclsRequest

    _raise(_wire_call(broker, DescribeAclsRequest(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
        principal_filter=None, host_filter=None, operation=1, permission_type=1), 3).error_code)


_ADMINS: dict[int, AdminClient] = {}


def _describe_scram(broker: Broker) -> None:
    """On the wire: librdkafka 2.16 aborts on a DescribeUserScramCredentials response with a
    top-level error (Kafka's answer to a principal without DESCRIBE on the cluster)."""
    from kbroker.protocol.messages.describe_user_scram_credentials import (
        DescribeUserScramCredentialsRequest as D,
    )

    _raise(_wire_call(broker, D(users=None), 0).error_code)


def _share_offsets(broker: Broker, api: str) -> None:
    """The share-group offsets APIs on the wire (no Python client has them). Alter and
    delete of a group that is no share group answer GROUP_ID_NOT_FOUND once authorized:
    that counts as let through here."""
    from kbroker.protocol.messages.alter_share_group_offsets import (
        AlterShareGroupOffsetsRequest as A,
    )
    from kbroker.protocol.messages.delete_share_group_offsets import (
        DeleteShareGroupOffsetsRequest as X,
    )
    from kbroker.protocol.messages.describe_share_group_offsets import (
        DescribeShareGroupOffsetsRequest as D,
    )

    if api == "describe":
        r = _wire_call(broker, D(groups=[D.DescribeShareGroupOffsetsRequestGroup(group_id=GROUP, topics=[
            D.DescribeShareGroupOffsetsRequestTopic(topic_name=TOPIC, partitions=[0])])]), 1).groups[0]
        _raise(r.error_code or next((p.error_code for t in r.topics for p in t.partitions if p.error_code), 0))
        return
    if api == "alter":
        r = _wire_call(broker, A(group_id=GROUP, topics=[A.AlterShareGroupOffsetsRequestTopic(
            topic_name=TOPIC, partitions=[A.AlterShareGroupOffsetsRequestPartition(partition_index=0)])]), 0)
    else:
        r = _wire_call(broker, X(group_id=GROUP, topics=[X.DeleteShareGroupOffsetsRequestTopic(topic_name=TOPIC)]), 0)
    _raise(0 if r.error_code == KafkaError.GROUP_ID_NOT_FOUND else r.error_code)


def _admin(broker: Broker) -> AdminClient:
    """alice's AdminClient (`alice_admin`)."""
    return _ADMINS[id(broker)]


def _result(futures: Any) -> Any:
    """The results; a partition's error (group offsets APIs report them per partition) raised."""
    results = ([f.result(timeout=15) for f in futures.values()] if isinstance(futures, dict)
               else [futures.result(timeout=15)])
    for r in results:
        for tp in getattr(r, "topic_partitions", None) or ():
            if tp.error is not None:
                raise KafkaException(tp.error)
    return results


TOPIC_R = (ResourceType.TOPIC, TOPIC)
GROUP_R = (ResourceType.GROUP, GROUP)
CLUSTER_R = (ResourceType.BROKER, "kafka-cluster")

# (case, what to grant, the action as alice, the code it fails with when not granted)
CASES: list[tuple[str, list[tuple[Any, str, Any]], Callable[[Broker], Any], int]] = [
    ("produce", [(*TOPIC_R, AclOperation.WRITE)], _produce, KafkaError.TOPIC_AUTHORIZATION_FAILED),
    ("fetch", [(*TOPIC_R, AclOperation.READ)], _consume, KafkaError.TOPIC_AUTHORIZATION_FAILED),
    ("list_offsets", [(*TOPIC_R, AclOperation.DESCRIBE)], _list_offsets,
     KafkaError.TOPIC_AUTHORIZATION_FAILED),
    ("describe_topics", [(*TOPIC_R, AclOperation.DESCRIBE)], lambda b: _result(_admin(b).describe_topics(
        confluent_kafka.TopicCollection([TOPIC]))), KafkaError.TOPIC_AUTHORIZATION_FAILED),
    ("create_topics", [((ResourceType.TOPIC, "acl-new", AclOperation.CREATE))],
     lambda b: _result(_admin(b).create_topics([NewTopic("acl-new", 1, 1)], validate_only=True)),
     KafkaError.TOPIC_AUTHORIZATION_FAILED),
    ("create_partitions", [(*TOPIC_R, AclOperation.ALTER)],
     lambda b: _result(_admin(b).create_partitions([NewPartitions(TOPIC, 3)], validate_only=True)),
     KafkaError.TOPIC_AUTHORIZATION_FAILED),
    ("describe_configs_topic", [(*TOPIC_R, AclOperation.DESCRIBE_CONFIGS)],
     lambda b: _result(_admin(b).describe_configs([ConfigResource("topic", TOPIC)])),
     KafkaError.TOPIC_AUTHORIZATION_FAILED),
    ("describe_configs_broker", [(*CLUSTER_R, AclOperation.DESCRIBE_CONFIGS)],
     lambda b: _result(_admin(b).describe_configs([ConfigResource("broker", "0")])),
     KafkaError.CLUSTER_AUTHORIZATION_FAILED),
    ("alter_configs_topic", [(*TOPIC_R, AclOperation.ALTER_CONFIGS)],
     lambda b: _result(_admin(b).incremental_alter_configs([ConfigResource(
         "topic", TOPIC, incremental_configs=[confluent_kafka.admin.ConfigEntry(
             "retention.ms", "86400000",
             incremental_operation=confluent_kafka.admin.AlterConfigOpType.SET)])])),
     KafkaError.TOPIC_AUTHORIZATION_FAILED),
    ("list_group_offsets", [(*GROUP_R, AclOperation.DESCRIBE), (*TOPIC_R, AclOperation.DESCRIBE)],
     lambda b: _result(_admin(b).list_consumer_group_offsets(
         [confluent_kafka.ConsumerGroupTopicPartitions(GROUP)])),
     KafkaError.GROUP_AUTHORIZATION_FAILED),
    ("commit_offsets", [(*GROUP_R, AclOperation.READ), (*TOPIC_R, AclOperation.READ)],
     lambda b: _result(_admin(b).alter_consumer_group_offsets([confluent_kafka.ConsumerGroupTopicPartitions(
         GROUP, [TopicPartition(TOPIC, 0, 3)])])), KafkaError.GROUP_AUTHORIZATION_FAILED),
    ("describe_groups", [(*GROUP_R, AclOperation.DESCRIBE)],
     lambda b: _result(_admin(b).describe_consumer_groups([GROUP])),
     KafkaError.GROUP_AUTHORIZATION_FAILED),
    ("describe_share_group_offsets", [(*GROUP_R, AclOperation.DESCRIBE), (*TOPIC_R, AclOperation.DESCRIBE)],
     lambda b: _share_offsets(b, "describe"), KafkaError.GROUP_AUTHORIZATION_FAILED),
    ("alter_share_group_offsets", [(*GROUP_R, AclOperation.READ)],
     lambda b: _share_offsets(b, "alter"), KafkaError.GROUP_AUTHORIZATION_FAILED),
    ("delete_share_group_offsets", [(*GROUP_R, AclOperation.DELETE)],
     lambda b: _share_offsets(b, "delete"), KafkaError.GROUP_AUTHORIZATION_FAILED),
    ("delete_records", [(*TOPIC_R, AclOperation.DELETE)],
     lambda b: _result(_admin(b).delete_records([TopicPartition(TOPIC, 1, 0)])),
     KafkaError.TOPIC_AUTHORIZATION_FAILED),
    ("describe_acls", [(*CLUSTER_R, AclOperation.DESCRIBE)], _describe_acls,
     KafkaError.CLUSTER_AUTHORIZATION_FAILED),
    ("create_acls", [(*CLUSTER_R, AclOperation.ALTER)],
     lambda b: _result(_admin(b).create_acls([AclBinding(
         ResourceType.TOPIC, "other", ResourcePatternType.LITERAL, "User:bob", "*",
         AclOperation.READ, AclPermissionType.ALLOW)])), KafkaError.CLUSTER_AUTHORIZATION_FAILED),
    ("scram_credentials", [(*CLUSTER_R, AclOperation.DESCRIBE)], _describe_scram,
     KafkaError.CLUSTER_AUTHORIZATION_FAILED),
    ("transactional_producer", [(ResourceType.TRANSACTIONAL_ID, "acl-txn", AclOperation.WRITE),
                                (*TOPIC_R, AclOperation.WRITE)],
     lambda b: confluent_kafka.Producer({**conf(b, "alice"), "transactional.id": "acl-txn"})
     .init_transactions(10), KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
]


@pytest.mark.parametrize(("case", "grants", "action", "denied"), CASES, ids=[c[0] for c in CASES])
def test_each_api_checks_what_kafka_checks(clean, case, grants, action, denied) -> None:
    assert _code(lambda: action(clean)) == denied
    grant(clean, *grants)
    assert _code(lambda: action(clean)) is None
    assert _code(lambda: action(clean)) is None  # and again (no state left behind)


def test_the_telemetry_apis_need_no_acl_and_listing_subscriptions_does(clean) -> None:
    """Client metrics (KIP-714): a principal with no ACL at all gets its subscription and
    pushes, as Kafka authorizes neither API; ListConfigResources needs DESCRIBE_CONFIGS on
    the cluster."""
    from kbroker.protocol.messages.get_telemetry_subscriptions import (
        GetTelemetrySubscriptionsRequest,
    )
    from kbroker.protocol.messages.list_config_resources import ListConfigResourcesRequest
    from kbroker.protocol.messages.push_telemetry import PushTelemetryRequest
    from kbroker.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
    from kbroker.protocol.messages.sasl_handshake import SaslHandshakeRequest

    from .wire import WireClient

    with WireClient(endpoint(clean, "SASL_PLAINTEXT")) as c:
        assert c.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        assert c.call(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), 2).error_code == 0
        sub = c.call(GetTelemetrySubscriptionsRequest(), 0)
        assert sub.error_code == 0
        push = c.call(PushTelemetryRequest(client_instance_id=sub.client_instance_id,
                                           subscription_id=sub.subscription_id, terminating=True,
                                           compression_type=0, metrics=b""), 0)
        assert push.error_code == 0
    listing = lambda: _raise(_wire_call(clean, ListConfigResourcesRequest(), 0).error_code)  # noqa: E731
    assert _code(listing) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    grant(clean, (*CLUSTER_R, AclOperation.DESCRIBE_CONFIGS))
    assert _code(listing) is None


def test_metadata_hides_topics_the_principal_may_not_describe(clean) -> None:
    admin = _admin(clean)
    assert TOPIC not in admin.list_topics(timeout=10).topics
    grant(clean, (*TOPIC_R, AclOperation.READ))  # READ implies DESCRIBE
    assert TOPIC in admin.list_topics(timeout=10).topics
    # operations reported for the principal (KIP-430)
    described = _result(admin.describe_topics(confluent_kafka.TopicCollection([TOPIC]),
                                              include_authorized_operations=True))
    assert set(described[0].authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE}
    # DescribeTopicPartitions reports the principal's too, not every topic operation
    from kbroker.protocol.messages.describe_topic_partitions import (
        DescribeTopicPartitionsRequest as D,
    )

    page = _wire_call(clean, D(topics=[D.TopicRequest(name=TOPIC)], cursor=None), 0)
    assert page.topics[0].topic_authorized_operations == (1 << 3) | (1 << 8)  # READ, DESCRIBE


def test_describe_groups_reports_no_operations_on_a_group_it_refuses(clean) -> None:
    """As KafkaApis: GROUP_AUTHORIZATION_FAILED with the field's default (operations
    omitted, not an empty set); once allowed, the group operations the principal has."""
    from kbroker.protocol.messages.describe_groups import DescribeGroupsRequest

    request = DescribeGroupsRequest(groups=[GROUP], include_authorized_operations=True)
    refused = _wire_call(clean, request, 5).groups[0]
    assert (refused.error_code, refused.authorized_operations) == (
        KafkaError.GROUP_AUTHORIZATION_FAILED, -(2**31))
    grant(clean, (ResourceType.GROUP, GROUP, AclOperation.DELETE))  # DELETE implies DESCRIBE
    described = _wire_call(clean, request, 5).groups[0]
    assert (described.error_code, described.authorized_operations) == (0, (1 << 6) | (1 << 8))


def test_prefixed_patterns_and_deny_wins(clean) -> None:
    grant(clean, (ResourceType.TOPIC, "acl-", AclOperation.WRITE), pattern=ResourcePatternType.PREFIXED)
    assert _code(lambda: _produce(clean)) is None
    grant(clean, (*TOPIC_R, AclOperation.WRITE), permission=AclPermissionType.DENY)
    assert _code(lambda: _produce(clean)) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    revoke_all(clean)
    grant(clean, (ResourceType.TOPIC, "*", AclOperation.ALL), principal="User:*")
    assert _code(lambda: _produce(clean)) is None
    grant(clean, (ResourceType.TOPIC, "acl", AclOperation.ALL), pattern=ResourcePatternType.PREFIXED,
          permission=AclPermissionType.DENY)
    assert _code(lambda: _produce(clean)) == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_anonymous_and_super_users(clean) -> None:
    anonymous = AdminClient({"bootstrap.servers": endpoint(clean, "PLAINTEXT"), "log_level": 0})
    assert TOPIC not in anonymous.list_topics(timeout=10).topics
    assert TOPIC in AdminClient(conf(clean, "admin")).list_topics(timeout=10).topics


def test_acls_persist_across_a_restart_and_allow_everyone(tmp_path: Path) -> None:
    props = acl_props(tmp_path / "logs")
    broker = Broker(props).start()
    try:
        grant(broker, (ResourceType.TOPIC, "kept", AclOperation.WRITE), principal="User:bob")
    finally:
        broker.stop()
    broker = Broker(props).start()
    try:
        admin = AdminClient(conf(broker, "admin"))
        found = admin.describe_acls(AclBindingFilter(
            ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
            AclPermissionType.ANY)).result(timeout=15)
        assert [(b.name, b.principal, b.operation) for b in found] == [
            ("kept", "User:bob", AclOperation.WRITE)]
    finally:
        broker.stop()
    broker = Broker({**props, "allow.everyone.if.no.acl.found": "true"}).start()
    try:  # no ACL on acl-topic: allowed; an ACL on kept names bob only: alice is denied
        assert _code(lambda: _produce(broker)) is None
        producer = confluent_kafka.Producer({**conf(broker, "alice"), "message.timeout.ms": 5000})
        errors: list[Any] = []
        producer.produce("kept", b"x", on_delivery=lambda e, m: errors.append(e))
        producer.flush(10)
        assert errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        broker.stop()


def test_the_tls_principal_follows_the_mapping_rules(pki: Pki, tmp_path: Path) -> None:
    props = {"listeners": "SSL://127.0.0.1:0", "log.dirs": str(tmp_path / "logs"),
             "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.keystore("server")),
             "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca),
             "ssl.client.auth": "required", "authorizer.class.name": AUTHORIZER,
             "ssl.principal.mapping.rules": "RULE:^CN=([a-z]+),OU=eng,.*$/$1/U,DEFAULT",
             "super.users": "User:CN=bob,O=kbroker tests"}
    broker = Broker(props).start()

    def client(cert: str) -> dict[str, Any]:
        return {"bootstrap.servers": endpoint(broker, "SSL"), "security.protocol": "SSL",
                "ssl.ca.location": str(pki.ca), "ssl.certificate.location": str(pki.cert(cert)),
                "ssl.key.location": str(pki.key(cert)), "log_level": 0}

    try:
        bob = AdminClient(client("bob"))  # the DEFAULT rule: his whole DN, a super user
        for f in bob.create_acls([AclBinding(ResourceType.TOPIC, "*", ResourcePatternType.LITERAL,
                                             "User:ALICE", "*", AclOperation.DESCRIBE,
                                             AclPermissionType.ALLOW)]).values():
            f.result(timeout=15)
        for f in bob.create_topics([NewTopic("tls-topic", 1, 1)]).values():
            f.result(timeout=15)
        assert "tls-topic" in AdminClient(client("alice")).list_topics(timeout=10).topics
    finally:
        broker.stop()


def test_kbroker_acls_cli(clean, tmp_path: Path) -> None:
    config = tmp_path / "admin.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                      'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule '
                      'required username="admin" password="admin-secret";\n')
    base = [sys.executable, "-m", "kbroker", "acls"]
    opts = ["--bootstrap-server", endpoint(clean, "SASL_PLAINTEXT"), "--command-config", str(config)]

    def kbroker_acls(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*base, args[0], *opts, *args[1:]], capture_output=True, text=True,
                              timeout=60)

    added = kbroker_acls("add", "--allow-principal", "User:alice", "--producer", "--topic", TOPIC)
    assert added.returncode == 0, added.stderr
    assert _code(lambda: _produce(clean)) is None
    listed = kbroker_acls("list", "--topic", TOPIC)
    assert listed.returncode == 0, listed.stderr
    assert (f"Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name={TOPIC}, "
            "patternType=LITERAL)`:") in listed.stdout
    assert "(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)" in listed.stdout
    removed = kbroker_acls("remove", "--allow-principal", "User:alice", "--operation", "Write",
                           "--topic", TOPIC, "--force")
    assert removed.returncode == 0, removed.stderr
    assert "operation=WRITE" in removed.stdout
    assert _code(lambda: _produce(clean)) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    refused = subprocess.run([*base, "add", "--bootstrap-server", endpoint(clean, "PLAINTEXT"),
                              "--allow-principal", "User:ANONYMOUS", "--cluster"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and "CLUSTER_AUTHORIZATION_FAILED" in refused.stderr
