"""Configs in a cluster: topic overrides and Kafka's dynamic broker configs live in
ZooKeeper and reach every broker, through confluent-kafka's AdminClient as users set them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from kbroker.cluster.local_cluster import Cluster
from kbroker.cluster.zookeeper_server import ZooKeeperServer

from .support import create_topic, new_cluster, wait_until

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = new_cluster(zookeeper, Path(tmp_path_factory.mktemp("configs")), 3)
    try:
        yield c
    finally:
        c.stop()


def _describe(cluster: Cluster, broker_id: int, resource: ConfigResource) -> dict[str, ConfigEntry]:
    admin = AdminClient({"bootstrap.servers": cluster.brokers[broker_id].bootstrap})
    result: dict[str, ConfigEntry] = admin.describe_configs([resource])[resource].result(timeout=30)
    return result


def _set(cluster: Cluster, resource: ConfigResource, name: str, value: str | None) -> None:
    if resource.restype == ConfigResource.Type.BROKER and resource.name == "":
        _set_cluster_default(cluster, name, value)  # confluent-kafka refuses an empty name
        return
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    op = AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET
    resource.add_incremental_config(ConfigEntry(name, value, incremental_operation=op))
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)


def _set_cluster_default(cluster: Cluster, name: str, value: str | None) -> None:
    """IncrementalAlterConfigs on the BROKER resource "" (Kafka's --entity-default)."""
    from kbroker.client.connection import BrokerConnection
    from kbroker.protocol.messages.incremental_alter_configs import (
        IncrementalAlterConfigsRequest as Req,
    )

    broker = cluster.brokers[1]
    request = Req(validate_only=False, resources=[Req.AlterConfigsResource(
        resource_type=4, resource_name="", configs=[Req.AlterableConfig(
            name=name, config_operation=1 if value is None else 0, value=value)])])
    with BrokerConnection(broker.host, broker.port) as conn:
        response = conn.request(request, 1)
    code = response.responses[0].error_code
    if code:
        raise KafkaException(KafkaError(code, response.responses[0].error_message or ""))


def test_a_topic_override_reaches_every_broker_and_its_logs(cluster: Cluster) -> None:
    create_topic(cluster, "tuned", partitions=1, rf=3)
    _set(cluster, ConfigResource(ConfigResource.Type.TOPIC, "tuned"), "retention.ms", "123456")
    for broker_id in cluster.brokers:
        def applied(b: int = broker_id) -> bool:
            entry = _describe(cluster, b, ConfigResource(ConfigResource.Type.TOPIC, "tuned"))
            return entry["retention.ms"].value == "123456"
        wait_until(applied, f"broker {broker_id} to see retention.ms")
    # every replica's log took it (restart reads it from ZooKeeper too)
    victim = 2
    cluster.stop_broker(victim)
    cluster.restart(victim)
    entry = _describe(cluster, victim, ConfigResource(ConfigResource.Type.TOPIC, "tuned"))
    assert entry["retention.ms"].value == "123456"
    assert entry["retention.ms"].source == 1  # DYNAMIC_TOPIC_CONFIG


def test_a_cluster_wide_dynamic_default_reaches_every_broker(cluster: Cluster) -> None:
    create_topic(cluster, "plain", partitions=1, rf=3)
    _set(cluster, ConfigResource(ConfigResource.Type.BROKER, ""), "log.retention.ms", "7777777")
    for broker_id in cluster.brokers:
        def applied(b: int = broker_id) -> bool:
            broker = _describe(cluster, b, ConfigResource(ConfigResource.Type.BROKER, str(b)))
            topic = _describe(cluster, b, ConfigResource(ConfigResource.Type.TOPIC, "plain"))
            entry = broker["log.retention.ms"]
            return (entry.value == "7777777" and entry.source == 3  # DYNAMIC_DEFAULT_BROKER_CONFIG
                    and not entry.is_read_only and topic["retention.ms"].value == "7777777")
        wait_until(applied, f"broker {broker_id} to take the new default")
    # this broker's own value wins over the cluster-wide default
    _set(cluster, ConfigResource(ConfigResource.Type.BROKER, "1"), "log.retention.ms", "8888888")
    own = _describe(cluster, 1, ConfigResource(ConfigResource.Type.BROKER, "1"))["log.retention.ms"]
    assert own.value == "8888888" and own.source == 2  # DYNAMIC_BROKER_CONFIG
    other = _describe(cluster, 2, ConfigResource(ConfigResource.Type.BROKER, "2"))["log.retention.ms"]
    assert other.value == "7777777"
    _set(cluster, ConfigResource(ConfigResource.Type.BROKER, "1"), "log.retention.ms", None)
    _set(cluster, ConfigResource(ConfigResource.Type.BROKER, ""), "log.retention.ms", None)
    wait_until(lambda: _describe(cluster, 3, ConfigResource(ConfigResource.Type.TOPIC, "plain"))[
        "retention.ms"].value == "604800000", "the default back on broker 3")


def test_a_topic_created_after_a_dynamic_default_takes_it_on_every_replica(cluster: Cluster) -> None:
    """The cluster-wide log.segment.bytes set while running is the base of a topic created
    afterwards: each replica's log rolls at the new size (its log opened with it)."""
    _set(cluster, ConfigResource(ConfigResource.Type.BROKER, ""), "log.segment.bytes", "2048")
    try:
        for broker_id in cluster.brokers:
            wait_until(lambda b=broker_id: _describe(cluster, b, ConfigResource(
                ConfigResource.Type.BROKER, str(b)))["log.segment.bytes"].value == "2048",
                f"broker {broker_id} to take the new default")
        create_topic(cluster, "rolled", partitions=1, rf=3)
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "linger.ms": 0})
        for i in range(40):
            producer.produce("rolled", b"x" * 500, key=str(i).encode())
            producer.flush(30)
        assert len(producer) == 0
        for broker_id, broker in cluster.brokers.items():
            def rolled(b: Path = broker.log_dir) -> bool:
                return len(list((b / "rolled-0").glob("*.log"))) >= 5
            wait_until(rolled, f"broker {broker_id}'s replica of rolled-0 to roll at 2048 bytes")
    finally:
        _set(cluster, ConfigResource(ConfigResource.Type.BROKER, ""), "log.segment.bytes", None)


