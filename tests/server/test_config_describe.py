"""DescribeConfigs entries read the one table: names, types, documentation, synonyms."""

from __future__ import annotations

from kbroker.common.configs import BROKER_CONFIGS, TOPIC_CONFIGS
from kbroker.config import BrokerConfig
from kbroker.server.config_describe import ConfigSource, describe_broker, describe_topic


def test_topic_entries_come_from_the_table() -> None:
    broker = BrokerConfig.from_props({"log.retention.minutes": "3"})
    config = broker.log_config().with_overrides({"segment.bytes": "2048"})
    described = describe_topic({"segment.bytes": "2048"}, config, broker, include_documentation=True)
    assert [d.name for d in described] == TOPIC_CONFIGS.names()
    for d in described:
        key = TOPIC_CONFIGS[d.name]
        assert (d.documentation, d.config_type, d.read_only) == (key.doc, key.type, False)
    by_name = {d.name: d for d in described}
    retention = by_name["retention.ms"]
    assert (retention.value, retention.source) == ("180000", ConfigSource.STATIC_BROKER_CONFIG)
    assert [(s.name, s.value, s.source) for s in retention.synonyms] == [
        ("log.retention.minutes", "3", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    ]
    assert [s.name for s in by_name["segment.bytes"].synonyms] == ["segment.bytes", "log.segment.bytes"]
    assert by_name["remote.storage.enable"].synonyms == ()  # topic-only
    plain = describe_topic({}, broker.log_config(), broker, keys=["retention.ms"])
    assert [(d.name, d.documentation) for d in plain] == [("retention.ms", None)]


def test_broker_entries_come_from_the_table() -> None:
    broker = BrokerConfig.from_props({"num.partitions": "4"})
    described = describe_broker(broker, include_documentation=True)
    assert [d.name for d in described] == sorted(BROKER_CONFIGS.names())
    for d in described:
        key = BROKER_CONFIGS[d.name]
        assert (d.documentation, d.config_type, d.read_only) == (key.doc, key.type, True)
    by_name = {d.name: d for d in described}
    assert (by_name["num.partitions"].value, by_name["num.partitions"].source) == (
        "4", ConfigSource.STATIC_BROKER_CONFIG)
    assert by_name["log.flush.interval.ms"].value == "9223372036854775807"
    assert by_name["log.cleaner.min.cleanable.ratio"].value == "0.5"
    assert by_name["zookeeper.connect"].value is None
    assert by_name["log.dirs"].value == broker.log_dirs[0]
