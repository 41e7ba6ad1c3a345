"""The single broker's dynamic broker configs, as users set them: confluent-kafka's and
kafka-python's admin clients alter this broker's own configs, and the cluster-wide default
(empty resource name, which both clients refuse to send: kbroker's wire client sends it,
as Kafka's kafka-configs.sh --entity-default does), DescribeConfigs shows their sources and synonyms as Kafka's
DynamicBrokerConfig does, the broker applies them while running (a topic without an
override takes the new default), and after a restart they are there again, read from
the file beside the logs. What kbroker cannot change live is refused with INVALID_CONFIG
and a message that says why (Kerberos, as librdkafka's admin test 0081 sets)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
)
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient

from kbroker.broker import Broker
from kbroker.config import parse_properties
from kbroker.metadata.dynamic_broker_store import BROKER_FILE, DEFAULT_BROKER_FILE
from kbroker.protocol.messages.describe_configs import DescribeConfigsRequest
from kbroker.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest

from .wire import WireClient

IncResource = IncrementalAlterConfigsRequest.AlterConfigsResource
IncOp = IncrementalAlterConfigsRequest.AlterableConfig

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TIMEOUT = 30
BROKER = ConfigResource.Type.BROKER
SET, DELETE = AlterConfigOpType.SET, AlterConfigOpType.DELETE


class Restartable:
    """An in-process broker on one log dir, stopped and started again by the test."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.broker: Broker | None = None

    def start(self) -> str:
        self.broker = Broker({"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(self.log_dir),
                              "num.partitions": "1", "log.retention.hours": "100"})
        self.broker.start()
        return self.broker.bootstrap_servers

    def stop(self) -> None:
        if self.broker is not None:
            self.broker.stop()
            self.broker = None


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Restartable]:
    b = Restartable(tmp_path / "logs")
    b.start()
    try:
        yield b
    finally:
        b.stop()


def _admin(b: Restartable) -> AdminClient:
    assert b.broker is not None
    return AdminClient({"bootstrap.servers": b.broker.bootstrap_servers})


def _alter(admin: AdminClient, name: str, *ops: tuple[str, str | None, Any]) -> None:
    res = ConfigResource(BROKER, name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=op) for key, value, op in ops])
    admin.incremental_alter_configs([res], request_timeout=TIMEOUT)[res].result()


def _describe(admin: AdminClient, name: str) -> dict[str, Any]:
    res = ConfigResource(BROKER, name)
    return admin.describe_configs([res], request_timeout=TIMEOUT)[res].result()


def _alter_default(b: Restartable, *ops: tuple[str, str | None, int]) -> None:
    """IncrementalAlterConfigs of the cluster-wide default (resource name "")."""
    assert b.broker is not None
    request = IncrementalAlterConfigsRequest(resources=[IncResource(
        resource_type=4, resource_name="", configs=[
            IncOp(name=k, config_operation=op, value=v) for k, v, op in ops])],
        validate_only=False)
    with WireClient(b.broker.bootstrap_servers) as c:
        (result,) = c.call(request, 1).responses
    assert (result.error_code, result.error_message) == (0, None)


def _wire_describe(b: Restartable, name: str) -> dict[str, Any]:
    """DescribeConfigs of a BROKER resource with synonyms (a client's dict of synonyms
    keeps one per name: a broker key's layers share its name)."""
    assert b.broker is not None
    request = DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=4, resource_name=name, configuration_keys=None)], include_synonyms=True)
    with WireClient(b.broker.bootstrap_servers) as c:
        (result,) = c.call(request, 4).results
    assert result.error_code == 0
    return {e.name: e for e in result.configs}


def _describe_default(b: Restartable) -> dict[str, tuple[str | None, int]]:
    return {k: (e.value, e.config_source) for k, e in _wire_describe(b, "").items()}