def test_keys_not_changed_while_running_are_refused(cluster: Cluster) -> None:
    with pytest.raises(KafkaException) as e:
        _set(cluster, ConfigResource(ConfigResource.Type.BROKER, ""), "num.partitions", "7")
    assert e.value.args[0].code() == KafkaError.INVALID_CONFIG
    with pytest.raises(KafkaException) as e:
        _set(cluster, ConfigResource(ConfigResource.Type.BROKER, ""), "log.retention.ms", "soon")
    assert e.value.args[0].code() == KafkaError.INVALID_CONFIG
    read_only = _describe(cluster, 1, ConfigResource(ConfigResource.Type.BROKER, "1"))
    assert read_only["num.partitions"].is_read_only
    assert not read_only["log.segment.bytes"].is_read_only


def test_a_client_metrics_subscription_reaches_every_broker_and_survives_a_restart(
        cluster: Cluster) -> None:
    """KIP-714's CLIENT_METRICS resource in a cluster: written to ZooKeeper
    (/config/client-metrics/<name>) by the broker that got the IncrementalAlterConfigs,
    applied by every broker from its /config/changes watch, read back at a restart."""
    from kafka.admin import AlterConfigOp, ConfigResourceType, KafkaAdminClient
    from kafka.admin import ConfigResource as KafkaConfigResource

    from kbroker.client.connection import BrokerConnection
    from kbroker.protocol.messages.get_telemetry_subscriptions import (
        GetTelemetrySubscriptionsRequest,
    )
    from kbroker.protocol.messages.list_config_resources import ListConfigResourcesRequest

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=30000)
    try:
        done = admin.alter_configs([KafkaConfigResource(
            ConfigResourceType.CLIENT_METRICS, "cluster-sub", configs={
                "metrics": (AlterConfigOp.SET, "org.apache.kafka.consumer."),
                "interval.ms": (AlterConfigOp.SET, "2000")})],
            raise_on_unknown=False, incremental=True)
        assert done == {"client_metrics": {"cluster-sub": "OK"}}
    finally:
        admin.close()

    def subscription_of(broker_id: int) -> tuple[list[str], list[str], int]:
        broker = cluster.brokers[broker_id]
        with BrokerConnection(broker.host, broker.port, client_id="cm-check") as conn:
            listed = conn.request(ListConfigResourcesRequest(), 0)
            sub = conn.request(GetTelemetrySubscriptionsRequest(), 0)
        return ([r.resource_name for r in listed.config_resources], sub.requested_metrics,
                sub.push_interval_ms)

    expected = (["cluster-sub"], ["org.apache.kafka.consumer."], 2000)
    for broker_id in cluster.brokers:
        wait_until(lambda b=broker_id: subscription_of(b) == expected,
                   f"broker {broker_id} to apply the subscription")
    victim = 3
    cluster.stop_broker(victim)
    cluster.restart(victim)
    assert subscription_of(victim) == expected
