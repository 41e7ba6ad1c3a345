"""Client metrics (KIP-714) with real clients: a subscription set as Kafka's tools set it
(IncrementalAlterConfigs on a CLIENT_METRICS resource, here through kafka-python 3's
admin client: confluent-kafka's AdminClient has no CLIENT_METRICS resource type), then
confluent-kafka (librdkafka 2.16, enable.metrics.push on by default) producers and
consumers push their metrics, which the broker's /metrics and console then show labelled
with their client id and instance id. Without a subscription a client gets an empty one
and pushes nothing."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, KafkaAdminClient

from kbroker import Broker
from kbroker.client.connection import BrokerConnection
from kbroker.common.error_code import ErrorCode
from kbroker.protocol.messages.alter_configs import AlterConfigsRequest
from tests.ops.support import get_json, scrape, value, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(150)]

CM = ConfigResourceType.CLIENT_METRICS


def _broker(log_dir: Path) -> Broker:
    return Broker({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(log_dir),
                   "operations.listener": "127.0.0.1:0",
                   "group.initial.rebalance.delay.ms": "0"})


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with _broker(tmp_path / "logs") as b:
        yield b


@pytest.fixture
def admin(broker: Broker) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=15000)
    try:
        yield client
    finally:
        client.close()


def _subscribe(admin: KafkaAdminClient, name: str, **configs: str) -> Any:
    """As `kafka-configs --alter --entity-type client-metrics --entity-name NAME
    --add-config k=v,...` does: IncrementalAlterConfigs SET of each key."""
    resource = ConfigResource(CM, name, configs={k.replace("_", "."): (AlterConfigOp.SET, v)
                                                 for k, v in configs.items()})
    return admin.alter_configs([resource], raise_on_unknown=False, incremental=True)


def _pushed(url: str, client_id: str, prefix: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {k: v for k, v in scrape(url).items()
            if k[0].startswith(prefix) and ("client_id", client_id) in k[1]}


def _topic(bs: str) -> str:
    name = f"cm-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    return name


def test_a_subscribed_producer_and_consumer_push_metrics_that_metrics_shows(
        broker: Broker, admin: KafkaAdminClient) -> None:
    bs, url = broker.bootstrap_servers, broker.operations_url
    assert url is not None
    assert _subscribe(admin, "all-clients", metrics="org.apache.kafka.",
                      interval_ms="1000") == {"client_metrics": {"all-clients": "OK"}}
    # the subscription reads back as Kafka describes it, and is listed
    described = admin.describe_configs([ConfigResource(CM, "all-clients")])
    assert described["client_metrics"]["all-clients"]["metrics"]["value"] == "org.apache.kafka."
    assert described["client_metrics"]["all-clients"]["interval.ms"]["value"] == "1000"
    assert admin.list_config_resources([CM]) == {"client_metrics": ["all-clients"]}
    topic = _topic(bs)
    producer = Producer({"bootstrap.servers": bs, "client.id": "telemetry-producer"})
    consumer = Consumer({"bootstrap.servers": bs, "client.id": "telemetry-consumer",
                         "group.id": "telemetry-group", "auto.offset.reset": "earliest"})
    try:
        for i in range(20):
            producer.produce(topic, value=b"v%d" % i)
        assert producer.flush(30) == 0
        consumer.subscribe([topic])

        def producer_metrics() -> Any:
            producer.poll(0)
            return _pushed(url, "telemetry-producer", "org_apache_kafka_producer")

        def consumer_metrics() -> Any:
            consumer.poll(0.2)
            return _pushed(url, "telemetry-consumer", "org_apache_kafka_consumer")

        pushed = wait_until(producer_metrics, "the producer's pushed metrics on /metrics", 60)
        labels = dict(next(iter(pushed))[1])
        assert uuid.UUID(labels["client_instance_id"])  # the instance the broker gave it
        wait_until(consumer_metrics, "the consumer's pushed metrics on /metrics", 60)
        samples = scrape(url)
        assert (value(samples, "kafka_server_client_metrics_instance_count") or 0) >= 2
        # the console shows the same instances with their series
        view = get_json(url + "/api/client-metrics")
        assert [s["name"] for s in view["subscriptions"]] == ["all-clients"]
        by_client = {i["client_id"]: i for i in view["instances"]}
        assert by_client["telemetry-producer"]["client_software"].startswith("confluent-kafka-python")
        assert by_client["telemetry-producer"]["pushes"] >= 1
        assert by_client["telemetry-producer"]["push_interval_ms"] == 1000
        assert any(s["name"].startswith("org.apache.kafka.producer.")
                   for s in by_client["telemetry-producer"]["series"])
    finally:
        consumer.close()


def test_a_changed_subscription_reaches_a_pushing_client(broker: Broker,
                                                          admin: KafkaAdminClient) -> None:
    """The subscription changes while librdkafka pushes: its next push gets
    UNKNOWN_SUBSCRIPTION_ID, it asks again at once and pushes what the new one asks for."""
    bs, url = broker.bootstrap_servers, broker.operations_url
    assert url is not None
    _subscribe(admin, "changing", metrics="org.apache.kafka.producer.", interval_ms="1000")
    topic = _topic(bs)
    producer = Producer({"bootstrap.servers": bs, "client.id": "changing-producer"})
    producer.produce(topic, value=b"v")
    assert producer.flush(30) == 0

    def names() -> set[str]:
        return {name for name, _ in _pushed(url, "changing-producer", "org_apache_kafka_producer")}

    before = wait_until(names, "the producer's first push")
    assert len(before) > 2
    _subscribe(admin, "changing", metrics="org.apache.kafka.producer.record.queue.time.")

    def narrowed() -> set[str] | None:
        found = names()
        return found if found and found < before else None

    after = wait_until(narrowed, "a push of the new subscription's metrics", 60)
    assert after <= {"org_apache_kafka_producer_record_queue_time_avg",
                     "org_apache_kafka_producer_record_queue_time_max"}
    samples = scrape(url)
    assert (value(samples, "kafka_server_client_metrics_unknown_subscription_request_count_total")
            or 0) >= 1
    (instance,) = [i for i in get_json(url + "/api/client-metrics")["instances"]
                   if i["client_id"] == "changing-producer"]
    assert instance["metrics"] == ["org.apache.kafka.producer.record.queue.time."]


def test_without_a_subscription_a_client_gets_none_and_pushes_nothing(broker: Broker) -> None:
    bs, url = broker.bootstrap_servers, broker.operations_url
    assert url is not None
    topic = _topic(bs)
    producer = Producer({"bootstrap.servers": bs, "client.id": "unsubscribed"})
    for i in range(5):
        producer.produce(topic, value=b"v%d" % i)
    assert producer.flush(30) == 0

    def asked() -> Any:
        return [i for i in get_json(url + "/api/client-metrics")["instances"]
                if i["client_id"] == "unsubscribed"]

    instance = wait_until(asked, "the producer's GetTelemetrySubscriptions")[0]
    assert instance["metrics"] == [] and instance["push_interval_ms"] == 300000
    del producer  # closing: a subscribed client would send its terminating push now
    samples = scrape(url)
    pushes = sum(v for (name, labels), v in samples.items()
                 if name == "kafka_network_requestmetrics_requests_total"
                 and ("request", "PushTelemetry") in labels)
    assert pushes == 0
    assert _pushed(url, "unsubscribed", "org_apache_kafka") == {}


def test_subscriptions_are_validated_and_survive_a_restart(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    with _broker(logs) as b:
        client = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers, request_timeout_ms=15000)
        try:
            refused = _subscribe(client, "bad", metrics="a.", interval_mss="1000")
            assert "InvalidConfig" in refused["client_metrics"]["bad"]
            refused = _subscribe(client, "bad", interval_ms="10")
            assert "InvalidConfig" in refused["client_metrics"]["bad"]
            refused = _subscribe(client, "bad", match="client_colour=red")
            assert "InvalidConfig" in refused["client_metrics"]["bad"]
            assert _subscribe(client, "producers", metrics="org.apache.kafka.producer.",
                              match="client_software_name=confluent-kafka-python") == {
                "client_metrics": {"producers": "OK"}}
            assert _subscribe(client, "gone", metrics="*") == {"client_metrics": {"gone": "OK"}}
            # deleting every key removes the subscription
            gone = ConfigResource(CM, "gone", configs={"metrics": (AlterConfigOp.DELETE, None)})
            client.alter_configs([gone], raise_on_unknown=False, incremental=True)
            assert client.list_config_resources([CM]) == {"client_metrics": ["producers"]}
            # the legacy AlterConfigs (key 33) replaces a subscription's whole set
            legacy = ConfigResource(CM, "legacy", configs={"metrics": "*", "interval.ms": "5000"})
            assert client.alter_configs([legacy], raise_on_unknown=False, incremental=False) == {
                "client_metrics": {"legacy": "OK"}}
            described = client.describe_configs([ConfigResource(CM, "legacy")])
            assert {k: v["value"] for k, v in described["client_metrics"]["legacy"].items()} == {
                "metrics": "*", "interval.ms": "5000"}
            # ... so an empty set removes it (kafka-python fills an empty set in: the raw request)
            host, port = b.bootstrap_servers.rsplit(":", 1)
            with BrokerConnection(host, int(port)) as conn:
                empty = AlterConfigsRequest(resources=[AlterConfigsRequest.AlterConfigsResource(
                    resource_type=int(CM), resource_name="legacy", configs=[])], validate_only=False)
                assert conn.request(empty, 2).responses[0].error_code == ErrorCode.NONE
            assert client.list_config_resources([CM]) == {"client_metrics": ["producers"]}
        finally:
            client.close()
    with _broker(logs) as b:
        client = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers, request_timeout_ms=15000)
        try:
            assert client.list_config_resources([CM]) == {"client_metrics": ["producers"]}
            described = client.describe_configs([ConfigResource(CM, "producers")])
            assert described["client_metrics"]["producers"]["match"]["value"] == \
                "client_software_name=confluent-kafka-python"
        finally:
            client.close()
