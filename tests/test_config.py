"""BrokerConfig: Kafka keys, precedence, properties parsing, typed errors."""

from __future__ import annotations

import dataclasses
import logging

import pytest

from kbroker.common.configs import BROKER_CONFIGS
from kbroker.config import (
    DEFAULT_LOG_DIR,
    FOLDED_KEYS,
    BrokerConfig,
    ConfigError,
    Listener,
    parse_override,
    parse_properties,
)
from kbroker.storage.log_config import LogConfig


def test_defaults() -> None:
    c = BrokerConfig.from_props({})
    assert c.listeners == (Listener("PLAINTEXT", "127.0.0.1", 9092),)
    assert c.log_dirs == (DEFAULT_LOG_DIR,)
    assert c.node_id == 0
    assert c.num_partitions == 1
    assert c.log_retention_ms == 168 * 3_600_000
    assert c.socket_request_max_bytes == 104857600
    assert c.connections_max_idle_ms == 600000
    assert c.message_max_bytes == 1048588
    assert c.auto_create_topics_enable is True


def test_properties_syntax() -> None:
    text = (
        "# comment\n"
        "! also a comment\n"
        "\n"
        "a=1\n"
        "b : 2\n"
        "c 3\n"
        "  d=with spaces  \n"
        "log.dirs=/x,\\\n"
        "         /y\n"
        "e\\=f=g\n"
        "a=last wins\n"
    )
    assert parse_properties(text) == {
        "a": "last wins", "b": "2", "c": "3", "d": "with spaces", "log.dirs": "/x,/y", "e=f": "g",
    }


def test_retention_precedence() -> None:
    assert BrokerConfig.from_props({"log.retention.hours": "1"}).log_retention_ms == 3_600_000
    assert BrokerConfig.from_props(
        {"log.retention.hours": "1", "log.retention.minutes": "2"}
    ).log_retention_ms == 120_000
    assert BrokerConfig.from_props(
        {"log.retention.hours": "1", "log.retention.minutes": "2", "log.retention.ms": "5"}
    ).log_retention_ms == 5
    assert BrokerConfig.from_props({"log.retention.ms": "-1"}).log_retention_ms == -1
    assert BrokerConfig.from_props({"log.roll.hours": "2"}).log_roll_ms == 7_200_000
    assert BrokerConfig.from_props({"log.roll.hours": "2", "log.roll.ms": "9"}).log_roll_ms == 9


def test_aliases() -> None:
    assert BrokerConfig.from_props({"broker.id": "4"}).node_id == 4
    assert BrokerConfig.from_props({"log.dir": "/a"}).log_dirs == ("/a",)
    assert BrokerConfig.from_props({"log.dir": "/a", "log.dirs": "/b,/c"}).log_dirs == ("/b", "/c")
    with pytest.raises(ConfigError, match="node.id"):
        BrokerConfig.from_props({"broker.id": "4", "node.id": "5"})


def test_listeners() -> None:
    c = BrokerConfig.from_props({
        "listeners": "PLAINTEXT://0.0.0.0:0",
        "advertised.listeners": "PLAINTEXT://example.com:19092",
    })
    assert c.listeners == (Listener("PLAINTEXT", "0.0.0.0", 0),)
    assert c.advertised_listeners == (Listener("PLAINTEXT", "example.com", 19092),)
    assert BrokerConfig.from_props({"listeners": "PLAINTEXT://[::1]:9"}).listeners[0].host == "::1"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("num.partitions", "x"),
        ("num.partitions", "0"),
        ("auto.create.topics.enable", "yes"),
        ("listeners", "localhost:9092"),
        ("listeners", "SSL://127.0.0.1:9093"),  # SSL with Kafka's default JKS key store: refused
        ("listeners", "PLAINTEXT://127.0.0.1:70000"),
        ("log.segment.bytes", "1.5"),
        ("log.message.timestamp.type", "Whenever"),
        ("log.retention.hours", "forever"),
        ("socket.request.max.bytes", "99999999999"),
    ],
)
def test_ill_typed_values_name_the_key(key: str, value: str) -> None:
    expected = "ssl.keystore.type" if value.startswith("SSL:") else key.split(".")[0]
    with pytest.raises(ConfigError, match=expected):
        BrokerConfig.from_props({key: value})