def test_broker_and_default_configs_are_applied_described_and_kept(broker: Restartable) -> None:
    admin = _admin(broker)
    _alter_default(broker, ("log.retention.ms", "7200000", 0), ("message.max.bytes", "500000", 0))
    _alter(admin, "0", ("log.retention.ms", "3600000", SET))

    described = _describe(admin, "0")
    retention = described["log.retention.ms"]
    assert (retention.value, retention.source, retention.is_read_only) == (
        "3600000", ConfigSource.DYNAMIC_BROKER_CONFIG.value, False)
    assert [(s.name, s.value, s.source) for s in _wire_describe(broker, "0")[
        "log.retention.ms"].synonyms] == [
        ("log.retention.ms", "3600000", ConfigSource.DYNAMIC_BROKER_CONFIG.value),
        ("log.retention.ms", "7200000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)]
    largest = described["message.max.bytes"]
    assert (largest.value, largest.source) == ("500000",
                                              ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    assert described["num.partitions"].is_read_only

    # the cluster-wide default resource lists what it sets, without the broker's own layer
    assert _describe_default(broker) == {
        "log.retention.ms": ("7200000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value),
        "message.max.bytes": ("500000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)}

    # a topic without overrides takes the new defaults, while running
    topic = f"dyn-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=TIMEOUT)[topic].result()
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([res], request_timeout=TIMEOUT)[res].result()
    assert (configs["retention.ms"].value, configs["retention.ms"].source) == (
        "3600000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert configs["max.message.bytes"].value == "500000"
    assert broker.broker is not None and broker.broker.state is not None
    plog = broker.broker.state.get_log(topic, 0)
    assert plog is not None and plog.config.retention_ms == 3600000
    producer = Producer({"bootstrap.servers": broker.broker.bootstrap_servers,
                         "message.max.bytes": 2_000_000})
    outcomes: list[KafkaError | None] = []
    producer.produce(topic, b"x" * 600_000, on_delivery=lambda err, _msg: outcomes.append(err))
    producer.flush(TIMEOUT)
    del producer  # destroyed before the broker stops
    assert outcomes and outcomes[0] is not None
    assert outcomes[0].code() == KafkaError.MSG_SIZE_TOO_LARGE

    # stored beside the logs, in Kafka's properties format
    assert parse_properties((broker.log_dir / BROKER_FILE).read_text()) == {
        "log.retention.ms": "3600000"}
    assert parse_properties((broker.log_dir / DEFAULT_BROKER_FILE).read_text()) == {
        "log.retention.ms": "7200000", "message.max.bytes": "500000"}

    del admin  # a client is destroyed before its broker stops
    broker.stop()
    broker.start()
    admin = _admin(broker)
    again = _describe(admin, "0")
    assert (again["log.retention.ms"].value, again["log.retention.ms"].source) == (
        "3600000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert again["message.max.bytes"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    assert broker.broker is not None and broker.broker.state is not None
    plog = broker.broker.state.get_log(topic, 0)
    assert plog is not None and plog.config.retention_ms == 3600000

    # deleting the broker's own value falls back to the default layer, then to the file's
    _alter(admin, "0", ("log.retention.ms", None, DELETE))
    assert _describe(admin, "0")["log.retention.ms"].value == "7200000"
    assert not (broker.log_dir / BROKER_FILE).exists()
    _alter_default(broker, ("log.retention.ms", None, 1), ("message.max.bytes", None, 1))
    entry = _describe(admin, "0")["log.retention.ms"]  # from log.retention.hours=100 again
    assert entry.value == "360000000" and entry.source not in (
        ConfigSource.DYNAMIC_BROKER_CONFIG.value, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    assert _describe_default(broker) == {}
    del admin


def test_what_kbroker_cannot_change_live_is_refused_and_not_stored(broker: Restartable) -> None:
    admin = _admin(broker)
    for key, value, why in [("sasl.kerberos.min.time.before.relogin", "58000", "Kerberos"),
                            ("num.partitions", "7", "server.properties"),
                            ("log.retention.ms", "soon", "log.retention.ms")]:
        with pytest.raises(KafkaException) as refused:
            _alter(admin, "0", (key, value, SET))
        error = refused.value.args[0]
        assert error.code() == KafkaError.INVALID_CONFIG, key
        assert why in error.str(), error.str()
    # validate_only checks and stores nothing
    res = ConfigResource(BROKER, "0", incremental_configs=[
        ConfigEntry("log.segment.bytes", "2000000", incremental_operation=SET)])
    admin.incremental_alter_configs([res], validate_only=True,
                                    request_timeout=TIMEOUT)[res].result()
    assert _describe(admin, "0")["log.segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert not (broker.log_dir / BROKER_FILE).exists()
    del admin


def test_kafka_python_alters_the_broker_configs(broker: Restartable) -> None:
    assert broker.broker is not None
    kp = KafkaAdminClient(bootstrap_servers=broker.broker.bootstrap_servers,
                          request_timeout_ms=TIMEOUT * 1000)
    try:
        resource = KpConfigResource(ConfigResourceType.BROKER, "0")
        # raise_on_unknown: the client first asks which broker keys are dynamic (not read-only)
        done = kp.alter_configs([KpConfigResource(ConfigResourceType.BROKER, "0", configs={
            "log.segment.bytes": "2000000", "log.cleanup.policy": "compact"})])
        assert done == {"broker": {"0": "OK"}}
        modified = kp.describe_configs([resource])["broker"]["0"]
        assert {k: (v["value"], v["config_source"]) for k, v in modified.items()
                if v["config_source"] == "DYNAMIC_BROKER_CONFIG"} == {
            "log.segment.bytes": ("2000000", "DYNAMIC_BROKER_CONFIG"),
            "log.cleanup.policy": ("compact", "DYNAMIC_BROKER_CONFIG")}
        dynamic = kp.describe_configs([resource], config_filter="dynamic")["broker"]["0"]
        assert "log.retention.ms" in dynamic and "num.partitions" not in dynamic
        refused = kp.alter_configs([KpConfigResource(ConfigResourceType.BROKER, "0", configs={
            "num.network.threads": "8"})], raise_on_unknown=False)
        message = refused["broker"]["0"]
        assert "InvalidConfigurationError" in message and "thread pools" in message, message
        kp.reset_configs([KpConfigResource(ConfigResourceType.BROKER, "0",
                                           configs={"log.segment.bytes": None})])
        after = kp.describe_configs([resource])["broker"]["0"]
        assert "log.segment.bytes" not in after and after["log.cleanup.policy"]["value"] == "compact"
    finally:
        kp.close()