def test_unknown_keys_warn_once(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kbroker.config"):
        BrokerConfig.from_props({"totally.unknown.thing": "1", "num.io.threads": "8"})
        BrokerConfig.from_props({"totally.unknown.thing": "1"})
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings.count("unknown configuration totally.unknown.thing ignored") == 1
    assert not any("num.io.threads" in w for w in warnings)


def test_topic_config_defaults_follow_broker_keys() -> None:
    c = BrokerConfig.from_props({
        "log.retention.minutes": "3", "log.segment.bytes": "1048576",
        "message.max.bytes": "5000", "log.cleanup.policy": "compact",
    })
    d = c.topic_config_defaults()
    assert d["retention.ms"] == "180000"
    assert d["segment.bytes"] == "1048576"
    assert d["max.message.bytes"] == "5000"
    assert d["cleanup.policy"] == "compact"
    cfg = LogConfig.from_props(d)
    assert cfg.retention_ms == 180000 and cfg.max_message_bytes == 5000


def test_parse_override() -> None:
    assert parse_override("a.b=c=d") == ("a.b", "c=d")
    with pytest.raises(ConfigError):
        parse_override("novalue")


KAFKA_KRAFT_PROPERTIES = """\
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"""


def test_stock_kafka_kraft_server_properties(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kbroker.config"):
        c = BrokerConfig.from_props(parse_properties(KAFKA_KRAFT_PROPERTIES))
    assert not caplog.records, [r.getMessage() for r in caplog.records]
    assert c.listeners == (Listener("PLAINTEXT", "", 9092),)
    assert c.advertised_listeners == (Listener("PLAINTEXT", "localhost", 9092),)
    assert c.node_id == 1 and c.log_dirs == ("/tmp/kraft-combined-logs",)


KAFKA_ZOOKEEPER_PROPERTIES = """\
broker.id=0
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kafka-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.retention.check.interval.ms=300000
zookeeper.connect=localhost:2181
zookeeper.connection.timeout.ms=18000
group.initial.rebalance.delay.ms=0
"""


def test_stock_kafka_zookeeper_server_properties(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kbroker.config"):
        c = BrokerConfig.from_props(parse_properties(KAFKA_ZOOKEEPER_PROPERTIES))
    assert not caplog.records, [r.getMessage() for r in caplog.records]
    assert (c.zookeeper_connect, c.zookeeper_connection_timeout_ms) == ("localhost:2181", 18000)
    assert (c.offsets_topic_replication_factor, c.transaction_state_log_min_isr) == (1, 1)


def test_named_listeners_need_a_protocol_mapping() -> None:
    c = BrokerConfig.from_props({
        "listeners": "CLIENT://127.0.0.1:0",
        "listener.security.protocol.map": "CLIENT:PLAINTEXT",
    })
    assert c.listeners[0].name == "CLIENT"
    with pytest.raises(ConfigError, match="listener"):
        BrokerConfig.from_props({"listeners": "CLIENT://127.0.0.1:0"})
    with pytest.raises(ConfigError, match="CLIENT maps to TLS"):
        BrokerConfig.from_props({
            "listeners": "CLIENT://127.0.0.1:0", "listener.security.protocol.map": "CLIENT:TLS",
        })


def test_values_storage_rejects_fail_at_startup_naming_the_broker_key() -> None:
    with pytest.raises(ConfigError, match="log.cleaner.min.cleanable.ratio"):
        BrokerConfig.from_props({"log.cleaner.min.cleanable.ratio": "lots"})


def test_log_preallocate_is_refused_at_startup_naming_the_key() -> None:
    with pytest.raises(ConfigError, match="log.preallocate"):
        BrokerConfig.from_props({"log.preallocate": "true"})
    assert not BrokerConfig.from_props({"log.preallocate": "false"}).log_config().preallocate


def test_every_broker_key_is_a_typed_field_or_folded_into_one() -> None:
    derived = {"props", "listener_security", "inter_broker_login"}  # from the keys, not keys
    fields = {f.name for f in dataclasses.fields(BrokerConfig)} - derived
    assert fields == {k.attr for k in BROKER_CONFIGS if k.name not in FOLDED_KEYS}
    assert set(FOLDED_KEYS) | set(FOLDED_KEYS.values()) <= set(BROKER_CONFIGS.names())


def test_broker_defaults_are_the_topic_defaults() -> None:
    assert BrokerConfig.from_props({}).log_config() == LogConfig()


def test_cluster_mode_keys_are_typed_attributes() -> None:
    c = BrokerConfig.from_props({})
    assert (c.zookeeper_connect, c.zookeeper_connection_timeout_ms, c.inter_broker_listener_name) == (
        None, None, None)
    assert (c.replica_lag_time_max_ms, c.replica_fetch_max_bytes, c.num_replica_fetchers) == (
        30000, 1048576, 1)
    assert (c.offsets_topic_replication_factor, c.transaction_state_log_min_isr) == (3, 2)
    c = BrokerConfig.from_props({
        "zookeeper.connect": "zk1:2181,zk2:2181/kbroker", "controlled.shutdown.enable": "false",
        "leader.imbalance.check.interval.seconds": "60", "security.inter.broker.protocol": "PLAINTEXT",
    })
    assert c.zookeeper_connect == "zk1:2181,zk2:2181/kbroker"
    assert c.controlled_shutdown_enable is False and c.leader_imbalance_check_interval_seconds == 60
    for key, value in [("replica.lag.time.max.ms", "soon"), ("offsets.topic.replication.factor", "0"),
                       ("security.inter.broker.protocol", "TLS")]:
        with pytest.raises(ConfigError, match=key):
            BrokerConfig.from_props({key: value})


def test_keys_read_by_nothing_are_unknown(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kbroker.config"):
        BrokerConfig.from_props({"group.coordinator.rebalance.protocols": "classic",
                                 "socket.send.buffer.bytes": "1"})
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == ["unknown configuration group.coordinator.rebalance.protocols ignored"]


def test_broker_synonyms_of_topic_keys_are_validated_as_the_topic_keys() -> None:
    with pytest.raises(ConfigError, match="log.cleanup.policy"):
        BrokerConfig.from_props({"log.cleanup.policy": "shred"})
    c = BrokerConfig.from_props({"log.message.timestamp.difference.max.ms": "1000",
                                 "compression.zstd.level": "9"})
    assert c.log_config().timestamp_after_max_ms == 1000
    assert c.log_config().compression_zstd_level == 9


def test_log_cleaner_keys_are_typed_and_used() -> None:
    from kbroker.common.configs import ACCEPTED_WITHOUT_EFFECT

    cfg = BrokerConfig.from_props({
        "log.cleaner.enable": "false", "log.cleaner.threads": "2",
        "log.cleaner.dedupe.buffer.size": "1048576", "log.cleaner.io.buffer.size": "65536",
        "log.cleaner.io.buffer.load.factor": "0.5", "log.cleaner.io.max.bytes.per.second": "1e6",
        "log.cleaner.backoff.ms": "100", "log.cleaner.min.cleanable.ratio": "0.2",
        "log.cleaner.delete.retention.ms": "1000", "log.cleaner.min.compaction.lag.ms": "5",
        "log.cleaner.max.compaction.lag.ms": "60000"})
    assert (cfg.log_cleaner_enable, cfg.log_cleaner_threads, cfg.log_cleaner_dedupe_buffer_size,
            cfg.log_cleaner_io_buffer_size, cfg.log_cleaner_io_buffer_load_factor,
            cfg.log_cleaner_io_max_bytes_per_second, cfg.log_cleaner_backoff_ms) == \
        (False, 2, 1048576, 65536, 0.5, 1e6, 100)
    lc = cfg.log_config()
    assert (lc.min_cleanable_dirty_ratio, lc.delete_retention_ms, lc.min_compaction_lag_ms,
            lc.max_compaction_lag_ms) == (0.2, 1000, 5, 60000)
    assert not [k for k in ACCEPTED_WITHOUT_EFFECT if k.startswith("log.cleaner")]
    with pytest.raises(ConfigError, match="log.cleaner.threads"):
        BrokerConfig.from_props({"log.cleaner.threads": "-1"})


def test_consumer_group_keys_are_checked_as_kafka_checks_them() -> None:
    c = BrokerConfig.from_props({})
    assert (c.group_consumer_session_timeout_ms, c.group_consumer_heartbeat_interval_ms) == (45000, 5000)
    assert c.group_consumer_assignors == ("uniform", "range")
    assert c.group_consumer_migration_policy == "bidirectional"  # Kafka 4.0's default
    assert BrokerConfig.from_props({"group.consumer.migration.policy": "Upgrade"}).group_consumer_migration_policy \
        == "Upgrade"  # Kafka's CaseInsensitiveValidString
    named = BrokerConfig.from_props({
        "group.consumer.assignors": "org.apache.kafka.coordinator.group.assignor.RangeAssignor,uniform"})
    assert named.group_consumer_assignors == ("range", "uniform")
    for props, key in [
        ({"group.consumer.session.timeout.ms": "30000"}, "group.consumer.session.timeout.ms"),
        ({"group.consumer.heartbeat.interval.ms": "20000"}, "group.consumer.heartbeat.interval.ms"),
        ({"group.consumer.min.session.timeout.ms": "70000"}, "group.consumer.min.session.timeout.ms"),
        ({"group.consumer.assignors": "sticky"}, "group.consumer.assignors"),
        ({"group.consumer.migration.policy": "sideways"}, "group.consumer.migration.policy"),
        ({"group.consumer.min.heartbeat.interval.ms": "100", "group.consumer.heartbeat.interval.ms": "6000",
          "group.consumer.min.session.timeout.ms": "1000", "group.consumer.session.timeout.ms": "6000"},
         "group.consumer.heartbeat.interval.ms must be less than"),
    ]:
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            BrokerConfig.from_props(props)
